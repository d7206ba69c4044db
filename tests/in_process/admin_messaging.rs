//! Messaging a child over HTTP (`POST /v1/children/{id}/call` and `/cast`) on a real hub: the
//! command reaches the child's kind, its answer comes back as JSON, and each failure has its
//! code and the status that tells the caller whether to fix the request or retry.

use crate::common;

use std::time::Duration;

use axum::http::StatusCode;
use process_hub::{ChildKinds, ChildSpec, Hub, ProcessHub, StartOptions};
use serde_json::{json, Value};

/// A hub with the kinds of `process_hub_actors` plus three test kinds: `silent` (a counter
/// without a command handler), `sleepy` (answers after 300 ms) and `binary` (answers bytes
/// that are not JSON).
async fn hub() -> Hub {
    let mut kinds = process_hub_actors::default_kinds();
    add_test_kinds(&mut kinds);
    let config = ProcessHub::builder("admin-messaging")
        .node_name("a@127.0.0.1")
        .build()
        .expect("valid config");
    let (hub, _join) = Hub::spawn(config, kinds).await.expect("hub spawns");
    let specs = vec![
        ChildSpec::new("c1", "counter"),
        ChildSpec::new("quiet", "silent"),
        ChildSpec::new("slow", "sleepy"),
        ChildSpec::new("raw", "binary"),
    ];
    let started = hub
        .start_children(specs, StartOptions::new())
        .await
        .expect("start answers");
    assert!(started.is_ok(), "{started:?}");
    hub
}

fn add_test_kinds(kinds: &mut ChildKinds) {
    use process_hub_actors::counter::Counter;
    kinds.register("silent", Counter);
    kinds.register("sleepy", Counter);
    kinds.register("binary", Counter);
    kinds.register_command("sleepy", |_cell, _payload| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(b"1".to_vec())
        })
    });
    kinds.register_command("binary", |_cell, _payload| {
        Box::pin(async { Ok(vec![0xff, 0x00, 0x01]) })
    });
}

async fn post(hub: &Hub, path: &str, body: Value) -> (StatusCode, Value) {
    common::admin::call_admin(hub, "POST", path, Some(body)).await
}

fn get() -> Value {
    json!({"kind": "counter", "command": {"op": "get"}})
}

fn increment(by: i64) -> Value {
    json!({"kind": "counter", "command": {"op": "increment", "by": by}})
}

#[tokio::test]
async fn a_call_answers_the_kinds_json_and_a_cast_is_accepted_then_seen() {
    let hub = hub().await;
    let (status, body) = post(&hub, "/v1/children/c1/call", get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"id": "c1", "node": "a@127.0.0.1", "answer": 0})
    );

    let (status, body) = post(&hub, "/v1/children/c1/cast", increment(5)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"id": "c1", "node": "a@127.0.0.1"}));
    // Casts and calls from one sender to one child arrive in order: the call sees the cast.
    let (status, body) = post(&hub, "/v1/children/c1/call?timeout_ms=2000", get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["answer"], 5);

    // A command that answers nothing is `null`.
    let (status, body) = post(&hub, "/v1/children/c1/call", increment(1)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["answer"], Value::Null);
    hub.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn each_failure_has_its_code_and_status() {
    let hub = hub().await;
    let cases = [
        ("/v1/children/ghost/call", get(), 404, "not_found"),
        ("/v1/children/ghost/cast", get(), 404, "not_found"),
        ("/v1/children/quiet/call", get(), 422, "no_command_handler"),
        (
            "/v1/children/c1/call",
            json!({"kind": "counter", "command": {"op": "fly"}}),
            422,
            "command_failed",
        ),
        (
            "/v1/children/slow/call?timeout_ms=50",
            get(),
            504,
            "timeout",
        ),
        ("/v1/children/raw/call", get(), 502, "answer_not_json"),
        (
            "/v1/children/c1/call?timeout_ms=0",
            get(),
            400,
            "invalid_input",
        ),
        (
            "/v1/children/c1/call?timeout_ms=60001",
            get(),
            400,
            "invalid_input",
        ),
        (
            "/v1/children/c1/call?timeout_ms=soon",
            get(),
            400,
            "invalid_input",
        ),
    ];
    for (path, body, status, code) in cases {
        let (got, answer) = post(&hub, path, body).await;
        assert_eq!(got.as_u16(), status, "{path}: {answer}");
        assert_eq!(answer["error"], code, "{path}: {answer}");
        assert!(
            answer["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{answer}"
        );
    }
    // The slow child still answers within a longer timeout.
    let (status, body) = post(&hub, "/v1/children/slow/call?timeout_ms=5000", get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["answer"], 1);
    hub.shutdown().await.expect("shutdown");
}

/// A request with a raw body and content type, for what `call_admin` cannot send.
async fn raw(hub: &Hub, path: &str, content_type: &str, body: Vec<u8>) -> (StatusCode, Value) {
    raw_with(hub, path, content_type, &[], body).await
}

/// [`raw`] with more headers; the body limit is 1024 bytes.
async fn raw_with(
    hub: &Hub,
    path: &str,
    content_type: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let mut request = axum::http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", content_type);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(axum::body::Body::from(body))
        .expect("a well-formed request");
    let config = process_hub::admin::AdminConfig {
        limits: process_hub::admin::AdminLimits {
            max_body_bytes: 1024,
            ..Default::default()
        },
        ..Default::default()
    };
    let (status, bytes) = common::admin::send(
        process_hub::admin::router_with(hub.clone(), config),
        request,
    )
    .await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn bodies_are_json_within_the_limit_like_every_other_write() {
    let hub = hub().await;
    for path in ["/v1/children/c1/call", "/v1/children/c1/cast"] {
        let (status, body) = raw(&hub, path, "text/plain", get().to_string().into_bytes()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path}: {body}");
        let (status, body) = raw(&hub, path, "application/json", b"{not json".to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["error"], "invalid_input");
        let (status, body) = raw(&hub, path, "application/json", Vec::new()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        let big = serde_json::to_vec(&json!({"pad": "x".repeat(2048)})).expect("json");
        let (status, body) = raw(&hub, path, "application/json", big).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {body}");
        assert_eq!(body["error"], "payload_too_large");
        assert_eq!(body["message"], "the body is over the 1024 byte limit");
        // A length declared over the limit is refused from the headers: the short body that
        // follows (a valid command) is never read.
        let declared = [("content-length", "4096")];
        let command = get().to_string().into_bytes();
        let (status, body) = raw_with(&hub, path, "application/json", &declared, command).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {body}");
        assert_eq!(body["error"], "payload_too_large");
        assert_eq!(
            body["message"], "a body of 4096 bytes is over the 1024 byte limit",
            "{path}"
        );
    }
    // Nothing reached the counter.
    let (_, body) = post(&hub, "/v1/children/c1/call", get()).await;
    assert_eq!(body["answer"], 0);
    hub.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn with_a_token_messaging_needs_it_too() {
    use tower::ServiceExt;
    let hub = hub().await;
    let config = process_hub::admin::AdminConfig {
        token: Some(process_hub::admin::AdminToken::new("0123456789abcdef0123").expect("token")),
        ..Default::default()
    };
    let request = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/children/c1/cast")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(increment(3).to_string()))
        .expect("request");
    let response = process_hub::admin::router_with(hub.clone(), config)
        .oneshot(request)
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let (_, body) = post(&hub, "/v1/children/c1/call", get()).await;
    assert_eq!(body["answer"], 0, "the refused cast reached the child");
    hub.shutdown().await.expect("shutdown");
}
