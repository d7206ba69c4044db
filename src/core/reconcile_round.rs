//! One node's reconcile round around its plan ([`crate::core::reconcile`]): when a round may
//! stand on the previous quiet one, when it skips the registry scan, when it plans parked and
//! whose declared copies it asks for, and what it hands the next round.
//!
//! A round is gathered in steps that wait (a hook, the leader's answer, a manifest fetch), and
//! what it learns at one step decides whether the next is worth taking: a round that will park
//! anyway does not scan hundreds of thousands of rows. These gates are the decisions here; the
//! Reconciler gathers each input in its turn and carries out what the plan says.
//!
//! Pure: inputs are plain data (the declared copy, the rows, the peers heard of, the owners of a
//! child as a function of its id and row); nothing here waits, reads a clock or sends.

use std::collections::{BTreeMap, BTreeSet};

use crate::core::declared::list::DeclaredList;
use crate::core::reconcile::{
    defer_to_owners, plan_replicated_round, LocalStop, QuietRound, ReconcilePlan, RoundInputs,
    StopReason,
};
use crate::model::{ChildId, NodeName, Row};

/// The previous round stands for this one when it was quiet and nothing it read has changed
/// since: the first round after boot and a round with a lost list always plan.
pub fn reuse_quiet(
    previous: Option<QuietRound>,
    first: bool,
    list_lost: bool,
    inputs: &RoundInputs,
) -> Option<QuietRound> {
    previous.filter(|q| !first && !list_lost && q.stands_for(inputs))
}

/// The round will park whatever the rows say (its copy is lost, a peer's copy is not weighed
/// yet, or a peer announced a newer one), so it does not scan the registry: at hundreds of
/// thousands of rows the scan is most of a round, and a parked round is retried an interval
/// later. Without its rows it stays parked even if the missing copy arrives meanwhile.
pub fn parks_before_scan(list_lost: bool, unheard: &[NodeName], ahead: &[NodeName]) -> bool {
    list_lost || !unheard.is_empty() || !ahead.is_empty()
}

/// The peers whose declared copies the round has not weighed, after it asked the leader.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unweighed {
    /// Peers that never offered their copy, and the leader when it did not answer in time.
    pub unheard: Vec<NodeName>,
    /// Peers that announced a copy newer than this node's.
    pub ahead: Vec<NodeName>,
}

impl Unweighed {
    /// `unheard` peers, the leader if it was silent (`leader_silent`), and the peers `ahead`.
    pub fn new(
        mut unheard: Vec<NodeName>,
        leader_silent: Option<NodeName>,
        ahead: Vec<NodeName>,
    ) -> Self {
        unheard.extend(leader_silent);
        Self { unheard, ahead }
    }

    /// Every copy is weighed and none is newer: the round may act on its own copy.
    pub fn is_empty(&self) -> bool {
        self.unheard.is_empty() && self.ahead.is_empty()
    }

    /// Whose copies the leader is asked for at once, sorted and once each: the unheard. A peer
    /// only ahead is left to [`Unweighed::to_await`].
    pub fn to_solicit(&self) -> Vec<NodeName> {
        let all: BTreeSet<&NodeName> = self.unheard.iter().collect();
        all.into_iter().cloned().collect()
    }

    /// The peers ahead of this copy and heard from, sorted and once each: their deltas on the
    /// way may bring this copy there, so the leader waits for them before it asks for a whole
    /// copy (`DeclaredMsg::Announced`). During a long burst of declarations a peer is always a
    /// few deltas behind the leader; asking at once would make every round a whole copy.
    pub fn to_await(&self) -> Vec<NodeName> {
        let asked = self.to_solicit();
        let ahead: BTreeSet<&NodeName> = self.ahead.iter().collect();
        ahead
            .into_iter()
            .filter(|p| asked.binary_search(p).is_err())
            .cloned()
            .collect()
    }
}

/// Why a round may not act: any of these parks it (it starts and stops nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// The declared list is lost (the node is parked).
    pub list_lost: bool,
    /// The round did not scan the registry ([`parks_before_scan`]).
    pub scan_skipped: bool,
    /// Copies not weighed, or newer than this node's: an outdated copy could restart a child
    /// stopped since.
    pub unweighed: Unweighed,
    /// This side of a split has no quorum: the majority's rounds decide.
    pub partitioned: bool,
}

