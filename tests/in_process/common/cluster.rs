//! In-process clusters of hubs: several hubs in one process, each node a `Hub` with an
//! `InProcessNode` network named `name@test`, with short sync / grace / batch intervals so
//! that a scenario takes seconds.
//!
//! One fixture, [`TestCluster`], for plain clusters ([`Options::plain`], hub `orders`) and for
//! clusters with auto-recovery ([`Options::durable`], hub `durable`: each node keeps its data
//! directory across crashes and restarts, like a disk, and its recovery hooks are recorded).
//! It crashes, restarts and partitions nodes, and judges the cluster with the simulator's
//! invariants (`process_hub::sim::invariants`), so the tests and the simulator hold the hub to
//! the same promises.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_hub::cluster::in_process::{InProcessCluster, InProcessNode};
use process_hub::cluster::wire::WireMsg;
use process_hub::core::placement::HashRing;
use process_hub::sim::invariants::{
    declared_run_as_decided, each_once_on_its_owner, registries_agree, NodeView,
};
use process_hub::storage::BackendConfig;
use process_hub::{
    AutoRecoveryConfig, ChildId, ChildKinds, ChildSpec, Distribution, HookEvent, HookHandler,
    HookKey, HotSwapConfig, Hub, LoadBalancerConfig, ManifestLocation, Migration, NodeName,
    PartitionTolerance, Pid, ProcessHub, RedundancySignal, ReplicationModel, SyncStrategy,
};

use super::{wait_for, wait_until, DEADLINE};

/// The hub id of a plain cluster.
pub const HUB: &str = "orders";
/// The hub id of a durable cluster.
pub const DURABLE_HUB: &str = "durable";

/// A leader elector as a plain function (the same on every node).
pub type Elector = fn(&BTreeSet<NodeName>) -> Option<NodeName>;

/// How every node of a [`TestCluster`] is configured. Start from [`Options::plain`] or
/// [`Options::durable`].
#[derive(Clone)]
pub struct Options {
    /// The hub id of every node.
    pub hub_id: &'static str,
    /// How long a node may be down before its children are re-placed (`nodedown_grace`).
    pub grace: Duration,
    /// `default_timeout` of the nodes spawned from now on.
    pub default_timeout: Duration,
    /// The retry delay of failed migrations (`None`: the hub's default).
    pub migration_retry: Option<Duration>,
    /// Auto-recovery on: every node on its own data directory (kept across crashes and
    /// restarts), its recovery hooks recorded in [`TestCluster::events`].
    pub auto_recovery: bool,
    /// With auto-recovery: a remote manifest in a local directory shared by every node.
    pub manifest: bool,
    /// The registry backend of every node.
    pub backend: BackendConfig,
    /// The declared-list leader elector of every node (none: the lowest member leads).
    pub elector: Option<Elector>,
    /// The child kinds of every node.
    pub kinds: ChildKinds,
    /// The distribution strategy of every node.
    pub distribution: Distribution,
    /// `migration = "hot"` with this timing (`None`: cold, the default).
    pub hot_swap: Option<HotSwapConfig>,
    /// Replication factor, model and redundancy signal (`None`: one instance per child).
    pub replication: Option<(usize, ReplicationModel, RedundancySignal)>,
    /// The load balancer's options (read with `Distribution::LoadBalanced`).
    pub load_balancer: Option<LoadBalancerConfig>,
    /// The partition tolerance strategy of every node.
    pub partition_tolerance: PartitionTolerance,
    /// Known bugs put into every node (to take one mechanism away).
    pub bugs: Vec<process_hub::sim::InjectedBug>,
    /// The config's static children of every node.
    pub child_specs: Vec<ChildSpec>,
    /// The synchronization strategy of every node spawned from now on.
    pub sync: SyncStrategy,
    /// The hub's `stable_after_ms` (none: the default).
    pub stable_after: Option<Duration>,
    /// A custom registry backend's factory, by the name `backend` gives it.
    pub storage_factory: Option<(String, process_hub::storage::StorageFactory)>,
}

