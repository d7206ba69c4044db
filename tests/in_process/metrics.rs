//! `GET /metrics` on the admin API of real hubs (two in-process nodes): the Prometheus text
//! format, the series an operator reads (children per kind, starts and stops, request
//! latency, registry rows, members, sync lag per peer), and labels that never name a child.

use crate::common::{self, alone};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::*;
use common::wait_until;
use process_hub::cluster::wire::WireMsg;
use process_hub::{Hub, StartOptions, StopOptions, SyncStrategy};

/// One sample: its name and labels.
type Series = (String, BTreeMap<String, String>);

/// Parses the text exposition format into `series -> value` (comments skipped).
fn parse(text: &str) -> BTreeMap<Series, f64> {
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("a value");
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split(',')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once('=').expect("label=value");
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect();
        out.insert((name.to_owned(), labels), value.parse().expect("a number"));
    }
    out
}

async fn scrape(hub: &Hub) -> (String, BTreeMap<Series, f64>) {
    let request = axum::http::Request::get("/metrics")
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, body) =
        common::admin::send(process_hub::admin::router(hub.clone()), request).await;
    assert_eq!(status, axum::http::StatusCode::OK);
    let text = String::from_utf8(body.to_vec()).unwrap();
    let parsed = parse(&text);
    (text, parsed)
}

/// The value of `name` with exactly these labels (0 when absent).
fn value(samples: &BTreeMap<Series, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .get(&(name.to_owned(), labels))
        .copied()
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_what_the_hubs_did_with_bounded_labels() {
    if alone::ran_in_own_process(
        module_path!(),
        "metrics_show_what_the_hubs_did_with_bounded_labels",
    ) {
        return;
    }
    process_hub::telemetry::install_prometheus().expect("the exporter installs");
    let cluster = TestCluster::with_nodes(31, &["a", "b"], Options::plain()).await;
    let specs = specs("m-", 30);
    let started = cluster
        .hub("a")
        .start_children(specs.clone(), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 30);
    let stop: Vec<_> = specs.iter().take(5).map(|s| s.id.clone()).collect();
    let stopped = cluster
        .hub("a")
        .stop_children(stop, StopOptions::new())
        .await
        .unwrap();
    assert_eq!(stopped.stopped.len(), 5);
    let kept: BTreeSet<_> = specs.iter().skip(5).map(|s| s.id.clone()).collect();
    cluster.wait_converged(&kept, "after the stops").await;

    let (text, a) = scrape(cluster.hub("a")).await;
    let (_, b) = scrape(cluster.hub("b")).await;
    assert!(text.contains("# HELP process_hub_children"), "{text}");
    assert!(
        text.contains("# TYPE process_hub_start_duration_seconds histogram"),
        "{text}"
    );

    let on = |node: &'static str| [("hub", "orders"), ("node", node)];
    let kind = |node: &'static str| [("hub", "orders"), ("node", node), ("kind", "counter")];
    // Children per node and kind: what each node runs, 25 in all.
    let children = value(&a, "process_hub_children", &kind("a@test"))
        + value(&b, "process_hub_children", &kind("b@test"));
    assert_eq!(children, 25.0);
    // Every node knows every row; two members.
    for (samples, node) in [(&a, "a@test"), (&b, "b@test")] {
        assert_eq!(value(samples, "process_hub_registry_rows", &on(node)), 25.0);
        assert_eq!(value(samples, "process_hub_members", &on(node)), 2.0);
    }
    // Starts and stops happened where the children ran.
    let starts = value(&a, "process_hub_child_starts_total", &on("a@test"))
        + value(&a, "process_hub_child_starts_total", &on("b@test"));
    assert_eq!(starts, 30.0);
    let stops = value(&a, "process_hub_child_stops_total", &on("a@test"))
        + value(&a, "process_hub_child_stops_total", &on("b@test"));
    assert_eq!(stops, 5.0);
    // One start request and one stop request were made on a.
    assert_eq!(
        value(
            &a,
            "process_hub_start_duration_seconds_count",
            &on("a@test")
        ),
        1.0
    );
    assert_eq!(
        value(&a, "process_hub_stop_duration_seconds_count", &on("a@test")),
        1.0
    );
    // a has applied b's registry, and says how long ago.
    let lag = value(
        &a,
        "process_hub_sync_lag_seconds",
        &[("hub", "orders"), ("node", "a@test"), ("peer", "b@test")],
    );
    assert!((0.0..60.0).contains(&lag), "{lag}");
    assert!(
        a.keys()
            .any(|(name, _)| name == "process_hub_membership_changes_total"),
        "membership changes counted"
    );
    // Bounded labels: no child id is ever a label value.
    for ((name, labels), _) in a.iter().chain(b.iter()) {
        for v in labels.values() {
            assert!(
                !v.starts_with("m-"),
                "{name} carries a child id: {labels:?}"
            );
        }
    }
    stop_all(&cluster).await;
}

/// The Grafana dashboard in `docs/` charts only series the hub exports.
#[test]
fn the_grafana_dashboard_charts_only_exported_metrics() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/grafana/process_hub.json");
    let text = std::fs::read_to_string(path).expect("docs/grafana/process_hub.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10);
    let mut exprs = Vec::new();
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            exprs.push(
                target["expr"]
                    .as_str()
                    .expect("a PromQL expression")
                    .to_owned(),
            );
        }
    }
    let charted = exported_names_in(&exprs);
    assert!(charted.len() >= 25, "{} metrics charted", charted.len());
    for wanted in [
        "process_hub_calls_total",
        "process_hub_call_duration_seconds",
        "process_resident_memory_bytes",
        "process_hub_build_info",
    ] {
        assert!(charted.contains(wanted), "{wanted} is not charted");
    }
}

