//! The `Hub` handle: a cloneable, async front of one running hub.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef, ActorStatus};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::errors::SpawnError;
use crate::cluster::transport::Network;
use crate::config::LeaderElector;
use crate::config::ProcessHub;
use crate::core::declared::list::DeclaredView;
use crate::core::recovery::RecoveryState;
use crate::events::{EventSink, HubEvent, SubscriptionId};
use crate::hooks::{HookError, HookHandler, HookKey, Hooks};
use crate::hub::declared::recovery_shared::RecoveryShared;
use crate::hub::protocol::HubMsg;
use crate::hub::reads;
use crate::hub::shared::Environment;
use crate::hub::supervisor::HubSupervisor;
use crate::hub::HubShared;
use crate::kinds::ChildKinds;
use crate::model::{ChildId, ChildSpec, NodeName, Pid, Row};
use crate::storage::{
    open_backend, BackendConfig, CustomBackend, MemoryStorage, Storage, StorageError,
    StorageFactory,
};
use crate::telemetry::metrics as telemetry;
use crate::types::errors::{
    AwaitNormalTimeout, ChildMessageError, RecoveryError, StartError, StopError,
};
use crate::types::options::{StartOptions, StopOptions};
use crate::types::results::{ChildInfo, ProcessEntry, ProcessScope, StartResult, StopResult};

/// A graceful shutdown did not finish within the hub's `shutdown_timeout_ms`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hub did not shut down within {0:?}; its remaining actors were killed")]
pub struct ShutdownTimedOut(pub Duration);

/// The hub is not running (stopped, or its root actor dropped the request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hub unavailable: {0}")]
pub struct HubUnavailable(pub String);

fn unavailable(node: &NodeName, id: &ChildId) -> ChildMessageError {
    ChildMessageError {
        id: id.clone(),
        node: node.clone(),
        code: "hub_unavailable".into(),
        message: "the hub is not running".into(),
    }
}

/// A running hub. Clone it freely: every clone talks to the same hub.
///
/// Writes (`start_*`, `stop_*`) go through the hub's actors; reads (`child_lookup`,
/// `process_list`, ...) read the registry view directly and never wait on an actor.
#[derive(Clone)]
pub struct Hub {
    shared: Arc<HubShared>,
    root: ActorRef<HubMsg>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("hub_id", &self.shared.config.hub_id)
            .field("node", &self.shared.node)
            .finish()
    }
}

/// Spawns a hub with hooks, subscribers or a supervisor attached before it boots.
pub struct HubBuilder {
    config: ProcessHub,
    kinds: ChildKinds,
    hooks: Vec<(HookKey, HookHandler)>,
    sinks: Vec<EventSink>,
    supervisor: Option<ActorCell>,
    network: Option<Arc<dyn Network>>,
    elector: Option<Arc<dyn LeaderElector>>,
    environment: Environment,
    /// A store given directly, over the config's backend.
    storage: Option<Arc<dyn Storage>>,
    /// Factories of custom backends, by the name a config gives them.
    factories: BTreeMap<String, StorageFactory>,
}

