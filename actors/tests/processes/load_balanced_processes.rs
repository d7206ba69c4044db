//! Real `process-hub node --distribution load-balanced` processes on loopback, driven through
//! their admin APIs as an operator would: `GET /v1/loads` shows the leader's table with each
//! member's children and its host figures; 30 counters started on one node spread over three
//! once two nodes join (a rebalance past 50 % of the mean, hot), each keeping its value; new
//! children then go to the nodes with room.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::harness::{wait_for, AdminClient, ClusterOptions, LocalCluster};
use serde_json::json;

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(90);
const CHILDREN: usize = 30;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn counter(id: String) -> StartSpec {
    StartSpec::new(id, "counter")
}

/// Children per node, when every child runs on exactly one node.
fn per_node(client: &AdminClient, expected: usize) -> Option<BTreeMap<String, usize>> {
    let children = client.children().ok()?;
    if children.len() != expected {
        return None;
    }
    let mut counts = BTreeMap::new();
    for child in children {
        let [one] = child.nodes.as_slice() else {
            return None;
        };
        *counts.entry(one.node.clone()).or_insert(0) += 1;
    }
    Some(counts)
}

#[test]
fn a_load_balanced_cluster_spreads_its_children_and_keeps_their_state() {
    let options = ClusterOptions {
        extra_args: vec![
            "--distribution".into(),
            "load-balanced".into(),
            "--load-push-interval-ms".into(),
            "200".into(),
            "--load-rebalance-threshold-percent".into(),
            "50".into(),
            "--migration".into(),
            "hot".into(),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 1, &options, None).expect("node spawns");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let entry = cluster.nodes[0].client();
    let first = cluster.nodes[0].node_name.clone();
    let ids: Vec<String> = (0..CHILDREN).map(|i| format!("room-{i:03}")).collect();
    let started = entry
        .start(&ids.iter().cloned().map(counter).collect::<Vec<_>>())
        .expect("start answers");
    assert_eq!(started.started.len(), CHILDREN, "{started:?}");
    for (i, id) in ids.iter().enumerate() {
        let cast = json!({"kind": "counter", "command": {"op": "increment", "by": i + 1}});
        entry.cast(id, &cast).expect("cast accepted");
    }

    for _ in 0..2 {
        cluster.add_node(&options).expect("a node spawns");
    }
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));

    // The table: three members, each with its own host figures (one node per process).
    let loads = wait_for("the leader's table of three members", DEADLINE, || {
        let loads = entry.loads().ok()?;
        (loads.nodes.len() == 3).then_some(loads)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    assert_eq!(loads.distribution, "load_balanced");
    assert_eq!(loads.node, first);
    assert!(loads.leader.is_some(), "{loads:?}");
    assert!(
        loads.nodes.iter().all(|n| n.memory_bytes > 0),
        "a node alone in its process reports its memory: {loads:?}"
    );

    // 30 on one node, none on the others: the first hands children over until no two nodes
    // differ by more than half the mean (5).
    let counts = wait_for("the children spread within the threshold", DEADLINE, || {
        let counts = per_node(&entry, CHILDREN)?;
        let max = counts.values().max().copied()?;
        let min = if counts.len() == 3 {
            *counts.values().min()?
        } else {
            0
        };
        (max - min <= 5).then_some(counts)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(60)));
    assert_eq!(counts.values().sum::<usize>(), CHILDREN, "{counts:?}");

    let get = json!({"kind": "counter", "command": {"op": "get"}});
    for (i, id) in ids.iter().enumerate() {
        let expected = json!(i + 1);
        wait_for(&format!("{id} holds {expected}"), DEADLINE, || {
            let answer = entry.call(id, &get, 5_000).ok()?.answer;
            (answer == expected).then_some(())
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    }
    cluster.shutdown(Duration::from_secs(10));
}
