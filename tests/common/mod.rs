//! Helpers shared by the hub's integration tests: spawning a hub with the ready-made kinds and
//! waiting for conditions with a generous deadline (never sleeping as an assertion).

#![allow(dead_code)]

use std::time::Duration;

use process_hub::{Hub, HubEvent, ProcessHub};
use tokio::sync::mpsc::UnboundedReceiver;

/// Generous: CI machines are slow and shared.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub async fn spawn_hub(hub_id: &str) -> Hub {
    spawn_with(ProcessHub::new(hub_id)).await
}

pub async fn spawn_with(config: ProcessHub) -> Hub {
    let (hub, _join) = Hub::spawn(config, process_hub_actors::default_kinds())
        .await
        .expect("hub spawns");
    hub
}

/// Polls `cond` until it holds or the deadline passes.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Receives events until one matches `pred`; returns it.
pub async fn wait_event(
    rx: &mut UnboundedReceiver<HubEvent>,
    what: &str,
    mut pred: impl FnMut(&HubEvent) -> bool,
) -> HubEvent {
    let found = tokio::time::timeout(DEADLINE, async {
        while let Some(e) = rx.recv().await {
            if pred(&e) {
                return Some(e);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(e)) => e,
        Ok(None) => panic!("event stream ended while waiting for: {what}"),
        Err(_) => panic!("timed out waiting for event: {what}"),
    }
}

/// Sends one request to the admin routes over `ops` and returns the status and the JSON body
/// (`Null` when empty, a JSON string when the body is not JSON).
pub async fn call_admin<O: process_hub::admin::AdminOps>(
    ops: &O,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (axum::http::StatusCode, serde_json::Value) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let request = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(match body {
            Some(v) => axum::body::Body::from(v.to_string()),
            None => axum::body::Body::empty(),
        })
        .expect("a well-formed request");
    let response = process_hub::admin::router(ops.clone())
        .oneshot(request)
        .await
        .expect("the router answers");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a readable body")
        .to_bytes();
    let value = if bytes.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::String(
            String::from_utf8_lossy(&bytes).into(),
        ))
    };
    (status, value)
}