impl HubBuilder {
    /// Keeps the registry in `storage`, whatever the config's `registry_backend` says: any
    /// implementation of [`Storage`] that keeps the contract of [`crate::storage::custom`].
    pub fn registry_storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = Some(storage);
        self
    }

    /// Registers the factory of the custom backend a config names
    /// (`registry_backend = { type = "custom", name, options }`):
    /// the hub calls it at spawn with the config's options, data dir and hub id.
    pub fn storage_backend(mut self, name: impl Into<String>, factory: StorageFactory) -> Self {
        self.factories.insert(name.into(), factory);
        self
    }

    /// Runs the hub in `environment` (the simulator's clock, disk and injected bugs).
    #[cfg(feature = "sim")]
    pub(crate) fn environment(mut self, environment: Environment) -> Self {
        self.environment = environment;
        self
    }

    /// Puts the simulator's known bugs into this hub, so that a test can take one mechanism
    /// away and watch another do the work (say, no migrations: duplicates are left to the
    /// reconcile round). Test builds only.
    #[cfg(feature = "sim")]
    #[doc(hidden)]
    pub fn inject_bugs(
        mut self,
        bugs: impl IntoIterator<Item = crate::hub::simulation::InjectedBug>,
    ) -> Self {
        self.environment.bugs.extend(bugs);
        self
    }

    /// Registers a hook handler before boot (so it also sees the static children).
    pub fn hook(mut self, key: HookKey, handler: HookHandler) -> Self {
        self.hooks.push((key, handler));
        self
    }

    /// Subscribes to events before boot.
    pub fn subscriber(mut self, sink: EventSink) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Links the hub's root actor under `supervisor`: when the hub gives up (its own restart
    /// intensity is exceeded) the supervisor sees `ActorFailed`.
    pub fn supervisor(mut self, supervisor: ActorCell) -> Self {
        self.supervisor = Some(supervisor);
        self
    }

    /// Makes the hub span nodes: it joins the hubs of the same id on `network` (a `ClusterNode`
    /// over ractor_cluster, or an `InProcessNode` in tests), given by value, as an `Arc` or as
    /// an `Arc<dyn Network>` (see [`crate::cluster::IntoNetwork`]). The node's name is then the
    /// network's `local_node()`; the config's `node_name` is ignored. Without a network the hub
    /// runs on one node.
    pub fn network(mut self, network: impl crate::cluster::IntoNetwork) -> Self {
        self.network = Some(network.into_network());
        self
    }

    /// Chooses the declared-list leader with `elector` instead of "the lowest member" (only
    /// with `auto_recovery`). It must answer the same on every node; see [`LeaderElector`].
    pub fn elector(mut self, elector: impl LeaderElector) -> Self {
        self.elector = Some(Arc::new(elector));
        self
    }

    /// Validates the config, opens the registry backend, boots the actor tree and starts the
    /// static children (awaited). Fails, leaving nothing running, if any step fails.
    pub async fn spawn(self) -> Result<(Hub, JoinHandle<()>), SpawnError> {
        self.config.validate()?;
        let environment = self.environment;
        let storage: Arc<dyn Storage> = match (
            environment.registry_storage().or(self.storage),
            &self.config.registry_backend,
        ) {
            (Some(storage), _) => storage,
            (None, BackendConfig::Memory) => {
                Arc::new(MemoryStorage::with_clock(environment.clock.clone()))
            }
            (None, BackendConfig::Custom { name, options }) => {
                let factory = self.factories.get(name).ok_or_else(|| {
                    StorageError::Backend(format!(
                        "registry backend {name:?} has no factory: register one with HubBuilder::storage_backend"
                    ))
                })?;
                factory(&CustomBackend {
                    name,
                    options,
                    data_dir: &self.config.data_dir,
                    hub_id: &self.config.hub_id,
                })?
            }
            (None, backend) => open_backend(backend, &self.config.data_dir, &self.config.hub_id)?,
        };
        let hooks = Hooks::new();
        for (key, handler) in self.hooks {
            hooks.register(key, handler)?;
        }
        let statics = self.config.child_specs.clone();
        let recovery = RecoveryShared::open(&self.config, environment.declared_medium())?;
        if let (Some(recovery), Some(elector)) = (&recovery, self.elector) {
            let _ = recovery.elector.set(elector);
        }
        let mut shared =
            HubShared::with_network(self.config, storage, self.kinds, hooks, self.network);
        shared.recovery = recovery;
        shared.clock = environment.clock;
        shared.events.set_clock(shared.clock.clone());
        #[cfg(feature = "sim")]
        {
            shared.bugs = environment.bugs;
            shared.observer = environment.observer;
        }
        telemetry::describe();
        let labels = telemetry::HubLabels::new(&shared.config.hub_id, &shared.node);
        crate::telemetry::zero::register(&labels);
        shared
            .storage
            .label_metrics(&shared.config.hub_id, &shared.node);
        shared
            .events
            .set_counter(crate::events::metrics::event_counter(labels));
        let shared = Arc::new(shared);
        for sink in self.sinks {
            shared.events.subscribe(sink);
        }

        // No name: ractor's name registry is process-global and many hubs share a process.
        let spawned = match self.supervisor {
            Some(sup) => Actor::spawn_linked(None, HubSupervisor, shared.clone(), sup).await,
            None => Actor::spawn(None, HubSupervisor, shared.clone()).await,
        };
        let (root, join) = spawned.map_err(|e| SpawnError::Actor(e.to_string()))?;
        let hub = Hub { shared, root };
        if !statics.is_empty() && hub.is_partitioned() {
            // A quorum strategy that starts without quorum (a node booting alone into a
            // cluster configured larger): the static children start once quorum is there.
            let waiting = hub.clone();
            tokio::spawn(async move { waiting.start_statics_with_quorum(statics).await });
            return Ok((hub, join));
        }
        if !statics.is_empty() {
            // A static child may have a row from a previous run (durable backends): starting
            // it again is the point, so existing rows are not a refusal here.
            let opts = StartOptions::new().check_existing(false);
            let errors = match hub.start_children(statics, opts).await {
                Ok(result) => result.errors,
                Err(e) => {
                    let _ = hub.shutdown().await;
                    return Err(SpawnError::Actor(format!("static children: {e}")));
                }
            };
            if !errors.is_empty() {
                let _ = hub.shutdown().await;
                return Err(SpawnError::StaticChildren { errors });
            }
        }
        Ok((hub, join))
    }
}

