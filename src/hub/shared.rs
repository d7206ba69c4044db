//! What a hub's actors share ([`HubShared`]).
//!
//! Nothing here is an actor: it is the config, the registry read view (reads never go through an
//! actor, like ETS), hooks, the event bus, the kind table, the current refs of the sibling actors
//! (a restarted actor has a new ref, so siblings look it up at send time) and the membership as
//! the Coordinator last published it: the members and the one placement ring every actor reads.
//!
//! Each table an actor writes lives with that actor, and `HubShared` holds it as a field: the
//! hot moves, the loads and the partition flags with the Coordinator
//! (`hub/coordinator/{handoffs,loads,partition_flags}.rs`), the replica stops and the roles told
//! with the Registry (`hub/registry/{replica_stops,told_roles}.rs`), the typed calls and the
//! monitors with their features (`hub/typed/calls.rs`, `hub/monitors/table.rs`), the recovery
//! state with the DeclaredLeader (`hub/declared/recovery_shared.rs`). What a feature does with
//! them is an `impl HubShared` block in the feature's own files, which nobody imports (callers
//! use the methods): handing work to a sibling actor (`hub/siblings.rs`), monitors
//! (`hub/monitors/mod.rs`), hot moves (`hub/coordinator/handoff_routing.rs`), roles and replica
//! stops (`hub/registry/{roles,replication}.rs`). So a file this one names never names
//! `HubShared` back, and no import cycle runs between this file and the actors' folders.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use dashmap::DashMap;
use ractor::{ActorCell, ActorRef};

use crate::clock::Clock;
use crate::cluster::transport::{Network, Transport};
use crate::config::ProcessHub;
use crate::core::declared::state::choose_leader;
use crate::core::placement::HashRing;
use crate::events::EventBus;
use crate::hooks::Hooks;
use crate::kinds::ChildKinds;
use crate::model::{ChildId, NodeName};
use crate::storage::Storage;

use super::declared::recovery_shared::{DeclaredMedium, RecoveryShared};
use super::protocol::{ChildSupMsg, CoordinatorMsg, DeclaredMsg, ReconcilerMsg, RegistryMsg};
use super::simulation;

/// The most child casts and calls handled at once on one node: each runs in a task of its
/// own, and a peer can send them faster than children answer. Beyond it a call is answered
/// `overloaded` and a cast is dropped (both logged and counted).
pub(crate) const MAX_CONCURRENT_COMMANDS: usize = 4096;

