//! Reconcile planning: one round's decisions from the declared list, the registry as observed,
//! and the ring (docs/recovery.md, "Rounds").
//!
//! ```text
//! orphans = declared children − children observed running anywhere
//! ```
//!
//! The same difference covers every outage: after a whole-cluster outage the registry is empty
//! and every declared child is an orphan; after a single-node rejoin the peers hold the children
//! and the difference is empty; a child stopped during an absence is absent from the list and
//! stays dead, because list absence is the stop record.
//!
//! Besides orphans a round handles:
//! - **a stop that crashed halfway**: a row marked durable, no longer declared, still bound
//!   somewhere: its instances are stopped;
//! - **duplicates**: a declared child bound on several nodes is reduced to one instance, its ring
//!   owner's (or, when the owner holds none, the instance on the lowest-named node, which the
//!   placement moves later);
//! - **stale rows**: a row marked durable, undeclared and bound nowhere (a stale rejoining peer's
//!   leftovers) is removed;
//! - **mid-migration**: a declared child whose row is registered but unbound may be between two
//!   nodes; it is started only if it is an orphan in two consecutive rounds. The first time it is
//!   `skipped_pending` and carried to the next round in [`ReconcilePlan::pending`].
//!
//! ## Who acts
//!
//! Every node plans from its own adopted copy and the same rules, so the rounds of different
//! nodes agree without talking to each other:
//! - **starts**: every node submits every orphan through the normal start path with
//!   `check_existing`; the ring routes concurrent submissions of one child to the same owner,
//!   whose supervisor accepts the first and rejects the rest. (A node cannot know that another
//!   node's round ran, so the redundancy is what makes a round survive a crashed peer.)
//!   After a boot the owner goes first: the caller applies [`defer_to_owners`] to its first
//!   round that is not parked, which leaves to its owner, for that round, an orphan registered
//!   nowhere that another node owns. After a whole-cluster outage each child is then submitted
//!   once, by its owner, instead of once per node (each node's start budget paces its own
//!   share, not every child). An orphan still running nowhere a round later is submitted by
//!   every node.
//! - **stops** (undeclared and duplicate instances): each node stops only instances bound on
//!   itself. Every node computes the same keeper for a duplicate, so the union of all nodes'
//!   stops leaves exactly the keeper's instance, and no stop ever crosses the network.
//! - **stale row removal**: every node removes the stale rows it holds (and tells its peers,
//!   whose copies of the stub go too): a node that kept one would re-place nothing from it, but
//!   would hold it until its TTL ran out, by a wall clock that may run slow.
//!
//! A parked round (the list is lost, see [`crate::core::boot::decide_boot`]) starts and stops
//! nothing. A caller that knows of a declared version newer than its copy (it is catching up)
//! should plan parked too: an outdated copy could restart a child stopped in the newer version.
//!
//! Pure: the Reconciler actor gathers the inputs, calls [`plan_round`] and carries out the plan.

use std::collections::{BTreeMap, BTreeSet};

use crate::core::declared::list::{DeclaredChild, DeclaredList};
use crate::model::{ChildId, NodeName, Pid, Row};

/// An orphan to submit through the normal start path (with `check_existing`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrphanStart {
    /// What to start, with the caller's metadata.
    pub child: DeclaredChild,
    /// The ring owner the start routes to.
    pub owner: NodeName,
    /// No row for it in this node's copy: it runs nowhere and is registered nowhere, as after
    /// a whole-cluster outage. Only such a start is left to its owner first
    /// ([`defer_to_owners`]); an unbound row has waited its round already (`pending`).
    pub unregistered: bool,
    /// It runs, on fewer of its owners than it has: the start tops its replicas up (it is no
    /// orphan, and no owner's own round would start it sooner).
    pub top_up: bool,
}

/// Why a local instance is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The row is marked durable but the child is no longer declared (a stop that crashed
    /// between the list removal and the terminate).
    Undeclared,
    /// The child runs on several nodes and this instance is not the keeper.
    Duplicate,
}

/// A local instance to stop. Always bound on the planning node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalStop {
    /// The child.
    pub id: ChildId,
    /// The local instance (as recorded in the row).
    pub pid: Pid,
    /// Why.
    pub reason: StopReason,
}

/// A declared child bound on several nodes, as every node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// The child.
    pub id: ChildId,
    /// The node whose instance survives.
    pub keep: NodeName,
    /// Every node holding an instance, the keeper included.
    pub bound_on: Vec<NodeName>,
}

/// The counters of a round, as the `reconcile_round` hook reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoundStats {
    /// Declared children examined.
    pub candidates: usize,
    /// Declared children observed running nowhere (started or skipped).
    pub orphans: usize,
    /// Orphans submitted for a start. The plan counts what it asks for; the Reconciler
    /// overwrites it with what it actually submitted (admission control may spread starts).
    pub started: usize,
    /// Orphans with a registered but unbound row seen for the first time (mid-migration).
    pub skipped_pending: usize,
    /// Declared children bound on more nodes than they have owners.
    pub duplicates: usize,
    /// Declared children running on fewer of their owners than the replication factor asks,
    /// submitted again (always 0 with a factor of 1).
    #[serde(default)]
    pub under_replicated: usize,
    /// Orphans another node owns, left to that owner for this round ([`defer_to_owners`]).
    #[serde(default)]
    pub deferred_to_owner: usize,
    /// Local instances of undeclared durable children stopped.
    pub stopped_undeclared: usize,
    /// Stale durable rows removed from this node's copy.
    pub removed_stale: usize,
    /// Wall-clock duration of the round, filled in by the Reconciler.
    pub elapsed_ms: u64,
}

