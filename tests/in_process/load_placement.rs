//! Load-based placement (`distribution = "load_balanced"`) on the in-process cluster: new
//! children go where there is room, in proportion to the members' spare capacity as the leader
//! gathers it; joins move none of them; with a rebalance threshold the busiest node hands
//! children to the idlest (hot swap where enabled: counters keep their values) until the
//! cluster is even, each child still running once.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::cluster::{full, Options, TestCluster};
use common::{wait_for, wait_until, DEADLINE};
use process_hub::{
    ChildId, ChildSpec, HotSwapConfig, Hub, HubEvent, LoadBalancerConfig, MoveReason, StartOptions,
};
use process_hub_actors::counter::CounterMsg;

const CALL: Duration = Duration::from_secs(5);

fn balancer(threshold_percent: u32) -> LoadBalancerConfig {
    LoadBalancerConfig {
        push_interval_ms: 100,
        decay_percent: 0,
        rebalance_threshold_percent: threshold_percent,
        rebalance_batch: 25,
    }
}

fn ids(prefix: &str, n: usize) -> Vec<ChildId> {
    (0..n)
        .map(|i| ChildId::from(format!("{prefix}{i:03}")))
        .collect()
}

async fn start(hub: &Hub, ids: &[ChildId]) {
    let specs = ids
        .iter()
        .map(|id| ChildSpec::new(id.clone(), "counter"))
        .collect();
    let result = hub
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
}

/// How many of `ids` run on each node (short names).
fn per_node(cluster: &TestCluster, ids: &[ChildId]) -> BTreeMap<String, usize> {
    let running = cluster.running();
    let mut counts = BTreeMap::new();
    for id in ids {
        for node in running.get(id).into_iter().flatten() {
            *counts.entry(node.clone()).or_insert(0) += 1;
        }
    }
    counts
}

/// Waits until node `on` holds a table of `members` in which `node` has `children`.
async fn wait_table(cluster: &TestCluster, on: &str, node: &str, children: u64) {
    wait_until(
        &format!("{on}'s load table shows {children} children on {node}"),
        || {
            let table = cluster.hub(on).load_table();
            table.len() == cluster.names().len()
                && table.get(&full(node)).map(|s| s.children) == Some(children)
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn new_children_go_where_there_is_room_and_joins_move_none() {
    let mut cluster =
        TestCluster::with_nodes(11, &["a"], Options::plain().load_balanced(balancer(0))).await;
    let first = ids("first-", 120);
    start(cluster.hub("a"), &first).await;
    cluster.add("b").await;
    cluster.add("c").await;
    cluster.wait_members().await;
    wait_table(&cluster, "b", "a", 120).await;
    wait_table(&cluster, "b", "c", 0).await;
    assert_eq!(
        per_node(&cluster, &first),
        BTreeMap::from([("a".to_owned(), 120)]),
        "children placed by load never move when nodes join"
    );

    // The ring would put a third on each node; a, with 120 children against none, has a
    // twentieth of the others' spare capacity.
    let second = ids("second-", 150);
    start(cluster.hub("b"), &second).await;
    let counts = per_node(&cluster, &second);
    assert_eq!(counts.values().sum::<usize>(), 150, "{counts:?}");
    let on_a = counts.get("a").copied().unwrap_or(0);
    assert!(on_a <= 15, "the busy node took {on_a} of 150: {counts:?}");
    for node in ["b", "c"] {
        assert!(counts.get(node).copied().unwrap_or(0) >= 50, "{counts:?}");
    }
    // Every node records each child's placement alike (it travels in the row).
    let row = cluster
        .hub("c")
        .child_lookup_with_metadata(&second[0])
        .unwrap();
    let hosts: Vec<String> = row.nodes.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(hosts.len(), 1);
    assert_eq!(
        cluster.running().get(&second[0]).map(|n| full(&n[0])),
        Some(hosts[0].clone())
    );
}

#[tokio::test(start_paused = true)]
async fn an_uneven_cluster_is_rebalanced_hot_and_counters_keep_their_values() {
    let options = Options::plain()
        .load_balanced(balancer(50))
        .hot_swap(HotSwapConfig {
            handover_data_wait_ms: 1000,
            ..HotSwapConfig::default()
        });
    let mut cluster = TestCluster::with_nodes(12, &["a"], options).await;
    let all = ids("room-", 90);
    start(cluster.hub("a"), &all).await;
    for (i, id) in all.iter().enumerate() {
        cluster
            .hub("a")
            .child_ref::<CounterMsg>(id.clone())
            .cast_within(CounterMsg::Increment(i as i64 + 1), CALL)
            .await
            .unwrap();
    }
    let (_, mut events) = cluster.hub("a").subscribe_channel();
    cluster.add("b").await;
    cluster.add("c").await;
    cluster.wait_members().await;

    // 90 on a, none elsewhere: a hands 25 at a time to the idlest node until no two nodes
    // differ by more than half the mean (15).
    wait_until("the children are spread within the threshold", || {
        let counts = per_node(&cluster, &all);
        let (max, min) = (
            counts.values().max().copied().unwrap_or(0),
            ["a", "b", "c"]
                .iter()
                .map(|n| counts.get(*n).copied().unwrap_or(0))
                .min()
                .unwrap(),
        );
        max - min <= 15
    })
    .await;
    let expected: BTreeSet<ChildId> = all.iter().cloned().collect();
    wait_for("each child runs once", || {
        cluster.exactly(&expected, &BTreeSet::new())
    })
    .await;

    // Each move is reported once its child runs on its new node: the last reports may still
    // be on their way when the counts settle.
    let counts = per_node(&cluster, &all);
    let mut moved = 0;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while moved < 90 - counts["a"] && tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(100), events.recv()).await {
            Ok(Some(HubEvent::ChildMoved { why, from, .. })) => {
                assert_eq!(why, MoveReason::LoadImbalance);
                assert_eq!(from, full("a"));
                moved += 1;
            }
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => break,
        }
    }
    assert_eq!(moved, 90 - counts["a"], "{counts:?}");
    for (i, id) in all.iter().enumerate() {
        let value: i64 = cluster
            .hub("b")
            .child_ref::<CounterMsg>(id.clone())
            .call(CounterMsg::Get, CALL)
            .await
            .unwrap();
        assert_eq!(value, i as i64 + 1, "{id} kept its value across the move");
    }
}
