//! Hub events: what an application observes about its hub, the ractor way of "watching
//! supervisor events".
//!
//! Subscribers are actors (any `ActorRef<M>` with a mapping from [`HubEvent`] to `M`) or tokio
//! channels. Delivery is **unbounded per subscriber**: the hub never waits on a subscriber and
//! never drops an event for a live one, so a slow subscriber costs memory, not correctness. (A
//! bounded queue would need either back-pressure on the hub or lost events; both are worse for a
//! supervisor. ractor's own mailboxes are unbounded for the same reason.) A subscriber whose
//! actor or receiver is gone is dropped from the list at the next event.
//!
//! Ordering: events from one hub actor arrive in the order that actor emitted them. Child
//! lifecycle events come from the child supervisor, registry events from the registry after the
//! write is committed, so a `RegistryInserted` may arrive before or after the matching
//! `ChildStarted`.
//!
//! - [`bus`]: the [`EventBus`] that delivers a hub's events to its subscribers;
//! - `metrics`: the subscriber that turns a hub's events into counters;
//! - [`recent`]: the bounded ring of recent events and their live feed, for operators.

mod bus;
pub(crate) mod metrics;
pub mod recent;

use ractor::ActorRef;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::model::{ChildId, NodeName, Pid};

pub use bus::EventBus;

/// Something that happened in a hub.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum HubEvent {
    /// A child's actor started (first start of this id on `node`).
    ChildStarted {
        /// The child.
        id: ChildId,
        /// Where.
        node: NodeName,
        /// Its pid.
        pid: Pid,
    },
    /// A child could not be started (unknown kind, bad arguments, `pre_start` failed).
    ChildStartFailed {
        /// The child.
        id: ChildId,
        /// Where.
        node: NodeName,
        /// Why.
        reason: String,
    },
    /// A child's actor ended on its own (crash, kill or normal exit).
    ChildExited {
        /// The child.
        id: ChildId,
        /// Where.
        node: NodeName,
        /// Its pid.
        pid: Pid,
        /// `normal`, `killed` or the failure message.
        reason: String,
        /// Whether the supervisor will restart it.
        will_restart: bool,
    },
    /// A child was restarted under a new pid.
    ChildRestarted {
        /// The child.
        id: ChildId,
        /// Where.
        node: NodeName,
        /// The pid before.
        old_pid: Pid,
        /// The pid now.
        new_pid: Pid,
    },
    /// A child was stopped on request.
    ChildStopped {
        /// The child.
        id: ChildId,
        /// Where.
        node: NodeName,
    },
    /// A row was inserted into the registry (committed).
    RegistryInserted {
        /// The child.
        id: ChildId,
    },
    /// A row left the registry (committed).
    RegistryRemoved {
        /// The child.
        id: ChildId,
    },
    /// The child supervisor exceeded its restart intensity and escalated to the hub supervisor,
    /// which restarts it (and it restores the node's children from the registry).
    RestartIntensityExceeded {
        /// The node.
        node: NodeName,
    },
    /// A hub actor (registry, coordinator, child supervisor, janitor) failed and was restarted.
    HubActorRestarted {
        /// Which one.
        actor: String,
    },
    /// The hub is stopping (shutdown, or its own restart intensity was exceeded).
    HubStopping {
        /// Why.
        reason: String,
    },

    // Membership, redistribution, recovery and the declared list: the same facts the cluster
    // and recovery hooks see, for actors that watch rather than intervene.
    /// A peer's hub of this id came up (first contact, back from a flap, or restarted).
    NodeUp {
        /// The peer.
        node: NodeName,
    },
    /// A peer's hub went down. Unless it said goodbye, its children wait for the
    /// `nodedown_grace` before they are re-placed, in case it comes back.
    NodeDown {
        /// The peer.
        node: NodeName,
        /// It announced its leave (no grace).
        graceful: bool,
    },
    /// A peer is gone for good (it left, or stayed down past its grace): its bindings are
    /// reaped and its children re-placed.
    NodeLeft {
        /// The peer.
        node: NodeName,
    },
    /// This node's side of a split lost quorum (`partition_tolerance`): its local children are
    /// stopped (their rows kept) and starts and stops are refused until quorum returns.
    PartitionModeEntered {
        /// The members this node still sees, itself included.
        members: Vec<NodeName>,
    },
    /// Quorum returned: this node takes work again, and a redistribution pass brings back the
    /// children it owns.
    PartitionModeLeft {
        /// The members this node sees, itself included.
        members: Vec<NodeName>,
    },
    /// Every member has delivered its registry to this node (`cluster_settled` became true).
    ClusterSettled {
        /// The members at that moment, this node included.
        members: Vec<NodeName>,
    },
    /// A child moved between live nodes: stopped on `from` and started on `to` (a cold swap, or
    /// the handover of a leaving node). Fired on `from`, instead of `ChildStopped`.
    ChildMoved {
        /// The child.
        id: ChildId,
        /// The node it left.
        from: NodeName,
        /// The node it runs on now.
        to: NodeName,
        /// Why it moved.
        why: MoveReason,
    },
    /// A child whose node is gone was started again on `node` (fired on the node that asked).
    ChildReplaced {
        /// The child.
        id: ChildId,
        /// The node it runs on now.
        node: NodeName,
        /// Why it was re-placed.
        why: MoveReason,
    },
    /// A reconcile round completed on this node, with its counters.
    ReconcileRoundCompleted {
        /// This node.
        node: NodeName,
        /// The round's counters.
        stats: crate::core::reconcile::RoundStats,
        /// The round was parked (the list is lost or outdated here): it did nothing.
        parked: bool,
    },
    /// This node's first round completed: recovery is `Normal` for good.
    RecoveryNormal {
        /// This node.
        node: NodeName,
    },
    /// This node's declared list is parked (lost, or its copy cannot be trusted): durable
    /// writes are refused and rounds do nothing until a real copy arrives or an operator clears.
    DeclaredParked {
        /// This node.
        node: NodeName,
    },
    /// This node's declared list is no longer parked.
    DeclaredUnparked {
        /// This node.
        node: NodeName,
    },
    /// This node's copy of the declared list reached a new version (persisted).
    DeclaredVersionChanged {
        /// This node.
        node: NodeName,
        /// The version now held.
        version: u64,
    },
    /// A hot move of a child whose kind hands its state over (`migration = "hot"`), fired on
    /// the node it left, beside its `ChildMoved`: whether the state went with it, or the move
    /// fell back to a cold swap and why.
    ChildHandover {
        /// The child.
        id: ChildId,
        /// The node it left.
        from: NodeName,
        /// The node it runs on now.
        to: NodeName,
        /// The actor of the instance the move started there (the one that took the state),
        /// when the new node named it: not when it already ran the child. The child may have
        /// been stopped or replaced on that node by the time this event is read.
        pid: Option<Pid>,
        /// The state went along, or why not.
        outcome: HandoverOutcome,
        /// From the export's request to the new node's confirmation, in ms (what a hot move
        /// costs the child: its casts are held meanwhile, its calls retry).
        took_ms: u64,
    },
}

