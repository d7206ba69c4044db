//! Helpers of the in-process cluster tests: several hubs in one process, each node a `Hub` with
//! an `InProcessNode` network, with short sync / grace / batch intervals so that a scenario
//! takes seconds. Conditions are waited for with a generous deadline, never slept on.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use process_hub::cluster::in_process::InProcessCluster;
use process_hub::core::placement::HashRing;
use process_hub::{ChildId, ChildSpec, Hub, NodeName, Pid, ProcessHub};

/// Generous: CI machines are slow and shared.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub const HUB: &str = "orders";

/// A config with test-speed cluster timing.
pub fn config(grace: Duration) -> ProcessHub {
    ProcessHub::builder(HUB)
        .cluster_timing(
            Duration::from_millis(300),
            grace,
            Duration::from_millis(20),
            Duration::from_millis(200),
        )
        .migration_retry(Duration::from_millis(100))
        .default_timeout(Duration::from_secs(5))
        .shutdown_timeout(Duration::from_secs(5))
        .build()
        .expect("valid config")
}

/// An in-process cluster of hubs.
pub struct TestCluster {
    pub net: InProcessCluster,
    pub hubs: BTreeMap<NodeName, Hub>,
    pub grace: Duration,
}

impl TestCluster {
    pub fn new(seed: u64, grace: Duration) -> Self {
        Self {
            net: InProcessCluster::new(seed),
            hubs: BTreeMap::new(),
            grace,
        }
    }

    pub async fn with_nodes(seed: u64, names: &[&str]) -> Self {
        let mut cluster = Self::new(seed, Duration::from_millis(100));
        for name in names {
            cluster.add(name).await;
        }
        cluster.wait_members().await;
        cluster
    }

    async fn spawn(&mut self, node: process_hub::cluster::in_process::InProcessNode) -> Hub {
        let name = process_hub::cluster::transport::Network::local_node(&node).clone();
        let (hub, _join) = Hub::builder(config(self.grace), process_hub_actors::default_kinds())
            .network(Arc::new(node))
            .spawn()
            .await
            .expect("hub spawns");
        self.hubs.insert(name, hub.clone());
        hub
    }

    /// Adds a node (`name@test`) running the hub.
    pub async fn add(&mut self, name: &str) -> Hub {
        let node = self.net.add_node(format!("{name}@test")).expect("new node");
        self.spawn(node).await
    }

    pub fn hub(&self, name: &str) -> &Hub {
        &self.hubs[&format!("{name}@test")]
    }

    /// Crashes a node: its endpoints vanish and its hub dies without a word.
    pub async fn crash(&mut self, name: &str) {
        let full = format!("{name}@test");
        self.net.crash(&full).expect("crash");
        if let Some(hub) = self.hubs.remove(&full) {
            hub.actor().kill();
            wait_until("crashed hub is dead", || !hub.is_alive()).await;
        }
    }

    /// Restarts a crashed node with a new boot token and a fresh hub.
    pub async fn restart(&mut self, name: &str) -> Hub {
        let node = self.net.restart(&format!("{name}@test")).expect("restart");
        self.spawn(node).await
    }

    pub fn names(&self) -> Vec<NodeName> {
        self.hubs.keys().cloned().collect()
    }

    /// Waits until every hub sees every other as a member and is settled.
    pub async fn wait_members(&self) {
        let all = self.names();
        wait_until("members agree and registries delivered", || {
            self.hubs
                .values()
                .all(|h| h.nodes(true) == all && h.cluster_settled())
        })
        .await;
    }

    /// Every hub's registry as `id -> node_pids`.
    pub fn views(&self) -> Vec<BTreeMap<ChildId, BTreeMap<NodeName, Pid>>> {
        self.hubs
            .values()
            .map(|h| {
                h.registry_dump()
                    .into_iter()
                    .map(|(id, row)| (id, row.node_pids))
                    .collect()
            })
            .collect()
    }

    /// Registries identical on every node, holding exactly `ids`, each child running exactly
    /// once, on its ring owner among the live nodes, and that node really runs it.
    pub fn converged(&self, ids: &BTreeSet<ChildId>) -> Result<(), String> {
        let views = self.views();
        let first = &views[0];
        if let Some((i, other)) = views.iter().enumerate().find(|(_, v)| *v != first) {
            let names = self.names();
            let diff: Vec<String> = first
                .keys()
                .chain(other.keys())
                .filter(|id| first.get(*id) != other.get(*id))
                .take(3)
                .map(|id| format!("{id}: {:?} vs {:?}", first.get(id), other.get(id)))
                .collect();
            return Err(format!(
                "registries of {} and {} differ: {diff:?}",
                names[0], names[i]
            ));
        }
        let held: BTreeSet<ChildId> = first.keys().cloned().collect();
        if &held != ids {
            return Err(format!(
                "registry holds {} children, expected {}",
                held.len(),
                ids.len()
            ));
        }
        let ring = HashRing::new(self.names());
        for (id, pids) in first {
            let owner = ring.owner(id).expect("non-empty ring");
            if pids.len() != 1 || !pids.contains_key(owner) {
                return Err(format!("{id} runs on {pids:?}, owner is {owner}"));
            }
            let hub = &self.hubs[owner];
            match hub.local_child(id) {
                Some(cell) if cell.get_id().pid() == pids[owner] => {}
                _ => return Err(format!("{id} is not running on its owner {owner}")),
            }
            for (name, other) in &self.hubs {
                if name != owner && other.local_child(id).is_some() {
                    return Err(format!("{id} also runs on {name}"));
                }
            }
        }
        Ok(())
    }

    pub async fn wait_converged(&self, ids: &BTreeSet<ChildId>, context: &str) {
        let start = tokio::time::Instant::now();
        loop {
            match self.converged(ids) {
                Ok(()) => return,
                Err(why) if start.elapsed() > DEADLINE => {
                    panic!("{context}: did not converge: {why}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
}

pub fn specs(prefix: &str, n: usize) -> Vec<ChildSpec> {
    (0..n)
        .map(|i| ChildSpec::new(format!("{prefix}-{i}"), "counter"))
        .collect()
}

pub fn ids(specs: &[ChildSpec]) -> BTreeSet<ChildId> {
    specs.iter().map(|s| s.id.clone()).collect()
}

/// Polls `cond` until it holds or the deadline passes.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
