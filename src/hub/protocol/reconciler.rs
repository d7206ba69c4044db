//! The Reconciler's messages: the schedule's wake-ups and the report of a finished round.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::core::declared::list::DeclaredList;
use crate::core::reconcile::{QuietRound, RoundStats};
use crate::core::reconcile_round::OwnerWork;
use crate::core::recovery::StartPacer;
use crate::model::ChildId;

pub(crate) enum ReconcilerMsg {
    /// Check the schedule.
    Poll,
    /// A synchronisation round completed (the cluster's sync sends it; a node without peers
    /// uses the interval tick instead).
    SyncCompleted,
    /// The interval tick of a node without peers.
    Tick,
    /// The running round finished.
    RoundDone(Box<RoundReport>),
}

impl ractor::Message for ReconcilerMsg {}

/// What one round hands the next, through the actor.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoundCarry {
    /// Mid-migration children seen by the previous round (`core::reconcile`).
    pub pending: BTreeSet<ChildId>,
    /// The previous round, if it was quiet.
    pub quiet: Option<QuietRound>,
    /// Every round since boot was parked: the next one that is not leaves to their owners
    /// the orphans registered nowhere (`core::reconcile::defer_to_owners`).
    pub owner_first: bool,
    /// The declared copy the previous round read (`core::reconcile_round::hold_new_declarations`).
    pub declared: Option<Arc<DeclaredList>>,
    /// Which owners were at work, by the rounds that scanned the registry
    /// (`core::reconcile_round::defer_to_working_owners`).
    pub work: OwnerWork,
}

/// What a finished round hands back to the actor.
pub(crate) struct RoundReport {
    pub stats: RoundStats,
    /// The round was the first since boot (its completion ends `recovering`).
    pub first: bool,
    /// The round was parked: it did nothing, and the next one is due without a sync.
    pub parked: bool,
    /// What the next round is handed.
    pub carry: RoundCarry,
    /// The start budget, lent to the round while it ran.
    pub pacer: StartPacer,
    /// How long the round's scan and plan took (its work, not its waits).
    pub work_ms: u64,
}
