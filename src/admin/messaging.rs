//! Messaging a child by id over HTTP: `POST /v1/children/{id}/call` and `/cast`.
//!
//! The body is the child's command as JSON, carried to the node running the child as it is:
//! the kind's command handler (`ChildKinds::register_command`) decodes it there, so only kinds
//! that take JSON commands (every kind of `process_hub_actors`) can be messaged this way. The
//! body must be JSON (400 otherwise) so that a typo is refused here rather than by a handler on
//! another node. A call's answer must be JSON too: an answer that is not is a 502
//! `answer_not_json`, since the HTTP caller could not read it.
//!
//! A call waits at most `timeout_ms` (query parameter, default
//! [`DEFAULT_CALL_TIMEOUT_MS`], at most [`MAX_CALL_TIMEOUT_MS`]): a request never holds a
//! connection longer than the operator chose, within a bound the node chose.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::bodies::ChildAnswer;
use super::routes::{parse_id, Routes};
use super::{AdminError, AdminOps};

/// How long a call waits for the child when the request does not say.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 5_000;
/// The longest a call may wait (400 beyond).
pub const MAX_CALL_TIMEOUT_MS: u64 = 60_000;

/// What a call to a child came back with, before the route checks it is JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallOutcome {
    /// The node the registry names as the child's host once answered, if any.
    pub node: Option<String>,
    /// The kind's encoded answer.
    pub answer: Vec<u8>,
}

/// The status and error of a failed message to a child, from the hub's code (see
/// `ChildMessageError`): the caller learns from the status whether to fix the request (4xx)
/// or retry later (5xx). An unknown code keeps its name with a 500.
pub fn message_error(code: &str, message: String) -> AdminError {
    let status = match code {
        "not_found" => return AdminError::NotFound(message),
        "hub_unavailable" => return AdminError::NotReady(message),
        // The kind takes no commands, or refused this one: the same request will fail again.
        "no_command_handler" | "command_failed" => StatusCode::UNPROCESSABLE_ENTITY,
        "timeout" => StatusCode::GATEWAY_TIMEOUT,
        // The child's node is down or busy, or the child kept moving: retry later.
        // (`between_nodes`: its node is down within the grace, or it is being moved.)
        "unreachable" | "overloaded" | "forward_limit" | "between_nodes" => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    AdminError::Child {
        status,
        code: code.to_owned(),
        message,
    }
}

/// `POST /v1/children/{id}/call`'s query.
#[derive(Deserialize)]
pub(super) struct CallQuery {
    timeout_ms: Option<u64>,
}

fn timeout_of(query: Result<Query<CallQuery>, QueryRejection>) -> Result<Duration, AdminError> {
    let Query(query) = query.map_err(|e| {
        AdminError::InvalidInput(format!(
            "query must be `timeout_ms` (1-{MAX_CALL_TIMEOUT_MS}): {}",
            e.body_text()
        ))
    })?;
    let ms = query.timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS);
    if ms == 0 || ms > MAX_CALL_TIMEOUT_MS {
        return Err(AdminError::InvalidInput(format!(
            "timeout_ms {ms} is out of range 1-{MAX_CALL_TIMEOUT_MS}"
        )));
    }
    Ok(Duration::from_millis(ms))
}

/// The body as the command to carry: JSON, within the body limit.
fn command_of(body: Result<Bytes, BytesRejection>, max: usize) -> Result<Vec<u8>, AdminError> {
    let body = body.map_err(|e| AdminError::of_body(e, max))?;
    serde_json::from_slice::<serde::de::IgnoredAny>(&body).map_err(|e| {
        AdminError::InvalidInput(format!(
            "the body must be the child's command as JSON (for example {{\"kind\":\"counter\",\"command\":{{\"op\":\"get\"}}}}): {e}"
        ))
    })?;
    Ok(body.to_vec())
}

pub(super) async fn call<O: AdminOps>(
    State(r): State<Routes<O>>,
    Path(id): Path<String>,
    query: Result<Query<CallQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ChildAnswer>, AdminError> {
    let id = parse_id(id)?;
    let timeout = timeout_of(query)?;
    let command = command_of(body, r.limits.max_body_bytes)?;
    let outcome = r.ops.call_child(id.clone(), command, timeout).await?;
    let answer = serde_json::from_slice(&outcome.answer).map_err(|e| AdminError::Child {
        status: StatusCode::BAD_GATEWAY,
        code: "answer_not_json".into(),
        message: format!(
            "child {id} answered {} bytes that are not JSON ({e}); call it through the hub's API instead",
            outcome.answer.len()
        ),
    })?;
    Ok(Json(ChildAnswer {
        id: id.to_string(),
        node: outcome.node,
        answer,
    }))
}

pub(super) async fn cast<O: AdminOps>(
    State(r): State<Routes<O>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminError> {
    let id = parse_id(id)?;
    let command = command_of(body, r.limits.max_body_bytes)?;
    let accepted = r.ops.cast_child(id, command).await?;
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_code_has_the_status_that_says_fix_or_retry() {
        let status = |code: &str| message_error(code, String::new()).status().as_u16();
        assert_eq!(status("not_found"), 404);
        assert_eq!(status("no_command_handler"), 422);
        assert_eq!(status("command_failed"), 422);
        assert_eq!(status("timeout"), 504);
        for retry in [
            "unreachable",
            "overloaded",
            "forward_limit",
            "hub_unavailable",
            "between_nodes",
        ] {
            assert_eq!(status(retry), 503, "{retry}");
        }
        let unknown = message_error("something_new", "m".into());
        assert_eq!(
            (unknown.status().as_u16(), unknown.code()),
            (500, "something_new")
        );
        // The hub's code travels as the error's code.
        assert_eq!(message_error("timeout", "m".into()).code(), "timeout");
        assert_eq!(
            message_error("hub_unavailable", "m".into()).code(),
            "not_ready"
        );
    }
}
