//! `POST /v1/children/stop`: many children stopped in one request.
//!
//! The body is `{"ids": ["a", "b", ...]}`, read strictly like a start's (an unknown field or a
//! key given twice is refused, naming it), bounded by [`AdminLimits::max_specs_per_request`]
//! (413 beyond) and checked id by id like the path of `DELETE /v1/children/{id}` before
//! anything stops: one bad id refuses the whole request. An id given twice is stopped once and
//! listed in `duplicates`.
//!
//! The ids go to the hub as one request ([`AdminOps::stop_children`]; [`crate::Hub`] makes it
//! one `Hub::stop_children`: one removal from the declared list for the durable ones, one
//! batch of frames per owner node for the remote ones). The answer puts every distinct id in
//! exactly one of `stopped`, `pending` and `errors` ([`StopManyResponse`]), in the vocabulary
//! of the single stop: `200` when every child is settled, `202` when some are `pending`; a
//! refusal of the whole request (`partitioned`, `no_leader`, `declared_parked`,
//! `outcome_unknown`, ...) is the single stop's error status with nothing changed (or, for
//! `outcome_unknown`, not known to have changed).
//!
//! A child may be named `stop`: `GET` and `DELETE /v1/children/stop` still read and stop it.
//!
//! [`AdminLimits::max_specs_per_request`]: super::AdminLimits::max_specs_per_request

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use crate::model::ChildId;

use super::bodies::{ChildView, StartError, StopCounts, StopManyResponse, StopResponse};
use super::json_keys::{read_value, Unread};
use super::routes::Routes;
use super::strict::{type_name, SpecInputError};
use super::{AdminError, AdminOps};

/// The fields of a batch stop's body.
pub const STOP_BODY_FIELDS: &[&str] = &["ids"];

/// The shape of a batch stop's body, for messages.
const STOP_BODY_SHAPE: &str = r#"{"ids": ["child id", ...]}"#;

fn whole(message: String) -> SpecInputError {
    SpecInputError {
        at: "the body".into(),
        field: None,
        message,
    }
}

/// Reads `POST /v1/children/stop`'s body: an object with only `ids`, an array of strings.
/// Answers the ids as given (duplicates and all, not yet checked as child ids).
pub fn parse_stop_body(body: &[u8]) -> Result<Vec<String>, SpecInputError> {
    let value = match read_value(body) {
        Ok(value) => value,
        Err(Unread::NotJson(e)) => {
            return Err(whole(format!(
                "the body is not JSON ({e}); it must be {STOP_BODY_SHAPE}"
            )))
        }
        Err(Unread::Duplicate(duplicate)) => {
            return Err(SpecInputError {
                at: "the body".into(),
                field: Some(duplicate.key.clone()),
                message: format!(
                    "duplicate field {:?} in the body; a field is given once (JSON keeps only the last)",
                    duplicate.key
                ),
            })
        }
    };
    let Value::Object(fields) = value else {
        return Err(whole(format!(
            "the body is {}; it must be {STOP_BODY_SHAPE}",
            type_name(&value)
        )));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !STOP_BODY_FIELDS.contains(&k.as_str()))
    {
        return Err(SpecInputError {
            at: "the body".into(),
            field: Some(unknown.clone()),
            message: format!(
                "unknown field {unknown:?} in the body; a batch stop is {STOP_BODY_SHAPE}"
            ),
        });
    }
    let field = |message: String| SpecInputError {
        at: "the body".into(),
        field: Some("ids".into()),
        message,
    };
    let Some(ids) = fields.get("ids") else {
        return Err(field(format!(
            "missing field \"ids\" in the body; a batch stop is {STOP_BODY_SHAPE}"
        )));
    };
    let Value::Array(ids) = ids else {
        return Err(field(format!(
            "field \"ids\" is {}; it must be an array of child ids",
            type_name(ids)
        )));
    };
    ids.iter()
        .enumerate()
        .map(|(i, id)| match id {
            Value::String(id) => Ok(id.clone()),
            other => Err(SpecInputError {
                at: format!("ids[{i}]"),
                field: Some("ids".into()),
                message: format!("ids[{i}] is {}; a child id is a string", type_name(other)),
            }),
        })
        .collect()
}

