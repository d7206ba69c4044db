//! A cluster of in-process hubs with auto-recovery for the recovery tests: each node keeps its
//! data directory across crashes and restarts (like a disk); helpers crash, restart, partition
//! and check where children run (from the supervisors, not the registry copies).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_hub::cluster::in_process::{InProcessCluster, InProcessNode};
use process_hub::storage::BackendConfig;
use process_hub::{
    AutoRecoveryConfig, ChildId, ChildSpec, HookEvent, HookHandler, HookKey, Hub, ManifestLocation,
    NodeName, ProcessHub, StartOptions,
};

pub const DEADLINE: Duration = Duration::from_secs(40);
pub const HUB: &str = "durable";

pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A cluster of hubs with auto-recovery, each node with its own data directory (kept across
/// crashes and restarts, like a disk).
pub struct Durable {
    pub net: InProcessCluster,
    pub root: tempfile::TempDir,
    pub hubs: BTreeMap<String, Hub>,
    pub manifest: Option<PathBuf>,
    /// Hook events of every node, with the node.
    pub events: Arc<Mutex<Vec<HookEvent>>>,
    /// The registry backend of every node (memory unless a test needs rows on disk).
    pub backend: BackendConfig,
    /// The declared-list leader elector of every node (none: the lowest member leads).
    pub elector: Option<Elector>,
    /// The child kinds of every node (`process_hub_actors::default_kinds()` unless a test
    /// registers its own, e.g. a kind whose start it can make fail).
    pub kinds: process_hub::ChildKinds,
    /// `default_timeout` of the nodes spawned from now on (3 s unless a test changes it).
    pub default_timeout: Duration,
}

/// A leader elector as a plain function (the same on every node).
pub type Elector = fn(&BTreeSet<NodeName>) -> Option<NodeName>;

impl Durable {
    pub async fn new(seed: u64, names: &[&str], manifest: bool) -> Self {
        Self::with_backend(seed, names, manifest, BackendConfig::Memory).await
    }

    /// Like [`Durable::new`], every node's registry on `backend`.
    pub async fn with_backend(
        seed: u64,
        names: &[&str],
        manifest: bool,
        backend: BackendConfig,
    ) -> Self {
        Self::with_options(seed, names, manifest, backend, None).await
    }

    /// Like [`Durable::new`] (no manifest, memory registry), every node with `default_timeout`.
    pub async fn with_timeout(seed: u64, names: &[&str], default_timeout: Duration) -> Self {
        let kinds = process_hub_actors::default_kinds();
        let mut d = Self::assemble(seed, &[], false, BackendConfig::Memory, None, kinds).await;
        d.default_timeout = default_timeout;
        for name in names {
            let node = d.net.add_node(full(name)).unwrap();
            d.spawn(name, node).await;
        }
        d.wait_members().await;
        d
    }

    /// Like [`Durable::new`] (no manifest, memory registry), every node with the kinds `kinds`.
    pub async fn with_kinds(seed: u64, names: &[&str], kinds: process_hub::ChildKinds) -> Self {
        Self::assemble(seed, names, false, BackendConfig::Memory, None, kinds).await
    }

    /// Like [`Durable::with_backend`], every node electing its leader with `elector`.
    pub async fn with_options(
        seed: u64,
        names: &[&str],
        manifest: bool,
        backend: BackendConfig,
        elector: Option<Elector>,
    ) -> Self {
        let kinds = process_hub_actors::default_kinds();
        Self::assemble(seed, names, manifest, backend, elector, kinds).await
    }

    async fn assemble(
        seed: u64,
        names: &[&str],
        manifest: bool,
        backend: BackendConfig,
        elector: Option<Elector>,
        kinds: process_hub::ChildKinds,
    ) -> Self {
        let root = tempfile::tempdir().unwrap();
        let manifest = manifest.then(|| root.path().join("off-cluster"));
        let mut cluster = Self {
            net: InProcessCluster::new(seed),
            root,
            hubs: BTreeMap::new(),
            manifest,
            events: Arc::default(),
            backend,
            elector,
            kinds,
            default_timeout: Duration::from_secs(3),
        };
        for name in names {
            let node = cluster.net.add_node(full(name)).unwrap();
            cluster.spawn(name, node).await;
        }
        cluster.wait_members().await;
        cluster
    }

    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    pub fn config(&self, name: &str) -> ProcessHub {
        let recovery = AutoRecoveryConfig {
            reconcile_grace_ms: 600,
            reconcile_interval_ms: 1000,
            remote_manifest: self
                .manifest
                .clone()
                .map(|path| ManifestLocation::LocalPath { path }),
            ..AutoRecoveryConfig::default()
        };
        ProcessHub::builder(HUB)
            .node_name(full(name))
            .data_dir(self.data_dir(name))
            .cluster_timing(
                Duration::from_millis(300),
                Duration::from_millis(100),
                Duration::from_millis(20),
                Duration::from_millis(200),
            )
            .migration_retry(Duration::from_millis(100))
            .default_timeout(self.default_timeout)
            .shutdown_timeout(Duration::from_secs(5))
            .auto_recovery(recovery)
            .registry_backend(self.backend.clone())
            .build()
            .unwrap()
    }

    pub async fn spawn(&mut self, name: &str, node: InProcessNode) -> Hub {
        let events = self.events.clone();
        let record =
            HookHandler::observe("rec", 0, move |e| events.lock().unwrap().push(e.clone()));
        // A crashed node's previous hub may still be releasing its store: retry the open.
        let start = tokio::time::Instant::now();
        let node = Arc::new(node);
        let hub = loop {
            let mut builder =
                Hub::builder(self.config(name), self.kinds.clone()).network(node.clone());
            if let Some(elector) = self.elector {
                builder = builder.elector(elector);
            }
            for key in [
                HookKey::DeclaredTiebreak,
                HookKey::ReconcileRound,
                HookKey::ReconcileDuplicate,
                HookKey::DeclaredParked,
            ] {
                builder = builder.hook(key, record.clone());
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
        self.hubs.insert(name.to_owned(), hub.clone());
        hub
    }

    pub fn hub(&self, name: &str) -> &Hub {
        &self.hubs[name]
    }

    pub async fn crash(&mut self, name: &str) {
        self.net.crash(&full(name)).unwrap();
        if let Some(hub) = self.hubs.remove(name) {
            hub.actor().kill();
            wait_until("the crashed hub is dead", || !hub.is_alive()).await;
        }
    }

    pub async fn restart(&mut self, name: &str) -> Hub {
        let node = self.net.restart(&full(name)).unwrap();
        self.spawn(name, node).await
    }

    pub async fn wait_members(&self) {
        let all: Vec<NodeName> = self.hubs.keys().map(|n| full(n)).collect();
        wait_until("members agree", || {
            self.hubs
                .values()
                .all(|h| h.nodes(true) == all && h.cluster_settled())
        })
        .await;
    }

    /// Where each child runs, from the hubs' own supervisors (not the registry copies).
    pub fn running(&self) -> BTreeMap<ChildId, Vec<String>> {
        let mut out: BTreeMap<ChildId, Vec<String>> = BTreeMap::new();
        for (name, hub) in &self.hubs {
            for entry in hub.process_list(process_hub::ProcessScope::Local) {
                if hub.local_child(&entry.id).is_some() {
                    out.entry(entry.id).or_default().push(name.clone());
                }
            }
        }
        out
    }

    /// Every id in `expected` runs exactly once in the cluster and nothing in `dead` runs.
    pub fn exactly(
        &self,
        expected: &BTreeSet<ChildId>,
        dead: &BTreeSet<ChildId>,
    ) -> Result<(), String> {
        let running = self.running();
        for id in expected {
            match running.get(id).map(Vec::len) {
                Some(1) => {}
                n => return Err(format!("{id} runs {n:?} times")),
            }
        }
        for id in dead {
            if let Some(nodes) = running.get(id) {
                return Err(format!("stopped {id} runs on {nodes:?}"));
            }
        }
        Ok(())
    }

    pub async fn wait_exactly(
        &self,
        expected: &BTreeSet<ChildId>,
        dead: &BTreeSet<ChildId>,
        what: &str,
    ) {
        let start = tokio::time::Instant::now();
        loop {
            match self.exactly(expected, dead) {
                Ok(()) => return,
                Err(e) if start.elapsed() > DEADLINE => panic!("{what}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

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
            .start_children(all.to_vec(), durable())
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
pub fn gated_kinds(gate: &Arc<AtomicBool>) -> process_hub::ChildKinds {
    let mut kinds = process_hub_actors::default_kinds();
    let open = gate.clone();
    kinds.register("gated", Gated { open, wait: false });
    let open = gate.clone();
    kinds.register("gated-slow", Gated { open, wait: true });
    kinds
}

/// The first id `{prefix}{i}` that `owner` owns in a ring of `members` (names without host).
pub fn id_owned_by(owner: &str, members: &[&str], prefix: &str) -> ChildId {
    let ring = process_hub::core::placement::HashRing::new(members.iter().map(|m| full(m)));
    (0..)
        .map(|i| ChildId::from(format!("{prefix}{i}")))
        .find(|id| ring.owner(id) == Some(&full(owner)))
        .expect("some id is owned by every member")
}

pub fn full(name: &str) -> String {
    format!("{name}@test")
}

pub fn specs(prefix: &str, n: usize) -> Vec<ChildSpec> {
    (0..n)
        .map(|i| ChildSpec::new(format!("{prefix}{i}"), "counter"))
        .collect()
}

pub fn ids(specs: &[ChildSpec]) -> BTreeSet<ChildId> {
    specs.iter().map(|s| s.id.clone()).collect()
}

pub fn durable() -> StartOptions {
    StartOptions::new().durable(true)
}

pub async fn stop_all(d: &Durable) {
    for hub in d.hubs.values() {
        let _ = hub.shutdown().await;
    }
}

pub fn remove_dir(path: &Path) {
    if path.exists() {
        std::fs::remove_dir_all(path).unwrap();
    }
}