/// What one node does in one round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcilePlan {
    /// Orphans to submit, in id order.
    pub starts: Vec<OrphanStart>,
    /// Instances bound on this node to stop, in id order.
    pub stops: Vec<LocalStop>,
    /// Every duplicate seen (the same on every node); this node's share is in `stops`. The node
    /// stopping its own duplicate instance fires `reconcile_duplicate`.
    pub duplicates: Vec<Duplicate>,
    /// Stale durable rows this node (their ring owner) removes from the registry.
    pub remove_rows: Vec<ChildId>,
    /// Orphans skipped this round because their row is registered but unbound; pass it as
    /// `previous_pending` to the next round.
    pub pending: BTreeSet<ChildId>,
    /// Orphans left to their owner this round ([`defer_to_owners`]): the next round submits
    /// them if they still run nowhere.
    pub deferred: BTreeSet<ChildId>,
    /// The round's counters.
    pub stats: RoundStats,
    /// The round was parked: it did nothing.
    pub parked: bool,
}

impl ReconcilePlan {
    /// The plan does nothing and carries nothing to the next round. A round planned from the
    /// same [`RoundInputs`] would plan the same, so the next round may skip its scan of the
    /// registry and report these counters again (at hundreds of thousands of children the scan
    /// is what a steady round costs).
    pub fn is_quiet(&self) -> bool {
        !self.parked
            && self.starts.is_empty()
            && self.stops.is_empty()
            && self.duplicates.is_empty()
            && self.remove_rows.is_empty()
            && self.pending.is_empty()
            && self.deferred.is_empty()
    }
}

/// Everything a round's plan depends on: the declared copy (by version: each mutation makes a
/// new one), the registry (by its commit count) and the members (the ring is theirs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundInputs {
    /// The declared copy's version.
    pub declared_version: u64,
    /// The registry's commit count when the round read it.
    pub registry_generation: u64,
    /// The other members, sorted.
    pub peers: Vec<NodeName>,
}

/// A quiet round ([`ReconcilePlan::is_quiet`]), remembered with what it was planned from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuietRound {
    /// What the round read.
    pub inputs: RoundInputs,
    /// What it counted.
    pub stats: RoundStats,
}

impl QuietRound {
    /// This quiet round stands for a round planned from `inputs`: nothing it depends on changed.
    pub fn stands_for(&self, inputs: &RoundInputs) -> bool {
        self.inputs == *inputs
    }
}

/// Plans one round on node `local`.
///
/// - `declared`: this node's adopted copy of the list.
/// - `observed`: the registry rows as this node sees them (every node's bindings). Bindings on
///   nodes that are no longer members must already be purged (the Coordinator does that on
///   nodedown and on a changed boot token), or their children would not count as orphans.
/// - `owner_of`: the ring owner of a child, from the current member set.
/// - `previous_pending`: the previous round's [`ReconcilePlan::pending`].
/// - `parked`: the list is lost (or known to be outdated): the plan is empty, and the pending
///   set is carried unchanged.
///
/// Promises (property-tested): never starts a child absent from `declared`; never stops a
/// declared child's keeper instance; a parked plan has no starts, stops or removals; over all
/// nodes, the duplicate stops leave exactly the keeper's instance of each child.
pub fn plan_round<'a>(
    declared: &DeclaredList,
    observed: impl IntoIterator<Item = &'a Row>,
    owner_of: impl Fn(&ChildId) -> NodeName,
    local: &str,
    previous_pending: &BTreeSet<ChildId>,
    parked: bool,
) -> ReconcilePlan {
    plan_replicated_round(
        declared,
        observed,
        |id, _| vec![owner_of(id)],
        local,
        previous_pending,
        parked,
    )
}