impl Options {
    /// Hub `orders`, a 100 ms grace, a 5 s `default_timeout`, a 100 ms migration retry, the
    /// ready-made kinds, memory registries, no auto-recovery.
    pub fn plain() -> Self {
        Self {
            hub_id: HUB,
            grace: Duration::from_millis(100),
            default_timeout: Duration::from_secs(5),
            migration_retry: Some(Duration::from_millis(100)),
            auto_recovery: false,
            manifest: false,
            backend: BackendConfig::Memory,
            elector: None,
            kinds: process_hub_actors::default_kinds(),
            distribution: Distribution::ConsistentHash,
            hot_swap: None,
            replication: None,
            load_balancer: None,
            partition_tolerance: PartitionTolerance::Divergence,
            bugs: Vec::new(),
            child_specs: Vec::new(),
            sync: SyncStrategy::PubSub,
            storage_factory: None,
            stable_after: None,
        }
    }

    /// Hub `durable` with auto-recovery (a 600 ms reconcile grace, a round every second), a
    /// 3 s `default_timeout`, no manifest; otherwise as [`Options::plain`].
    pub fn durable() -> Self {
        Self {
            hub_id: DURABLE_HUB,
            default_timeout: Duration::from_secs(3),
            auto_recovery: true,
            ..Self::plain()
        }
    }

    pub fn stable_after(mut self, stable_after: Duration) -> Self {
        self.stable_after = Some(stable_after);
        self
    }

    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    pub fn manifest(mut self) -> Self {
        self.manifest = true;
        self
    }

    pub fn backend(mut self, backend: BackendConfig) -> Self {
        self.backend = backend;
        self
    }

    pub fn elector(mut self, elector: Elector) -> Self {
        self.elector = Some(elector);
        self
    }

    pub fn distribution(mut self, distribution: Distribution) -> Self {
        self.distribution = distribution;
        self
    }

    /// `Distribution::LoadBalanced` with these options.
    pub fn load_balanced(mut self, options: LoadBalancerConfig) -> Self {
        self.distribution = Distribution::LoadBalanced;
        self.load_balancer = Some(options);
        self
    }

    pub fn child_specs(mut self, specs: Vec<ChildSpec>) -> Self {
        self.child_specs = specs;
        self
    }

    pub fn bug(mut self, bug: process_hub::sim::InjectedBug) -> Self {
        self.bugs.push(bug);
        self
    }

    pub fn partition_tolerance(mut self, strategy: PartitionTolerance) -> Self {
        self.partition_tolerance = strategy;
        self
    }

    /// The registry in the custom backend `name`, opened by `factory`.
    pub fn custom_storage(
        mut self,
        name: &str,
        factory: process_hub::storage::StorageFactory,
    ) -> Self {
        self.backend = BackendConfig::Custom {
            name: name.to_owned(),
            options: Default::default(),
        };
        self.storage_factory = Some((name.to_owned(), factory));
        self
    }

    pub fn sync(mut self, strategy: SyncStrategy) -> Self {
        self.sync = strategy;
        self
    }

    pub fn kinds(mut self, kinds: ChildKinds) -> Self {
        self.kinds = kinds;
        self
    }

    pub fn hot_swap(mut self, timing: HotSwapConfig) -> Self {
        self.hot_swap = Some(timing);
        self
    }

    pub fn replication(
        mut self,
        factor: usize,
        model: ReplicationModel,
        signal: RedundancySignal,
    ) -> Self {
        self.replication = Some((factor, model, signal));
        self
    }
}

