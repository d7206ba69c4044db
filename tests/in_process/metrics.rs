//! `GET /metrics` on the admin API of real hubs (two in-process nodes): the Prometheus text
//! format, the series an operator reads (children per kind, starts and stops, request
//! latency, registry rows, members, sync lag per peer), and labels that never name a child.

use crate::common::{self, alone};

use std::collections::{BTreeMap, BTreeSet};

use common::cluster::*;
use process_hub::{Hub, StartOptions, StopOptions};

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
    let known: BTreeSet<&str> = process_hub::telemetry::metrics::ALL.into_iter().collect();
    let mut charted = BTreeSet::new();
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("a PromQL expression");
            let mut rest = expr;
            while let Some(at) = rest.find("process_hub_") {
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
    }
    assert!(charted.len() >= 25, "{} metrics charted", charted.len());
}
