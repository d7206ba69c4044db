//! Durable children across real `process-hub node` processes: three nodes with
//! `--auto-recovery` declare children (`"durable": true`) and stop some; every node is SIGKILLed
//! and restarted on its data directory; every declared child then runs exactly once across the
//! cluster, no stopped child runs, and every node's `GET /v1/declared` lists the same children.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use process_hub_actors::cli::node_settings::BackendChoice;
use process_hub_actors::harness::outage::{counter_specs, stop_concurrently};
use process_hub_actors::harness::{
    wait_for, whole_cluster_outage, AdminClient, Census, ClusterOptions, LocalCluster,
    OutageSettings,
};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);
const GRACE_MS: u64 = 500;
const CHILDREN: usize = 24;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn options(backend: BackendChoice) -> ClusterOptions {
    ClusterOptions {
        hub: "durable".into(),
        backend,
        extra_args: vec![
            "--auto-recovery".into(),
            "--reconcile-grace-ms".into(),
            GRACE_MS.to_string(),
            "--reconcile-interval-ms".into(),
            "1000".into(),
        ],
        ..ClusterOptions::default()
    }
}

fn all_normal(clients: &[(String, AdminClient)]) -> Option<()> {
    clients
        .iter()
        .all(|(_, c)| c.health().is_ok_and(|h| h.recovery_state == "normal"))
        .then_some(())
}

/// Every registry runs each of `declared` once and none of `stopped`, and every node's declared
/// list is exactly `declared`.
fn settled(
    clients: &[(String, AdminClient)],
    declared: &BTreeSet<String>,
    stopped: &BTreeSet<String>,
) -> Option<()> {
    let census = Census::take(clients).ok()?;
    let lists_agree = clients.iter().all(|(_, c)| {
        c.declared().is_ok_and(|l| {
            l.children
                .iter()
                .map(|c| c.id.clone())
                .collect::<BTreeSet<_>>()
                == *declared
        })
    });
    (census.all_run_once(declared) && census.resurrected(stopped).is_empty() && lists_agree)
        .then_some(())
}

fn declared_children_survive_a_whole_cluster_sigkill(backend: BackendChoice) {
    let mut cluster =
        LocalCluster::start(binary(), 3, &options(backend), None).expect("nodes spawn");
    let all = cluster.named_clients();
    let ready = cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("every node to be normal", DEADLINE, || all_normal(&all)));
    if let Err(e) = ready {
        panic!("{e}\n{}", cluster.log_tails(40));
    }

    let ids: Vec<String> = (0..CHILDREN).map(|i| format!("d-{i:03}")).collect();
    // Through a node that is not the leader (the lowest name), so the mutations are forwarded.
    let started = cluster.nodes[1]
        .client()
        .start(&counter_specs(&ids, true))
        .expect("durable start");
    assert_eq!(started.started.len(), CHILDREN, "{started:?}");
    let stopped: BTreeSet<String> = ids.iter().step_by(4).cloned().collect();
    let declared: BTreeSet<String> = ids
        .iter()
        .filter(|id| !stopped.contains(*id))
        .cloned()
        .collect();
    let stop_list: Vec<String> = stopped.iter().cloned().collect();
    let failures = stop_concurrently(&cluster.nodes[2].client(), &stop_list, 3);
    assert!(failures.is_empty(), "{failures:?}");
    if let Err(e) = wait_for("the stops to reach every node", DEADLINE, || {
        settled(&all, &declared, &stopped)
    }) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }

    let report = whole_cluster_outage(
        &mut cluster,
        &declared,
        &stopped,
        &OutageSettings {
            reconcile_grace: Duration::from_millis(GRACE_MS),
            deadline: DEADLINE,
            settle: Duration::ZERO,
        },
        &|_| {},
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    assert!(report.clean(), "{report:#?}\n{}", cluster.log_tails(40));
    // The same check, read again now that every node is normal: every declared child once,
    // no stopped child anywhere, the same list on every node.
    let census = Census::take(&all).expect("census");
    assert!(census.all_run_once(&declared), "{census:?}");
    assert_eq!(census.resurrected(&stopped), Vec::<String>::new());
    assert!(census.duplicates().is_empty(), "{census:?}");
    let versions: BTreeSet<u64> = report.declared_versions.values().copied().collect();
    assert_eq!(versions.len(), 1, "{:?}", report.declared_versions);
    assert_eq!(report.declared_versions.len(), 3);
}

#[test]
fn declared_children_survive_a_whole_cluster_sigkill_on_the_memory_backend() {
    declared_children_survive_a_whole_cluster_sigkill(BackendChoice::Memory);
}

#[test]
fn declared_children_survive_a_whole_cluster_sigkill_on_the_durable_backend() {
    declared_children_survive_a_whole_cluster_sigkill(BackendChoice::Durable);
}