/// The alert examples in `docs/` use only series the hub exports.
#[test]
fn the_alert_examples_use_only_exported_metrics() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/grafana/process_hub_alerts.yml"
    );
    let text = std::fs::read_to_string(path).expect("docs/grafana/process_hub_alerts.yml");
    let exprs: Vec<String> = text
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.starts_with('#') && !l.starts_with("- name:"))
        .map(str::to_owned)
        .collect();
    let used = exported_names_in(&exprs);
    for wanted in [
        "process_hub_sync_lag_seconds",
        "process_hub_child_start_failures_total",
        "process_hub_refused_peer_input_total",
        "process_resident_memory_bytes",
    ] {
        assert!(used.contains(wanted), "no alert on {wanted}");
    }
}

/// Every metric name (`process_hub_*`, `process_*`) in `exprs`, checked to be one the hub
/// exports (a histogram's `_bucket`, `_count` and `_sum` count as the histogram).
fn exported_names_in(exprs: &[String]) -> BTreeSet<String> {
    let known: BTreeSet<&str> = process_hub::telemetry::metrics::ALL
        .into_iter()
        .chain(process_hub::telemetry::metrics::PROCESS)
        .collect();
    let mut charted = BTreeSet::new();
    for expr in exprs {
        let mut rest = expr.as_str();
        while let Some(at) = rest.find("process_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            let base = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(&name)
                .to_owned();
            assert!(
                known.contains(base.as_str()),
                "{base} is not exported ({expr})"
            );
            charted.insert(base);
            rest = &rest[at + name.len()..];
        }
    }
    charted
}