impl Hub {
    /// Starts the config's static children once this node has quorum (a hub that booted
    /// partitioned); failures are logged, as nobody waits for them any more.
    async fn start_statics_with_quorum(self, statics: Vec<ChildSpec>) {
        tracing::info!(children = statics.len(), "static children wait for quorum");
        let mut pending = statics;
        while !pending.is_empty() {
            while self.is_partitioned() {
                if !self.is_alive() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let opts = StartOptions::new().check_existing(false);
            match self.start_children(pending.clone(), opts).await {
                // Quorum was lost again before the start was taken: wait for it again.
                Err(StartError::Partitioned) => continue,
                Err(e) => {
                    tracing::error!(error = %e, "static children not started");
                    return;
                }
                Ok(result) => {
                    // A peer that has not seen quorum come back yet answers `partitioned`, and
                    // one not reachable yet `node_unavailable`: those are asked again.
                    let mut again = std::collections::BTreeSet::new();
                    for e in result.errors {
                        match e.reason {
                            crate::types::errors::ChildStartError::Partitioned
                            | crate::types::errors::ChildStartError::NodeUnavailable { .. }
                            | crate::types::errors::ChildStartError::NodeReceiveTimeout => {
                                again.insert(e.id);
                            }
                            reason => {
                                tracing::error!(child = %e.id, error = %reason, "static child not started")
                            }
                        }
                    }
                    pending.retain(|spec| again.contains(&spec.id));
                    if !pending.is_empty() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
            if !self.is_alive() {
                return;
            }
        }
        tracing::info!("static children started");
    }

    /// A builder, to attach hooks, subscribers or a supervisor before the hub boots.
    pub fn builder(config: ProcessHub, kinds: ChildKinds) -> HubBuilder {
        HubBuilder {
            config,
            kinds,
            hooks: Vec::new(),
            sinks: Vec::new(),
            supervisor: None,
            network: None,
            elector: None,
            environment: Environment::default(),
            storage: None,
            factories: BTreeMap::new(),
        }
    }

    /// Spawns a hub (unsupervised) and returns its handle and the root actor's join handle.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use process_hub::{ChildKinds, Hub, ProcessHub};
    /// let (hub, _join) = Hub::spawn(ProcessHub::new("orders"), ChildKinds::new()).await?;
    /// hub.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn spawn(
        config: ProcessHub,
        kinds: ChildKinds,
    ) -> Result<(Hub, JoinHandle<()>), SpawnError> {
        Self::builder(config, kinds).spawn().await
    }

    /// The state the hub's actors share (typed references and monitors work on it; the
    /// simulator reads the supervisors' truth from it).
    pub(crate) fn shared(&self) -> &Arc<HubShared> {
        &self.shared
    }

    /// The hub's root actor, for the `HubMsg` API.
    pub fn actor(&self) -> ActorRef<HubMsg> {
        self.root.clone()
    }

    /// The hub id.
    pub fn hub_id(&self) -> &str {
        &self.shared.config.hub_id
    }

    /// This node's name.
    pub fn node(&self) -> &NodeName {
        &self.shared.node
    }

    /// The config the hub runs with.
    pub fn config(&self) -> &ProcessHub {
        &self.shared.config
    }

    async fn call<T: Send + 'static>(
        &self,
        build: impl FnOnce(ractor::RpcReplyPort<T>) -> HubMsg,
    ) -> Result<T, String> {
        match self.root.call(build, None).await {
            Ok(ractor::rpc::CallResult::Success(v)) => Ok(v),
            Ok(_) => Err("the hub dropped the request".into()),
            Err(e) => Err(format!("the hub is not running: {e}")),
        }
    }

    /// Starts one child. See [`Hub::start_children`].
    pub async fn start_child(
        &self,
        spec: ChildSpec,
        opts: StartOptions,
    ) -> Result<StartResult, StartError> {
        self.call(|reply| HubMsg::StartChild { spec, opts, reply })
            .await
            .map_err(StartError::HubUnavailable)?
    }

    /// Starts children: validated, deduplicated, checked against the registry
    /// (`check_existing`), delivered in one batch per owner node. Awaited (the default), it
    /// answers once every child is running and recorded, failed, or timed out; with
    /// `on_failure: Rollback` a partial failure stops what did start. A child's failure is an
    /// entry in `errors`, never a hub crash. A durable child declared for good whose start is
    /// not confirmed is in `pending`, not `errors`; a declaration the leader did not answer is
    /// [`StartError::OutcomeUnknown`]. Retrying is safe (docs/api.md, "What an answer
    /// promises").
    pub async fn start_children(
        &self,
        specs: Vec<ChildSpec>,
        opts: StartOptions,
    ) -> Result<StartResult, StartError> {
        let began = std::time::Instant::now();
        let result = self
            .call(|reply| HubMsg::StartChildren { specs, opts, reply })
            .await
            .map_err(StartError::HubUnavailable)?;
        self.labels()
            .request_took(telemetry::START_SECONDS, began.elapsed());
        result
    }

    /// Stops one child. See [`Hub::stop_children`].
    pub async fn stop_child(
        &self,
        id: impl Into<ChildId>,
        opts: StopOptions,
    ) -> Result<StopResult, StopError> {
        let id = id.into();
        self.call(|reply| HubMsg::StopChild { id, opts, reply })
            .await
            .map_err(StopError::HubUnavailable)?
    }

    /// Stops children on the nodes that run them (each gets its shutdown grace, then is
    /// killed) and removes their rows. Unknown ids are `not_found` errors (nothing changed). A
    /// durable child removed from the declared list for good whose instances are not confirmed
    /// stopped is in `pending`, never an error; a removal the leader did not answer is
    /// [`StopError::OutcomeUnknown`]. Retrying is safe (docs/api.md, "What an answer
    /// promises").
    pub async fn stop_children(
        &self,
        ids: Vec<ChildId>,
        opts: StopOptions,
    ) -> Result<StopResult, StopError> {
        let began = std::time::Instant::now();
        let result = self
            .call(|reply| HubMsg::StopChildren { ids, opts, reply })
            .await
            .map_err(StopError::HubUnavailable)?;
        self.labels()
            .request_took(telemetry::STOP_SECONDS, began.elapsed());
        result
    }

    /// Sets the metrics read from this hub's state (children per kind, registry rows, members,
    /// the declared list, recovery, sync lag per peer) to what they are now: a `/metrics`
    /// handler calls it before rendering, so a scrape shows the present without the hub
    /// updating gauges on every change. A no-op without a `metrics` recorder installed.
    pub fn refresh_metrics(&self) {
        if telemetry::enabled() {
            telemetry::set_gauges(&self.labels(), &reads::gauges(&self.shared));
        }
    }

    fn labels(&self) -> telemetry::HubLabels {
        telemetry::HubLabels::new(&self.shared.config.hub_id, &self.shared.node)
    }

    /// How far this node's registry copy is behind each member's, now: the age of the oldest
    /// frame of the peer's registry stream not yet applied here, or how long the peer's next
    /// proof of being in sync (a full sync, a gossip round caught up with) is overdue past one
    /// and a half sync periods. Zero on an idle healthy cluster; it climbs while a peer's
    /// stream is stuck. What `process_hub_sync_lag_seconds` shows.
    pub fn sync_lag(&self) -> std::collections::BTreeMap<NodeName, Duration> {
        self.shared.sync_lags().into_iter().collect()
    }

    /// Peer input this node refused since the hub started, counted by reason (`parts`,
    /// `invalid_child`, `implausible_version`, `overloaded`, `reachability`,
    /// `undecodable_message`): a peer that sends what no healthy node sends (or a typed message
    /// of another version of a child's type) shows here, besides the warn line each refusal
    /// logs.
    pub fn refused_peer_input(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.shared.refusals.snapshot()
    }

    /// The child's spec and where it runs, or `None`.
    pub fn child_lookup(&self, id: &ChildId) -> Option<ChildInfo> {
        reads::child_lookup(&self.shared, id, false)
    }

    /// Like [`Hub::child_lookup`], with the child's metadata.
    pub fn child_lookup_with_metadata(&self, id: &ChildId) -> Option<ChildInfo> {
        reads::child_lookup(&self.shared, id, true)
    }

    /// Every node's pid of the child (empty if unknown).
    pub fn get_pids(&self, id: &ChildId) -> Vec<(NodeName, Pid)> {
        reads::get_pids(&self.shared, id)
    }

    /// The child's first pid, or `None`.
    pub fn get_pid(&self, id: &ChildId) -> Option<Pid> {
        self.get_pids(id).first().map(|(_, p)| *p)
    }

    /// The children (sorted by id), globally or on this node.
    pub fn process_list(&self, scope: ProcessScope) -> Vec<ProcessEntry> {
        reads::process_list(&self.shared, scope)
    }

    /// The whole registry copy of this node.
    pub fn registry_dump(&self) -> BTreeMap<ChildId, Row> {
        reads::registry_dump(&self.shared)
    }

    /// Calls `f` with every row of this node's registry copy, without copying the copy (for
    /// counts and summaries; use [`Hub::registry_dump`] to keep the rows). `f` runs while the
    /// storage is read: keep it short and do not call the hub from it.
    pub fn for_each_row(&self, mut f: impl FnMut(&Row)) {
        self.shared.storage.for_each_row(&mut f);
    }

    /// Calls `f` with where each child of this node's registry copy runs (its id, kind and
    /// node bindings): cheaper than [`Hub::for_each_row`] for counts over the whole registry,
    /// since the registry keeps rows packed and this reads only those fields. Same rules as
    /// [`Hub::for_each_row`].
    pub fn for_each_placement(&self, mut f: impl FnMut(crate::storage::Placement<'_>)) {
        self.shared.storage.for_each_placement(&mut f);
    }

    /// A page of this node's registry copy in id order: the rows with the `limit` smallest ids
    /// after `after`, plus the next one if any, without copying the rest.
    pub fn registry_page(&self, after: Option<&ChildId>, limit: usize) -> Vec<Row> {
        self.shared.storage.page_after(after, limit)
    }

    /// The nodes running child `id` (`running_on`, e.g. [`ChildInfo::nodes`]'s), each with its
    /// role as this node sees it now, in the order messages pick them: the first reachable one
    /// is the active replica. With a replication factor of 1 the one instance is `Active`.
    pub fn replica_roles<'a>(
        &self,
        id: &ChildId,
        metadata: Option<&crate::model::Metadata>,
        running_on: impl IntoIterator<Item = &'a NodeName>,
    ) -> Vec<(NodeName, crate::core::replication::Role)> {
        self.shared
            .replica_roles(&self.shared.ring(), id, metadata, running_on)
    }

    /// The members' loads that this node places new children by
    /// (`Distribution::LoadBalanced`): the leader's latest table, each an average over the
    /// member's reports. Empty with another distribution, or before the first table arrived.
    pub fn load_table(
        &self,
    ) -> std::collections::BTreeMap<NodeName, crate::core::load::LoadSample> {
        self.shared.loads.table()
    }

    /// Children whose metadata `tag` is `tag`.
    pub fn tag_query(&self, tag: &str) -> Vec<ProcessEntry> {
        reads::tag_query(&self.shared, tag)
    }

    /// The hub's members, sorted; with `include_local` this node too.
    pub fn nodes(&self, include_local: bool) -> Vec<NodeName> {
        reads::nodes(&self.shared, include_local)
    }

    /// Whether the hub's root actor is running.
    pub fn is_alive(&self) -> bool {
        self.root.get_status() == ActorStatus::Running
    }

    /// Whether this node is in partition mode: its side of a split has no quorum under the
    /// hub's `partition_tolerance`, so it runs no child and refuses starts and stops
    /// (`partitioned`) until quorum returns. Always `false` under `divergence`.
    pub fn is_partitioned(&self) -> bool {
        self.shared.partition.partitioned()
    }

    /// Whether the reachability resolution set this node aside (`docs/cluster.md`,
    /// "Reachability"): it reaches some members only through others, so it stopped its children
    /// and refuses starts and stops (`partitioned`) until it is fully connected again for the
    /// stable time. [`Hub::is_partitioned`] is true meanwhile too.
    pub fn is_set_aside(&self) -> bool {
        self.shared.partition.set_aside()
    }

    /// Members this node reaches only through others (indirectly connected): they stay
    /// members and keep their children; sends to them from here fail (`node_unavailable`).
    pub fn indirectly_connected(&self) -> Vec<crate::model::NodeName> {
        self.shared.partition.indirect()
    }

    /// This node's connection to the cluster: isolated or not (seeds given, no peer
    /// authenticated for long), and the peers refused for their cookie. `None` on a network
    /// without seeds to miss (in-process) or without a network.
    pub fn connection(&self) -> Option<crate::core::isolation::ConnectionReport> {
        self.shared.network.as_ref().and_then(|n| n.connection())
    }

    /// Whether membership work is under way on this node: it is partitioned, or children of a
    /// redistribution pass are moving (Elixir's ProcessHub's locked event queue). Requests are
    /// still taken while locked; the flag tells an operator or a test that placements are in flux.
    pub fn is_locked(&self) -> bool {
        self.shared.partition.is_locked()
    }

    /// Tells a quorum strategy that the cluster was made smaller on purpose (nodes left for
    /// good): its majority is counted of `size` members from now on, so the nodes that remain
    /// keep (or regain) quorum. Answers whether this node is partitioned afterwards. Call it on
    /// every remaining node. No effect under `divergence`; a static quorum keeps its size.
    pub async fn reset_cluster_size(&self, size: usize) -> Result<bool, HubUnavailable> {
        self.call(|reply| HubMsg::ResetClusterSize { size, reply })
            .await
            .map_err(HubUnavailable)
    }

    /// What the Coordinator still owes the cluster, as a count (
    /// `pending_work_count`): requests waiting for nodes' answers, children moving or
    /// re-placed, failed moves waiting for their retry, requests relayed for peers, calls
    /// waiting for a child's answer, hot moves under way. 0 on a quiet node; a count that does
    /// not come back to 0 points at a node that does not answer.
    pub fn pending_work(&self) -> usize {
        self.shared.partition.pending_work()
    }

    /// The actor of a child running on this node.
    pub fn local_child(&self, id: &ChildId) -> Option<ActorCell> {
        self.shared
            .local_children
            .get(id)
            .map(|c| c.value().clone())
    }

    /// A typed ref to a child running on this node; `None` if it is not running here or its
    /// message type is not `M`.
    pub fn local_child_ref<M: ractor::Message>(&self, id: &ChildId) -> Option<ActorRef<M>> {
        let cell = self.local_child(id)?;
        (cell.is_message_type_of::<M>() == Some(true)).then(|| cell.into())
    }

    /// Events go to `actor` (never dropped, never blocking the hub).
    pub fn subscribe(&self, actor: ActorRef<HubEvent>) -> SubscriptionId {
        self.shared.events.subscribe(EventSink::actor(actor))
    }

    /// Events go to `actor`, converted into its message type by `map`.
    pub fn subscribe_mapped<M: ractor::Message>(
        &self,
        actor: ActorRef<M>,
        map: impl Fn(HubEvent) -> M + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.shared
            .events
            .subscribe(EventSink::actor_mapped(actor, map))
    }

    /// Events go to a new unbounded channel.
    pub fn subscribe_channel(&self) -> (SubscriptionId, mpsc::UnboundedReceiver<HubEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (self.shared.events.subscribe(EventSink::channel(tx)), rx)
    }

    /// The hub's last events (a bounded ring, see [`crate::events::recent`]) and a live feed
    /// of new ones that drops for a watcher that falls behind, rather than grow.
    pub fn recent_events(&self) -> &crate::events::recent::RecentEvents {
        self.shared.events.recent()
    }

    /// Cancels a subscription; `false` if it did not exist.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.shared.events.unsubscribe(id)
    }

