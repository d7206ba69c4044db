//! Real `process-hub node --replication-factor 2` processes on loopback, checked through their
//! admin APIs: every child runs on two nodes, one `active` and one `passive`; after the SIGKILL
//! of a node, every child it was active for is answered by its passive replica, promoted with
//! the same pid (no restart), while the grace period keeps the lost replica from being
//! re-created elsewhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use process_hub::admin::ChildView;
use process_hub::Role;
use process_hub_actors::harness::outage::counter_specs;
use process_hub_actors::harness::{wait_for, AdminClient, ClusterOptions, LocalCluster};
use serde_json::json;

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);
const CHILDREN: usize = 12;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn id(i: usize) -> String {
    format!("rep-{i:03}")
}

/// Each child's instances, `(node, pid, role)`, by child.
type Placement = BTreeMap<String, Vec<(String, u64, Role)>>;

/// Each child's instances, `(node, pid, role)`, if every child runs on exactly two nodes, one
/// active and one passive, all on `live`.
fn replicas(client: &AdminClient, live: &BTreeSet<String>) -> Option<Placement> {
    let children: Vec<ChildView> = client.children().ok()?;
    if children.len() != CHILDREN {
        return None;
    }
    children
        .into_iter()
        .map(|c| {
            let nodes: Vec<(String, u64, Role)> = c
                .nodes
                .iter()
                .map(|n| (n.node.clone(), n.pid, n.role.unwrap_or(Role::Passive)))
                .collect();
            let roles: Vec<Role> = nodes.iter().map(|n| n.2).collect();
            let placed = nodes.len() == 2
                && nodes.iter().all(|n| live.contains(&n.0))
                && roles == [Role::Active, Role::Passive];
            placed.then_some((c.id, nodes))
        })
        .collect()
}

#[test]
fn a_passive_replica_takes_over_without_a_restart_when_its_node_is_killed() {
    let options = ClusterOptions {
        // Far beyond the deadline: the survivors must answer without any re-placement.
        extra_args: vec![
            "--replication-factor".into(),
            "2".into(),
            "--replication-model".into(),
            "active-passive".into(),
            "--nodedown-grace-ms".into(),
            "600000".into(),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 3, &options, None).expect("nodes spawn");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let all: BTreeSet<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
    let entry = cluster.nodes[1].client();
    let ids: Vec<String> = (0..CHILDREN).map(id).collect();
    let specs = counter_specs(&ids, false);
    let started = entry.start(&specs).expect("start answers");
    assert_eq!(started.started.len(), CHILDREN, "{started:?}");
    let before = wait_for("every child on two nodes, one active", DEADLINE, || {
        replicas(&entry, &all)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));

    // A cast by id reaches the active replica only.
    let get = json!({"kind": "counter", "command": {"op": "get"}});
    for i in 0..CHILDREN {
        let cast = json!({"kind": "counter", "command": {"op": "increment", "by": 5}});
        entry.cast(&id(i), &cast).expect("cast accepted");
        wait_for("the increment lands", DEADLINE, || {
            let answer = entry.call(&id(i), &get, 5_000).ok()?.answer;
            (answer == json!(5)).then_some(())
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    }

    let victim = cluster.nodes[0].node_name.clone();
    let promoted: BTreeMap<String, (String, u64)> = before
        .iter()
        .filter(|(_, nodes)| nodes[0].0 == victim)
        .map(|(id, nodes)| (id.clone(), (nodes[1].0.clone(), nodes[1].1)))
        .collect();
    assert!(
        !promoted.is_empty(),
        "the victim is active for some child: {before:?}"
    );
    cluster.nodes[0].kill();

    // Every child answers again through a survivor; those the victim was active for are
    // answered by their former passive replica, same pid, now active.
    let survivor = cluster.nodes[2].client();
    for i in 0..CHILDREN {
        wait_for("the child answers after the kill", DEADLINE, || {
            survivor.call(&id(i), &get, 2_000).ok().map(|_| ())
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    }
    for (child, (node, pid)) in &promoted {
        let view = wait_for("the survivor shows the promotion", DEADLINE, || {
            let view = survivor.child(child).ok()?;
            (view.nodes.first().map(|n| n.node.as_str()) == Some(node.as_str())
                && !view
                    .nodes
                    .iter()
                    .any(|n| n.node == victim && n.role == Some(Role::Active)))
            .then_some(view)
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
        let first = &view.nodes[0];
        assert_eq!(first.role, Some(Role::Active), "{child}: {view:?}");
        assert_eq!(first.pid, *pid, "{child}: promoted, not restarted");
    }
    // The children the victim was passive for kept their active replica and its value.
    for (child, nodes) in &before {
        if promoted.contains_key(child) {
            continue;
        }
        let answer = survivor.call(child, &get, 5_000).expect("answers").answer;
        assert_eq!(answer, json!(5), "{child} ({:?})", nodes);
    }
    cluster.shutdown(Duration::from_secs(10));
}
