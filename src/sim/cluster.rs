//! The cluster under simulation: in-process nodes joined by the router, each with a hub, a
//! simulated disk that outlives the node's crashes, and a clock that can be skewed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use std::sync::Mutex;

use super::child::sim_kinds_with;
use super::partial::PartialFault;
use super::state::{with_book, SharedBook};
use super::trace::{short, Trace};
use crate::api::Hub;
use crate::clock::Clock;
use crate::cluster::in_process::{InProcessCluster, InProcessNode, LinkFaults};
use crate::config::{AutoRecoveryConfig, Migration, ProcessHub};
use crate::events::{HandoverOutcome, HubEvent};
use crate::hub::shared::Environment;
use crate::hub::simulation::{InjectedBug, Observer};
use crate::kinds::ChildKinds;
use crate::model::{ChildId, NodeName, Pid};
use crate::storage::SimulatedDisk;

/// The hub id every simulated node runs.
pub const SIM_HUB: &str = "sim";

/// The wall-clock time every simulated clock starts at (2026-01-01T00:00:00Z).
const EPOCH_MS: u64 = 1_767_225_600_000;

/// The timing every simulated hub runs with: the production defaults scaled down, so that a
/// run covers many membership changes, syncs and rounds in little virtual time; `migration`
/// as the run drew it, and each child on `replicas` nodes, replicated as `model` says.
pub fn sim_config(
    node: &str,
    migration: Migration,
    replicas: usize,
    model: crate::config::ReplicationModel,
    distribution: crate::config::Distribution,
    partition_tolerance: crate::config::PartitionTolerance,
    sync: crate::config::SyncStrategy,
) -> ProcessHub {
    let recovery = AutoRecoveryConfig {
        reconcile_grace_ms: 1_500,
        reconcile_interval_ms: 2_000,
        ..AutoRecoveryConfig::default()
    };
    ProcessHub::builder(SIM_HUB)
        .node_name(node)
        .cluster_timing(
            Duration::from_millis(1_000),
            Duration::from_millis(1_000),
            Duration::from_millis(200),
            Duration::from_millis(1_000),
        )
        .migration_retry(Duration::from_millis(500))
        .default_timeout(Duration::from_secs(3))
        .shutdown_timeout(Duration::from_secs(2))
        .stub_ttl(Duration::from_secs(60))
        .auto_recovery(recovery)
        .migration(migration)
        .replication(replicas, model)
        .distribution(distribution)
        .partition_tolerance(partition_tolerance)
        .sync(sync)
        .load_balancer(crate::config::LoadBalancerConfig {
            push_interval_ms: 1_000,
            decay_percent: 50,
            rebalance_threshold_percent: 50,
            rebalance_batch: 5,
        })
        .build_unchecked()
}

/// Where a simulated node is in its life.
pub enum NodeLife {
    /// Running its hub.
    Up(Hub),
    /// Crashed (or not restarted yet): its disk waits for it.
    Down,
    /// Left the cluster gracefully; it may come back as a new boot.
    Left,
}

/// One simulated node.
pub struct SimNode {
    /// `name@sim`.
    pub name: NodeName,
    /// Up, down or departed.
    pub life: NodeLife,
    /// Its disk for the declared list: survives crashes, lost only by [`SimCluster::restart`]
    /// with `lose_disk`.
    pub disk: Arc<SimulatedDisk>,
    /// Its disk for the registry, in a run whose nodes keep their registry on disk (the
    /// `durable` backend); lost with the other.
    pub registry_disk: Option<Arc<SimulatedDisk>>,
    /// Its wall clock.
    pub clock: Clock,
    /// Bumped each time the disk is lost (versions are compared within one disk's life).
    pub disk_generation: u64,
}

impl SimNode {
    /// Its disks.
    pub fn disks(&self) -> impl Iterator<Item = &Arc<SimulatedDisk>> {
        std::iter::once(&self.disk).chain(self.registry_disk.as_ref())
    }

    /// The hub, when the node is up.
    pub fn hub(&self) -> Option<&Hub> {
        match &self.life {
            NodeLife::Up(hub) => Some(hub),
            _ => None,
        }
    }
}

