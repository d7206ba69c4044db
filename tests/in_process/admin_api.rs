//! The admin API's HTTP contract (paths, JSON fields, status codes), driven against an
//! in-memory stand-in for the hub so that only the HTTP layer is under test here.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use process_hub::admin::{
    AdminError, AdminOps, ChildView, Health, NodePid, PendingChild, StartError, StartResponse,
    StartSpec, StartedChild, StopResponse, StoppedChild,
};
use process_hub::model::ChildId;
use serde_json::{json, Value};

/// A hub stand-in: a map of children on one node; `ready` false answers 503.
#[derive(Clone, Default)]
struct FakeHub {
    children: Arc<Mutex<BTreeMap<String, ChildView>>>,
    not_ready: bool,
    /// The kinds it knows; `None`: it cannot tell (the trait's default).
    kinds: Option<Vec<String>>,
    /// The health's `status` when not `"ok"`.
    status: Option<&'static str>,
    /// The first reconcile round has not completed (`recovery_state` `"recovering"`).
    recovering: bool,
}

impl AdminOps for FakeHub {
    async fn health(&self) -> Result<Health, AdminError> {
        if self.not_ready {
            return Err(AdminError::NotReady("hub is starting".into()));
        }
        Ok(Health {
            node: "a@127.0.0.1".into(),
            hub: "h".into(),
            members: vec!["a@127.0.0.1".into(), "b@127.0.0.1".into()],
            recovery_state: if self.recovering {
                "recovering"
            } else {
                "normal"
            }
            .into(),
            parked: false,
            status: self.status.unwrap_or("ok").into(),
            problems: self
                .status
                .map(|s| vec![format!("{s}: a reason")])
                .unwrap_or_default(),
            partitioned: false,
            pending_work: 0,
            refused_peer_input: Default::default(),
            ..Health::default()
        })
    }

    fn known_kinds(&self) -> Option<Vec<String>> {
        self.kinds.clone()
    }

    async fn list_children(&self) -> Result<Vec<ChildView>, AdminError> {
        Ok(self.children.lock().unwrap().values().cloned().collect())
    }

    async fn get_child(&self, id: ChildId) -> Result<Option<ChildView>, AdminError> {
        Ok(self.children.lock().unwrap().get(id.as_str()).cloned())
    }

    async fn start_children(&self, specs: Vec<StartSpec>) -> Result<StartResponse, AdminError> {
        let mut out = StartResponse::default();
        let mut children = self.children.lock().unwrap();
        for spec in specs {
            if spec.id.starts_with("unsure") {
                return Err(AdminError::OutcomeUnknown(
                    "the declared list's leader did not answer in time".into(),
                ));
            }
            if spec.id.starts_with("pending") {
                out.pending.push(PendingChild {
                    id: spec.id.clone(),
                    nodes: vec!["d@127.0.0.1".into()],
                    reason: "node unavailable: d is cut off".into(),
                    code: "node_unavailable".into(),
                });
                continue;
            }
            if children.contains_key(&spec.id) {
                out.errors.push(StartError {
                    id: spec.id.clone(),
                    node: "a@127.0.0.1".into(),
                    reason: "already started".into(),
                    code: "already_started".into(),
                });
                continue;
            }
            let nodes = vec![NodePid {
                node: "a@127.0.0.1".into(),
                pid: children.len() as u64 + 1,
                role: None,
            }];
            children.insert(
                spec.id.clone(),
                ChildView {
                    id: spec.id.clone(),
                    kind: spec.kind.clone(),
                    nodes: nodes.clone(),
                    metadata: spec.metadata.clone().unwrap_or_default(),
                    durable: None,
                },
            );
            out.started.push(StartedChild { id: spec.id, nodes });
        }
        Ok(out)
    }