/// The ids of a batch stop checked as child ids (the first invalid one refuses the request,
/// named by its index), in request order with each id once, and the ids given more than
/// once (each once, in order of first repeat).
pub fn check_ids(raw: Vec<String>) -> Result<(Vec<ChildId>, Vec<String>), SpecInputError> {
    let mut seen = BTreeSet::new();
    let mut repeated = BTreeSet::new();
    let mut ids = Vec::with_capacity(raw.len());
    let mut duplicates = Vec::new();
    for (i, id) in raw.into_iter().enumerate() {
        if seen.contains(id.as_str()) {
            if repeated.insert(id.clone()) {
                duplicates.push(id);
            }
            continue;
        }
        let checked = ChildId::parse(id.clone()).map_err(|e| SpecInputError {
            at: format!("ids[{i}]"),
            field: Some("ids".into()),
            message: format!("ids[{i}]: {e}"),
        })?;
        seen.insert(id);
        ids.push(checked);
    }
    Ok((ids, duplicates))
}

/// The ids of `ids` that `response` does not name.
fn unanswered<'a>(ids: &'a [ChildId], response: &StopResponse) -> Vec<&'a ChildId> {
    let answered: BTreeSet<&str> = response
        .stopped
        .iter()
        .map(|s| s.id.as_str())
        .chain(response.errors.iter().map(|e| e.id.as_str()))
        .chain(response.pending.iter().map(|p| p.id.as_str()))
        .collect();
    ids.iter()
        .filter(|id| !answered.contains(id.as_str()))
        .collect()
}

/// The answer of a batch stop of `ids` (distinct, in request order) from the hub's
/// `response`: an id the hub's answer does not name is an error `outcome_unknown` reported
/// by `node` (the answer cannot say what happened to it), so every id is answered once.
pub fn stop_many_answer(
    ids: &[ChildId],
    requested: usize,
    duplicates: Vec<String>,
    response: StopResponse,
    node: &str,
) -> StopManyResponse {
    let missing: Vec<StartError> = unanswered(ids, &response)
        .into_iter()
        .map(|id| StartError {
            id: id.to_string(),
            node: node.to_owned(),
            reason: "outcome unknown: the hub's answer does not name this child; retrying the \
                     stop is safe"
                .into(),
            code: "outcome_unknown".into(),
        })
        .collect();
    let StopResponse {
        stopped,
        mut errors,
        pending,
    } = response;
    errors.extend(missing);
    let counts = StopCounts {
        requested,
        distinct: ids.len(),
        stopped: stopped.len(),
        pending: pending.len(),
        errors: errors.len(),
        not_found: errors.iter().filter(|e| e.code == "not_found").count(),
    };
    StopManyResponse {
        stopped,
        errors,
        pending,
        duplicates,
        counts,
    }
}

