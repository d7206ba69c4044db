//! The admin routes served by a real single-node `Hub`: the `AdminOps` mapping from the hub's
//! typed API to the admin API's JSON fields, codes and statuses.

use crate::common;

use axum::http::StatusCode;
use process_hub::{Hub, ProcessHub};
use serde_json::{json, Value};

async fn hub() -> Hub {
    let config = ProcessHub::builder("admin-hub")
        .node_name("a@127.0.0.1")
        .build()
        .expect("valid config");
    let (hub, _join) = Hub::spawn(config, process_hub_actors::default_kinds())
        .await
        .expect("hub spawns");
    hub
}

/// `POST /v1/children` of one durable `counter` child.
async fn start_durable(hub: &Hub, id: &str) -> (StatusCode, Value) {
    let spec = json!({"id": id, "kind": "counter", "durable": true});
    call(hub, "POST", "/v1/children", Some(spec)).await
}

async fn call(hub: &Hub, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    common::admin::call_admin(hub, method, path, body).await
}

#[tokio::test]
async fn health_names_the_node_the_hub_and_itself_as_member() {
    let hub = hub().await;
    let (status, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["node"], "a@127.0.0.1");
    assert_eq!(body["hub"], "admin-hub");
    assert_eq!(body["members"], json!(["a@127.0.0.1"]));
    assert_eq!(body["recovery_state"], "normal");

    hub.shutdown().await.unwrap();
    let (status, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"], "not_ready");
}

#[tokio::test]
async fn registry_summary_counts_what_the_listing_shows() {
    let hub = hub().await;
    let (status, body) = call(&hub, "GET", "/v1/registry/summary", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"], 0);
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([{"id": "s1", "kind": "counter"}, {"id": "s2", "kind": "counter"}])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(&hub, "GET", "/v1/registry/summary", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["node"], "a@127.0.0.1");
    assert_eq!(body["members"], json!(["a@127.0.0.1"]));
    assert_eq!(body["rows"], 2);
    assert_eq!(body["placed"], 2);
    assert_eq!(body["unbound"], 0);
    assert_eq!(body["per_node"], json!({"a@127.0.0.1": 2}));
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn started_children_are_listed_with_pid_and_metadata_then_stopped() {
    let hub = hub().await;
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([
            {"id": "c1", "kind": "counter", "metadata": {"tag": "web"}},
            {"id": "c2", "kind": "counter", "args": {"start": 5}},
        ])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["errors"], json!([]));
    let started: Vec<&str> = body["started"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(started, vec!["c1", "c2"]);
    let pid = body["started"][0]["nodes"][0]["pid"].as_u64().unwrap();
    assert_eq!(body["started"][0]["nodes"][0]["node"], "a@127.0.0.1");
    assert_eq!(
        hub.get_pid(&"c1".into()),
        Some(pid),
        "the answer's pid is the registry's"
    );

    let (status, list) = call(&hub, "GET", "/v1/children", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(list[0]["id"], "c1");
    assert_eq!(list[0]["kind"], "counter");
    assert_eq!(list[0]["metadata"]["tag"], "web");
    assert_eq!(list[1]["metadata"], json!({}));

    let (status, one) = call(&hub, "GET", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        one["nodes"],
        json!([{"node": "a@127.0.0.1", "pid": pid, "role": "active"}]),
        "one instance per child: it is the active one"
    );

    let (status, stopped) = call(&hub, "DELETE", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::OK, "{stopped}");
    assert_eq!(stopped["stopped"][0]["id"], "c1");
    assert_eq!(stopped["stopped"][0]["nodes"], json!(["a@127.0.0.1"]));
    assert!(hub.child_lookup(&"c1".into()).is_none());

    let (status, body) = call(&hub, "GET", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "not_found");
    let (status, body) = call(&hub, "DELETE", "/v1/children/c1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "not_found");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn per_child_failures_keep_the_hub_codes_and_map_to_statuses() {
    let hub = hub().await;
    let spec = json!({"id": "dup", "kind": "counter"});
    assert_eq!(
        call(&hub, "POST", "/v1/children", Some(spec.clone()))
            .await
            .0,
        StatusCode::OK
    );
    let (status, body) = call(&hub, "POST", "/v1/children", Some(spec.clone())).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "already_started");

    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!({"id": "k", "kind": "no_such_kind"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "invalid_input");
    assert_eq!(body["field"], "kind");
    // The node's own kinds are listed.
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("known kinds: counter, crasher,"),
        "{body}"
    );

    // A batch naming an unknown kind is refused whole: nothing of it starts.
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([
            {"id": "before", "kind": "counter"},
            {"id": "k2", "kind": "no_such_kind"},
        ])),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        (&body["field"], &body["at"]),
        (&json!("kind"), &json!("children[1]"))
    );
    assert!(hub.child_lookup(&"before".into()).is_none());

    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!({"id": "bad", "kind": "counter", "args": {"start": "many"}})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // In a batch the failures are entries with codes, next to what did start.
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([
            spec,
            {"id": "fresh", "kind": "counter"},
            {"id": "f", "kind": "crasher", "args": {"fail_in_pre_start": true}},
        ])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["started"].as_array().unwrap().len(), 1);
    assert_eq!(body["started"][0]["id"], "fresh");
    let mut codes: Vec<(String, String)> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["node"], "a@127.0.0.1");
            assert!(!e["reason"].as_str().unwrap().is_empty());
            (
                e["id"].as_str().unwrap().to_owned(),
                e["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        vec![
            ("dup".to_owned(), "already_started".to_owned()),
            ("f".to_owned(), "startup_failed".to_owned()),
        ]
    );

    // A durable start needs auto-recovery: refused per child, nothing started.
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!({"id": "d", "kind": "counter", "durable": true, "restart": "temporary"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "durable_requires_permanent");
    assert!(hub.child_lookup(&"d".into()).is_none());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn reserved_metadata_is_invalid_input() {
    let hub = hub().await;
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!({"id": "m", "kind": "counter", "metadata": {"__process_hub__": "x"}})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "invalid_input");
    assert!(hub.child_lookup(&"m".into()).is_none());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn durable_starts_and_the_declared_list_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::recovery_hub::config("admin-durable", dir.path());
    let (hub, _join) = Hub::spawn(config, process_hub_actors::default_kinds())
        .await
        .expect("hub spawns");

    let (status, body) = start_durable(&hub, "d1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["started"][0]["id"], "d1");

    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!({"id": "t1", "kind": "counter", "durable": true, "restart": "transient"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "durable_requires_permanent");

    let (status, body) = call(&hub, "GET", "/v1/declared", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["version"], 1);
    assert_eq!(body["children"][0]["id"], "d1");
    assert_eq!(body["children"][0]["kind"], "counter");
    assert_eq!(body["parked"], false);

    hub.await_normal(std::time::Duration::from_secs(30))
        .await
        .expect("first round completes");
    let (_, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(body["recovery_state"], "normal");
    assert_eq!(body["parked"], false);

    let (status, body) = call(&hub, "POST", "/v1/declared/clear", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["version"], 2);
    let (_, body) = call(&hub, "GET", "/v1/declared", None).await;
    assert_eq!(body["children"], json!([]));
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_parked_hub_says_so_over_http_until_the_operator_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::recovery_hub::config("admin-parked", dir.path());
    let (hub, join) = Hub::spawn(config.clone(), process_hub_actors::default_kinds())
        .await
        .expect("hub spawns");
    let (status, body) = start_durable(&hub, "d1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    hub.shutdown().await.unwrap();
    join.await.unwrap();
    // The list is lost; the seeded marker beside it is the evidence that there was one.
    let hub_dir = dir.path().join("process_hub").join("admin-parked");
    std::fs::remove_file(hub_dir.join(process_hub::recovery::declared_store::DECLARED_FILE))
        .unwrap();

    let (hub, _join) = Hub::spawn(config, process_hub_actors::default_kinds())
        .await
        .expect("hub spawns");
    let (status, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["parked"], true, "{body}");
    let (_, body) = call(&hub, "GET", "/v1/declared", None).await;
    assert_eq!(body["parked"], true, "{body}");
    let (status, body) = start_durable(&hub, "d2").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "declared_parked", "{body}");

    let (status, body) = call(&hub, "POST", "/v1/declared/clear", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, body) = call(&hub, "GET", "/v1/health", None).await;
    assert_eq!(body["parked"], false, "{body}");
    let (status, body) = start_durable(&hub, "d2").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_auto_recovery_the_declared_list_is_404_and_durable_is_refused() {
    let hub = hub().await;
    let (status, body) = call(&hub, "GET", "/v1/declared", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = call(
        &hub,
        "POST",
        "/v1/children",
        Some(json!([{"id": "d2", "kind": "counter", "durable": true}])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["errors"][0]["code"], "durable_unavailable");
    hub.shutdown().await.unwrap();
}

/// This process never installs the Prometheus exporter (the metrics tests install it alone in
/// processes of their own): `GET /metrics` says so.
#[tokio::test]
async fn metrics_are_off_until_the_exporter_is_installed() {
    let hub = hub().await;
    let (status, body) = call(&hub, "GET", "/metrics", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "metrics_off");
    hub.shutdown().await.unwrap();
}

/// A batch stop through node a of a two-node cluster with auto-recovery: durable children are
/// undeclared for good (a restart of the whole cluster does not bring them back), children
/// owned by b are stopped with frames per owner rather than one per child, and an unknown id
/// is answered `not_found` beside them.
#[tokio::test]
async fn a_batch_stop_undeclares_durable_children_for_good_and_batches_remote_ones() {
    use common::cluster::{full, Options, TestCluster};
    use process_hub::cluster::in_process::{FrameEvent, FrameFate};
    use process_hub::model::ChildId;
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let mut d = TestCluster::with_nodes(41, &["a", "b"], Options::durable()).await;
    let specs: Vec<Value> = (0..16)
        .map(|i| json!({"id": format!("d{i}"), "kind": "counter", "durable": true}))
        .chain((0..4).map(|i| json!({"id": format!("p{i}"), "kind": "counter"})))
        .collect();
    let (status, body) = call(d.hub("a"), "POST", "/v1/children", Some(json!(specs))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["started"].as_array().unwrap().len(), 20, "{body}");
    let durable = |range: std::ops::Range<usize>| -> BTreeSet<ChildId> {
        range.map(|i| ChildId::from(format!("d{i}"))).collect()
    };
    d.wait_exactly(&durable(0..16), &BTreeSet::new(), "declared and running")
        .await;
    d.wait_versions(16).await;

    // Stop d0..d9 and p0..p3 (the ring puts some of each on b), one unknown id, one id twice.
    let mut stop: Vec<String> = (0..10).map(|i| format!("d{i}")).collect();
    stop.extend((0..4).map(|i| format!("p{i}")));
    let running = d.running();
    let on_b = stop
        .iter()
        .filter(|id| running.get(&ChildId::from(id.as_str())) == Some(&vec!["b".to_owned()]))
        .count();
    assert!(
        on_b >= 3,
        "the ring puts only {on_b} of them on b: {running:?}"
    );
    stop.push("nope".into());
    stop.push("d0".into());
    let frames = Arc::new(AtomicU64::new(0));
    let seen = frames.clone();
    let (from, to) = (full("a"), full("b"));
    d.net
        .set_observer(Some(Arc::new(move |event: &FrameEvent<'_>| {
            if event.fate == FrameFate::Delivered
                && event.kind == "stop_children"
                && event.from == from
                && event.to == to
            {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        })));
    let (status, body) = call(
        d.hub("a"),
        "POST",
        "/v1/children/stop",
        Some(json!({ "ids": stop })),
    )
    .await;
    d.net.set_observer(None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["counts"],
        json!({"requested": 16, "distinct": 15, "stopped": 14, "pending": 0, "errors": 1, "not_found": 1}),
        "{body}"
    );
    assert_eq!(body["errors"][0]["id"], "nope", "{body}");
    assert_eq!(body["duplicates"], json!(["d0"]));
    let stopped_on_b = body["stopped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["nodes"] == json!([full("b")]))
        .count();
    assert_eq!(stopped_on_b, on_b, "{body}");
    let frames = frames.load(Ordering::Relaxed);
    assert!(
        (1..on_b as u64).contains(&frames),
        "{on_b} children of b stopped with {frames} stop frames from a to b"
    );

    // Undeclared on every node: 16 declarations, 10 removals.
    d.wait_versions(26).await;
    let (_, declared) = call(d.hub("b"), "GET", "/v1/declared", None).await;
    let declared: Vec<&str> = declared["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        declared,
        ["d10", "d11", "d12", "d13", "d14", "d15"],
        "what the batch stopped is no longer declared"
    );

    // The whole cluster restarts on its data: the stopped ones stay stopped.
    for name in ["a", "b"] {
        d.crash(name).await;
    }
    for name in ["a", "b"] {
        d.restart(name).await;
    }
    d.wait_members().await;
    for hub in d.hubs.values() {
        hub.await_normal(common::DEADLINE).await.unwrap();
    }
    d.wait_exactly(&durable(10..16), &durable(0..10), "after the restart")
        .await;
    assert_eq!(d.versions(), vec![26, 26]);
    common::cluster::stop_all(&d).await;
}
