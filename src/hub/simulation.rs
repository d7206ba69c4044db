//! What the deterministic simulator (`process_hub::sim`) puts into a hub: bugs injected on
//! purpose, to show that each of its invariants catches the bug it guards against, and an
//! observer told of the events it judges by (who authored which declared version). Without the
//! `sim` feature no hub can have either: every bug check is `false` and nothing is observed.

#[cfg(feature = "sim")]
use std::sync::Arc;

use crate::core::declared::delta::ListStamp;
use crate::model::{ChildId, NodeName};

/// A bug the simulator can inject into a hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InjectedBug {
    /// The Reconciler starts a registered but unbound declared child in the first round that
    /// sees it, skipping the two-round rule that lets a migration finish.
    SkipTwoRoundRule,
    /// The DeclaredLeader acknowledges a durable start without declaring the children.
    AcknowledgeWithoutDeclaring,
    /// A durable stop leaves the children declared (it only terminates them).
    StopWithoutUndeclaring,
    /// A peer's report that it runs a child is dropped when the row is known already.
    IgnorePeerBindings,
    /// The redistribution pass never migrates a child to its new owner.
    NeverMigrate,
    /// The DeclaredLeader adopts any offered copy, even an older one.
    AdoptOlderCopies,
    /// The Coordinator never answers a stop request.
    ForgetStopReplies,
    /// A leaving node hands its children over at once, without waiting for its peers to say
    /// whether they leave too.
    HandOverWithoutGoodbyeAnswers,
    /// A host never answers a peer's typed call.
    IgnoreTypedCalls,
    /// A host drops a peer's typed casts.
    DropTypedCasts,
    /// A monitor delivers its `ChildDown` twice.
    DeliverMonitorsTwice,
    /// A node that starts a hot-moved child takes its state but never gives it to the child.
    DropHandoverImport,
    /// A child moving hot stays in its old node's local routing after its export, so calls
    /// there are still answered by the old instance, whose state has already left.
    AnswerCallsDuringMove,
    /// Every replica of a child calls itself active, whatever the replication model.
    EveryReplicaActive,
    /// Redistribution never re-creates a replica lost with its node.
    SkipReplicaRecreation,
    /// The busiest node ignores the load balancer's requests to move children.
    IgnoreRebalance,
    /// A node that loses quorum keeps its children running.
    KeepChildrenWithoutQuorum,
    /// A node without quorum still takes starts and stops from its callers.
    AcceptWithoutQuorum,
    /// A gossiping node never runs its periodic rounds nor asks for what it is behind in, so
    /// a lost delta is never made good.
    GossipWithoutRounds,
    /// A node acts on its own view of its links: a peer it cannot reach leaves its ring and
    /// its children are re-placed, whatever the other members reach (the behaviour before
    /// reachability was shared; a single cut link then runs children twice).
    ActOnOwnView,
    /// A durable stop answers `no_leader` although its removal from the declared list is
    /// committed (its terminate goes ahead): an error for a change that happened.
    ErrorAfterUndeclaring,
}

impl InjectedBug {
    /// Every bug.
    pub const ALL: [InjectedBug; 21] = [
        InjectedBug::SkipTwoRoundRule,
        InjectedBug::AcknowledgeWithoutDeclaring,
        InjectedBug::StopWithoutUndeclaring,
        InjectedBug::IgnorePeerBindings,
        InjectedBug::NeverMigrate,
        InjectedBug::AdoptOlderCopies,
        InjectedBug::ForgetStopReplies,
        InjectedBug::HandOverWithoutGoodbyeAnswers,
        InjectedBug::IgnoreTypedCalls,
        InjectedBug::DropTypedCasts,
        InjectedBug::DeliverMonitorsTwice,
        InjectedBug::DropHandoverImport,
        InjectedBug::AnswerCallsDuringMove,
        InjectedBug::EveryReplicaActive,
        InjectedBug::SkipReplicaRecreation,
        InjectedBug::IgnoreRebalance,
        InjectedBug::KeepChildrenWithoutQuorum,
        InjectedBug::AcceptWithoutQuorum,
        InjectedBug::GossipWithoutRounds,
        InjectedBug::ErrorAfterUndeclaring,
        InjectedBug::ActOnOwnView,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            InjectedBug::SkipTwoRoundRule => "skip_two_round_rule",
            InjectedBug::AcknowledgeWithoutDeclaring => "acknowledge_without_declaring",
            InjectedBug::StopWithoutUndeclaring => "stop_without_undeclaring",
            InjectedBug::IgnorePeerBindings => "ignore_peer_bindings",
            InjectedBug::NeverMigrate => "never_migrate",
            InjectedBug::AdoptOlderCopies => "adopt_older_copies",
            InjectedBug::ForgetStopReplies => "forget_stop_replies",
            InjectedBug::HandOverWithoutGoodbyeAnswers => "hand_over_without_goodbye_answers",
            InjectedBug::IgnoreTypedCalls => "ignore_typed_calls",
            InjectedBug::DropTypedCasts => "drop_typed_casts",
            InjectedBug::DeliverMonitorsTwice => "deliver_monitors_twice",
            InjectedBug::DropHandoverImport => "drop_handover_import",
            InjectedBug::AnswerCallsDuringMove => "answer_calls_during_move",
            InjectedBug::EveryReplicaActive => "every_replica_active",
            InjectedBug::SkipReplicaRecreation => "skip_replica_recreation",
            InjectedBug::IgnoreRebalance => "ignore_rebalance",
            InjectedBug::KeepChildrenWithoutQuorum => "keep_children_without_quorum",
            InjectedBug::AcceptWithoutQuorum => "accept_without_quorum",
            InjectedBug::GossipWithoutRounds => "gossip_without_rounds",
            InjectedBug::ErrorAfterUndeclaring => "error_after_undeclaring",
            InjectedBug::ActOnOwnView => "act_on_own_view",
        }
    }
}

impl std::str::FromStr for InjectedBug {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|b| b.name()).collect();
                format!("unknown bug {s:?}; one of {}", names.join(", "))
            })
    }
}

/// An event of a hub that the simulator's invariants judge by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The declared list's leader `author` decided a mutation: the copy stamped `base` became
    /// the copy stamped `result` (the same stamp when it changed nothing). Told once the
    /// mutation is durable, before it is acknowledged.
    Authored {
        /// The leader that decided.
        author: NodeName,
        /// The copy before.
        base: ListStamp,
        /// The copy after.
        result: ListStamp,
        /// Children the mutation declared.
        declared: Vec<ChildId>,
        /// Children the mutation undeclared.
        undeclared: Vec<ChildId>,
        /// Children the mutation named but did not change (a stop of a child this copy does not
        /// declare).
        untouched: Vec<ChildId>,
        /// The mutation was the operator's clear.
        cleared: bool,
    },
    /// Leaving node `from` handed its children over to `to` (the next owners it chose).
    HandedOver {
        /// The leaving node.
        from: NodeName,
        /// The nodes it started its children on.
        to: Vec<NodeName>,
    },
}

/// Told every [`Observation`]. Called from the hub's actors and tasks: it must not block.
#[cfg(feature = "sim")]
pub type Observer = Arc<dyn Fn(Observation) + Send + Sync>;