/// The families of a scrape (its `# TYPE` lines), by name.
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// A node that has done nothing yet already shows every family an operator alerts on: the
/// failure counters at zero (each reason), the request and storage histograms empty, the
/// process and build metrics, and every sample carries `hub` and `node`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_node_shows_every_family_with_hub_and_node() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_fresh_node_shows_every_family_with_hub_and_node",
    ) {
        return;
    }
    process_hub::telemetry::install_prometheus().expect("the exporter installs");
    let options = Options {
        backend: process_hub::storage::BackendConfig::Lmdb { path: None },
        ..Options::durable()
    };
    let cluster = TestCluster::with_nodes(32, &["a"], options).await;
    let (text, samples) = scrape(cluster.hub("a")).await;

    let families = families(&text);
    assert!(
        families.len() >= 25,
        "{} families on a fresh node: {families:?}",
        families.len()
    );
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        assert!(
            line.contains("hub=\"durable\"") && line.contains("node=\"a@test\""),
            "a sample without hub and node: {line}"
        );
    }
    let on = |extra: &[(&'static str, &'static str)]| {
        let mut labels = vec![("hub", "durable"), ("node", "a@test")];
        labels.extend_from_slice(extra);
        labels
    };
    let present = |name: &str, extra: &[(&'static str, &'static str)]| {
        let labels: BTreeMap<String, String> = on(extra)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        samples.get(&(name.to_owned(), labels)).copied()
    };
    // Failure counters exist at zero before any failure, for each value of their label.
    for (name, extra) in [
        (
            "process_hub_child_start_failures_total",
            vec![("reason", "timeout")],
        ),
        (
            "process_hub_child_start_failures_total",
            vec![("reason", "other")],
        ),
        (
            "process_hub_refused_peer_input_total",
            vec![("reason", "parts")],
        ),
        ("process_hub_manifest_ship_failures_total", vec![]),
        ("process_hub_manifest_ships_total", vec![]),
        (
            "process_hub_actor_restarts_total",
            vec![("actor", "registry")],
        ),
        ("process_hub_peer_auth_failures_total", vec![]),
        ("process_hub_child_exits_total", vec![("reason", "failed")]),
        ("process_hub_calls_total", vec![("outcome", "ok")]),
        ("process_hub_calls_total", vec![("outcome", "timeout")]),
        ("process_hub_casts_total", vec![("outcome", "not_found")]),
        ("process_hub_call_duration_seconds_count", vec![]),
        ("process_hub_start_duration_seconds_count", vec![]),
    ] {
        assert_eq!(
            present(name, &extra),
            Some(0.0),
            "{name} {extra:?}:\n{text}"
        );
    }
    // The registry's disk commits are labelled with the hub, the node and the store.
    assert!(
        present(
            "process_hub_storage_commit_duration_seconds_count",
            &[("store", "registry")]
        )
        .is_some(),
        "{text}"
    );
    assert!(
        present(
            "process_hub_storage_writes_per_commit_count",
            &[("store", "registry")]
        )
        .is_some(),
        "{text}"
    );
    // The build and the process.
    assert_eq!(
        present(
            "process_hub_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0),
        "{text}"
    );
    for name in [
        "process_resident_memory_bytes",
        "process_threads",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(
            present(name, &[]).is_some_and(|v| v > 0.0),
            "{name}:\n{text}"
        );
    }
    assert!(
        present("process_cpu_seconds_total", &[]).is_some(),
        "{text}"
    );
    stop_all(&cluster).await;
}