    async fn stop_child(&self, id: ChildId) -> Result<Option<StopResponse>, AdminError> {
        if id.as_str().starts_with("unsure") {
            return Err(AdminError::OutcomeUnknown(
                "the declared list's leader did not answer in time".into(),
            ));
        }
        if id.as_str().starts_with("pending") {
            return Ok(Some(StopResponse {
                pending: vec![PendingChild {
                    id: id.to_string(),
                    nodes: vec!["d@127.0.0.1".into()],
                    reason: "node unavailable: d is cut off".into(),
                    code: "node_unavailable".into(),
                }],
                ..StopResponse::default()
            }));
        }
        Ok(self
            .children
            .lock()
            .unwrap()
            .remove(id.as_str())
            .map(|c| StopResponse {
                stopped: vec![StoppedChild {
                    id: c.id,
                    nodes: c.nodes.into_iter().map(|n| n.node).collect(),
                }],
                errors: vec![],
                pending: vec![],
            }))
    }
}

async fn call(hub: &FakeHub, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    common::admin::call_admin(hub, method, path, body).await
}

/// `GET path` of the unauthenticated probe listener's routes over `hub`.
async fn probe(hub: &FakeHub, path: &str) -> (StatusCode, Value) {
    let request = axum::http::Request::builder()
        .uri(path)
        .body(axum::body::Body::empty())
        .expect("a well-formed request");
    let (status, bytes) =
        common::admin::send(process_hub::admin::probe_router(hub.clone()), request).await;
    (status, serde_json::from_slice(&bytes).expect("a JSON body"))
}

#[tokio::test]
async fn health_reports_node_hub_sorted_members_and_recovery_state() {
    let hub = FakeHub::default();
    let (status, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["node"], "a@127.0.0.1");
    assert_eq!(body["hub"], "h");
    assert_eq!(body["members"], json!(["a@127.0.0.1", "b@127.0.0.1"]));
    assert_eq!(body["recovery_state"], "normal");
}