/// An in-process cluster of hubs.
pub struct TestCluster {
    pub net: InProcessCluster,
    /// The live hubs by node name (`name@test`).
    pub hubs: BTreeMap<NodeName, Hub>,
    /// How the nodes spawned from now on are configured.
    pub options: Options,
    /// Holds every node's data directory.
    pub root: tempfile::TempDir,
    /// The remote manifest's directory, with [`Options::manifest`].
    pub manifest: Option<PathBuf>,
    /// Hook events of every node, with auto-recovery.
    pub events: Arc<Mutex<Vec<HookEvent>>>,
}

impl TestCluster {
    /// A cluster without nodes yet.
    pub fn new(seed: u64, options: Options) -> Self {
        let root = tempfile::tempdir().unwrap();
        let manifest = options.manifest.then(|| root.path().join("off-cluster"));
        Self {
            net: InProcessCluster::new(seed),
            hubs: BTreeMap::new(),
            options,
            root,
            manifest,
            events: Arc::default(),
        }
    }

    /// A cluster of `names`, once every node sees every other.
    pub async fn with_nodes(seed: u64, names: &[&str], options: Options) -> Self {
        let mut cluster = Self::new(seed, options);
        for name in names {
            cluster.add(name).await;
        }
        cluster.wait_members().await;
        cluster
    }

    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// The config of node `name`.
    pub fn config(&self, name: &str) -> ProcessHub {
        let options = &self.options;
        let mut builder = ProcessHub::builder(options.hub_id)
            .cluster_timing(
                Duration::from_millis(300),
                options.grace,
                Duration::from_millis(20),
                Duration::from_millis(200),
            )
            .default_timeout(options.default_timeout)
            .distribution(options.distribution)
            .partition_tolerance(options.partition_tolerance.clone())
            .sync(options.sync.clone())
            .shutdown_timeout(Duration::from_secs(5))
            .registry_backend(options.backend.clone());
        if let Some(retry) = options.migration_retry {
            builder = builder.migration_retry(retry);
        }
        if let Some(stable_after) = options.stable_after {
            builder = builder.stable_after(stable_after);
        }
        if let Some((factor, model, signal)) = options.replication {
            builder = builder.replication(factor, model).redundancy_signal(signal);
        }
        if let Some(load_balancer) = &options.load_balancer {
            builder = builder.load_balancer(load_balancer.clone());
        }
        if let Some(timing) = &options.hot_swap {
            builder = builder.migration(Migration::Hot).hot_swap(timing.clone());
        }
        if options.auto_recovery {
            let recovery = AutoRecoveryConfig {
                reconcile_grace_ms: 600,
                reconcile_interval_ms: 1000,
                remote_manifest: self
                    .manifest
                    .clone()
                    .map(|path| ManifestLocation::LocalPath { path }),
                ..AutoRecoveryConfig::default()
            };
            builder = builder
                .node_name(full(name))
                .data_dir(self.data_dir(name))
                .auto_recovery(recovery);
        }
        let mut config = builder.build().expect("valid config");
        config.child_specs = options.child_specs.clone();
        config
    }

    /// Adds a node (`name@test`) running the hub.
    pub async fn add(&mut self, name: &str) -> Hub {
        let node = self.net.add_node(full(name)).expect("new node");
        self.spawn(name, node).await
    }