/// [`plan_round`] for children that run on several owners (`core::replication`): `owners_of`
/// gives a child's owners in order (the first one alone with a factor of 1), from its id and
/// its row in `observed` if it has one (a row may record a placement of its own).
///
/// A declared child bound on fewer of its owners than it has is submitted again (the start
/// pipeline places it on every owner, and an owner already running it keeps its instance),
/// counted in `RoundStats::under_replicated`; one bound on more nodes than its owners keeps the
/// best-ranked instances (its owners first, then the lowest-named nodes), and the others are
/// stopped as duplicates.
pub fn plan_replicated_round<'a>(
    declared: &DeclaredList,
    observed: impl IntoIterator<Item = &'a Row>,
    owners_of: impl Fn(&ChildId, Option<&Row>) -> Vec<NodeName>,
    local: &str,
    previous_pending: &BTreeSet<ChildId>,
    parked: bool,
) -> ReconcilePlan {
    if parked {
        return ReconcilePlan {
            pending: previous_pending.clone(),
            parked: true,
            ..ReconcilePlan::default()
        };
    }
    let rows: BTreeMap<&ChildId, &Row> = observed.into_iter().map(|r| (r.id(), r)).collect();
    let mut plan = ReconcilePlan::default();
    plan.stats.candidates = declared.len();

    for (id, child) in declared.children() {
        match rows.get(id) {
            Some(row) if !row.node_pids.is_empty() => {
                let owners = owners_of(id, Some(row));
                if row.node_pids.len() > owners.len().max(1) {
                    plan_duplicate(&mut plan, id, row, &owners, local);
                } else if owners.len() > 1 && owners.iter().any(|o| !row.node_pids.contains_key(o))
                {
                    plan.stats.under_replicated += 1;
                    plan.starts.push(OrphanStart {
                        child: child.clone(),
                        owner: owners[0].clone(),
                        unregistered: false,
                        top_up: true,
                    });
                }
            }
            Some(_) if !previous_pending.contains(id) => {
                // Registered but unbound: maybe mid-migration. Give it one round.
                plan.stats.orphans += 1;
                plan.stats.skipped_pending += 1;
                plan.pending.insert(id.clone());
            }
            observed_row => {
                plan.stats.orphans += 1;
                let owner = owners_of(id, observed_row.copied())
                    .into_iter()
                    .next()
                    .unwrap_or_default();
                plan.starts.push(OrphanStart {
                    child: child.clone(),
                    owner,
                    unregistered: observed_row.is_none(),
                    top_up: false,
                });
            }
        }
    }
    plan.stats.started = plan.starts.len();
    plan.stats.duplicates = plan.duplicates.len();

    for (id, row) in &rows {
        if !row.hub.durable || declared.contains(id) {
            continue;
        }
        if row.node_pids.is_empty() {
            plan.remove_rows.push((*id).clone());
        } else if let Some(pid) = row.node_pids.get(local) {
            plan.stops.push(LocalStop {
                id: (*id).clone(),
                pid: *pid,
                reason: StopReason::Undeclared,
            });
            plan.stats.stopped_undeclared += 1;
        }
    }
    plan.stats.removed_stale = plan.remove_rows.len();
    plan.stops.sort_by(|a, b| a.id.cmp(&b.id));
    plan
}

/// The node whose instance of a duplicated child survives: the ring owner if it holds one,
/// otherwise the lowest-named node holding one (any fixed choice works, as long as every node
/// makes the same one).
pub fn duplicate_keeper(row: &Row, owner: &str) -> Option<NodeName> {
    if row.node_pids.contains_key(owner) {
        return Some(owner.to_owned());
    }
    row.node_pids.keys().next().cloned()
}

/// The nodes whose instances of a child bound on more nodes than it has owners survive: the
/// best-ranked ones (`core::replication::ranked`), as many as it has owners (at least one).
/// With one owner this is [`duplicate_keeper`].
pub fn replica_keepers(row: &Row, owners: &[NodeName]) -> Vec<NodeName> {
    let mut keep = crate::core::replication::ranked(owners, row.node_pids.keys());
    keep.truncate(owners.len().max(1));
    keep
}

fn plan_duplicate(
    plan: &mut ReconcilePlan,
    id: &ChildId,
    row: &Row,
    owners: &[NodeName],
    local: &str,
) {
    let keepers = replica_keepers(row, owners);
    let Some(keep) = keepers.first().cloned() else {
        return;
    };
    if !keepers.iter().any(|k| k == local) {
        if let Some(pid) = row.node_pids.get(local) {
            plan.stops.push(LocalStop {
                id: id.clone(),
                pid: *pid,
                reason: StopReason::Duplicate,
            });
        }
    }
    plan.duplicates.push(Duplicate {
        id: id.clone(),
        keep,
        bound_on: row.node_pids.keys().cloned().collect(),
    });
}

/// Leaves to their owners, for one round, the starts of `plan` of unregistered orphans
/// ([`OrphanStart::unregistered`]) that another node owns; they move to `plan.deferred`.
///
/// Every node's round sees the same orphans, so without this each child is submitted once per
/// node: after a whole-cluster outage of N nodes, N times the starts go through the start
/// budgets, routing and the owners' supervisors, which refuse all but one. With it the owner
/// submits its own, and a child whose owner did not (its round has not run, it is parked, it
/// crashed) is submitted by every node one round later. A parked plan is left as it is.
pub fn defer_to_owners(plan: &mut ReconcilePlan, local: &str) {
    if plan.parked {
        return;
    }
    let (keep, defer): (Vec<OrphanStart>, Vec<OrphanStart>) = std::mem::take(&mut plan.starts)
        .into_iter()
        .partition(|start| !start.unregistered || start.owner.is_empty() || start.owner == local);
    plan.starts = keep;
    plan.deferred = defer.into_iter().map(|s| s.child.spec.id).collect();
    plan.stats.deferred_to_owner = plan.deferred.len();
    plan.stats.started = plan.starts.len();
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