    /// Registers a hook handler (`DuplicateHandlerId` if the id is taken for the key).
    pub fn register_hook(&self, key: HookKey, handler: HookHandler) -> Result<(), HookError> {
        self.shared.hooks.register(key, handler)
    }

    /// Cancels a hook handler.
    pub fn cancel_hook(&self, key: HookKey, handler_id: &str) -> Result<(), HookError> {
        self.shared.hooks.cancel(key, handler_id)
    }

    /// The ids of the handlers of `key`, in the order they run.
    pub fn hook_handlers(&self, key: HookKey) -> Vec<String> {
        self.shared.hooks.handler_ids(key)
    }

    /// This node's copy of the declared list as last persisted (`None` without
    /// `auto_recovery`). Read without an actor round trip.
    pub fn declared_children(&self) -> Option<DeclaredView> {
        reads::declared_children(&self.shared)
    }

    /// Whether this node's declared list is parked; `None` without `auto_recovery`. Unlike
    /// [`Hub::declared_children`] it copies nothing, so per-request and per-child checks stay
    /// O(1) however long the list is.
    pub(crate) fn declared_parked(&self) -> Option<bool> {
        self.shared
            .recovery
            .as_ref()
            .map(|recovery| recovery.snapshot().parked)
    }

    /// What keeps this node from writing what it must, one sentence each (empty when nothing
    /// does): the registry's or the declared list's last failed write until a write succeeds
    /// again, a store file removed or replaced under the running node. The admin API's health
    /// reports them.
    pub fn storage_problems(&self) -> Vec<String> {
        reads::storage_problems(&self.shared)
    }