/// What a hub takes from its surroundings besides its config and network: the time of day and,
/// in the simulator, a simulated disk for the declared store and injected bugs.
#[derive(Clone, Default)]
pub(crate) struct Environment {
    pub clock: Clock,
    #[cfg(feature = "sim")]
    pub declared_disk: Option<Arc<crate::storage::SimulatedDisk>>,
    /// The simulator's disk for a `durable` registry (none: the configured backend).
    #[cfg(feature = "sim")]
    pub registry_disk: Option<Arc<crate::storage::SimulatedDisk>>,
    #[cfg(feature = "sim")]
    pub bugs: BTreeSet<simulation::InjectedBug>,
    #[cfg(feature = "sim")]
    pub observer: Option<simulation::Observer>,
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment")
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Environment {
    /// The registry storage when the environment decides it (the simulator's durable disk).
    pub fn registry_storage(&self) -> Option<Arc<dyn Storage>> {
        #[cfg(feature = "sim")]
        if let Some(disk) = &self.registry_disk {
            return Some(Arc::new(crate::storage::SimulatedDurableStorage::open(
                disk.clone(),
                self.clock.clone(),
            )));
        }
        None
    }

    /// Where the declared store lives when the environment decides it (the simulator's disk).
    pub fn declared_medium(&self) -> Option<DeclaredMedium> {
        #[cfg(feature = "sim")]
        if let Some(disk) = &self.declared_disk {
            return Some(DeclaredMedium::Simulated(disk.clone()));
        }
        None
    }
}

/// The membership as last published by the Coordinator.
struct Membership {
    members: Vec<NodeName>,
    ring: Arc<HashRing>,
    /// Peers down past their grace, not back and not reaped yet ([`HubShared::is_gone`]).
    gone: BTreeSet<NodeName>,
}

impl Membership {
    fn alone(node: &NodeName) -> Self {
        Self {
            members: vec![node.clone()],
            ring: Arc::new(HashRing::new([node.clone()])),
            gone: BTreeSet::new(),
        }
    }
}

/// The refs of the hub's actors as of now.
#[derive(Default)]
pub(crate) struct ActorRefs {
    pub registry: Option<ActorRef<RegistryMsg>>,
    pub child_supervisor: Option<ActorRef<ChildSupMsg>>,
    pub coordinator: Option<ActorRef<CoordinatorMsg>>,
    pub declared_leader: Option<ActorRef<DeclaredMsg>>,
    pub reconciler: Option<ActorRef<ReconcilerMsg>>,
}

/// State shared by a hub's actors and its handles.
pub(crate) struct HubShared {
    pub config: ProcessHub,
    pub node: NodeName,
    pub storage: Arc<dyn Storage>,
    pub kinds: ChildKinds,
    pub hooks: Hooks,
    pub events: EventBus,
    pub refs: RwLock<ActorRefs>,
    /// The members and the ring as the Coordinator last published them.
    membership: RwLock<Membership>,
    /// The actors of this node's children, for `Hub::local_child`.
    pub local_children: DashMap<ChildId, ActorCell, crate::model::TableHasher>,
    /// The role each local replica was last told (`redundancy_signal`).
    pub(crate) told_roles: crate::hub::registry::told_roles::ToldRoles,
    /// Replicated children being stopped on purpose (not to be re-created meanwhile).
    pub(crate) replica_stops: crate::hub::registry::replica_stops::ReplicaStops,
    /// Durable children and orphan recovery, when `auto_recovery` is on.
    pub recovery: Option<Arc<RecoveryShared>>,
    /// The registry's last failed write until one succeeds (the Registry notes every commit).
    pub registry_fault: crate::storage::write_fault::WriteFaultLatch,
    /// Counts the registry's commits, bumped once each is visible to readers: a reader that
    /// saw the same count twice saw no write in between (a reconcile round with nothing to do
    /// skips its scan while the count, the declared version and the members stay the same).
    pub registry_generation: std::sync::atomic::AtomicU64,
    /// The node's network when the hub spans nodes (`HubBuilder::network`); `None`: one node.
    pub network: Option<Arc<dyn Network>>,
    /// This hub's endpoint on the network, opened by the Coordinator in `pre_start` (a restarted
    /// Coordinator re-opens it). The Registry broadcasts its deltas through it.
    pub transport: RwLock<Option<Arc<dyn Transport>>>,
    /// `true` when every member has delivered its registry to this node (`cluster_settled`).
    pub settled: tokio::sync::watch::Sender<bool>,
    /// How many members the last published membership has, this node included: what
    /// `Hub::wait_for_members` waits on, woken by membership changes rather than polling.
    pub member_count: tokio::sync::watch::Sender<usize>,
    /// The time of day (row timestamps, TTL expiry). The memory and simulated backends count
    /// their TTLs on it too; the on-disk backends (`lmdb`, `durable`) count theirs on the
    /// system clock.
    pub clock: Clock,
    /// Peer input refused since the hub started, by reason.
    pub refusals: crate::telemetry::refusals::Refusals,
    /// Child casts and calls being handled on this node (one task each), at most
    /// [`MAX_CONCURRENT_COMMANDS`].
    pub command_slots: Arc<tokio::sync::Semaphore>,
    /// Typed calls this node waits on (`ChildRef::call` to a child on a peer).
    pub typed: crate::hub::typed::calls::TypedCalls,
    /// Summary queries this node waits on (`GET /v1/cluster`), and its answers in progress.
    pub summaries: crate::hub::summary::SummaryQueries,
    /// Monitors set on this node and watches on its children (`Hub::monitor`).
    pub monitors: crate::hub::monitors::table::Monitors,
    /// Hot moves: local children moving away, and states for children about to start here.
    pub handoffs: crate::hub::coordinator::handoffs::Handoffs,
    /// The members' loads, for `Distribution::LoadBalanced`.
    pub loads: crate::hub::coordinator::loads::Loads,
    /// Partition mode and the membership lock (`Hub::is_partitioned`, `Hub::is_locked`).
    pub partition: crate::hub::coordinator::partition_flags::PartitionFlags,
    /// How far this node's registry copy is behind each peer's (the sync lag metric).
    pub sync_lag: std::sync::Mutex<crate::core::sync_lag::SyncLag>,
    /// Calls and casts to children made on this node, by outcome (metrics).
    pub messages: crate::telemetry::messaging::MessageMetrics,
    /// The children this node ran before it booted, as its disk backend kept their rows:
    /// held from its redistribution passes until it may restore them (`core::boot_rows`).
    /// Set by the Registry at first boot; ended by the Coordinator.
    pub boot_hold: std::sync::Mutex<Option<crate::core::boot_rows::BootHold>>,
    /// Bugs the simulator injected into this hub.
    #[cfg(feature = "sim")]
    pub bugs: BTreeSet<simulation::InjectedBug>,
    /// The simulator's observer of this hub.
    #[cfg(feature = "sim")]
    pub observer: Option<simulation::Observer>,
    epoch: tokio::time::Instant,
}

impl HubShared {
    /// A hub on one node, for unit tests.
    #[cfg(test)]
    pub fn new(
        config: ProcessHub,
        storage: Arc<dyn Storage>,
        kinds: ChildKinds,
        hooks: Hooks,
    ) -> Self {
        Self::with_network(config, storage, kinds, hooks, None)
    }

