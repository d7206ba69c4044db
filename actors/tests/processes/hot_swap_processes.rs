//! Real `process-hub node --migration hot` processes on loopback, checked through their admin
//! APIs: counters keep their values when a node joins and takes some of them, and when a node
//! leaves gracefully (SIGTERM) and hands its children over.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::harness::{wait_for, AdminClient, ClusterOptions, LocalCluster};
use serde_json::json;

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);
const CHILDREN: usize = 16;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn id(i: usize) -> String {
    format!("hot-{i:03}")
}

/// Where each child runs, if every child runs on exactly one node.
fn hosts(client: &AdminClient) -> Option<BTreeMap<String, String>> {
    let children = client.children().ok()?;
    if children.len() != CHILDREN {
        return None;
    }
    children
        .into_iter()
        .map(|c| match c.nodes.as_slice() {
            [one] => Some((c.id, one.node.clone())),
            _ => None,
        })
        .collect()
}

/// Waits until `client` places every child on `live` and some on `on` (when given).
fn wait_hosts(
    cluster: &LocalCluster,
    client: &AdminClient,
    live: &BTreeSet<String>,
    on: Option<&str>,
) -> BTreeMap<String, String> {
    wait_for("every child placed on the live nodes", DEADLINE, || {
        let hosts = hosts(client)?;
        let placed = hosts.values().all(|n| live.contains(n));
        let reached = on.is_none_or(|on| hosts.values().any(|n| n == on));
        (placed && reached).then_some(hosts)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)))
}

/// Child `i` holds `i + 1`, asked through `client`.
fn wait_values(cluster: &LocalCluster, client: &AdminClient, context: &str) {
    let get = json!({"kind": "counter", "command": {"op": "get"}});
    for i in 0..CHILDREN {
        let expected = json!(i as i64 + 1);
        // Awaited by its value: a cast through the command path is not ordered with a call.
        let what = format!("{} holds {expected} ({context})", id(i));
        wait_for(&what, DEADLINE, || {
            let answer = client.call(&id(i), &get, 5_000).ok()?.answer;
            (answer == expected).then_some(())
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    }
}

fn names(cluster: &LocalCluster) -> BTreeSet<String> {
    cluster.nodes.iter().map(|n| n.node_name.clone()).collect()
}

#[test]
fn counters_keep_their_values_when_a_node_joins_and_when_a_node_leaves() {
    let options = ClusterOptions {
        // Far beyond the deadline: only the hot moves can place children in time.
        extra_args: vec![
            "--migration".into(),
            "hot".into(),
            "--nodedown-grace-ms".into(),
            "600000".into(),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 2, &options, None).expect("nodes spawn");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let entry = cluster.nodes[0].client();
    let specs: Vec<StartSpec> = (0..CHILDREN)
        .map(|i| StartSpec::new(id(i), "counter"))
        .collect();
    let started = entry.start(&specs).expect("start answers");
    assert_eq!(started.started.len(), CHILDREN, "{started:?}");
    for i in 0..CHILDREN {
        let by = i as i64 + 1;
        let cast = json!({"kind": "counter", "command": {"op": "increment", "by": by}});
        entry.cast(&id(i), &cast).expect("cast accepted");
    }
    wait_values(&cluster, &entry, "before any move");

    // A third node joins: the children it owns move to it, their values with them.
    let joined = cluster.add_node(&options).expect("third node spawns");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let joined_name = cluster.nodes[joined].node_name.clone();
    let all = names(&cluster);
    wait_hosts(&cluster, &entry, &all, Some(&joined_name));
    wait_values(&cluster, &entry, "after a node joined");

    // It leaves gracefully: its children are handed back, their values with them.
    let status = cluster.nodes[joined]
        .terminate_status(DEADLINE)
        .unwrap_or_else(|| panic!("no exit on SIGTERM\n{}", cluster.log_tails(40)));
    assert!(status.success(), "exit status {status:?}");
    let live: BTreeSet<String> = all.into_iter().filter(|n| *n != joined_name).collect();
    wait_hosts(&cluster, &entry, &live, None);
    wait_values(&cluster, &entry, "after a node left");
    cluster.shutdown(Duration::from_secs(10));
}