/// The simulated cluster.
pub struct SimCluster {
    /// The router joining the nodes (and injecting the link faults).
    pub router: InProcessCluster,
    /// Every node ever added, by name.
    pub nodes: BTreeMap<NodeName, SimNode>,
    kinds: ChildKinds,
    /// The nodes keep their registry on disk.
    durable_registry: bool,
    bugs: BTreeSet<InjectedBug>,
    observer: Observer,
    /// The run's trace (every frame goes in).
    pub trace: Arc<Trace>,
    /// How children move.
    migration: Migration,
    /// Where the children write what they do with their state (hot runs).
    book: Option<SharedBook>,
    /// The hubs that are up, for the event listeners (which look at the node a child moved to).
    hubs: Arc<Mutex<BTreeMap<NodeName, Hub>>>,
    /// How many nodes run each child (the hubs' `replication_factor`).
    pub replicas: usize,
    /// Whether every replica is active (the hubs' `replication_model`).
    pub replication_model: crate::config::ReplicationModel,
    /// How new children are placed (the hubs' `distribution`).
    pub distribution: crate::config::Distribution,
    /// What a side of a split without quorum does (the hubs' `partition_tolerance`).
    pub partition_tolerance: crate::config::PartitionTolerance,
    /// How registry changes travel (the hubs' `sync`).
    pub sync: crate::config::SyncStrategy,
    /// The tasks that flap links ([`PartialFault::Flap`]), until a heal stops them.
    flaps: Vec<tokio::task::JoinHandle<()>>,
    /// The links those tasks flap, each pair both ways.
    flapping: BTreeSet<(NodeName, NodeName)>,
}

impl SimCluster {
    /// An empty cluster whose router draws from `seed`; with `durable_registry` every node
    /// keeps its registry on disk; its hubs move children as `migration` says, and with a
    /// `book` the children write what they do with their state there.
    pub fn new(
        seed: u64,
        durable_registry: bool,
        bugs: BTreeSet<InjectedBug>,
        trace: Arc<Trace>,
        observer: Observer,
        migration: Migration,
        book: Option<SharedBook>,
    ) -> Self {
        let router = InProcessCluster::new(seed);
        let tap = trace.clone();
        router.set_observer(Some(Arc::new(move |frame| tap.frame(frame))));
        Self {
            router,
            nodes: BTreeMap::new(),
            kinds: sim_kinds_with(book.clone()),
            durable_registry,
            bugs,
            observer,
            trace,
            migration,
            book,
            hubs: Arc::default(),
            replicas: 1,
            replication_model: crate::config::ReplicationModel::ActivePassive,
            distribution: crate::config::Distribution::ConsistentHash,
            partition_tolerance: crate::config::PartitionTolerance::Divergence,
            sync: crate::config::SyncStrategy::PubSub,
            flaps: Vec::new(),
            flapping: BTreeSet::new(),
        }
    }

    /// Adds a node `name@sim` and boots its hub.
    pub async fn add(&mut self, name: &str) -> Result<(), String> {
        let full = format!("{name}@sim");
        let network = self
            .router
            .add_node(full.clone())
            .map_err(|e| e.to_string())?;
        self.nodes.insert(
            full.clone(),
            SimNode {
                name: full.clone(),
                life: NodeLife::Down,
                disk: Arc::new(SimulatedDisk::new(&format!("{full}/declared"))),
                registry_disk: self
                    .durable_registry
                    .then(|| Arc::new(SimulatedDisk::new(&format!("{full}/registry")))),
                // A node added later starts at the run's present, as its peers' clocks read.
                clock: Clock::following_tokio(EPOCH_MS + self.trace.now_ms()),
                disk_generation: 0,
            },
        );
        self.boot(&full, network).await
    }

    async fn boot(&mut self, name: &str, network: InProcessNode) -> Result<(), String> {
        let node = self.nodes.get_mut(name).ok_or("no such node")?;
        let environment = Environment {
            clock: node.clock.clone(),
            declared_disk: Some(node.disk.clone()),
            registry_disk: node.registry_disk.clone(),
            bugs: self.bugs.clone(),
            observer: Some(self.observer.clone()),
        };
        let spawned = Hub::builder(
            sim_config(
                name,
                self.migration,
                self.replicas,
                self.replication_model,
                self.distribution,
                self.partition_tolerance.clone(),
                self.sync.clone(),
            ),
            self.kinds.clone(),
        )
        .network(Arc::new(network))
        .environment(environment)
        .spawn()
        .await;
        match spawned {
            Ok((hub, _)) => {
                if let Some(book) = &self.book {
                    listen_for_handovers(&hub, book, &self.trace);
                    lock(&self.hubs).insert(name.to_owned(), hub.clone());
                }
                node.life = NodeLife::Up(hub);
                Ok(())
            }
            Err(e) => {
                node.life = NodeLife::Down;
                let _ = self.router.crash(name);
                Err(format!("{name} did not boot: {e}"))
            }
        }
    }

