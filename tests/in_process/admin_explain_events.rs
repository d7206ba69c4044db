//! Explain, members and events over the admin routes of real hubs: why a child is where it is
//! (on its ring owner; waiting for the grace of its crashed node), the members with their
//! state, the bounded ring of recent events, and the live event stream with its cap.

use crate::common;

use std::time::Duration;

use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use process_hub::admin::{AdminConfig, AdminLimits};
use process_hub::{ChildSpec, Hub, ProcessHub, StartOptions};
use serde_json::{json, Value};
use tower::ServiceExt;

use common::cluster::{Options, TestCluster};
use common::{wait_for_async, wait_until, DEADLINE};

async fn hub() -> Hub {
    let config = ProcessHub::builder("explain-hub")
        .node_name("a@127.0.0.1")
        .build()
        .expect("valid config");
    common::spawn_with(config).await
}

async fn call(hub: &Hub, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    common::admin::call_admin(hub, method, path, body).await
}

fn kinds(events: &Value) -> Vec<String> {
    events
        .as_array()
        .expect("an array of events")
        .iter()
        .map(|e| e["kind"].as_str().expect("a kind").to_owned())
        .collect()
}

#[tokio::test]
async fn explain_names_where_a_child_runs_its_owner_why_and_its_events() {
    let hub = hub().await;
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([{"id": "c1", "kind": "counter"}, {"id": "c2", "kind": "counter"}])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let pid = hub.get_pid(&"c1".into()).expect("c1 runs");

    let (status, e) = call(&hub, "GET", "/v1/children/c1/explain", None).await;
    assert_eq!(status, StatusCode::OK, "{e}");
    assert_eq!(e["id"], "c1");
    assert_eq!(e["kind"], "counter");
    assert_eq!(e["node"], "a@127.0.0.1");
    assert_eq!(e["running"], true);
    assert_eq!(
        e["nodes"],
        json!([{"node": "a@127.0.0.1", "pid": pid, "role": "active"}])
    );
    assert_eq!(e["owners"], json!(["a@127.0.0.1"]));
    assert_eq!(e["belongs_on"], json!(["a@127.0.0.1"]));
    assert_eq!(e["placement"], "ring");
    assert_eq!(e["why"], "ring_owner");
    assert_eq!(e["declared"], false);
    let about = kinds(&e["recent_events"]);
    assert!(
        about.contains(&"child_started".to_owned()) && about.contains(&"registry_inserted".into()),
        "{about:?}"
    );
    assert!(
        e["recent_events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|ev| ev["event"]["id"] == "c1"),
        "only c1's events: {}",
        e["recent_events"]
    );

    // Stopped, it is neither in the registry nor declared: 404 in the API's shape.
    let (status, _) = call(&hub, "DELETE", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(&hub, "GET", "/v1/children/c1/explain", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "not_found");
    let (status, body) = call(&hub, "GET", "/v1/children/ghost/explain", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn recent_events_are_the_last_ones_in_order_and_the_limit_is_checked() {
    let hub = hub().await;
    let specs: Vec<ChildSpec> = (0..5)
        .map(|i| ChildSpec::new(format!("r{i}"), "counter"))
        .collect();
    let result = hub
        .start_children(specs, StartOptions::new())
        .await
        .expect("started");
    assert_eq!(result.started.len(), 5);
    // Registry events come after the write commits: wait for the ring to hold them all.
    wait_until("five registry inserts recorded", || {
        hub.recent_events()
            .last(100)
            .iter()
            .filter(|e| matches!(e.event, process_hub::HubEvent::RegistryInserted { .. }))
            .count()
            == 5
    })
    .await;

    let (status, all) = call(&hub, "GET", "/v1/events/recent", None).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    let seqs: Vec<u64> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(
        kinds(&all).iter().filter(|k| *k == "child_started").count(),
        5
    );
    let (status, two) = call(&hub, "GET", "/v1/events/recent?limit=2", None).await;
    assert_eq!(status, StatusCode::OK);
    let two_seqs: Vec<u64> = two
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(two_seqs, seqs[seqs.len() - 2..].to_vec(), "the latest two");
    for bad in ["limit=0", "limit=1001", "limit=x"] {
        let (status, body) = call(&hub, "GET", &format!("/v1/events/recent?{bad}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"], "invalid_input");
    }

    let (status, members) = call(&hub, "GET", "/v1/members", None).await;
    assert_eq!(status, StatusCode::OK, "{members}");
    assert_eq!(members["leader"], "a@127.0.0.1");
    assert_eq!(members["members"][0]["node"], "a@127.0.0.1");
    assert_eq!(members["members"][0]["state"], "up");
    assert_eq!(members["members"][0]["local"], true);
    assert_eq!(members["members"][0]["children"], 5);
    hub.shutdown().await.unwrap();
}

/// Reads the stream's body until its text holds `needle`; returns the text read.
async fn read_until(body: &mut axum::body::Body, needle: &str) -> String {
    let mut text = String::new();
    tokio::time::timeout(DEADLINE, async {
        while !text.contains(needle) {
            let frame = body
                .frame()
                .await
                .expect("the stream goes on")
                .expect("a readable frame");
            if let Ok(data) = frame.into_data() {
                text.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} on the stream; read so far:\n{text}"));
    text
}

fn events_request() -> Request<axum::body::Body> {
    Request::builder()
        .uri("/v1/events")
        .body(axum::body::Body::empty())
        .expect("a well-formed request")
}

#[tokio::test]
async fn the_event_stream_carries_events_as_they_happen_and_is_capped() {
    let hub = hub().await;
    let config = AdminConfig {
        limits: AdminLimits {
            max_event_streams: 1,
            ..AdminLimits::default()
        },
        ..AdminConfig::default()
    };
    let router = process_hub::admin::router_with(hub.clone(), config);
    let response = router
        .clone()
        .oneshot(events_request())
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream",
        "server-sent events"
    );
    let mut body = response.into_body();

    // A second stream is one too many.
    let (status, bytes) = common::admin::send(router.clone(), events_request()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let refused: Value = serde_json::from_slice(&bytes).expect("a JSON error");
    assert_eq!(refused["error"], "too_many_streams");

    hub.start_child(ChildSpec::new("live", "counter"), StartOptions::new())
        .await
        .expect("started");
    let text = read_until(&mut body, "event: child_started").await;
    let data = text
        .lines()
        .skip_while(|l| *l != "event: child_started")
        .find_map(|l| l.strip_prefix("data: "))
        .expect("the event's data line");
    let event: Value = serde_json::from_str(data).expect("JSON data");
    assert_eq!(event["kind"], "child_started");
    assert_eq!(event["event"]["id"], "live");
    assert_eq!(event["event"]["node"], "a@127.0.0.1");

    // The watcher leaves: its permit is free for the next one.
    drop(body);
    let response = router.oneshot(events_request()).await.expect("answers");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();

    // The hub stops: the stream ends, so no server's graceful shutdown waits on it.
    hub.shutdown().await.unwrap();
    tokio::time::timeout(DEADLINE, async {
        while let Some(frame) = body.frame().await {
            frame.expect("a readable frame");
        }
    })
    .await
    .expect("the stream ends with the hub");
}

/// The server-sent events in `text`, as (event, data) pairs.
fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let event = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((event.to_owned(), serde_json::from_str(data).ok()?))
        })
        .collect()
}

#[tokio::test]
async fn a_watcher_that_falls_behind_gets_a_lagged_event_and_the_latest_events() {
    let hub = hub().await;
    let router = process_hub::admin::router(hub.clone());
    let response = router.oneshot(events_request()).await.expect("answers");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();

    // Nobody reads the stream while 600 children start: two events each, more than the 1,024
    // a watcher may fall behind. A subscriber tells when the last one is published.
    let (_subscription, mut published) = hub.subscribe_channel();
    let specs: Vec<ChildSpec> = (0..600)
        .map(|i| ChildSpec::new(format!("s{i}"), "counter"))
        .collect();
    let result = hub
        .start_children(specs, StartOptions::new())
        .await
        .expect("started");
    assert_eq!(result.started.len(), 600);
    for _ in 0..1_200 {
        common::wait_event(&mut published, "a start or a registry insert", |e| {
            matches!(
                e,
                process_hub::HubEvent::ChildStarted { .. }
                    | process_hub::HubEvent::RegistryInserted { .. }
            )
        })
        .await;
    }
    let last_seq = |hub: &Hub| hub.recent_events().last(1)[0].seq;
    let last = last_seq(&hub);

    let text = read_until(&mut body, &format!("\nid: {last}\n")).await;
    let events = sse_events(&text);
    let (kind, lagged) = &events[0];
    assert_eq!(
        kind, "lagged",
        "the first thing a late reader sees: {text:.300}"
    );
    let lost = lagged["lost"].as_u64().expect("how many were lost");
    assert!(lost > 0);
    let kept: Vec<u64> = events[1..]
        .iter()
        .map(|(_, e)| e["seq"].as_u64().expect("a seq"))
        .collect();
    assert_eq!(kept.len(), 1_024, "the backlog a watcher may have, no more");
    assert_eq!(kept.last(), Some(&last));
    assert!(
        kept.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap after the lag"
    );
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_child_of_a_crashed_node_waits_for_its_grace_and_the_node_shows_down() {
    // A grace far longer than the test: the crashed node's children stay bound to it.
    let cluster = TestCluster::with_nodes(
        7,
        &["a", "b"],
        Options::plain().grace(Duration::from_secs(600)),
    )
    .await;
    let a = cluster.hub("a").clone();
    let specs: Vec<ChildSpec> = (0..16)
        .map(|i| ChildSpec::new(format!("g{i}"), "counter"))
        .collect();
    let result = a
        .start_children(specs, StartOptions::new())
        .await
        .expect("started");
    assert_eq!(result.started.len(), 16, "{:?}", result.errors);
    let on = |node: &str| {
        result
            .started
            .iter()
            .find(|s| s.nodes.iter().any(|(n, _)| n == node))
            .map(|s| s.id.to_string())
            .unwrap_or_else(|| panic!("sixteen children on two nodes: some run on {node}"))
    };
    let (on_a, on_b) = (on("a@test"), on("b@test"));
    wait_until("a's registry binds b's child", || {
        !a.get_pids(&on_b.clone().into()).is_empty()
    })
    .await;
    let (_, e) = call(&a, "GET", &format!("/v1/children/{on_b}/explain"), None).await;
    assert_eq!(e["why"], "ring_owner", "{e}");
    assert_eq!(e["nodes"][0]["node"], "b@test");

    let mut cluster = cluster;
    cluster.crash("b").await;
    wait_until("a sees b down", || a.nodes(true) == vec!["a@test"]).await;

    let (status, e) = call(&a, "GET", &format!("/v1/children/{on_b}/explain"), None).await;
    assert_eq!(status, StatusCode::OK, "{e}");
    assert_eq!(e["why"], "waiting_for_grace", "{e}");
    assert_eq!(e["running"], false);
    assert_eq!(e["nodes"][0]["node"], "b@test", "still bound to its node");
    assert_eq!(e["owners"], json!(["a@test"]), "the ring without b");
    assert_eq!(e["nodedown_grace_ms"], 600_000);
    assert!(e["down_since_ms"].as_u64().is_some(), "{e}");

    let (_, e) = call(&a, "GET", &format!("/v1/children/{on_a}/explain"), None).await;
    assert_eq!(e["why"], "ring_owner", "{e}");

    let (_, members) = call(&a, "GET", "/v1/members", None).await;
    let states: Vec<(String, String)> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["node"].as_str().unwrap().to_owned(),
                m["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        states,
        vec![
            ("a@test".to_owned(), "up".to_owned()),
            ("b@test".to_owned(), "down".to_owned())
        ]
    );
    assert!(members["members"][1]["children"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn replicas_on_their_owners_are_explained_with_their_roles() {
    use process_hub::{RedundancySignal, ReplicationModel};
    let cluster = TestCluster::with_nodes(
        11,
        &["a", "b"],
        Options::plain().replication(2, ReplicationModel::ActivePassive, RedundancySignal::None),
    )
    .await;
    let a = cluster.hub("a").clone();
    let result = a
        .start_child(ChildSpec::new("r1", "counter"), StartOptions::new())
        .await
        .expect("started");
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    wait_until("a's registry binds both replicas", || {
        a.get_pids(&"r1".into()).len() == 2
    })
    .await;

    let (status, e) = call(&a, "GET", "/v1/children/r1/explain", None).await;
    assert_eq!(status, StatusCode::OK, "{e}");
    assert_eq!(e["why"], "replica", "{e}");
    assert_eq!(e["owners"].as_array().unwrap().len(), 2);
    let mut roles: Vec<&str> = e["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["role"].as_str().expect("a member's replica has a role"))
        .collect();
    roles.sort();
    assert_eq!(roles, vec!["active", "passive"]);
    // The active replica is the first owner's.
    let active = e["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["role"] == "active")
        .unwrap();
    assert_eq!(active["node"], e["owners"][0]);
}

/// `(node, health)` of each member of `GET /v1/cluster`, in its order.
fn cluster_health(cluster: &Value) -> Vec<(String, String)> {
    cluster["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            (
                m["node"].as_str().expect("a node").to_owned(),
                m["health"].as_str().expect("a health").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_cluster_view_gathers_every_members_figures_and_shows_a_crashed_one_down() {
    let cluster = TestCluster::with_nodes(11, &["a", "b", "c"], Options::plain()).await;
    let a = cluster.hub("a").clone();
    let specs: Vec<ChildSpec> = (0..9)
        .map(|i| ChildSpec::new(format!("v{i}"), "counter"))
        .collect();
    let result = a
        .start_children(specs, StartOptions::new())
        .await
        .expect("started");
    assert_eq!(result.started.len(), 9, "{:?}", result.errors);

    // Every member answers over the wire; the starts are in their histories, wherever each
    // child started.
    wait_for_async("every member's figures with the nine starts", || {
        let a = a.clone();
        async move {
            let (status, body) = call(&a, "GET", "/v1/cluster", None).await;
            if status != StatusCode::OK {
                return Err(format!("{status}: {body}"));
            }
            let health = cluster_health(&body);
            let all_ok =
                health == ["a@test", "b@test", "c@test"].map(|n| (n.to_owned(), "ok".to_owned()));
            let members = body["members"].as_array().expect("members");
            let starts: u64 = members
                .iter()
                .map(|m| m["summary"]["totals"]["starts"].as_u64().unwrap_or(0))
                .sum();
            let recent: u64 = members
                .iter()
                .flat_map(|m| {
                    m["summary"]["history"]["starts"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .map(|n| n.as_u64().unwrap_or(0))
                .sum();
            let children: u64 = members
                .iter()
                .map(|m| m["summary"]["children"].as_u64().unwrap_or(0))
                .sum();
            (all_ok && starts == 9 && recent == 9 && children == 9)
                .then_some(())
                .ok_or_else(|| {
                    format!("{health:?}, {starts} starts, {recent} recent, {children} children")
                })
        }
    })
    .await;
    let (_, last) = call(&a, "GET", "/v1/cluster", None).await;
    let b = &last["members"][1];
    assert_eq!(b["local"], false);
    assert_eq!(b["membership"], "up");
    assert_eq!(b["summary"]["node"], "b@test", "{b}");
    assert_eq!(b["summary"]["registry_rows"], 9, "{b}");
    assert_eq!(
        b["summary"]["history"]["starts"].as_array().map(Vec::len),
        Some(60)
    );
    assert_eq!(last["members"][0]["local"], true);
    let on_c = last["members"][2]["summary"]["children"]
        .as_u64()
        .expect("c's children");
    assert!(on_c > 0, "nine children on three nodes: some run on c");

    let mut cluster = cluster;
    cluster.crash("c").await;
    wait_for_async("c shown down, the others ok", || {
        let a = a.clone();
        async move {
            let (_, body) = call(&a, "GET", "/v1/cluster", None).await;
            let health = cluster_health(&body);
            let want = [("a@test", "ok"), ("b@test", "ok"), ("c@test", "down")]
                .map(|(n, h)| (n.to_owned(), h.to_owned()));
            (health == want)
                .then_some(())
                .ok_or_else(|| format!("{health:?}"))
        }
    })
    .await;
    let (_, body) = call(&a, "GET", "/v1/cluster", None).await;
    let c = &body["members"][2];
    assert!(c["summary"].is_null(), "a down node is not asked: {c}");
    assert!(c["down_since_ms"].as_u64().is_some(), "{c}");
    // c's children fail over after their grace: each counts once, where it runs now.
    wait_for_async("c's children counted as failovers once each", || {
        let a = a.clone();
        async move {
            let (_, body) = call(&a, "GET", "/v1/cluster", None).await;
            let failovers: u64 = body["members"]
                .as_array()
                .expect("members")
                .iter()
                .map(|m| m["summary"]["totals"]["failovers"].as_u64().unwrap_or(0))
                .sum();
            (failovers == on_c)
                .then_some(())
                .ok_or_else(|| format!("{failovers} failovers of {on_c}"))
        }
    })
    .await;
}
