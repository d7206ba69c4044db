//! Redistribution planning: which children move when the membership changes, and where to.
//!
//! A pass runs when a batch of membership events is due (`core::event_batch`). From this node's
//! registry copy, the ring and who is up, it decides two things:
//! - **migrations**: a child this node runs whose ring owner is another member that is up moves
//!   there (cold swap: stopped here, then started on the owner);
//! - **re-placements**: a child no live node runs (its node's bindings were reaped: the grace ran
//!   out or the node restarted, or a migration lost its second half) is started on its owner.
//!   Every node holding the stub plans the same start and the owner's supervisor keeps one
//!   child; a node that does not hold the row (it restarted empty) learns it from the others.
//!
//! A guided child (`core::guided`) never migrates, and is re-placed on its own node, or on its
//! ring owner only when all its nodes are gone and its start allowed it. A child placed by load
//! (`core::load`) re-placed on its ring owner is recorded there.
//!
//! A node counts as live while it is up or within its grace period after going down, so a flap
//! shorter than the grace moves nothing. A child with a migration or a re-placement in flight,
//! or one waiting for a retry, is left alone.
//!
//! With durable children a row alone is not enough to bring a durable child back: it may be a
//! stale row of a child stopped while the node that kept the row was away. Such a row is
//! re-placed only when the declared list this node trusts declares it; otherwise it is held
//! back and the reconcile round decides.
//!
//! Pure: the Coordinator gathers the inputs, calls [`plan_redistribution`] and carries the plan
//! out (stops, starts, retries).

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};

use crate::core::declared::list::DeclaredList;
use crate::core::guided::{Guided, Owner};
use crate::core::placement::HashRing;
use crate::core::replication::owners_of;
use crate::model::{ChildId, NodeName, Row};

/// What a pass knows of the declared list.
#[derive(Clone, Copy, Debug)]
pub enum DeclaredKnowledge<'a> {
    /// Auto-recovery is off: rows decide.
    Off,
    /// This node's copy cannot be trusted (it is parked, or a peer announced a newer one).
    Untrusted,
    /// The copy this node trusts.
    Current(&'a DeclaredList),
}

impl DeclaredKnowledge<'_> {
    /// Whether `row` may be re-placed from the registry alone: always for a child that was never
    /// durable, for a durable one only when the trusted copy declares it.
    pub fn allows(&self, row: &Row) -> bool {
        match self {
            Self::Off => true,
            _ if !row.hub.durable => true,
            Self::Untrusted => false,
            Self::Current(list) => list.contains(&row.spec.id),
        }
    }
}

/// Who is around, as this node sees it.
#[derive(Clone, Copy, Debug)]
pub struct Liveness<'a> {
    /// This node.
    pub me: &'a NodeName,
    /// The peers that are up (this node excluded).
    pub up: &'a BTreeSet<NodeName>,
    /// The peers that went down but are within their grace period: their children still count
    /// as running.
    pub in_grace: &'a BTreeSet<NodeName>,
}

impl Liveness<'_> {
    fn is_member(&self, node: &NodeName) -> bool {
        node == self.me || self.up.contains(node)
    }

    fn is_live(&self, node: &NodeName) -> bool {
        self.up.contains(node) || self.in_grace.contains(node)
    }

    /// Whether a binding on `node` counts as a running child: this node, an up peer, or one
    /// within its grace. A binding of a node past its grace (its reap may still wait) runs
    /// nothing.
    pub fn runs_on(&self, node: &str) -> bool {
        node == self.me.as_str() || self.up.contains(node) || self.in_grace.contains(node)
    }
}

/// What one pass does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedistributionPlan {
    /// Children running here to move, by their new owner (one stop batch here, then one start
    /// batch there, per owner).
    pub migrations: BTreeMap<NodeName, Vec<Row>>,
    /// Children no live node runs, to start on their owner, by owner (one start batch each).
    pub replacements: BTreeMap<NodeName, Vec<Row>>,
    /// Durable rows no live node runs that the declared list does not let this node re-place.
    pub held_back: Vec<ChildId>,
    /// Replicas this node runs off the child's owners while every owner runs one already: they
    /// stop here (released), nothing moves.
    pub excess: Vec<ChildId>,
}

impl RedistributionPlan {
    /// How many children migrate.
    pub fn migrating(&self) -> usize {
        self.migrations.values().map(Vec::len).sum()
    }

    /// How many children are re-placed.
    pub fn replacing(&self) -> usize {
        self.replacements.values().map(Vec::len).sum()
    }

    /// Every child the plan moves or starts.
    pub fn children(&self) -> impl Iterator<Item = &ChildId> {
        self.migrations
            .values()
            .chain(self.replacements.values())
            .flatten()
            .map(|row| &row.spec.id)
    }
}

/// A row a pass plans from: borrowed, when the caller keeps its rows (the plan copies the rows
/// it moves), or owned, when the caller hands them over (the plan keeps the rows it moves and
/// drops the others, with no copy: at a failover of thousands of children the copies and the
/// drop of the originals were most of the pass).
pub trait PassRow: Borrow<Row> {
    /// The row, owned.
    fn into_row(self) -> Row;
}