    /// Crashes `name`: its endpoints vanish, its hub dies without a word, the writes its disk
    /// had not applied are lost.
    pub async fn crash(&mut self, name: &str) {
        let Some(node) = self.nodes.get_mut(name) else {
            return;
        };
        let _ = self.router.crash(name);
        node.disks().for_each(|d| d.crash());
        lock(&self.hubs).remove(name);
        if let NodeLife::Up(hub) = std::mem::replace(&mut node.life, NodeLife::Down) {
            hub.actor().kill();
            let _ = hub.actor().wait(Some(Duration::from_secs(5))).await;
        }
    }

    /// Restarts a crashed (or departed) node with a new boot token, on its disk or, with
    /// `lose_disk`, on an empty one.
    pub async fn restart(&mut self, name: &str, lose_disk: bool) -> Result<(), String> {
        let Some(node) = self.nodes.get_mut(name) else {
            return Err(format!("no node {name}"));
        };
        if node.hub().is_some() {
            return Err(format!("{name} is up"));
        }
        if lose_disk {
            node.disks().for_each(|d| d.wipe());
            node.disk_generation += 1;
        }
        let network = self.router.restart(name).map_err(|e| e.to_string())?;
        self.boot(name, network).await
    }

    /// `name` leaves gracefully: hands its children over, then shuts its hub down.
    pub async fn leave(&mut self, name: &str) {
        self.leave_together(&[name.to_owned()]).await;
    }

    /// `names` leave gracefully at once: each hands its children over, then shuts its hub down.
    pub async fn leave_together(&mut self, names: &[NodeName]) {
        let mut leaving = Vec::new();
        for name in names {
            let Some(node) = self.nodes.get_mut(name) else {
                continue;
            };
            if let NodeLife::Up(hub) = std::mem::replace(&mut node.life, NodeLife::Left) {
                leaving.push(hub);
            }
            lock(&self.hubs).remove(name);
        }
        futures::future::join_all(leaving.iter().map(Hub::leave)).await;
        for name in names {
            let _ = self.router.crash(name);
            if let Some(node) = self.nodes.get(name) {
                node.disks().for_each(|d| d.crash());
            }
        }
    }

    /// How the hubs move children.
    pub fn migration(&self) -> Migration {
        self.migration
    }

    /// The nodes that are up, sorted.
    pub fn up(&self) -> Vec<NodeName> {
        self.nodes
            .values()
            .filter(|n| n.hub().is_some())
            .map(|n| n.name.clone())
            .collect()
    }

    /// The nodes that are down (crashed, or left), sorted.
    pub fn down(&self) -> Vec<NodeName> {
        self.nodes
            .values()
            .filter(|n| n.hub().is_none())
            .map(|n| n.name.clone())
            .collect()
    }

    /// The hub of `name`, when it is up.
    pub fn hub(&self, name: &str) -> Option<&Hub> {
        self.nodes.get(name).and_then(SimNode::hub)
    }

    /// The nodes `name` hears now (itself included), by the router's links: the ground
    /// truth of who `name`'s own view of the members holds.
    pub fn component_of(&self, name: &str) -> BTreeSet<NodeName> {
        self.up()
            .into_iter()
            .filter(|other| other == name || self.router.hears(name, other))
            .collect()
    }

    /// The up nodes connected through some path, over links that work both ways: each
    /// connected component (`sim::split::components`), with the links between its nodes that
    /// do not work.
    pub fn connected(&self) -> Vec<super::split::Shape> {
        let works = |a: &NodeName, b: &NodeName| self.router.hears(a, b) && self.router.hears(b, a);
        super::split::components(&self.up(), works)
            .into_iter()
            .map(|nodes| {
                let mut down = BTreeSet::new();
                for a in &nodes {
                    for b in nodes.range::<NodeName, _>((
                        std::ops::Bound::Excluded(a),
                        std::ops::Bound::Unbounded,
                    )) {
                        if !works(a, b) {
                            down.insert((a.clone(), b.clone()));
                        }
                    }
                }
                (nodes, down)
            })
            .collect()
    }

    /// A partial fault strikes; a flapping link bumps `sides_changed` each time it is cut or
    /// restored (the sides of a split may change with it).
    pub fn strike(
        &mut self,
        fault: &PartialFault,
        sides_changed: &Arc<std::sync::atomic::AtomicU64>,
    ) {
        match fault {
            PartialFault::Cut { links } => {
                for (a, b) in links {
                    self.router.cut(a, b);
                }
            }
            PartialFault::OneWay { from, to } => self.router.cut_one_way(from, to),
            PartialFault::Lossy {
                a,
                b,
                drop_probability,
            } => {
                let faults = LinkFaults {
                    drop_probability: *drop_probability,
                    ..LinkFaults::default()
                };
                self.router.set_link_faults(a, b, faults);
                self.router.set_link_faults(b, a, faults);
            }
            PartialFault::Flap { a, b, down, up } => {
                self.flapping.insert((a.clone(), b.clone()));
                self.flapping.insert((b.clone(), a.clone()));
                let (router, trace) = (self.router.clone(), self.trace.clone());
                let (a, b, down, up) = (a.clone(), b.clone(), *down, *up);
                let sides = sides_changed.clone();
                let changed = move || sides.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                self.flaps.push(tokio::spawn(async move {
                    loop {
                        router.cut(&a, &b);
                        changed();
                        trace.line(format!("flap: {}-{} cut", short(&a), short(&b)));
                        tokio::time::sleep(down).await;
                        router.heal_link(&a, &b);
                        changed();
                        trace.line(format!("flap: {}-{} up", short(&a), short(&b)));
                        tokio::time::sleep(up).await;
                    }
                }));
            }
        }
    }

