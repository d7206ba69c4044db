//! Cluster: three hubs of one hub id on an in-process cluster (three simulated nodes in one
//! process), children placed by the ring, a node killed, and the survivors taking its children.
//!
//! The same code runs on real nodes: give `HubBuilder::network` a `ClusterNode` (ractor_cluster
//! over TCP) instead of an `InProcessNode`.
//!
//! Run: `cargo run --example cluster`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use process_hub::cluster::in_process::InProcessCluster;
use process_hub::{ChildSpec, Hub, ProcessHub, StartOptions};

const CHILDREN: usize = 3_000;

fn per_node(hub: &Hub) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for row in hub.registry_dump().values() {
        for node in row.node_pids.keys() {
            *counts.entry(node.clone()).or_default() += 1;
        }
    }
    counts
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > Duration::from_secs(60) {
            panic!("gave up waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let net = InProcessCluster::new(42);
    let config = ProcessHub::builder("orders")
        .cluster_timing(
            Duration::from_secs(15),    // full sync
            Duration::from_millis(500), // node-down grace
            Duration::from_millis(50),  // membership debounce
            Duration::from_millis(500), // ... capped
        )
        .build()?;
    let mut hubs = BTreeMap::new();
    for name in ["a@example", "b@example", "c@example"] {
        let node = net.add_node(name)?;
        let (hub, _) = Hub::builder(config.clone(), process_hub_actors::default_kinds())
            .network(Arc::new(node))
            .spawn()
            .await?;
        hubs.insert(name, hub);
    }
    let a = hubs["a@example"].clone();
    wait_for("members", || {
        hubs.values()
            .all(|h| h.nodes(true).len() == 3 && h.cluster_settled())
    })
    .await;
    println!("members: {:?}", a.nodes(true));

    let specs: Vec<ChildSpec> = (0..CHILDREN)
        .map(|i| ChildSpec::new(format!("counter-{i}"), "counter"))
        .collect();
    let t = Instant::now();
    let result = a.start_children(specs, StartOptions::new()).await?;
    println!(
        "started {} children from a in {:?} (errors: {})",
        result.started.len(),
        t.elapsed(),
        result.errors.len()
    );
    let converge = wait_for("every registry holds every child", || {
        hubs.values().all(|h| h.registry_dump().len() == CHILDREN)
    })
    .await;
    println!("every node's registry holds them after {converge:?}");
    println!("children per node: {:?}", per_node(&a));

    // A call by id from any node reaches the child wherever it runs.
    let increment = br#"{"kind":"counter","command":{"op":"increment","by":5}}"#.to_vec();
    let get = br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec();
    // A call, not a cast: casts from b and calls from c travel different routes, so only an
    // answered increment is sure to be seen by c's call.
    hubs["b@example"]
        .call_child("counter-7", increment, Duration::from_secs(5))
        .await?;
    let value = hubs["c@example"]
        .call_child("counter-7", get, Duration::from_secs(5))
        .await?;
    println!(
        "counter-7 (asked from c): {}",
        String::from_utf8_lossy(&value)
    );

    // Kill c: its endpoints vanish, its hub dies without a word.
    println!("crashing c ...");
    net.crash("c@example")?;
    let c = hubs.remove("c@example").expect("c");
    c.actor().kill();
    let failover = wait_for("survivors run every child", || {
        let counts = per_node(&a);
        !counts.contains_key("c@example") && counts.values().sum::<usize>() == CHILDREN
    })
    .await;
    println!(
        "failover: every child runs on a or b {failover:?} after the crash (grace {:?})",
        Duration::from_millis(config.nodedown_grace_ms)
    );
    println!("children per node: {:?}", per_node(&a));

    for hub in hubs.values() {
        hub.shutdown().await?;
    }
    Ok(())
}