impl Readiness {
    /// The round plans parked.
    pub fn parked(&self) -> bool {
        self.list_lost || self.scan_skipped || !self.unweighed.is_empty() || self.partitioned
    }
}

/// What one node plans in one round, from the inputs it gathered.
pub struct RoundView<'a> {
    /// This node's adopted copy of the list.
    pub declared: &'a DeclaredList,
    /// This node.
    pub local: &'a str,
    /// The previous round's pending children (registered, unbound, seen once).
    pub previous_pending: &'a BTreeSet<ChildId>,
    /// Every round since boot was parked: orphans registered nowhere go to their owners first.
    pub owner_first: bool,
    /// Which owners are at work, by the rounds that scanned the registry up to this one
    /// ([`defer_to_working_owners`]).
    pub work: &'a OwnerWork,
    /// What may park the round.
    pub readiness: Readiness,
}

/// How many children each node runs, as the rows a round read say ([`bindings_per_node`]).
pub type Bindings = BTreeMap<NodeName, usize>;

/// Counts the bindings of each node in `rows` (for a store that keeps no counts of its own,
/// `Storage::counts`).
pub fn bindings_per_node<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Bindings {
    let mut bindings = Bindings::new();
    for row in rows {
        for node in row.node_pids.keys() {
            *bindings.entry(node.clone()).or_default() += 1;
        }
    }
    bindings
}

/// Scanned rounds in a row an owner's bindings may stand still before every node submits its
/// orphans: this node's view of another node's bindings lags behind by the replication's delay
/// (tens of seconds at a million children), so one round without growth is no idle owner.
pub const OWNER_IDLE_ROUNDS: u32 = 3;

/// Which nodes are at work starting children, from round to round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerWork {
    /// The bindings per node of the last round that scanned the registry.
    pub bindings: Bindings,
    /// Scanned rounds in a row each node's bindings did not grow.
    pub idle_rounds: BTreeMap<NodeName, u32>,
}

impl OwnerWork {
    /// The work seen by a round that counted `bindings`, after the `previous` rounds'. With
    /// no previous count (the default), every node bound somewhere counts as at work.
    pub fn after(previous: &OwnerWork, bindings: Bindings) -> OwnerWork {
        let idle_rounds = bindings
            .iter()
            .map(|(node, now)| {
                let grew = *now > previous.bindings.get(node).copied().unwrap_or(0);
                let idle = match previous.idle_rounds.get(node) {
                    Some(r) if !grew => r.saturating_add(1),
                    _ => 0,
                };
                (node.clone(), idle)
            })
            .collect();
        OwnerWork {
            bindings,
            idle_rounds,
        }
    }

    /// Whether `node` started children within the last [`OWNER_IDLE_ROUNDS`] scanned rounds.
    pub fn at_work(&self, node: &str) -> bool {
        self.idle_rounds
            .get(node)
            .is_some_and(|r| *r < OWNER_IDLE_ROUNDS)
    }
}

/// Leaves to their owners the orphans whose owner is at work ([`OwnerWork::at_work`]): its
/// own rounds will start them. After a whole-cluster outage each owner's share of the recovery
/// takes many rounds at hundreds of thousands of children; if every node also submitted the
/// orphans of the owners still at it, each child went through the start pipeline once per node,
/// the registries fell behind under the refusals and duplicates, and the next rounds saw even
/// more orphans. An orphan whose owner's bindings stood still for [`OWNER_IDLE_ROUNDS`] rounds
/// (the owner is parked, or its rounds do not run) is submitted by every node as before. The
/// deferred children stay pending (registered ones) or deferred (unregistered ones), so the
/// next round that finds their owner idle submits them. Replica top-ups are left as they are.
/// Returns how many were deferred.
pub fn defer_to_working_owners(plan: &mut ReconcilePlan, local: &str, work: &OwnerWork) -> usize {
    if plan.parked {
        return 0;
    }
    let working = |owner: &NodeName| owner != local && !owner.is_empty() && work.at_work(owner);
    let before = plan.starts.len();
    let (pending, deferred) = (&mut plan.pending, &mut plan.deferred);
    plan.starts.retain(|start| {
        if start.top_up || !working(&start.owner) {
            return true;
        }
        let id = start.child.spec.id.clone();
        if start.unregistered {
            deferred.insert(id);
        } else {
            pending.insert(id);
        }
        false
    });
    let count = before - plan.starts.len();
    plan.stats.started -= count;
    plan.stats.deferred_to_owner += count;
    count
}