impl PassRow for &Row {
    fn into_row(self) -> Row {
        self.clone()
    }
}

impl PassRow for Row {
    fn into_row(self) -> Row {
        self
    }
}

/// Plans one redistribution pass over `rows` (this node's registry copy), one instance per
/// child.
///
/// Promises: every child appears at most once in the plan; a migration goes from this node to
/// an up peer; a re-placement goes to a member (this node or an up peer); a durable row the
/// declared list does not allow is never re-placed; a child in `busy` is left alone.
pub fn plan_redistribution<R: PassRow>(
    rows: impl IntoIterator<Item = R>,
    ring: &HashRing,
    live: Liveness<'_>,
    declared: DeclaredKnowledge<'_>,
    busy: &BTreeSet<ChildId>,
) -> RedistributionPlan {
    plan_replicated_redistribution(rows, ring, 1, live, declared, busy)
}

/// What a pass does with one row.
enum Decision {
    /// Nothing.
    Nothing,
    /// It migrates to this member.
    Migrate(NodeName),
    /// It is started on these owners; a child placed by load is recorded on the first
    /// (`Some`: its placement as rewritten).
    Replace(Vec<NodeName>, Option<Guided>),
    /// Its durable row waits for the reconcile round.
    HeldBack,
    /// A replica to stop here.
    Excess,
}

/// [`plan_redistribution`] with `factor` replicas per child (`core::replication`): each child
/// runs on its `factor` owners.
///
/// - A replica this node runs off its owners migrates to the first owner that is up and runs
///   none, so a join moves replicas only to the joiner; when every owner runs one already it
///   is excess, and stops here.
/// - A child with fewer live instances than `factor` (a node's instance counts while the node
///   is within its grace) is started on the owners that run none, up to `factor`; every node
///   holding the row plans the same starts and each owner's supervisor keeps one instance.
///
/// Promises, beyond [`plan_redistribution`]'s: a child appears in at most one migration of this
/// node, and its re-placements go to distinct owners.
pub fn plan_replicated_redistribution<R: PassRow>(
    rows: impl IntoIterator<Item = R>,
    ring: &HashRing,
    factor: usize,
    live: Liveness<'_>,
    declared: DeclaredKnowledge<'_>,
    busy: &BTreeSet<ChildId>,
) -> RedistributionPlan {
    let mut plan = RedistributionPlan::default();
    for row in rows {
        let decision = {
            let row: &Row = row.borrow();
            if busy.contains(&row.spec.id) {
                continue;
            }
            if factor > 1 {
                decide_replicas(row, ring, factor, live, declared)
            } else {
                decide(row, ring, live, declared)
            }
        };
        match decision {
            Decision::Nothing => {}
            Decision::Migrate(to) => plan.migrations.entry(to).or_default().push(row.into_row()),
            Decision::HeldBack => plan.held_back.push(row.borrow().spec.id.clone()),
            Decision::Excess => plan.excess.push(row.borrow().spec.id.clone()),
            Decision::Replace(mut owners, placed) => {
                let mut row = row.into_row();
                if let Some(placed) = placed {
                    placed.write(&mut row.metadata);
                }
                let last = owners.pop();
                for owner in owners {
                    plan.replacements
                        .entry(owner)
                        .or_default()
                        .push(row.clone());
                }
                if let Some(owner) = last {
                    plan.replacements.entry(owner).or_default().push(row);
                }
            }
        }
    }
    plan
}

/// What a pass with one instance per child does with `row`.
fn decide(
    row: &Row,
    ring: &HashRing,
    live: Liveness<'_>,
    declared: DeclaredKnowledge<'_>,
) -> Decision {
    let id = &row.spec.id;
    let guided = Guided::of(&row.metadata);
    let owner = match &guided {
        None => ring.owner(id),
        Some(guided) => match guided.owner(|n| live.is_member(n), ring.owner(id)) {
            Some(Owner::Node(node)) => Some(node),
            _ => None,
        },
    };
    let Some(owner) = owner else {
        return Decision::Nothing;
    };
    if row.node_pids.contains_key(live.me) {
        // A guided child never migrates: joins do not move it off the node it runs on. A
        // second copy (a partition let the ring re-place it) gives way to the one on its
        // own node, or when none runs there, to the copy on the lowest-named node.
        if guided.is_some() {
            let keeper = if row.node_pids.contains_key(owner) {
                Some(owner)
            } else {
                row.node_pids
                    .keys()
                    .find(|n| *n == live.me || live.up.contains(*n))
            };
            return match keeper.filter(|k| *k != live.me && live.up.contains(*k)) {
                Some(keeper) => Decision::Migrate(keeper.clone()),
                None => Decision::Nothing,
            };
        }
        if owner != live.me && live.up.contains(owner) {
            return Decision::Migrate(owner.clone());
        }
        return Decision::Nothing;
    }
    if row.node_pids.keys().any(|n| live.is_live(n)) {
        return Decision::Nothing;
    }
    if !declared.allows(row) {
        return Decision::HeldBack;
    }
    if !live.is_member(owner) {
        return Decision::Nothing;
    }
    let owner = owner.clone();
    // Placed by load, its node gone: it falls back to its ring owner and is recorded there,
    // so nothing waits for the old node and a rebalance may move it. Every node holding the
    // stub records the same owner.
    let placed = guided
        .filter(|g| g.by_load && !g.nodes.contains(&owner))
        .map(|mut placed| {
            placed.nodes = vec![owner.clone()];
            placed
        });
    Decision::Replace(vec![owner], placed)
}