    /// `Recovering` until this node's first reconcile round completes, then `Normal` for good;
    /// `Normal` from the start without `auto_recovery`.
    pub fn recovery_state(&self) -> RecoveryState {
        reads::recovery_state(&self.shared)
    }

    /// Waits until the recovery state is `Normal`, at most `timeout` (size it above
    /// `reconcile_grace_ms`).
    pub async fn await_normal(&self, timeout: Duration) -> Result<(), AwaitNormalTimeout> {
        match &self.shared.recovery {
            Some(r) => r.state.await_normal(timeout).await,
            None => Ok(()),
        }
    }

    /// The operator's `clear`: the empty declared list becomes the truth, one version above
    /// this node's, and a parked node resumes. Every running durable child is then stopped by
    /// the next round (its row is durable and it is no longer declared). Answers the version.
    pub async fn clear_declared(&self) -> Result<u64, RecoveryError> {
        self.call(|reply| HubMsg::ClearDeclared { reply })
            .await
            .map_err(|reason| RecoveryError::HubUnavailable { reason })?
    }

    /// Whether every peer this node is connected to now has delivered its registry to it
    /// (`cluster_settled`): this node's copy then reflects those members, up to what changed
    /// since. It says nothing about peers not connected yet: a node with no peers (a single
    /// node, or a clustered node whose peers have not joined) is settled, and a node turns
    /// unsettled when a peer connects until that peer's registry arrives.
    pub fn cluster_settled(&self) -> bool {
        *self.shared.settled.borrow()
    }