#[tokio::test]
async fn not_ready_is_503_with_error_code() {
    let hub = FakeHub {
        not_ready: true,
        ..Default::default()
    };
    let (status, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"], "not_ready");
    assert!(body["message"].as_str().unwrap().contains("starting"));
}

/// The readiness probe fails for every status but `ok` and while the node recovers; the
/// liveness probe (`/v1/health`) answers 200 whatever the status, so a node that is only not
/// ready is never restarted for it.
#[tokio::test]
async fn ready_only_when_ok_and_recovered_while_health_always_answers() {
    let (status, body) = call(&FakeHub::default(), "GET", "/v1/ready", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    for not_ok in ["isolated", "partitioned", "degraded", "set_aside"] {
        let hub = FakeHub {
            status: Some(not_ok),
            ..Default::default()
        };
        let (status, body) = call(&hub, "GET", "/v1/ready", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{not_ok}: {body}");
        assert_eq!(body["error"], "not_ready");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(&format!("status {not_ok}")), "{message}");
        let (status, body) = call(&hub, "GET", "/v1/health", None).await;
        assert_eq!(status, StatusCode::OK, "{not_ok}: {body}");
        assert_eq!(body["status"], not_ok);
        // The probe listener says the same, and nothing more than the status.
        let (status, body) = probe(&hub, "/v1/ready").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{not_ok}: {body}");
        assert_eq!(body["error"], "not_ready");
        assert!(
            !body["message"].as_str().unwrap().contains("a reason"),
            "{body}"
        );
        let (status, body) = probe(&hub, "/v1/health").await;
        assert_eq!(status, StatusCode::OK, "{not_ok}: {body}");
        assert_eq!(body, json!({"status": not_ok, "recovery_state": "normal"}));
    }
    let (status, body) = probe(&FakeHub::default(), "/v1/ready").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"status": "ok", "recovery_state": "normal"}));
    let (status, body) = probe(&FakeHub::default(), "/v1/children").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "only the probes: {body}");
    let recovering = FakeHub {
        recovering: true,
        ..Default::default()
    };
    let (status, body) = call(&recovering, "GET", "/v1/ready", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("recovering"),
        "{body}"
    );
    let (status, body) = call(&recovering, "GET", "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["recovery_state"], "recovering");
    let (status, body) = probe(&recovering, "/v1/ready").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, body) = probe(&recovering, "/v1/health").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn start_one_then_list_get_and_delete() {
    let hub = FakeHub::default();
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!({"id": "c1", "kind": "counter", "metadata": {"tag": "t"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["started"][0]["id"], "c1");
    assert_eq!(body["started"][0]["nodes"][0]["node"], "a@127.0.0.1");
    assert_eq!(body["errors"], json!([]));

    let (status, body) = call(&hub, "GET", "/v1/children", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0]["id"], "c1");
    assert_eq!(body[0]["kind"], "counter");
    assert_eq!(body[0]["metadata"]["tag"], "t");

    let (status, body) = call(&hub, "GET", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["nodes"][0]["pid"], 1);

    let (status, body) = call(&hub, "DELETE", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["stopped"][0]["id"], "c1");

    let (status, body) = call(&hub, "GET", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "not_found");
    let (status, _) = call(&hub, "DELETE", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn starting_a_running_child_alone_is_409_and_in_a_batch_is_an_error_entry() {
    let hub = FakeHub::default();
    let spec = json!({"id": "dup", "kind": "counter"});
    assert_eq!(
        call(&hub, "POST", "/v1/children", Some(spec.clone()))
            .await
            .0,
        StatusCode::OK
    );
    let (status, body) = call(&hub, "POST", "/v1/children", Some(spec.clone())).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"], "already_started");

    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([spec, {"id": "fresh", "kind": "counter"}])),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["started"][0]["id"], "fresh");
    assert_eq!(body["errors"][0]["id"], "dup");
    assert_eq!(body["errors"][0]["node"], "a@127.0.0.1");
    assert!(body["errors"][0]["reason"].is_string());
}

#[tokio::test]
async fn invalid_bodies_are_400_and_start_nothing() {
    let hub = FakeHub::default();
    for bad in [
        json!({"kind": "counter"}),
        json!({"id": "", "kind": "counter"}),
        json!({"id": "x", "kind": ""}),
        json!({"id": "x", "kind": "counter", "restart": "sometimes"}),
        json!({"id": "x", "kind": "counter", "metadata": {"n": 1}}),
        json!([]),
        json!([{"id": "ok", "kind": "counter"}, {"id": "", "kind": "counter"}]),
        json!(42),
    ] {
        let (status, body) = call(&hub, "POST", "/v1/children", Some(bad.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} -> {body}");
        assert_eq!(body["error"], "invalid_input", "{bad}");
    }
    assert!(hub.children.lock().unwrap().is_empty());
}

#[tokio::test]
async fn declared_routes_answer_404_where_there_is_no_declared_list() {
    let hub = FakeHub::default();
    let (status, body) = call(&hub, "GET", "/v1/declared", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "not_found");
    let (status, _) = call(&hub, "POST", "/v1/declared/clear", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(body["parked"], false);
}

#[tokio::test]
async fn a_node_that_does_not_message_children_answers_404_and_wrong_methods_405() {
    let hub = FakeHub::default();
    let command = json!({"kind": "counter", "command": {"op": "get"}});
    for path in ["/v1/children/c1/call", "/v1/children/c1/cast"] {
        let (status, body) = call(&hub, "POST", path, Some(command.clone())).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(body["error"], "not_found");
        let (status, body) = call(&hub, "GET", path, None).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}: {body}");
        assert_eq!(body["error"], "method_not_allowed");
    }
}

/// Posts `body` and checks it is refused whole: 400 `invalid_input` naming `field` at `at`,
/// nothing started. Answers the message.
async fn refused(hub: &FakeHub, body: Value, field: &str, at: &str) -> String {
    let (status, answer) = call(hub, "POST", "/v1/children", Some(body.clone())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {answer}");
    assert_eq!(answer["error"], "invalid_input", "{answer}");
    assert_eq!(answer["field"], field, "{answer}");
    assert_eq!(answer["at"], at, "{answer}");
    assert!(
        hub.children.lock().unwrap().is_empty(),
        "{body} started something"
    );
    answer["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn unknown_and_missing_fields_and_unknown_kinds_are_named_and_start_nothing() {
    let hub = FakeHub {
        kinds: Some(vec!["counter".into(), "kv_shard".into()]),
        ..Default::default()
    };
    // A misspelled field is refused, not ignored: `durabel` ignored would start a plain child.
    let message = refused(
        &hub,
        json!({"id": "x", "kind": "counter", "durabel": true}),
        "durabel",
        "the child spec",
    )
    .await;
    assert!(
        message.starts_with(r#"unknown field "durabel" in the child spec (id "x")"#),
        "{message}"
    );
    assert!(
        message.contains("durable"),
        "the expected fields are listed: {message}"
    );
    // In a batch, one bad entry refuses the whole request, named by its index.
    let mut batch: Vec<Value> = (0..5)
        .map(|i| json!({"id": format!("ok{i}"), "kind": "counter"}))
        .collect();
    batch[3]["durabel"] = json!(true);
    let message = refused(&hub, json!(batch), "durabel", "children[3]").await;
    assert!(
        message.starts_with(r#"unknown field "durabel" in children[3] (id "ok3")"#),
        "{message}"
    );
    // A missing field.
    let message = refused(
        &hub,
        json!([{"id": "a"}, {"id": "b", "kind": "counter"}]),
        "kind",
        "children[0]",
    )
    .await;
    assert_eq!(message, r#"missing field "kind" in children[0] (id "a")"#);
    // A misspelled `kind` field is an unknown field, not an untagged enum's riddle.
    let message = refused(
        &hub,
        json!({"id": "a", "knid": "counter"}),
        "knid",
        "the child spec",
    )
    .await;
    assert!(!message.contains("untagged"), "{message}");
    // A field of the wrong type.
    let message = refused(
        &hub,
        json!([{"id": "a", "kind": "counter"}, {"id": "b", "kind": "counter", "restart": "permanant"}]),
        "restart",
        "children[1]",
    )
    .await;
    assert!(message.contains("permanant"), "{message}");
    // An unknown kind lists the known ones, and the batch starts nothing.
    let message = refused(
        &hub,
        json!([{"id": "a", "kind": "counter"}, {"id": "b", "kind": "cuonter"}]),
        "kind",
        "children[1]",
    )
    .await;
    assert_eq!(
        message,
        r#"unknown kind "cuonter" in children[1] (id "b"); known kinds: counter, kv_shard"#
    );
    // A blank id is named too.
    refused(
        &hub,
        json!([{"id": "", "kind": "counter"}]),
        "id",
        "children[0]",
    )
    .await;

    // The same batch without its typo starts every child.
    batch[3] = json!({"id": "ok3", "kind": "counter"});
    let (status, body) = call(&hub, "POST", "/v1/children", Some(json!(batch))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["started"].as_array().unwrap().len(), 5);

    // A node that cannot tell its kinds leaves the kind to the start.
    let open = FakeHub::default();
    let (status, body) = call(
        &open,
        "POST",
        "/v1/children",
        Some(json!({"id": "a", "kind": "anything"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Posts the raw text `body` (JSON a `Value` cannot hold: a key given twice) to the start.
async fn post_text(hub: &FakeHub, body: &str) -> (StatusCode, Value) {
    let request = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/children")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_owned()))
        .expect("a well-formed request");
    let (status, bytes) =
        common::admin::send(process_hub::admin::router(hub.clone()), request).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("the answer is JSON ({e}): {bytes:?}"));
    (status, value)
}

#[tokio::test]
async fn a_field_given_twice_is_refused_naming_it_and_starts_nothing() {
    let hub = FakeHub::default();
    // Read as its last value, this would start a plain child where a durable one was asked.
    let (status, answer) = post_text(
        &hub,
        r#"{"id":"a","kind":"counter","durable":true,"durable":false}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"], "invalid_input");
    assert_eq!(answer["field"], "durable");
    assert_eq!(answer["at"], "the child spec");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .starts_with(r#"duplicate field "durable" in the child spec (id "a")"#),
        "{answer}"
    );
    // In a batch, the entry is named and none of the batch starts; a key twice inside `args`
    // blames `args`.
    let (status, answer) = post_text(
        &hub,
        r#"[{"id":"a","kind":"counter"},{"id":"b","kind":"counter","args":{"start":1,"start":2}}]"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(
        (&answer["error"], &answer["field"], &answer["at"]),
        (
            &json!("invalid_input"),
            &json!("args"),
            &json!("children[1]")
        ),
        "{answer}"
    );
    assert!(hub.children.lock().unwrap().is_empty(), "started something");
    // The same keys once each start.
    let (status, answer) = post_text(&hub, r#"{"id":"a","kind":"counter","durable":false}"#).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(hub.children.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn kinds_lists_what_the_node_can_start_or_404_when_it_cannot_tell() {
    let hub = FakeHub {
        kinds: Some(vec!["counter".into(), "kv_shard".into()]),
        ..Default::default()
    };
    let (status, body) = call(&hub, "GET", "/v1/kinds", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"kinds": ["counter", "kv_shard"]}));
    let (status, body) = call(&FakeHub::default(), "GET", "/v1/kinds", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "not_found");
}

#[tokio::test]
async fn a_pending_answer_is_202_naming_the_pending_instances() {
    let hub = FakeHub::default();
    let (status, body) = call(&hub, "DELETE", "/v1/children/pending-1", None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["stopped"], json!([]));
    assert_eq!(body["errors"], json!([]));
    assert_eq!(body["pending"][0]["id"], "pending-1");
    assert_eq!(body["pending"][0]["nodes"], json!(["d@127.0.0.1"]));
    assert_eq!(body["pending"][0]["code"], "node_unavailable");
    // A start: one child pending among started ones makes the batch 202 too.
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([{"id": "s1", "kind": "counter"}, {"id": "pending-2", "kind": "counter", "durable": true}])),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["started"][0]["id"], "s1");
    assert_eq!(body["pending"][0]["id"], "pending-2");
    // Settled answers carry no `pending` field at all (the shape callers already parse).
    let (status, body) = call(&hub, "DELETE", "/v1/children/s1", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.get("pending").is_none(), "{body}");
}

#[tokio::test]
async fn an_unknown_outcome_is_504_outcome_unknown_never_a_refusal() {
    let hub = FakeHub::default();
    let (status, body) = call(&hub, "DELETE", "/v1/children/unsure-1", None).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(body["error"], "outcome_unknown");
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!({"id": "unsure-2", "kind": "counter", "durable": true})),
    )
    .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(body["error"], "outcome_unknown");
}

/// Starts counter children `ids` on `hub` (200 expected).
async fn start_counters(hub: &FakeHub, ids: &[&str]) {
    let specs: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "kind": "counter"}))
        .collect();
    let (status, body) = call(hub, "POST", "/v1/children", Some(json!(specs))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The ids of the entries of `list` (an array of objects with an `id`).
fn ids_of(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("{list} is not an array"))
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect()
}

fn running(hub: &FakeHub) -> Vec<String> {
    hub.children.lock().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn a_batch_stop_answers_every_id_once_with_counts() {
    let hub = FakeHub::default();
    start_counters(&hub, &["c1", "c2", "c3"]).await;
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children/stop",
        Some(json!({"ids": ["c1", "nope", "c2", "c1", "pending-9", "nope"]})),
    )
    .await;
    // One child is pending: acknowledged, not done.
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(ids_of(&body["stopped"]), ["c1", "c2"], "{body}");
    assert_eq!(body["stopped"][0]["nodes"], json!(["a@127.0.0.1"]));
    assert_eq!(ids_of(&body["errors"]), ["nope"], "{body}");
    assert_eq!(body["errors"][0]["code"], "not_found");
    assert_eq!(body["errors"][0]["node"], "a@127.0.0.1");
    assert_eq!(ids_of(&body["pending"]), ["pending-9"], "{body}");
    assert_eq!(body["pending"][0]["code"], "node_unavailable");
    assert_eq!(body["duplicates"], json!(["c1", "nope"]));
    assert_eq!(
        body["counts"],
        json!({"requested": 6, "distinct": 4, "stopped": 2, "pending": 1, "errors": 1, "not_found": 1})
    );
    assert_eq!(running(&hub), ["c3"]);
    // Every child settled: 200.
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children/stop",
        Some(json!({"ids": ["c3"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["counts"]["stopped"], 1, "{body}");
    assert_eq!(body["pending"], json!([]));
    assert!(running(&hub).is_empty());
}

/// Posts the raw text `body` to `path`.
async fn post_raw(hub: &FakeHub, path: &str, body: &str) -> (StatusCode, Value) {
    let request = axum::http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_owned()))
        .expect("a well-formed request");
    let (status, bytes) =
        common::admin::send(process_hub::admin::router(hub.clone()), request).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("the answer is JSON ({e}): {bytes:?}"));
    (status, value)
}

#[tokio::test]
async fn a_bad_batch_stop_is_refused_whole_naming_the_field_and_stops_nothing() {
    let hub = FakeHub::default();
    start_counters(&hub, &["c1", "c2"]).await;
    for (body, field, at) in [
        // A misspelled or unknown field is refused, not ignored.
        (
            json!({"ids": ["c1"], "force": true}),
            Some("force"),
            "the body",
        ),
        (json!({"idz": ["c1"]}), Some("idz"), "the body"),
        (json!({}), Some("ids"), "the body"),
        (json!({"ids": "c1"}), Some("ids"), "the body"),
        (json!(["c1"]), None, "the body"),
        // One bad id refuses the batch, named by its index.
        (json!({"ids": ["c1", 3]}), Some("ids"), "ids[1]"),
        (json!({"ids": ["c1", ""]}), Some("ids"), "ids[1]"),
    ] {
        let (status, answer) = call(&hub, "POST", "/v1/children/stop", Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {answer}");
        assert_eq!(answer["error"], "invalid_input", "{body} -> {answer}");
        assert_eq!(answer["at"], at, "{body} -> {answer}");
        match field {
            Some(field) => assert_eq!(answer["field"], field, "{body} -> {answer}"),
            None => assert!(answer.get("field").is_none(), "{body} -> {answer}"),
        }
    }
    let (status, answer) = call(&hub, "POST", "/v1/children/stop", Some(json!({"ids": []}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    // A key given twice: read as its last value, this would stop `c1`.
    let (status, answer) =
        post_raw(&hub, "/v1/children/stop", r#"{"ids":["x"],"ids":["c1"]}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["field"], "ids", "{answer}");
    // More ids than the limit: 413 naming both numbers.
    let many: Vec<String> = (0..10_001).map(|i| format!("c{i}")).collect();
    let (status, answer) = call(
        &hub,
        "POST",
        "/v1/children/stop",
        Some(json!({ "ids": many })),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert_eq!(answer["error"], "payload_too_large");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("10001 ids") && message.contains("at most 10000"),
        "{message}"
    );
    assert_eq!(
        running(&hub),
        ["c1", "c2"],
        "a refused batch stopped something"
    );
}

#[tokio::test]
async fn a_batch_stop_refused_at_its_first_child_is_the_requests_error_later_that_childs() {
    let hub = FakeHub::default();
    start_counters(&hub, &["c1", "c2"]).await;
    // Nothing was stopped: the refusal is the request's, with the single stop's status.
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children/stop",
        Some(json!({"ids": ["unsure-1", "c1"]})),
    )
    .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(body["error"], "outcome_unknown");
    assert_eq!(running(&hub), ["c1", "c2"]);
    // After a child stopped, a refusal is that child's answer, and the rest go ahead.
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children/stop",
        Some(json!({"ids": ["c1", "unsure-2", "c2"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids_of(&body["stopped"]), ["c1", "c2"], "{body}");
    assert_eq!(ids_of(&body["errors"]), ["unsure-2"], "{body}");
    assert_eq!(body["errors"][0]["code"], "outcome_unknown");
    assert!(running(&hub).is_empty());
}

#[tokio::test]
async fn a_child_named_stop_is_still_read_stopped_and_messaged_by_its_path() {
    let hub = FakeHub::default();
    start_counters(&hub, &["stop"]).await;
    let (status, body) = call(&hub, "GET", "/v1/children/stop", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], "stop");
    // Its messaging paths reach the messaging routes (this stand-in does not message).
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children/stop/call",
        Some(json!({"op": "get"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("does not message children"),
        "{body}"
    );
    let (status, body) = call(&hub, "DELETE", "/v1/children/stop", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["stopped"][0]["id"], "stop");
    let (status, _) = call(&hub, "GET", "/v1/children/stop", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