/// Plans the round ([`plan_replicated_round`]); after a boot, the first round that acts leaves
/// to their owners the orphans registered nowhere ([`defer_to_owners`]), and every later one
/// the orphans of the owners at work ([`defer_to_working_owners`]).
pub fn plan_local_round(
    view: &RoundView<'_>,
    rows: &[Row],
    owners_of: impl Fn(&ChildId, Option<&Row>) -> Vec<NodeName>,
) -> ReconcilePlan {
    let mut plan = plan_replicated_round(
        view.declared,
        rows,
        owners_of,
        view.local,
        view.previous_pending,
        view.readiness.parked(),
    );
    if view.owner_first {
        defer_to_owners(&mut plan, view.local);
    } else {
        defer_to_working_owners(&mut plan, view.local, view.work);
    }
    plan
}

/// Gives one round to the unregistered orphans declared since the `previous` round's copy: a
/// child declared a moment ago is usually on its way (its start follows its declaration, and its
/// row reaches the other nodes after its host recorded it), so starting it here would only start
/// it twice (during a long burst of durable starts, every child of the burst still in the
/// pipeline). They go to the plan's pending set, and the next round starts those still running
/// nowhere. Without a previous copy (the first round after a boot, whose orphans are the
/// recovery) every orphan is started. Returns how many were held.
pub fn hold_new_declarations(plan: &mut ReconcilePlan, previous: Option<&DeclaredList>) -> usize {
    let Some(previous) = previous else {
        return 0;
    };
    let before = plan.starts.len();
    let pending = &mut plan.pending;
    plan.starts.retain(|s| {
        let new = s.unregistered && !previous.contains(&s.child.spec.id);
        if new {
            pending.insert(s.child.spec.id.clone());
        }
        !new
    });
    let count = before - plan.starts.len();
    plan.stats.started -= count;
    plan.stats.skipped_pending += count;
    count
}

/// This node's duplicate instances to stop, each with the node whose instance is kept (empty
/// when the plan names none).
pub fn duplicate_stops(plan: &ReconcilePlan) -> Vec<(&LocalStop, NodeName)> {
    // Looked up by id: a split cluster that heals can leave every child duplicated, and a scan
    // of the duplicates per stop was quadratic in them.
    let keeps: BTreeMap<&ChildId, &NodeName> =
        plan.duplicates.iter().map(|d| (&d.id, &d.keep)).collect();
    plan.stops
        .iter()
        .filter(|s| s.reason == StopReason::Duplicate)
        .map(|s| {
            (
                s,
                keeps.get(&s.id).map(|k| (*k).clone()).unwrap_or_default(),
            )
        })
        .collect()
}

/// What a round hands the next one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NextRound {
    /// The children seen pending this round.
    pub pending: BTreeSet<ChildId>,
    /// What this round was planned from, if it was quiet: the next may stand on it
    /// ([`QuietRound`], with the counters the round reports).
    pub quiet: Option<RoundInputs>,
    /// Orphans still go to their owners first: every round since boot was parked.
    pub owner_first: bool,
}

/// What follows `plan`, planned from `inputs`, its pending set taken from it. Asked before its
/// starts are taken to be submitted: a round that starts, stops or removes something changes
/// the registry itself, and one that waits on something carries it; neither is quiet.
pub fn next_round(plan: &mut ReconcilePlan, owner_first: bool, inputs: RoundInputs) -> NextRound {
    NextRound {
        quiet: plan.is_quiet().then_some(inputs),
        pending: std::mem::take(&mut plan.pending),
        owner_first: owner_first && plan.parked,
    }
}

#[cfg(test)]
#[path = "reconcile_round_tests.rs"]
mod tests;