    /// Waits until [`Hub::cluster_settled`] holds, or `timeout`; returns whether it holds.
    ///
    /// It does not wait for the cluster to form: on a node whose peers have not connected yet
    /// it returns `true` at once. To wait for peers, call [`Hub::wait_for_members`] first,
    /// then this (so the registry copy includes theirs).
    pub async fn wait_cluster_settled(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.settled.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|settled| *settled))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Sends `payload` to child `id` wherever it runs (this node or a peer), through the hubs.
    /// Fire and forget: the kind's command handler (`ChildKinds::register_command`) decodes it
    /// on the node running the child; failures there are logged, not returned. Fails with
    /// `hub_unavailable` when this hub cannot route it (not running, or its Coordinator is
    /// restarting).
    pub fn cast_child(
        &self,
        id: impl Into<ChildId>,
        payload: Vec<u8>,
    ) -> Result<(), ChildMessageError> {
        let result = self.cast_child_uncounted(id.into(), payload);
        self.shared
            .messages
            .casted(result, |e: &ChildMessageError| e.code.as_str())
    }

    fn cast_child_uncounted(&self, id: ChildId, payload: Vec<u8>) -> Result<(), ChildMessageError> {
        if self.shared.coordinator().is_none() {
            // Between a Coordinator's failure and its restart the cast would be dropped.
            return Err(ChildMessageError {
                message: "the coordinator is restarting".into(),
                ..unavailable(&self.shared.node, &id)
            });
        }
        self.root
            .cast(HubMsg::CastChild {
                id: id.clone(),
                payload,
            })
            .map_err(|_| unavailable(&self.shared.node, &id))
    }

    /// Sends `payload` to child `id` wherever it runs and waits for the kind's answer (see
    /// [`ChildMessageError`] for the failure codes).
    pub async fn call_child(
        &self,
        id: impl Into<ChildId>,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, ChildMessageError> {
        let began = std::time::Instant::now();
        let result = self.call_child_uncounted(id.into(), payload, timeout).await;
        self.shared
            .messages
            .called(result, |e: &ChildMessageError| e.code.as_str(), began)
    }

    async fn call_child_uncounted(
        &self,
        id: ChildId,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, ChildMessageError> {
        let call = self.root.call(
            |reply| HubMsg::CallChild {
                id: id.clone(),
                payload,
                timeout,
                reply,
            },
            Some(timeout + Duration::from_millis(100)),
        );
        match call.await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            Ok(ractor::rpc::CallResult::Timeout) => Err(ChildMessageError {
                id,
                node: self.shared.node.clone(),
                code: "timeout".into(),
                message: "the child did not answer in time".into(),
            }),
            _ => Err(unavailable(&self.shared.node, &id)),
        }
    }

    /// Leaves the cluster gracefully, then shuts the hub down: peers are told (no grace
    /// period for this node), every local child is started on its next owner (the ring without
    /// this node) and awaited, then the local copies stop with the hub. On one node it is
    /// `shutdown`. Used by the node binary on SIGTERM.
    pub async fn leave(&self) -> Result<(), ShutdownTimedOut> {
        // The goodbye's answers (at most half a second), then the handover.
        let budget = self.shared.config.default_timeout() + Duration::from_millis(1500);
        let _ = self
            .root
            .call(|reply| HubMsg::Leave { reply }, Some(budget))
            .await;
        self.shutdown().await
    }

    /// Stops the hub gracefully: `coordinator_shutdown` hooks, then the coordinator, the children
    /// (each with its shutdown grace) and the registry (every acknowledged write committed).
    /// Rows stay in the registry backend, so a durable hub finds them at its next boot.
    pub async fn shutdown(&self) -> Result<(), ShutdownTimedOut> {
        let budget = self.shared.config.shutdown_timeout() + Duration::from_secs(5);
        if self.root.cast(HubMsg::Shutdown).is_err() {
            return Ok(()); // not running
        }
        match self.root.wait(Some(budget)).await {
            Err(_) => {
                self.root.kill();
                Err(ShutdownTimedOut(budget))
            }
            _ => Ok(()),
        }
    }
}