    /// Spawns node `name`'s hub on `node`.
    pub async fn spawn(&mut self, name: &str, node: InProcessNode) -> Hub {
        let events = self.events.clone();
        let record =
            HookHandler::observe("rec", 0, move |e| events.lock().unwrap().push(e.clone()));
        // A crashed node's previous hub may still be releasing its store: retry the open.
        let start = tokio::time::Instant::now();
        let node = Arc::new(node);
        let hub = loop {
            let mut builder =
                Hub::builder(self.config(name), self.options.kinds.clone()).network(node.clone());
            if let Some(elector) = self.options.elector {
                builder = builder.elector(elector);
            }
            builder = builder.inject_bugs(self.options.bugs.iter().copied());
            if let Some((name, factory)) = &self.options.storage_factory {
                builder = builder.storage_backend(name.clone(), factory.clone());
            }
            if self.options.auto_recovery {
                for key in [
                    HookKey::DeclaredTiebreak,
                    HookKey::ReconcileRound,
                    HookKey::ReconcileDuplicate,
                    HookKey::DeclaredParked,
                ] {
                    builder = builder.hook(key, record.clone());
                }
            }
            match builder.spawn().await {
                Ok((hub, _)) => break hub,
                Err(e) if start.elapsed() < DEADLINE => {
                    tracing::debug!(error = %e, "retrying the spawn");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("hub {name} does not spawn: {e}"),
            }
        };
        self.hubs.insert(full(name), hub.clone());
        hub
    }

    pub fn hub(&self, name: &str) -> &Hub {
        &self.hubs[&full(name)]
    }

    /// Crashes a node: its endpoints vanish (peers see `NodeDown`) and its hub dies without a
    /// word.
    pub async fn crash(&mut self, name: &str) {
        self.net.crash(&full(name)).expect("crash");
        if let Some(hub) = self.hubs.remove(&full(name)) {
            hub.actor().kill();
            wait_until("the crashed hub is dead", || !hub.is_alive()).await;
        }
    }

    /// Restarts a crashed node with a new boot token and a fresh hub (on its old data
    /// directory, with auto-recovery).
    pub async fn restart(&mut self, name: &str) -> Hub {
        let node = self.net.restart(&full(name)).expect("restart");
        self.spawn(name, node).await
    }

    /// The live nodes.
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

    /// Holds every frame of `kind` sent to `to` in the router.
    pub fn hold(&self, kind: &'static str, to: &str) {
        let to = full(to);
        self.net
            .hold_frames(Some(Arc::new(move |_, dest, msg: &WireMsg| {
                dest == to && msg.kind() == kind
            })));
    }

    /// Waits until the router holds a frame.
    pub async fn wait_held(&self) {
        wait_until("the request is held", || self.net.held_frames() >= 1).await;
    }

    /// What every live hub shows, as the simulator sees its nodes.
    pub fn node_views(&self) -> Vec<NodeView> {
        self.hubs.values().map(NodeView::of).collect()
    }

    /// Every live hub's registry as `id -> node_pids`.
    pub fn views(&self) -> Vec<BTreeMap<ChildId, BTreeMap<NodeName, Pid>>> {
        self.node_views().into_iter().map(|v| v.registry).collect()
    }

    /// Registries identical on every node and true to what runs where (the simulator's
    /// `registries_agree`), holding exactly `ids`, each child running exactly once, on its ring
    /// owner among the live nodes (`each_once_on_its_owner`).
    pub fn converged(&self, ids: &BTreeSet<ChildId>) -> Result<(), String> {
        let views = self.node_views();
        registries_agree(&views).map_err(|v| v.to_string())?;
        each_once_on_its_owner(&views, &self.names()).map_err(|v| v.to_string())?;
        let held: BTreeSet<&ChildId> = views
            .first()
            .map(|v| v.registry.keys().collect())
            .unwrap_or_default();
        if held != ids.iter().collect() {
            return Err(format!(
                "registry holds {} children, expected {}",
                held.len(),
                ids.len()
            ));
        }
        Ok(())
    }

    /// Starts `n` counters named `prefix<i>` through `via` and waits until the cluster has
    /// converged on them; their ids.
    pub async fn start_converged(&self, via: &str, prefix: &str, n: usize) -> BTreeSet<ChildId> {
        let specs = specs(prefix, n);
        let all = ids(&specs);
        self.hub(via)
            .start_children(specs, process_hub::StartOptions::new())
            .await
            .unwrap();
        self.wait_converged(&all, &format!("{n} children started through {via}"))
            .await;
        all
    }

    pub async fn wait_converged(&self, ids: &BTreeSet<ChildId>, context: &str) {
        wait_for(&format!("convergence ({context})"), || self.converged(ids)).await;
    }

    /// Where each child runs, from the supervisors: `id -> node -> pid` of the children a node
    /// runs and its own registry copy binds to it there.
    fn running_pids(&self) -> BTreeMap<ChildId, BTreeMap<NodeName, Pid>> {
        let mut out: BTreeMap<ChildId, BTreeMap<NodeName, Pid>> = BTreeMap::new();
        for view in self.node_views() {
            for (id, pid) in &view.running {
                if view
                    .registry
                    .get(id)
                    .is_some_and(|n| n.contains_key(&view.node))
                {
                    out.entry(id.clone())
                        .or_default()
                        .insert(view.node.clone(), *pid);
                }
            }
        }
        out
    }

    /// Where each child runs (by node name without `@test`), from the hubs' own supervisors
    /// (not the registry copies).
    pub fn running(&self) -> BTreeMap<ChildId, Vec<String>> {
        self.running_pids()
            .into_iter()
            .map(|(id, nodes)| (id, nodes.into_keys().map(|n| short(&n)).collect()))
            .collect()
    }

    /// The children that run on `name` and nowhere else.
    pub fn running_only_on(&self, name: &str) -> BTreeSet<ChildId> {
        self.running()
            .into_iter()
            .filter(|(_, nodes)| nodes.len() == 1 && nodes[0] == name)
            .map(|(id, _)| id)
            .collect()
    }

    /// Each of `ids` runs exactly once, on a node other than `gone`.
    pub fn assert_each_runs_once_off(&self, ids: &BTreeSet<ChildId>, gone: &str) {
        let running = self.running();
        for id in ids {
            let nodes = running.get(id).map(Vec::as_slice).unwrap_or_default();
            assert!(
                nodes.len() == 1 && nodes[0] != gone,
                "{id} runs on {nodes:?}"
            );
        }
    }

    /// Every id in `expected` runs exactly once in the cluster and nothing in `dead` runs (the
    /// simulator's `declared_run_as_decided`, with `expected` as the declared list).
    pub fn exactly(
        &self,
        expected: &BTreeSet<ChildId>,
        dead: &BTreeSet<ChildId>,
    ) -> Result<(), String> {
        if let Some(id) = expected.intersection(dead).next() {
            return Err(format!("{id} is expected both to run and not to run"));
        }
        let durable: BTreeSet<ChildId> = expected.union(dead).cloned().collect();
        declared_run_as_decided(&self.running_pids(), expected, &durable, dead)
            .map_err(|v| v.to_string())
    }

    pub async fn wait_exactly(
        &self,
        expected: &BTreeSet<ChildId>,
        dead: &BTreeSet<ChildId>,
        what: &str,
    ) {
        wait_for(what, || self.exactly(expected, dead)).await;
    }

    /// Every live node's declared version.
    pub fn versions(&self) -> Vec<u64> {
        self.hubs
            .values()
            .map(|h| h.declared_children().unwrap().version)
            .collect()
    }

    pub async fn wait_versions(&self, version: u64) {
        wait_until(
            &format!("every node holds declared version {version}"),
            || self.versions().iter().all(|v| *v == version),
        )
        .await;
    }

    /// Declares `all` through `on` (the list reaches version `version` everywhere) and waits
    /// until each runs once.
    pub async fn declare_all(&self, on: &str, all: &[ChildSpec], version: u64) {
        self.hub(on)
            .start_children(all.to_vec(), super::durable())
            .await
            .unwrap();
        self.wait_versions(version).await;
        self.wait_exactly(&ids(all), &BTreeSet::new(), "declared")
            .await;
    }

    /// Crashes `away`, then stops `stopped` through `on` while it is down (the list reaches
    /// `version` on the others); returns the stopped ids.
    pub async fn stop_while_away(
        &mut self,
        away: &str,
        on: &str,
        stopped: &[ChildSpec],
        version: u64,
    ) -> BTreeSet<ChildId> {
        self.crash(away).await;
        self.wait_members().await;
        let stopped: Vec<ChildId> = stopped.iter().map(|s| s.id.clone()).collect();
        self.hub(on)
            .stop_children(stopped.clone(), process_hub::StopOptions::new())
            .await
            .unwrap();
        self.wait_versions(version).await;
        stopped.into_iter().collect()
    }

    /// The nodes whose reconcile rounds stopped an undeclared running child so far.
    pub fn stopped_undeclared_on(&self) -> BTreeSet<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                HookEvent::ReconcileRound { node, stats, .. } if stats.stopped_undeclared > 0 => {
                    Some(node.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Reconcile rounds `name` has run that were not parked (a parked round does nothing).
    pub fn rounds_on(&self, name: &str) -> usize {
        let node = full(name);
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, HookEvent::ReconcileRound { node: n, parked: false, .. } if *n == node))
            .count()
    }

    /// Waits until `name` has run `more` rounds beyond the `seen` counted earlier.
    pub async fn wait_rounds(&self, name: &str, seen: usize, more: usize) {
        wait_until(&format!("{more} more rounds on {name}"), || {
            self.rounds_on(name) >= seen + more
        })
        .await;
    }

    pub fn hooked(&self, pred: impl Fn(&HookEvent) -> bool) -> bool {
        self.events.lock().unwrap().iter().any(pred)
    }
}

/// A child kind whose start the test controls with a gate: while the gate is closed, the start
/// of a `gated` child fails and the start of a `gated-slow` child waits for the gate to open
/// (its answer is late: a start lost, or stuck, on its way).
#[derive(Clone)]
pub struct Gated {
    open: Arc<AtomicBool>,
    wait: bool,
}

/// `Gated` takes no messages.
pub enum GatedMsg {}

impl ractor::Message for GatedMsg {}

impl ractor::Actor for Gated {
    type Msg = GatedMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        while self.wait && !self.open.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if self.open.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("the test keeps the gate closed".into())
        }
    }
}