/// Calls and casts made on a node are counted by outcome, and calls timed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_and_casts_are_counted_by_outcome() {
    if alone::ran_in_own_process(module_path!(), "calls_and_casts_are_counted_by_outcome") {
        return;
    }
    process_hub::telemetry::install_prometheus().expect("the exporter installs");
    let cluster = TestCluster::with_nodes(33, &["a", "b"], Options::plain()).await;
    let hub = cluster.hub("a");
    let started = hub
        .start_children(specs("msg-", 4), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 4);
    let get = br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec();
    for spec in specs("msg-", 4) {
        hub.call_child(spec.id.clone(), get.clone(), Duration::from_secs(5))
            .await
            .expect("the counter answers");
    }
    let missing = hub
        .call_child("no-such-child", get.clone(), Duration::from_secs(1))
        .await;
    assert!(missing.is_err());
    hub.cast_child("msg-0", get.clone()).expect("cast accepted");

    let (text, a) = scrape(hub).await;
    let on = |k: &'static str, v: &'static str| [("hub", "orders"), ("node", "a@test"), (k, v)];
    assert_eq!(
        value(&a, "process_hub_calls_total", &on("outcome", "ok")),
        4.0,
        "{text}"
    );
    let failed: f64 = a
        .iter()
        .filter(|((name, labels), _)| {
            name == "process_hub_calls_total"
                && labels.get("node").map(String::as_str) == Some("a@test")
                && labels.get("outcome").map(String::as_str) != Some("ok")
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(failed, 1.0, "{text}");
    assert_eq!(
        value(
            &a,
            "process_hub_call_duration_seconds_count",
            &[("hub", "orders"), ("node", "a@test")]
        ),
        5.0,
        "{text}"
    );
    assert_eq!(
        value(&a, "process_hub_casts_total", &on("outcome", "ok")),
        1.0,
        "{text}"
    );
    stop_all(&cluster).await;
}

/// Every hub's sync lag for every other member (`Hub::sync_lag`, what the gauge shows).
fn lags(cluster: &TestCluster, names: &[&str]) -> Vec<(String, String, Duration)> {
    let mut out = Vec::new();
    for name in names {
        let lag = cluster.hub(name).sync_lag();
        assert_eq!(
            lag.len(),
            names.len() - 1,
            "{name} watches every peer: {lag:?}"
        );
        out.extend(
            lag.into_iter()
                .map(|(peer, d)| ((*name).to_owned(), peer, d)),
        );
    }
    out
}

/// An idle healthy cluster shows no sync lag, however long it stays idle (two virtual
/// minutes, 400 sync periods, sampled every second), with either sync strategy.
#[tokio::test(start_paused = true)]
async fn an_idle_cluster_shows_no_sync_lag() {
    let gossip = SyncStrategy::Gossip {
        interval_ms: 300,
        recipients: 3,
        restricted_init: true,
    };
    for sync in [SyncStrategy::PubSub, gossip] {
        let names = ["a", "b", "c"];
        let cluster =
            TestCluster::with_nodes(34, &names, Options::plain().sync(sync.clone())).await;
        let specs = specs("idle-", 6);
        cluster
            .hub("a")
            .start_children(specs.clone(), StartOptions::new())
            .await
            .unwrap();
        cluster
            .wait_converged(&ids(&specs), "after the starts")
            .await;
        for second in 0..120 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            for (on, peer, lag) in lags(&cluster, &names) {
                assert_eq!(
                    lag,
                    Duration::ZERO,
                    "{sync:?}: {on}'s lag for {peer} after {second} s idle"
                );
            }
        }
        stop_all(&cluster).await;
    }
}

/// A peer whose registry frames stop reaching a node (its full syncs and sync digests held in
/// the network)
/// shows a sync lag that climbs on that node only, and falls back to zero once they arrive.
#[tokio::test(start_paused = true)]
async fn a_stuck_stream_makes_the_sync_lag_climb() {
    let names = ["a", "b"];
    let cluster = TestCluster::with_nodes(35, &names, Options::plain()).await;
    let (a, b) = (full("a"), full("b"));
    {
        let (a, b) = (a.clone(), b.clone());
        cluster
            .net
            .hold_frames(Some(Arc::new(move |from, to, msg: &WireMsg| {
                from == b && to == a && matches!(msg.kind(), "full_sync" | "sync_digest")
            })));
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    let on_a = cluster.hub("a").sync_lag()[&b];
    assert!(
        on_a >= Duration::from_secs(20),
        "a has had nothing of b's for 30 s of 0.3 s sync periods: {on_a:?}"
    );
    assert_eq!(
        cluster.hub("b").sync_lag()[&a],
        Duration::ZERO,
        "a's stream to b flows"
    );
    cluster.net.hold_frames(None);
    cluster.net.release_held();
    wait_until("a's lag for b back to zero", || {
        cluster.hub("a").sync_lag()[&b] == Duration::ZERO
    })
    .await;
    stop_all(&cluster).await;
}