    /// A partial fault heals (what it cut is restored, whatever else cut it meanwhile).
    pub fn end(&mut self, fault: &PartialFault) {
        match fault {
            PartialFault::Cut { links } => {
                for (a, b) in links {
                    self.router.heal_link(a, b);
                }
            }
            PartialFault::OneWay { from, to } => self.router.heal_one_way(from, to),
            PartialFault::Lossy { a, b, .. } => {
                self.router.set_link_faults(a, b, LinkFaults::default());
                self.router.set_link_faults(b, a, LinkFaults::default());
            }
            PartialFault::Flap { a, b, .. } => {
                self.stop_flapping();
                self.router.heal_link(a, b);
            }
        }
    }

    fn stop_flapping(&mut self) {
        for flap in self.flaps.drain(..) {
            flap.abort();
        }
        self.flapping.clear();
    }

    /// Whether the link `a`-`b` flaps ([`PartialFault::Flap`]): it may be cut at any instant.
    pub fn flaps(&self, a: &str, b: &str) -> bool {
        self.flapping.contains(&(a.to_owned(), b.to_owned()))
    }

    /// Splits the nodes that are up into `groups` (every link between groups is cut).
    pub fn partition(&self, groups: &[Vec<NodeName>]) {
        self.router.partition(groups);
    }

    /// Restores every link (a flapping one stays up) and removes every link fault.
    pub fn heal(&mut self) {
        self.stop_flapping();
        self.router.heal();
        self.router.clear_link_faults();
        self.router.set_drop_probability(0.0);
    }

    /// Sets the faults of the link from `from` to `to`.
    pub fn fault_link(&self, from: &str, to: &str, faults: LinkFaults) {
        self.router.set_link_faults(from, to, faults);
    }

    /// What runs where: child -> (node -> pid), from the supervisors themselves.
    pub fn running(&self) -> BTreeMap<ChildId, BTreeMap<NodeName, Pid>> {
        let mut out: BTreeMap<ChildId, BTreeMap<NodeName, Pid>> = BTreeMap::new();
        for node in self.nodes.values() {
            let Some(hub) = node.hub() else { continue };
            for entry in hub.shared().local_children.iter() {
                out.entry(entry.key().clone())
                    .or_default()
                    .insert(node.name.clone(), entry.value().get_id().pid());
            }
        }
        out
    }

    /// Stops every hub (the end of a run).
    pub async fn shut_down(&mut self) {
        self.stop_flapping();
        lock(&self.hubs).clear();
        for node in self.nodes.values_mut() {
            if let NodeLife::Up(hub) = std::mem::replace(&mut node.life, NodeLife::Down) {
                hub.actor().kill();
                let _ = hub.actor().wait(Some(Duration::from_secs(5))).await;
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Follows `hub`'s hot moves: each goes in the trace, and one whose state went along names
/// the new instance (the actor its start answered with) that must have taken it.
fn listen_for_handovers(hub: &Hub, book: &SharedBook, trace: &Arc<Trace>) {
    let (_, mut events) = hub.subscribe_channel();
    let (book, trace) = (book.clone(), trace.clone());
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let HubEvent::ChildHandover {
                id,
                from,
                to,
                pid,
                outcome,
                ..
            } = event
            else {
                continue;
            };
            let what = format!("{} -> {}", short(&from), short(&to));
            match outcome {
                HandoverOutcome::Imported { bytes } => {
                    trace.line(format!("hot move of {id} {what}: imported {bytes} bytes"));
                    // The instance the move started, as its start named it: by the time the
                    // old node reports, another instance may run there (a duplicate stop, a
                    // start on the other side of a split).
                    if let Some(pid) = pid {
                        with_book(&book, |b| b.expect_import(id, what, pid));
                    }
                }
                other => trace.line(format!("hot move of {id} {what}: {other:?}")),
            }
        }
    });
}