/// What became of a child's state in a hot move ([`HubEvent::ChildHandover`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HandoverOutcome {
    /// The new instance imported the old one's state (`bytes` long) before any other message.
    Imported {
        /// The state's size.
        bytes: u64,
    },
    /// The state could not be taken or sent: the child started without it (a cold swap).
    FellBackCold {
        /// Why.
        reason: crate::kinds::HandoverError,
    },
}

/// Why a child moved or was re-placed ([`HubEvent::ChildMoved`], [`HubEvent::ChildReplaced`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MoveReason {
    /// A node joined and owns the child now (a cold swap to it).
    NodeJoined,
    /// The child's node went down and stayed down past its grace (or restarted without it).
    NodeDown,
    /// The child's node left the cluster gracefully (a handover, or a re-placement after it).
    NodeLeft,
    /// The members did not change, but the child ran away from its owner (after a partition
    /// healed, or a failed move being retried).
    Rebalance,
    /// The load balancer's leader found the members' children further apart than
    /// `load_balancer.rebalance_threshold_percent` and moved some from the busiest node to the
    /// idlest (`Distribution::LoadBalanced`).
    LoadImbalance,
}

impl ractor::Message for HubEvent {}

/// Identifies a subscription, to cancel it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SubscriptionId(pub u64);

/// Where a subscriber's events go. Built from an actor or a channel.
pub struct EventSink(Box<dyn Fn(HubEvent) -> bool + Send + Sync>);

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventSink")
    }
}

impl EventSink {
    /// Events go to an actor whose message type is `HubEvent`.
    pub fn actor(actor: ActorRef<HubEvent>) -> Self {
        Self(Box::new(move |e| actor.send_message(e).is_ok()))
    }

    /// Events go to an actor of any message type, converted by `map`.
    pub fn actor_mapped<M: ractor::Message>(
        actor: ActorRef<M>,
        map: impl Fn(HubEvent) -> M + Send + Sync + 'static,
    ) -> Self {
        Self(Box::new(move |e| actor.send_message(map(e)).is_ok()))
    }

    /// Events go to an unbounded tokio channel.
    pub fn channel(tx: mpsc::UnboundedSender<HubEvent>) -> Self {
        Self(Box::new(move |e| tx.send(e).is_ok()))
    }

    /// Events go to `f`, called on the publishing actor's task: it must be quick and must not
    /// block (a counter, a bounded buffer). `false` ends the subscription.
    pub fn from_fn(f: impl Fn(HubEvent) -> bool + Send + Sync + 'static) -> Self {
        Self(Box::new(f))
    }
}
