//! The README's main command, `process-hub demo`, run end to end as a user runs it (smaller, and
//! with `--durable`, which adds the whole-cluster outage to the plain demo's failover): it must
//! finish, and its report must show nothing lost, resurrected or duplicated.

use crate::common;

use serde_json::Value;

fn counts(report: &Value, field: &str) -> Vec<(String, u64)> {
    report[field]
        .as_object()
        .unwrap_or_else(|| panic!("{field} is not an object: {report}"))
        .iter()
        .map(|(node, n)| (node.clone(), n.as_u64().unwrap()))
        .collect()
}

fn sum(counts: &[(String, u64)]) -> u64 {
    counts.iter().map(|(_, n)| n).sum()
}

#[test]
fn the_durable_demo_loses_nothing_through_a_failover_and_a_whole_cluster_outage() {
    let workdir = tempfile::tempdir().unwrap();
    let children = 300;
    let (report, _) = common::report_of([
        "demo",
        "--durable",
        "--json",
        "--children",
        "300",
        "--batch",
        "50",
        "--workdir",
        workdir.path().to_str().unwrap(),
    ]);

    // The plain demo: every child placed, then moved off the killed node.
    assert_eq!(report["children"], children, "{report}");
    let before = counts(&report, "before");
    assert_eq!(before.len(), 3, "{report}");
    assert_eq!(sum(&before), children, "{report}");
    let killed = report["killed"].as_str().unwrap();
    let after = counts(&report, "after");
    assert!(after.iter().all(|(node, _)| node != killed), "{report}");
    assert_eq!(sum(&after), children, "every child runs again: {report}");

    // The outage: every declared child back, the stopped ones still stopped, once each.
    let outage = &report["outage"];
    for field in ["lost", "resurrected", "duplicates"] {
        assert_eq!(outage[field], 0, "{field}: {outage}");
    }
    assert_eq!(outage["declared_lists_agree"], true, "{outage}");
    let stopped = outage["stopped"].as_u64().unwrap();
    assert!(stopped > 0, "the demo stops some children: {outage}");
    let declared = counts(outage, "declared_counts");
    assert_eq!(declared.len(), 3, "{outage}");
    assert!(
        declared.iter().all(|(_, n)| *n == children - stopped),
        "{outage}"
    );
    assert_eq!(
        sum(&counts(outage, "running_per_node")),
        children - stopped,
        "{outage}"
    );
}

#[test]
fn the_plain_demo_starts_as_many_fresh_children_as_the_failover_re_placed() {
    let workdir = tempfile::tempdir().unwrap();
    let children = 300;
    let (report, _) = common::report_of([
        "demo",
        "--json",
        "--children",
        "300",
        "--batch",
        "50",
        "--workdir",
        workdir.path().to_str().unwrap(),
    ]);
    let before = counts(&report, "before");
    assert_eq!(sum(&before), children, "{report}");
    let killed = report["killed"].as_str().unwrap();
    let held = before
        .iter()
        .find(|(node, _)| node == killed)
        .map(|(_, n)| *n)
        .unwrap_or_else(|| panic!("the killed node held children: {report}"));
    // The yardstick of the failover: the killed node's count, started fresh on the survivors.
    let refill = &report["refill"];
    assert_eq!(refill["children"], held, "{report}");
    let (start, converge) = (
        refill["start_ms"].as_u64().unwrap(),
        refill["converge_ms"].as_u64().unwrap(),
    );
    assert!(
        start <= converge,
        "answered before listed everywhere: {refill}"
    );
    // Each survivor's share of the fresh starts: every one of them, on survivors only.
    let shares = refill["per_node"].as_object().unwrap();
    assert!(!shares.contains_key(killed), "{refill}");
    let started: u64 = shares.values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(started, held, "{refill}");
    // The failover after the grace is part of the failover beyond its detection.
    let failover = report["failover_ms"].as_u64().unwrap();
    let detect = report["detect_ms"].as_u64().unwrap();
    let after_grace = report["failover_after_grace_ms"].as_u64().unwrap();
    assert!(after_grace <= failover - detect, "{report}");
}
