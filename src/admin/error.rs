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
    /// A field of the request body is unknown, missing or of the wrong type, or names a kind
    /// the node does not know (400, `invalid_input`); the body says which field and where.
    #[error("{message}")]
    InvalidField {
        /// The field to blame (`durabel`, `kind`), if one is.
        field: Option<String>,
        /// Where in the body (`children[3]`, `the child spec`, `the body`).
        at: String,
        /// The whole sentence.
        message: String,
    },
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
    /// This node's side of a split has no quorum, so it takes no start or stop (503,
    /// `partitioned`); a node of the majority does, and this one once quorum returns.
    #[error("{0}")]
    Partitioned(String),
    /// As many event streams are open as the node serves (503, `too_many_streams`): retry once
    /// one closes.
    #[error("{0}")]
    TooManyStreams(String),
    /// The write the request needed did not reach the disk (503, `storage_failed`); other
    /// requests keep working.
    #[error("{0}")]
    StorageFailed(String),
    /// The disk the request needed to write is full (507, `insufficient_storage`); the same
    /// request succeeds once space returns.
    #[error("{0}")]
    InsufficientStorage(String),
    /// The request was taken but this node cannot tell whether it took effect: the node it
    /// depends on (the declared list's leader) did not answer in time (504,
    /// `outcome_unknown`). Retrying the same request is safe and settles it.
    #[error("{0}")]
    OutcomeUnknown(String),
    /// The hub failed in a way the caller cannot fix (500, `internal`).
    #[error("{0}")]
    Internal(String),
    /// The request carries no valid bearer token (401, `unauthorized`).
    #[error("{0}")]
    Unauthorized(String),
    /// The request comes from another origin, or names a host the API does not serve (403,
    /// `forbidden`).
    #[error("{0}")]
    Forbidden(String),
    /// The path exists but not with this method (405, `method_not_allowed`).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The body, or the number of specs in it, is over the API's limit (413,
    /// `payload_too_large`).
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A write whose body is not declared `application/json` (415, `unsupported_media_type`).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A request naming one child failed for that child: the hub's own per-child code (such
    /// as `startup_failed` or `node_unavailable`) with the status that fits it.
    #[error("{message}")]
    Child {
        /// The status that fits `code`.
        status: StatusCode,
        /// The hub's stable snake_case code.
        code: String,
        /// What happened.
        message: String,
    },
    /// Any other HTTP error status the framework produced, in the API's shape (`code` is
    /// derived from the status).
    #[error("{message}")]
    Http {
        /// The status.
        status: StatusCode,
        /// What happened.
        message: String,
    },
}