    /// A hub on `network` (or on one node with `None`). With a network the node's name is the
    /// network's: the config's `node_name` is ignored (and logged when it differs from it), so
    /// one `ClusterNode` cannot host hubs that disagree about who they are.
    pub fn with_network(
        config: ProcessHub,
        storage: Arc<dyn Storage>,
        kinds: ChildKinds,
        hooks: Hooks,
        network: Option<Arc<dyn Network>>,
    ) -> Self {
        let node = match &network {
            Some(net) => {
                if net.local_node() != &config.node_name {
                    tracing::info!(config = %config.node_name, network = %net.local_node(),
                        "node_name is taken from the network");
                }
                net.local_node().clone()
            }
            None => config.node_name.clone(),
        };
        let messages = crate::telemetry::messaging::MessageMetrics::new(
            &crate::telemetry::metrics::HubLabels::new(&config.hub_id, &node),
        );
        let mut events = EventBus::new();
        events.set_node(node.clone());
        Self {
            membership: RwLock::new(Membership::alone(&node)),
            config,
            node,
            storage,
            kinds,
            hooks,
            events,
            refs: RwLock::new(ActorRefs::default()),
            local_children: DashMap::default(),
            told_roles: crate::hub::registry::told_roles::ToldRoles::default(),
            replica_stops: crate::hub::registry::replica_stops::ReplicaStops::default(),
            recovery: None,
            registry_fault: crate::storage::write_fault::WriteFaultLatch::default(),
            registry_generation: std::sync::atomic::AtomicU64::new(0),
            // One node is settled by definition; a clustered hub is settled once its peers'
            // registries arrived (a lone clustered node also counts as settled).
            settled: tokio::sync::watch::Sender::new(true),
            member_count: tokio::sync::watch::Sender::new(1),
            transport: RwLock::new(None),
            network,
            clock: Clock::system(),
            refusals: crate::telemetry::refusals::Refusals::default(),
            command_slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_COMMANDS)),
            typed: crate::hub::typed::calls::TypedCalls::default(),
            summaries: crate::hub::summary::SummaryQueries::default(),
            monitors: crate::hub::monitors::table::Monitors::default(),
            handoffs: crate::hub::coordinator::handoffs::Handoffs::default(),
            loads: crate::hub::coordinator::loads::Loads::default(),
            partition: crate::hub::coordinator::partition_flags::PartitionFlags::default(),
            sync_lag: Default::default(),
            messages,
            boot_hold: std::sync::Mutex::new(None),
            #[cfg(feature = "sim")]
            bugs: BTreeSet::new(),
            #[cfg(feature = "sim")]
            observer: None,
            epoch: tokio::time::Instant::now(),
        }
    }

    /// The sync lag's state (plain data: a panic elsewhere cannot leave it half-updated).
    pub(crate) fn sync_lag(&self) -> std::sync::MutexGuard<'_, crate::core::sync_lag::SyncLag> {
        self.sync_lag.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How far this node's registry copy is behind each peer's, now (see
    /// [`crate::core::sync_lag`]): 0 while every peer's stream is in sync.
    pub fn sync_lags(&self) -> Vec<(NodeName, std::time::Duration)> {
        let now = self.mono_ms();
        let grace = crate::core::sync_lag::grace_ms(self.config.sync_period_ms());
        let peers: Vec<NodeName> = self
            .members()
            .into_iter()
            .filter(|n| *n != self.node)
            .collect();
        let mut lag = self.sync_lag();
        peers
            .into_iter()
            .map(|peer| {
                let ms = lag.lag_ms(&peer, now, grace);
                (peer, std::time::Duration::from_millis(ms))
            })
            .collect()
    }

    /// The children held by the boot hold (`core::boot_rows`), empty once it ended.
    pub fn boot_held(&self) -> BTreeSet<ChildId> {
        self.boot_hold
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|hold| hold.hosted.clone())
            .unwrap_or_default()
    }

    /// Whether the simulator injected `bug` into this hub (never, without the `sim` feature).
    #[inline]
    pub fn has_bug(&self, bug: simulation::InjectedBug) -> bool {
        #[cfg(feature = "sim")]
        return self.bugs.contains(&bug);
        #[cfg(not(feature = "sim"))]
        {
            let _ = bug;
            false
        }
    }

    /// Whether this node's load includes its host's figures (scheduler, run queue, memory):
    /// only where a node is alone in its process, as on the networks that serve remote
    /// clients. Nodes sharing a process (the in-process network, the simulator) would all
    /// report the same host, so they report their children alone.
    pub fn measures_host_load(&self) -> bool {
        self.network
            .as_ref()
            .is_some_and(|n| n.serves_remote_clients())
    }

    /// The members that may take new children: those on the placement ring (a node leaving,
    /// this one included, is off it already).
    pub fn placeable_members(&self) -> Vec<NodeName> {
        let ring = self.ring();
        self.members()
            .into_iter()
            .filter(|n| ring.contains(n))
            .collect()
    }

    /// With `Distribution::LoadBalanced`, chooses the nodes of every child of a start that
    /// does not name its own (`core::load`), once, where the start enters the hub: the choice
    /// is then carried like a guided placement. Left to the ring while there are fewer members
    /// than the replication factor.
    pub fn place_by_load(
        &self,
        specs: &[crate::model::ChildSpec],
        opts: &mut crate::types::StartOptions,
    ) {
        opts.placed_by_load.clear();
        if self.config.distribution != crate::config::Distribution::LoadBalanced {
            return;
        }
        let members = self.placeable_members();
        let k = self.config.replication_factor.max(1);
        if members.len() < k {
            return;
        }
        let unmapped = specs
            .iter()
            .map(|s| &s.id)
            .filter(|id| !opts.child_mapping.contains_key(*id));
        for (id, nodes) in self.loads.choose(unmapped, &members, k) {
            if nodes.len() == k {
                opts.placed_by_load.insert(id.clone());
                opts.child_mapping.insert(id, nodes);
            }
        }
    }

    /// A child placed by load whose recorded nodes are all gone (the Reconciler bringing it
    /// back after an outage) starts on its ring owners and is recorded there, as a
    /// re-placement records it (`core::redistribution`).
    pub fn refresh_load_placements(&self, ring: &HashRing, opts: &mut crate::types::StartOptions) {
        let k = self.config.replication_factor.max(1);
        for id in &opts.placed_by_load {
            let Some(nodes) = opts.child_mapping.get_mut(id) else {
                continue;
            };
            if nodes.iter().any(|n| *n == self.node || ring.contains(n)) {
                continue;
            }
            let owners: Vec<NodeName> = ring.owners(id, k).into_iter().cloned().collect();
            if owners.len() == k {
                *nodes = owners;
            }
        }
    }

    /// Tells the simulator's observer, if any, about `observation` (built only when one exists).
    #[inline]
    pub fn observe(&self, observation: impl FnOnce() -> simulation::Observation) {
        #[cfg(feature = "sim")]
        if let Some(observer) = &self.observer {
            observer(observation());
        }
        #[cfg(not(feature = "sim"))]
        let _ = observation;
    }

    /// Monotonic milliseconds since the hub was created (restart intensity, timers).
    pub fn mono_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The Registry, unless it is restarting (every write goes through it).
    pub fn registry(&self) -> Option<ActorRef<RegistryMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .registry
            .clone()
    }

    /// The ChildSupervisor, unless it is restarting (it starts and stops this node's children).
    pub fn child_supervisor(&self) -> Option<ActorRef<ChildSupMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .child_supervisor
            .clone()
    }

    /// The Coordinator, unless it is restarting (it routes starts, stops and child messages).
    pub fn coordinator(&self) -> Option<ActorRef<CoordinatorMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .coordinator
            .clone()
    }

    /// The Reconciler: with auto-recovery, unless it is restarting.
    pub fn reconciler(&self) -> Option<ActorRef<ReconcilerMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .reconciler
            .clone()
    }

    /// The DeclaredLeader: with auto-recovery, unless it is restarting.
    pub fn declared_leader(&self) -> Option<ActorRef<DeclaredMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .declared_leader
            .clone()
    }

    /// The hub's endpoint, when clustered and open.
    pub fn transport(&self) -> Option<Arc<dyn Transport>> {
        self.transport
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the hub's endpoint.
    pub fn set_transport(&self, transport: Option<Arc<dyn Transport>>) {
        *self.transport.write().unwrap_or_else(|e| e.into_inner()) = transport;
    }

    /// Whether the hub spans nodes.
    pub fn clustered(&self) -> bool {
        self.network.is_some()
    }

    /// Publishes the membership: `members` (sorted, this node included) and the placement ring
    /// the Coordinator routes with. Only the Coordinator calls it; every other actor reads.
    pub fn publish_membership(&self, members: Vec<NodeName>, ring: HashRing) {
        let count = members.len();
        {
            let mut membership = self.membership.write().unwrap_or_else(|e| e.into_inner());
            membership.members = members;
            membership.ring = Arc::new(ring);
        }
        // Waiters wake only when the count changes.
        self.member_count.send_if_modified(|seen| {
            let changed = *seen != count;
            *seen = count;
            changed
        });
        self.tell_roles(None);
    }

    /// Waits until the published membership has at least `wanted` members (this node
    /// included), at most `timeout`; answers the count it saw. Shared by the handle's
    /// `wait_for_members` and the root actor's `HubMsg::WaitForMembers`.
    pub(crate) async fn wait_for_members(
        &self,
        wanted: usize,
        timeout: std::time::Duration,
    ) -> Result<usize, crate::types::WaitForMembersTimeout> {
        let mut count = self.member_count.subscribe();
        let reached = tokio::time::timeout(timeout, count.wait_for(|n| *n >= wanted))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|seen| *seen);
        // The sender lives as long as the hub's shared state, which this wait borrows: a
        // closed channel cannot happen, but it would answer as a timeout rather than panic.
        reached.ok_or_else(|| crate::types::WaitForMembersTimeout {
            wanted,
            seen: *self.member_count.borrow(),
            waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        })
    }

    fn membership(&self) -> std::sync::RwLockReadGuard<'_, Membership> {
        self.membership.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The members (sorted, this node included).
    pub fn members(&self) -> Vec<NodeName> {
        self.membership().members.clone()
    }

    /// Whether `node` is a member now.
    pub fn is_member(&self, node: &str) -> bool {
        self.membership().members.iter().any(|n| n == node)
    }

    /// Marks `node` gone for good (its grace ran out: the Coordinator) or not any more (it is
    /// up again: the Coordinator; its reap is applied: the Registry).
    pub(crate) fn set_gone(&self, node: &NodeName, gone: bool) {
        let mut membership = self.membership.write().unwrap_or_else(|e| e.into_inner());
        if gone {
            membership.gone.insert(node.clone());
        } else {
            membership.gone.remove(node);
        }
    }

    /// Whether `node` went down and stayed down past its grace, its reap not sent yet: its
    /// bindings run nothing (the planner already counts them so), and the Registry drops them
    /// from a row it writes anyway, so that the reap after a failover finds little left to
    /// unbind.
    pub fn is_gone(&self, node: &str) -> bool {
        self.membership().gone.contains(node)
    }

    /// The placement ring: the Coordinator's, which drops a peer as soon as it says goodbye
    /// (members keep it until it goes down), so every actor places children alike.
    pub fn ring(&self) -> Arc<HashRing> {
        self.membership().ring.clone()
    }

    /// The ring owner of a child (this node when the ring is empty).
    pub fn owner_of(&self, ring: &HashRing, id: &ChildId) -> NodeName {
        ring.owner(id).cloned().unwrap_or_else(|| self.node.clone())
    }

    /// Where child `id` belongs, given its metadata: a guided child's own node
    /// (`core::guided`; while all its nodes are gone and it may not fall back, its first node,
    /// which nothing reaches until it comes back), else its ring owner.
    pub fn placement_of(
        &self,
        ring: &HashRing,
        id: &ChildId,
        metadata: Option<&crate::model::Metadata>,
    ) -> NodeName {
        use crate::core::guided::{Guided, Owner};
        let Some(guided) = metadata.and_then(Guided::of) else {
            return self.owner_of(ring, id);
        };
        let is_member = |n: &NodeName| *n == self.node || ring.contains(n);
        match guided.owner(is_member, ring.owner(id)) {
            Some(Owner::Node(node)) => node.clone(),
            _ => guided.nodes[0].clone(),
        }
    }

    /// The nodes that must run child `id` given its metadata, the one that would be active
    /// first: [`Self::placement_of`] alone with a replication factor of 1, else its owners
    /// (`core::replication::owners_of`).
    pub fn owners_of(
        &self,
        ring: &HashRing,
        id: &ChildId,
        metadata: Option<&crate::model::Metadata>,
    ) -> Vec<NodeName> {
        let factor = self.config.replication_factor;
        if factor <= 1 || ring.is_empty() {
            return vec![self.placement_of(ring, id, metadata)];
        }
        let is_member = |n: &NodeName| *n == self.node || ring.contains(n);
        let owners = crate::core::replication::owners_of(ring, id, factor, metadata, is_member);
        if owners.is_empty() {
            return vec![self.placement_of(ring, id, metadata)];
        }
        owners
    }

    /// The nodes running child `id` (`running_on`), best-ranked first (the first reachable one
    /// is where messages go), with each one's role as this node sees it now: the replica of the
    /// first owner that is this node or a member is active (`core::replication`).
    pub fn replica_roles<'a>(
        &self,
        ring: &HashRing,
        id: &ChildId,
        metadata: Option<&crate::model::Metadata>,
        running_on: impl IntoIterator<Item = &'a NodeName>,
    ) -> Vec<(NodeName, crate::core::replication::Role)> {
        use crate::core::replication::{active_owner, ranked, role_of};
        let owners = self.owners_of(ring, id, metadata);
        let ranked = ranked(&owners, running_on);
        let active = active_owner(&owners, |n| n == self.node || self.is_member(n));
        let model = if self.has_bug(simulation::InjectedBug::EveryReplicaActive) {
            crate::config::ReplicationModel::ActiveActive
        } else {
            self.config.replication_model
        };
        ranked
            .iter()
            .map(|n| (n.clone(), role_of(n, active, model)))
            .collect()
    }

    /// Refuses a requested start whose kind this node does not know (kinds are registered on
    /// every node), listing the kinds it knows: checked where the request enters, so such a
    /// child is never declared nor sent to a node.
    pub fn check_kind(
        &self,
        spec: &crate::model::ChildSpec,
    ) -> Result<(), crate::types::ChildStartError> {
        if self.kinds.contains(&spec.kind) {
            return Ok(());
        }
        Err(crate::types::ChildStartError::UnknownKind {
            kind: spec.kind.clone(),
            known: self.kinds.names(),
        })
    }

    /// Checks a start's `child_mapping` for child `id` against the hub's distribution and the
    /// members now.
    pub fn check_mapping(
        &self,
        ring: &HashRing,
        opts: &crate::types::StartOptions,
        id: &ChildId,
    ) -> Result<(), crate::core::guided::MappingError> {
        let required = self.config.distribution == crate::config::Distribution::Guided;
        let is_member = |n: &NodeName| *n == self.node || ring.contains(n);
        crate::core::guided::check_mapping(
            opts.child_mapping.get(id),
            required,
            self.config.replication_factor,
            opts.guided_fallback,
            is_member,
        )
        .map(|_| ())
    }

    /// Every member but this node.
    pub fn peers(&self) -> Vec<NodeName> {
        self.membership()
            .members
            .iter()
            .filter(|n| **n != self.node)
            .cloned()
            .collect()
    }

    /// Whether this node's view is the whole hub (no peers).
    pub fn alone(&self) -> bool {
        self.peers().is_empty()
    }

    /// The declared-list leader: [`choose_leader`] over the members, with the elector's choice
    /// when there is one (validated: a non-member falls back to the lowest member). On one node,
    /// this node.
    pub fn leader(&self) -> Option<NodeName> {
        let members: BTreeSet<NodeName> = self.membership().members.iter().cloned().collect();
        let elected = self
            .recovery
            .as_ref()
            .and_then(|r| r.elector.get())
            .and_then(|e| e.elect(&members));
        choose_leader(&members, elected.as_deref())
    }

    /// Whether this node leads the declared list.
    pub fn is_leader(&self) -> bool {
        self.leader().as_deref() == Some(self.node.as_str())
    }

    /// Updates the published refs: the HubSupervisor sets an actor's ref once it runs and clears
    /// it when it ends, so a sender finds no ref rather than a dead one.
    pub fn set_refs(&self, f: impl FnOnce(&mut ActorRefs)) {
        f(&mut self.refs.write().unwrap_or_else(|e| e.into_inner()));
    }
}