/// The default kinds plus `gated` and `gated-slow` behind `gate` (see [`Gated`]).
pub fn gated_kinds(gate: &Arc<AtomicBool>) -> ChildKinds {
    let mut kinds = process_hub_actors::default_kinds();
    let open = gate.clone();
    kinds.register("gated", Gated { open, wait: false });
    let open = gate.clone();
    kinds.register("gated-slow", Gated { open, wait: true });
    kinds
}

/// The first id `{prefix}{i}` that `owner` owns in a ring of `members` (names without host).
pub fn id_owned_by(owner: &str, members: &[&str], prefix: &str) -> ChildId {
    let ring = HashRing::new(members.iter().map(|m| full(m)));
    (0..)
        .map(|i| ChildId::from(format!("{prefix}{i}")))
        .find(|id| ring.owner(id) == Some(&full(owner)))
        .expect("some id is owned by every member")
}

/// The node name of `name`: `name@test`.
pub fn full(name: &str) -> NodeName {
    format!("{name}@test")
}

/// `name` of a node name `name@test`.
fn short(node: &str) -> String {
    node.strip_suffix("@test").unwrap_or(node).to_owned()
}

/// `n` counter children `{prefix}0`, `{prefix}1`, ...
pub fn specs(prefix: &str, n: usize) -> Vec<ChildSpec> {
    (0..n)
        .map(|i| ChildSpec::new(format!("{prefix}{i}"), "counter"))
        .collect()
}

pub fn ids(specs: &[ChildSpec]) -> BTreeSet<ChildId> {
    specs.iter().map(|s| s.id.clone()).collect()
}

/// Shuts every live hub down.
pub async fn stop_all(cluster: &TestCluster) {
    for hub in cluster.hubs.values() {
        let _ = hub.shutdown().await;
    }
}

pub fn remove_dir(path: &Path) {
    if path.exists() {
        std::fs::remove_dir_all(path).unwrap();
    }
}
