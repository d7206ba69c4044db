//! The per-hub actor tree on one node (DESIGN §2):
//!
//! ```text
//! HubSupervisor(hub_id)      the hub's root and its `ActorRef<HubMsg>`; restarts the others,
//! │                          gives up (and fails to its own supervisor) past hub_max_restarts
//! ├── Registry               single writer of the registry copy; commits in order, then fires
//! │                          registry hooks and events
//! ├── ChildSupervisor        spawns this node's children; permanent/transient/temporary;
//! │                          restart intensity -> escalates to the HubSupervisor
//! ├── Coordinator            start/stop pipeline and the pending-operation table
//! ├── Janitor                periodic sweep of expired TTL rows
//! ├── DeclaredLeader         (auto_recovery) the declared list: boot, mutations, park
//! └── Reconciler             (auto_recovery) reconcile rounds toward the declared list
//! ```
//!
//! The actors share one [`HubShared`]: the config, the storage read view (reads never go
//! through an actor), hooks, the event bus, the kind table and the current refs of the sibling
//! actors (a restarted actor has a new ref, so siblings look it up at send time).

pub(crate) mod child_supervisor;
pub(crate) mod cluster;
pub(crate) mod coordinator;
pub(crate) mod declared_forward;
pub(crate) mod declared_leader;
pub(crate) mod declared_remote;
pub(crate) mod delivery;
pub(crate) mod janitor;
pub(crate) mod reconciler;
pub(crate) mod recovery_shared;
pub(crate) mod registry;
pub(crate) mod replication;
pub(crate) mod supervisor;

use std::sync::{Arc, RwLock};
use std::time::Instant;

use dashmap::DashMap;
use ractor::{ActorCell, ActorRef};

use crate::cluster::transport::{Network, Transport};
use crate::config::ProcessHub;
use crate::events::EventBus;
use crate::hooks::Hooks;
use crate::kinds::ChildKinds;
use crate::model::{ChildId, NodeName};
use crate::storage::Storage;

use child_supervisor::ChildSupMsg;
use coordinator::CoordinatorMsg;
use declared_leader::DeclaredMsg;
use recovery_shared::RecoveryShared;
use registry::RegistryMsg;

/// The refs of the hub's actors as of now.
#[derive(Default)]
pub(crate) struct ActorRefs {
    pub registry: Option<ActorRef<RegistryMsg>>,
    pub child_supervisor: Option<ActorRef<ChildSupMsg>>,
    pub coordinator: Option<ActorRef<CoordinatorMsg>>,
    pub declared_leader: Option<ActorRef<DeclaredMsg>>,
    pub reconciler: Option<ActorRef<reconciler::ReconcilerMsg>>,
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
    /// The hub's members (just this node until the cluster exists).
    pub members: RwLock<Vec<NodeName>>,
    /// The actors of this node's children, for `Hub::local_child`.
    pub local_children: DashMap<ChildId, ActorCell>,
    /// Durable children and orphan recovery, when `auto_recovery` is on.
    pub recovery: Option<Arc<RecoveryShared>>,
    /// The node's network when the hub spans nodes (`HubBuilder::network`); `None`: one node.
    pub network: Option<Arc<dyn Network>>,
    /// This hub's endpoint on the network, opened by the Coordinator in `pre_start` (a restarted
    /// Coordinator re-opens it). The Registry broadcasts its deltas through it.
    pub transport: RwLock<Option<Arc<dyn Transport>>>,
    /// `true` when every member has delivered its registry to this node (`cluster_settled`).
    pub settled: tokio::sync::watch::Sender<bool>,
    epoch: Instant,
}

impl HubShared {
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
        Self {
            members: RwLock::new(vec![node.clone()]),
            config,
            node,
            storage,
            kinds,
            hooks,
            events: EventBus::new(),
            refs: RwLock::new(ActorRefs::default()),
            local_children: DashMap::new(),
            recovery: None,
            // One node is settled by definition; a clustered hub is settled once its peers'
            // registries arrived (a lone clustered node also counts as settled).
            settled: tokio::sync::watch::Sender::new(true),
            transport: RwLock::new(None),
            network,
            epoch: Instant::now(),
        }
    }

    /// Monotonic milliseconds since the hub was created (restart intensity, timers).
    pub fn mono_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn registry(&self) -> Option<ActorRef<RegistryMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .registry
            .clone()
    }

    pub fn child_supervisor(&self) -> Option<ActorRef<ChildSupMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .child_supervisor
            .clone()
    }

    pub fn coordinator(&self) -> Option<ActorRef<CoordinatorMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .coordinator
            .clone()
    }

    pub fn reconciler(&self) -> Option<ActorRef<reconciler::ReconcilerMsg>> {
        self.refs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .reconciler
            .clone()
    }

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

    /// Replaces the member list (sorted, this node included).
    pub fn set_members(&self, members: Vec<NodeName>) {
        *self.members.write().unwrap_or_else(|e| e.into_inner()) = members;
    }

    /// Whether `node` is a member now.
    pub fn is_member(&self, node: &str) -> bool {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|n| n == node)
    }

    pub fn set_refs(&self, f: impl FnOnce(&mut ActorRefs)) {
        f(&mut self.refs.write().unwrap_or_else(|e| e.into_inner()));
    }
}