/// Children per start batch of a re-placement: about what a caller's request of 1,000 brings
/// each owner of a three-node cluster. A failover's children go in several batches so that
/// their starts, registry writes and peers' merges overlap; one batch of them all ran each
/// stage after the other.
pub const REPLACEMENT_BATCH: usize = 500;

/// One start batch of a re-placement, with the children sent ahead of it in the same pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplacementBatch<T> {
    /// Children of the batches before this one: they start first, so the batch's timeout
    /// allows for them too, and the last batch has the time one batch of them all had.
    pub ahead: usize,
    /// The batch's children, in the pass's order.
    pub children: Vec<T>,
}

/// `children` (each with its target) in start batches of at most [`REPLACEMENT_BATCH`], in
/// order.
pub fn replacement_batches<T>(children: Vec<T>) -> Vec<ReplacementBatch<T>> {
    let mut batches = Vec::with_capacity(children.len().div_ceil(REPLACEMENT_BATCH));
    let mut ahead = 0;
    let mut children = children.into_iter().peekable();
    while children.peek().is_some() {
        let batch: Vec<T> = children.by_ref().take(REPLACEMENT_BATCH).collect();
        let size = batch.len();
        batches.push(ReplacementBatch {
            ahead,
            children: batch,
        });
        ahead += size;
    }
    batches
}

/// Whether a pass could plan anything for the row with this id bound to `bound`: the rows the
/// Coordinator reads whole and gives [`plan_replicated_redistribution`], so that a pass reads
/// the rows that can move (those bound to no live node, those this node runs off their owner,
/// and a replicated child's rows short of instances) instead of every row. Decided from the id
/// and the bindings alone, which a store answers without unpacking the spec, arguments and
/// metadata (`Storage::for_each_placement`).
///
/// Promise: for any rows, planning over the rows it accepts gives the same plan as planning
/// over every row (the planner decides each row by itself, and it rejects only rows for which
/// the planner decides nothing). It may accept rows for which nothing is planned: a guided
/// child this node runs alone whose ring owner is another node, and with `factor` above 1
/// every row this node runs (its owners may come from its metadata).
pub fn may_plan<'n>(
    id: &ChildId,
    bound: impl IntoIterator<Item = &'n str>,
    ring: &HashRing,
    factor: usize,
    live: Liveness<'_>,
    busy: &BTreeSet<ChildId>,
) -> bool {
    if busy.contains(id) {
        return false;
    }
    let (mut here, mut nodes, mut running) = (false, 0usize, 0usize);
    for node in bound {
        nodes += 1;
        here |= node == live.me.as_str();
        running += usize::from(live.runs_on(node));
    }
    if factor > 1 {
        // Off its owners (migration or excess) needs the owners, which a guided child's
        // metadata names; short of instances needs fewer than `factor` running.
        return here || running < factor;
    }
    if here {
        // A guided child migrates only to another node running it; any other child only to
        // its ring owner when that owner is an up peer.
        return nodes > 1
            || ring
                .owner(id)
                .is_some_and(|owner| owner != live.me && live.up.contains(owner));
    }
    running == 0
}

/// What a pass with `factor` instances per child does with `row`.
fn decide_replicas(
    row: &Row,
    ring: &HashRing,
    factor: usize,
    live: Liveness<'_>,
    declared: DeclaredKnowledge<'_>,
) -> Decision {
    let id = &row.spec.id;
    let owners = owners_of(ring, id, factor, Some(&row.metadata), |n| live.is_member(n));
    if owners.is_empty() {
        return Decision::Nothing;
    }
    if row.node_pids.contains_key(live.me) && !owners.contains(live.me) {
        let target = owners
            .iter()
            .find(|o| live.up.contains(*o) && !row.node_pids.contains_key(*o));
        return if let Some(target) = target {
            Decision::Migrate(target.clone())
        } else if owners.iter().all(|o| row.node_pids.contains_key(o)) {
            Decision::Excess
        } else {
            Decision::Nothing
        };
    }
    let running = row
        .node_pids
        .keys()
        .filter(|n| *n == live.me || live.is_live(n))
        .count();
    if running >= factor.min(owners.len()) {
        return Decision::Nothing;
    }
    if running == 0 && !declared.allows(row) {
        return Decision::HeldBack;
    }
    let missing: Vec<NodeName> = owners
        .iter()
        .filter(|o| live.is_member(o) && !row.node_pids.contains_key(*o))
        .take(factor.min(owners.len()) - running)
        .cloned()
        .collect();
    if missing.is_empty() {
        return Decision::Nothing;
    }
    Decision::Replace(missing, None)
}

#[cfg(test)]
#[path = "redistribution_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "redistribution_candidates_tests.rs"]
mod candidates_tests;