impl AdminError {
    /// A body axum could not read: over the `max` byte limit (413), or cut off or unreadable.
    pub(crate) fn of_body(rejection: axum::extract::rejection::BytesRejection, max: usize) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AdminError::PayloadTooLarge(format!("the body is over the {max} byte limit"))
        } else {
            AdminError::InvalidInput(rejection.body_text())
        }
    }

    /// The stable snake_case code of the `error` field.
    pub fn code(&self) -> &str {
        match self {
            AdminError::InvalidInput(_) | AdminError::InvalidField { .. } => "invalid_input",
            AdminError::DurableRequiresPermanent(_) => "durable_requires_permanent",
            AdminError::NotFound(_) => "not_found",
            AdminError::AlreadyStarted(_) => "already_started",
            AdminError::DeclaredParked(_) => "declared_parked",
            AdminError::NotReady(_) => "not_ready",
            AdminError::NoLeader(_) => "no_leader",
            AdminError::Partitioned(_) => "partitioned",
            AdminError::StorageFailed(_) => "storage_failed",
            AdminError::TooManyStreams(_) => "too_many_streams",
            AdminError::InsufficientStorage(_) => "insufficient_storage",
            AdminError::OutcomeUnknown(_) => "outcome_unknown",
            AdminError::Internal(_) => "internal",
            AdminError::Unauthorized(_) => "unauthorized",
            AdminError::Forbidden(_) => "forbidden",
            AdminError::MethodNotAllowed(_) => "method_not_allowed",
            AdminError::PayloadTooLarge(_) => "payload_too_large",
            AdminError::UnsupportedMediaType(_) => "unsupported_media_type",
            AdminError::Child { code, .. } => code,
            AdminError::Http { status, .. } => match status.as_u16() {
                400 => "invalid_input",
                401 => "unauthorized",
                403 => "forbidden",
                404 => "not_found",
                405 => "method_not_allowed",
                408 => "request_timeout",
                409 => "conflict",
                413 => "payload_too_large",
                415 => "unsupported_media_type",
                422 => "unprocessable",
                503 => "not_ready",
                s if s >= 500 => "internal",
                _ => "http_error",
            },
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            AdminError::InvalidInput(_)
            | AdminError::InvalidField { .. }
            | AdminError::DurableRequiresPermanent(_) => StatusCode::BAD_REQUEST,
            AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::AlreadyStarted(_) | AdminError::DeclaredParked(_) => StatusCode::CONFLICT,
            AdminError::NotReady(_) | AdminError::NoLeader(_) | AdminError::Partitioned(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AdminError::StorageFailed(_) | AdminError::TooManyStreams(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AdminError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            AdminError::OutcomeUnknown(_) => StatusCode::GATEWAY_TIMEOUT,
            AdminError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            AdminError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AdminError::Forbidden(_) => StatusCode::FORBIDDEN,
            AdminError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AdminError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AdminError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AdminError::Child { status, .. } | AdminError::Http { status, .. } => *status,
        }
    }

    /// The error of a request that named one child and failed for it, from the hub's
    /// per-child `code`: the caller learns from the status alone whether to fix the request
    /// (4xx) or retry later (5xx).
    pub fn for_child(code: &str, message: String) -> AdminError {
        let status = match code {
            "already_started" => return AdminError::AlreadyStarted(message),
            "unknown_kind" | "invalid_args" | "invalid_id" | "invalid_metadata" => {
                return AdminError::InvalidInput(message)
            }
            "durable_requires_permanent" => return AdminError::DurableRequiresPermanent(message),
            "no_leader" => return AdminError::NoLeader(message),
            "partitioned" => return AdminError::Partitioned(message),
            "not_found" => return AdminError::NotFound(message),
            "outcome_unknown" => return AdminError::OutcomeUnknown(message),
            "invalid_spec" => return AdminError::InvalidInput(message),
            // The registry write the request needed failed: the same request succeeds once
            // space returns (507), or once the disk is writable again (503).
            "insufficient_storage" => return AdminError::InsufficientStorage(message),
            "storage" => return AdminError::StorageFailed(message),
            // More than a child may weigh: it could never cross the wire.
            "too_large" => StatusCode::PAYLOAD_TOO_LARGE,
            // The request is understood, but the node cannot honour it as asked.
            "durable_unavailable" => StatusCode::BAD_REQUEST,
            // The child's own start refused these arguments: retrying will not help.
            "startup_failed" => StatusCode::UNPROCESSABLE_ENTITY,
            "node_unavailable" => StatusCode::SERVICE_UNAVAILABLE,
            "node_receive_timeout" => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        AdminError::Child {
            status,
            code: code.to_owned(),
            message,
        }
    }
}

impl From<super::strict::SpecInputError> for AdminError {
    fn from(e: super::strict::SpecInputError) -> Self {
        AdminError::InvalidField {
            field: e.field,
            at: e.at,
            message: e.message,
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({ "error": self.code(), "message": self.to_string() });
        if let AdminError::InvalidField { field, at, .. } = &self {
            // Where the message's field is, for a script to point at the line to fix.
            body["at"] = at.clone().into();
            if let Some(field) = field {
                body["field"] = field.clone().into();
            }
        }
        let mut response = (self.status(), Json(body)).into_response();
        if matches!(self, AdminError::Unauthorized(_)) {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
