//! The per-hub actor tree on one node (docs/architecture.md, "The actor tree of a node"):
//!
//! ```text
//! HubSupervisor(hub_id)      the hub's root and its `ActorRef<HubMsg>`; restarts the others,
//! │                          gives up (and fails to its own supervisor) past hub_max_restarts
//! ├── Registry               single writer of the registry copy; commits in order, then fires
//! │                          registry hooks and events; merges peers' observations
//! ├── ChildSupervisor        spawns this node's children; permanent/transient/temporary;
//! │                          restart intensity -> escalates to the HubSupervisor
//! ├── Coordinator            start/stop pipeline, pending operations, membership and the ring,
//! │                          redistribution, messages to children by id
//! ├── Janitor                periodic sweep of expired TTL rows
//! ├── DeclaredLeader         (auto_recovery) the declared list: boot, mutations, park
//! ├── Reconciler             (auto_recovery) reconcile rounds toward the declared list
//! └── Endpoint               (ractor_cluster) the remotable door for clients on other nodes
//! ```
//!
//! - [`protocol`]: every actor's messages (a leaf: it imports no actor);
//! - [`shared`]: what the actors share ([`HubShared`]: config, the registry read view, hooks,
//!   events, the current refs of the sibling actors, the published membership and ring, and the
//!   tables each actor owns);
//! - [`siblings`]: handing a request to a sibling actor, answering it when the sibling is away;
//! - [`reads`]: the reads answered from the shared state without an actor round trip;
//! - [`monitors`]: monitors set on this node and the watches on its children;
//! - [`typed`]: typed messages to children by id, and the calls this node waits on;
//! - [`summary`]: this node's figures for the cluster dashboard, and the queries of peers';
//! - [`simulation`]: the simulator's seam (injected bugs, the observer), inert without `sim`;
//! - one folder (or file) per actor, each importing the protocol, the shared state, the pure
//!   core, storage and config, never another actor's internals.
//!
//! Incoming wire messages reach the actor that owns them through [`inbox`].

pub(crate) mod child_supervisor;
pub(crate) mod coordinator;
pub(crate) mod declared;
pub(crate) mod endpoint;
pub(crate) mod inbox;
pub(crate) mod janitor;
pub(crate) mod monitors;
pub(crate) mod protocol;
pub(crate) mod reads;
pub(crate) mod reconciler;
pub(crate) mod registry;
pub(crate) mod shared;
pub(crate) mod siblings;
pub(crate) mod simulation;
pub(crate) mod summary;
pub(crate) mod supervisor;
pub(crate) mod typed;

pub(crate) use shared::HubShared;