/// `POST /v1/children/stop`.
pub(super) async fn stop_many<O: AdminOps>(
    State(r): State<Routes<O>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminError> {
    let body = body.map_err(|e| AdminError::of_body(e, r.limits.max_body_bytes))?;
    let raw = parse_stop_body(&body)?;
    if raw.is_empty() {
        return Err(AdminError::InvalidInput(
            "no children in the request: `ids` is empty".into(),
        ));
    }
    let max = r.limits.max_specs_per_request;
    if raw.len() > max {
        return Err(AdminError::PayloadTooLarge(format!(
            "{} ids in one request; at most {max} are taken (send the rest in further requests)",
            raw.len()
        )));
    }
    let requested = raw.len();
    // Every id checked before any child stops, so a bad id stops nothing.
    let (ids, duplicates) = check_ids(raw)?;
    let response = r.ops.stop_children(ids.clone()).await?;
    // The node's name only for the ids the answer does not name (which it always does).
    let node = if unanswered(&ids, &response).is_empty() {
        String::new()
    } else {
        r.ops.health().await.map(|h| h.node).unwrap_or_default()
    };
    let answer = stop_many_answer(&ids, requested, duplicates, response, &node);
    let status = if answer.pending.is_empty() {
        StatusCode::OK
    } else {
        // Undeclared for good, instances not confirmed stopped: acknowledged, not done.
        StatusCode::ACCEPTED
    };
    Ok((status, Json(answer)).into_response())
}

/// `GET /v1/children/stop`: the child named `stop` (the batch stop's path is `POST` only).
pub(super) async fn get_child_named_stop<O: AdminOps>(
    state: State<Routes<O>>,
) -> Result<Json<ChildView>, AdminError> {
    super::routes::get_one(state, Path("stop".to_owned())).await
}

/// `DELETE /v1/children/stop`: stops the child named `stop`.
pub(super) async fn stop_child_named_stop<O: AdminOps>(
    state: State<Routes<O>>,
) -> Result<Response, AdminError> {
    super::routes::stop(state, Path("stop".to_owned())).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::bodies::{PendingChild, StoppedChild};

    #[test]
    fn the_body_is_an_object_of_ids_read_strictly() {
        assert_eq!(
            parse_stop_body(br#"{"ids":["a","b","a"]}"#).unwrap(),
            ["a", "b", "a"]
        );
        let e = parse_stop_body(br#"{"ids":["a"],"force":true}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("force"));
        assert!(
            e.message
                .starts_with(r#"unknown field "force" in the body"#),
            "{e}"
        );
        let e = parse_stop_body(br#"{"ids":["a"],"ids":["b"]}"#).unwrap_err();
        assert!(e.message.starts_with(r#"duplicate field "ids""#), "{e}");
        let e = parse_stop_body(br#"{}"#).unwrap_err();
        assert!(e.message.starts_with(r#"missing field "ids""#), "{e}");
        let e = parse_stop_body(br#"{"ids":"a"}"#).unwrap_err();
        assert!(e.message.starts_with(r#"field "ids" is a string"#), "{e}");
        let e = parse_stop_body(br#"{"ids":["a",7]}"#).unwrap_err();
        assert_eq!((e.at.as_str(), e.field.as_deref()), ("ids[1]", Some("ids")));
        let e = parse_stop_body(br#"["a"]"#).unwrap_err();
        assert!(e.message.starts_with("the body is an array"), "{e}");
        let e = parse_stop_body(b"{oops").unwrap_err();
        assert!(e.message.starts_with("the body is not JSON"), "{e}");
    }

    #[test]
    fn ids_are_checked_in_order_and_kept_once() {
        let (ids, duplicates) =
            check_ids(["b", "a", "b", "c", "b", "a"].map(String::from).to_vec()).unwrap();
        let ids: Vec<&str> = ids.iter().map(ChildId::as_str).collect();
        assert_eq!(ids, ["b", "a", "c"]);
        assert_eq!(duplicates, ["b", "a"]);
        let e = check_ids(vec!["a".into(), String::new()]).unwrap_err();
        assert_eq!(e.at, "ids[1]");
        assert!(e.message.contains("must not be empty"), "{e}");
    }

    #[test]
    fn every_distinct_id_is_answered_once_and_counted() {
        let ids: Vec<ChildId> = ["s", "p", "gone", "lost"].map(ChildId::from).to_vec();
        let response = StopResponse {
            stopped: vec![StoppedChild {
                id: "s".into(),
                nodes: vec!["a@h".into()],
            }],
            errors: vec![StartError {
                id: "gone".into(),
                node: "a@h".into(),
                reason: "no such child".into(),
                code: "not_found".into(),
            }],
            pending: vec![PendingChild {
                id: "p".into(),
                nodes: vec!["b@h".into()],
                reason: "node unavailable".into(),
                code: "node_unavailable".into(),
            }],
        };
        let answer = stop_many_answer(&ids, 5, vec!["s".into()], response, "a@h");
        assert_eq!(
            answer.counts,
            StopCounts {
                requested: 5,
                distinct: 4,
                stopped: 1,
                pending: 1,
                errors: 2,
                not_found: 1,
            }
        );
        // The id the hub did not answer is not claimed stopped nor refused: its outcome is
        // unknown.
        let lost = answer.errors.iter().find(|e| e.id == "lost").unwrap();
        assert_eq!(
            (lost.code.as_str(), lost.node.as_str()),
            ("outcome_unknown", "a@h")
        );
        assert_eq!(answer.duplicates, ["s"]);
    }
}
