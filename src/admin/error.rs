//! Admin API errors and their HTTP mapping.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// What went wrong with an admin request; each variant maps to one status and one stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// The request body or path is not acceptable (400, `invalid_input`).
    #[error("{0}")]
    InvalidInput(String),
    /// A durable start of a child that is not permanent (400, `durable_requires_permanent`).
    #[error("{0}")]
    DurableRequiresPermanent(String),
    /// No such child (404, `not_found`).
    #[error("{0}")]
    NotFound(String),
    /// The child already runs (409, `already_started`).
    #[error("{0}")]
    AlreadyStarted(String),
    /// The declared list is lost on this node and parked until an operator restores or clears
    /// it, so it takes no durable start or stop (409, `declared_parked`).
    #[error("{0}")]
    DeclaredParked(String),
    /// The hub cannot answer yet (503, `not_ready`).
    #[error("{0}")]
    NotReady(String),
    /// No declared-list leader is reachable (503, `no_leader`).
    #[error("{0}")]
    NoLeader(String),
    /// The write the request needed did not reach the disk (503, `storage_failed`); other
    /// requests keep working.
    #[error("{0}")]
    StorageFailed(String),
    /// The disk the request needed to write is full (507, `insufficient_storage`); the same
    /// request succeeds once space returns.
    #[error("{0}")]
    InsufficientStorage(String),
    /// The hub failed in a way the caller cannot fix (500, `internal`).
    #[error("{0}")]
    Internal(String),
}

impl AdminError {
    /// The stable snake_case code of the `error` field.
    pub fn code(&self) -> &'static str {
        match self {
            AdminError::InvalidInput(_) => "invalid_input",
            AdminError::DurableRequiresPermanent(_) => "durable_requires_permanent",
            AdminError::NotFound(_) => "not_found",
            AdminError::AlreadyStarted(_) => "already_started",
            AdminError::DeclaredParked(_) => "declared_parked",
            AdminError::NotReady(_) => "not_ready",
            AdminError::NoLeader(_) => "no_leader",
            AdminError::StorageFailed(_) => "storage_failed",
            AdminError::InsufficientStorage(_) => "insufficient_storage",
            AdminError::Internal(_) => "internal",
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            AdminError::InvalidInput(_) | AdminError::DurableRequiresPermanent(_) => {
                StatusCode::BAD_REQUEST
            }
            AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::AlreadyStarted(_) | AdminError::DeclaredParked(_) => StatusCode::CONFLICT,
            AdminError::NotReady(_) | AdminError::NoLeader(_) => StatusCode::SERVICE_UNAVAILABLE,
            AdminError::StorageFailed(_) => StatusCode::SERVICE_UNAVAILABLE,
            AdminError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            AdminError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.code(), "message": self.to_string() });
        (self.status(), Json(body)).into_response()
    }
}
