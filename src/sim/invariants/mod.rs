//! The invariants, as code: what must hold after every step and at quiescence, judged from what
//! the nodes show ([`NodeView`]) and what the run was told ([`Ledger`]).
//!
//! | invariant | when | what |
//! |---|---|---|
//! | [`Invariant::DeclaredRunOnce`] | quiescence | every acknowledged durable start the final declared list keeps runs exactly once; the nodes agree on that list, and it is exactly what its leaders decided |
//! | [`Invariant::StoppedStaysStopped`] | quiescence | an acknowledged durable stop the final list keeps is not running anywhere, nor is any durable child the list does not declare; a plain child that ran before a whole-cluster outage (and was not started again) neither runs nor is listed anywhere |
//! | [`Invariant::RegistriesAgree`] | quiescence | every node's registry is the same, says the truth about what runs where, and each child runs once, on its ring owner |
//! | [`Invariant::PlacementBounded`] | every step | no child runs on a node that is not its ring owner (over the nodes that node can reach) for longer than the bound |
//! | [`Invariant::VersionsMonotonic`] | every step | a node's declared version never goes backwards while it keeps its disk |
//! | [`Invariant::RequestsAnswered`] | every step, quiescence | no request is answered twice; at quiescence each was answered once |
//! | [`Invariant::CallsAnswered`] | every step, quiescence | a typed call that is answered gets its own child's answer; at quiescence, a call from any node to any child (which stays put) is answered |
//! | [`Invariant::CastsInOrder`] | quiescence | one sender's typed casts to a child that stays put all arrive, in the order sent |
//! | [`Invariant::MonitorsFireOnce`] | every step, quiescence | a monitor delivers at most one `ChildDown`, none once demonitored; at quiescence, a monitor set from any node on a child that is then stopped fires once, `stopped` |
//! | [`Invariant::NoHandoverToLeaving`] | every step | nodes that leave together hand no child to each other (when the link between them delivers) |
//! | [`Invariant::HandoverStateKept`] | every step, quiescence (hot runs) | an instance the hub reports as having taken a hot-moved child's state (`outcome: imported`) took it before any other message; no two instances of one state's lineage diverge with both acknowledged (each acknowledged an increment the other lacks; increments applied during a partition aside) |
//! | [`Invariant::NoAckedMessageLostAcrossMove`] | every step, quiescence (hot runs) | every increment acknowledged by the instance that exported a state, before the import, is in the imported state |
//! | [`Invariant::OneActiveReplica`] | every step | with replicas (active-passive), no two nodes that see the same members both hold a child's active replica |
//! | [`Invariant::LoadBalanced`] | quiescence | in a load-balanced run, every child runs on the nodes its row records, and no rebalance the leader would ask for is left undone |
//! | [`Invariant::DoubleRunBounded`] | every step, and every 250 ms between | no child runs on more nodes than its replicas within nodes connected through some path (over links that work both ways) for longer than the bound (`sim::split`) |
//! | [`Invariant::AnswersTruthful`] | quiescence | a durable start or stop answered with an error changed nothing (no leader undeclared the stopped child; a refused start's child is not left declared); success and pending answers are acknowledgements the list holds; unknown outcomes are exempt ([`answers`]) |
//!
//! In a run with a replication factor k above 1, "once" reads "on exactly its k owners":
//! `declared_run_once`, `registries_agree` and `placement_bounded` count a child's replicas.
//!
//! The declared list is the leader's, persisted before it is acknowledged and then broadcast; it
//! is not a consensus log. So when two leaders mutate at once (a partition, or a leader that
//! crashed before its broadcast left) one side's acknowledged mutations lose (the documented
//! divergence: the higher version wins, a tie goes to the lowest mutator). The run therefore
//! asks the hubs which leader decided what ([`Ledger::decisions`]) and holds an acknowledged
//! mutation to the final list when the final list's lineage contains its decision; one on a
//! losing branch only has to leave nothing running twice.
//!
//! The functions are public so the integration tests judge their clusters with the same code.
//! The declared list's judgement (the agreed copy, its lineage, who runs what it declares) is in
//! [`declared`]; the quorum runs' watch of a split in `sim::split`.

use std::collections::{BTreeMap, BTreeSet};

use super::ledger::Ledger;
use crate::api::Hub;
use crate::core::declared::delta::ListStamp;
use crate::core::placement::HashRing;
use crate::model::{ChildId, NodeName, Pid};

/// Which promise a check guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// Every acknowledged declared child runs exactly once at quiescence.
    DeclaredRunOnce,
    /// An acknowledged durable stop never runs again.
    StoppedStaysStopped,
    /// Registries agree at quiescence.
    RegistriesAgree,
    /// No child runs outside its owner set for longer than the bounds.
    PlacementBounded,
    /// Declared versions never go backwards on a node.
    VersionsMonotonic,
    /// Every request is answered exactly once.
    RequestsAnswered,
    /// A typed call gets its child's own answer, and a child that stays put answers.
    CallsAnswered,
    /// Typed casts of one sender to a child that stays put arrive, in order.
    CastsInOrder,
    /// A monitor fires at most once (exactly once for a child that is stopped), never after it
    /// is cancelled.
    MonitorsFireOnce,
    /// A leaving node hands no child to a node leaving with it.
    NoHandoverToLeaving,
    /// A hot-moved child's state is neither lost (the new instance the hub names takes it)
    /// nor forked (two instances of it both acknowledging diverging increments).
    HandoverStateKept,
    /// An increment acknowledged to its sender before a hot move is in the state after it.
    NoAckedMessageLostAcrossMove,
    /// At most one active replica of a child among nodes that agree on the members.
    OneActiveReplica,
    /// In a load-balanced run, at quiescence, no move the load balancer would make is left
    /// undone: the children per node are within the rebalance threshold, or the busiest node
    /// has no child it may move.
    LoadBalanced,
    /// Under a quorum strategy, while the cluster is split cleanly into sides, no child runs on
    /// two sides for longer than the partition-detection bound.
    QuorumOneSide,
    /// Under a quorum strategy, no acknowledged durable mutation is lost to another side's
    /// list: the minority acknowledges none.
    QuorumNoMinorityAck,
    /// Every answer to a durable start or stop matches what happened: an error only when the
    /// list did not change, success or pending only when it did.
    AnswersTruthful,
    /// No child runs on more nodes than its replicas within nodes connected through some path
    /// for longer than the stated bound (`sim::split::DoubleRunWatch`).
    DoubleRunBounded,
}

impl Invariant {
    /// Every invariant.
    pub const ALL: [Invariant; 18] = [
        Invariant::DeclaredRunOnce,
        Invariant::StoppedStaysStopped,
        Invariant::RegistriesAgree,
        Invariant::PlacementBounded,
        Invariant::VersionsMonotonic,
        Invariant::RequestsAnswered,
        Invariant::CallsAnswered,
        Invariant::CastsInOrder,
        Invariant::MonitorsFireOnce,
        Invariant::NoHandoverToLeaving,
        Invariant::HandoverStateKept,
        Invariant::NoAckedMessageLostAcrossMove,
        Invariant::OneActiveReplica,
        Invariant::LoadBalanced,
        Invariant::QuorumOneSide,
        Invariant::QuorumNoMinorityAck,
        Invariant::AnswersTruthful,
        Invariant::DoubleRunBounded,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::DeclaredRunOnce => "declared_run_once",
            Invariant::StoppedStaysStopped => "stopped_stays_stopped",
            Invariant::RegistriesAgree => "registries_agree",
            Invariant::PlacementBounded => "placement_bounded",
            Invariant::VersionsMonotonic => "versions_monotonic",
            Invariant::RequestsAnswered => "requests_answered",
            Invariant::CallsAnswered => "calls_answered",
            Invariant::CastsInOrder => "casts_in_order",
            Invariant::MonitorsFireOnce => "monitors_fire_once",
            Invariant::NoHandoverToLeaving => "no_handover_to_leaving",
            Invariant::HandoverStateKept => "handover_state_kept",
            Invariant::NoAckedMessageLostAcrossMove => "no_acked_message_lost_across_move",
            Invariant::OneActiveReplica => "one_active_replica",
            Invariant::LoadBalanced => "load_balanced",
            Invariant::QuorumOneSide => "quorum_one_side",
            Invariant::DoubleRunBounded => "double_run_bounded",
            Invariant::QuorumNoMinorityAck => "quorum_no_minority_ack",
            Invariant::AnswersTruthful => "answers_truthful",
        }
    }
}

impl std::fmt::Display for Invariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A broken invariant and what broke it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant.
    pub invariant: Invariant,
    /// What broke it.
    pub detail: String,
}

impl Violation {
    pub(crate) fn new(invariant: Invariant, detail: impl Into<String>) -> Self {
        Self {
            invariant,
            detail: detail.into(),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// What one node shows: what its supervisor runs, its registry copy, its declared copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// The node.
    pub node: NodeName,
    /// Children the node's supervisor runs, with their pids.
    pub running: BTreeMap<ChildId, Pid>,
    /// The registry copy: child -> node -> pid.
    pub registry: BTreeMap<ChildId, BTreeMap<NodeName, Pid>>,
    /// The members as the node sees them (itself included).
    pub members: Vec<NodeName>,
    /// The declared copy's stamp and children (`None` without auto-recovery or while parked).
    pub declared: Option<(ListStamp, BTreeSet<ChildId>)>,
}

impl NodeView {
    /// What `hub` shows now.
    pub fn of(hub: &Hub) -> Self {
        let shared = hub.shared();
        let running = shared
            .local_children
            .iter()
            .map(|e| (e.key().clone(), e.value().get_id().pid()))
            .collect();
        let registry = hub
            .registry_dump()
            .into_iter()
            .map(|(id, row)| (id, row.node_pids))
            .collect();
        let declared = shared.recovery.as_ref().and_then(|r| {
            let snapshot = r.snapshot();
            (!snapshot.parked).then(|| {
                let children = snapshot.list.children().keys().cloned().collect();
                (snapshot.list.stamp(), children)
            })
        });
        Self {
            node: hub.node().clone(),
            running,
            registry,
            members: hub.nodes(true),
            declared,
        }
    }
}

/// Every node's registry is the same, and it tells the truth: a row bound on a node is run
/// there under that pid, and whatever runs has its row.
pub fn registries_agree(views: &[NodeView]) -> Result<(), Violation> {
    let Some(first) = views.first() else {
        return Ok(());
    };
    for view in &views[1..] {
        if view.registry != first.registry {
            let diff: Vec<String> = first
                .registry
                .keys()
                .chain(view.registry.keys())
                .filter(|id| first.registry.get(*id) != view.registry.get(*id))
                .take(3)
                .map(|id| {
                    format!(
                        "{id}: {:?} on {} vs {:?} on {}",
                        first.registry.get(id),
                        first.node,
                        view.registry.get(id),
                        view.node
                    )
                })
                .collect();
            return Err(Violation::new(
                Invariant::RegistriesAgree,
                format!("registries differ: {diff:?}"),
            ));
        }
    }
    let by_node: BTreeMap<&NodeName, &NodeView> = views.iter().map(|v| (&v.node, v)).collect();
    for (id, nodes) in &first.registry {
        for (node, pid) in nodes {
            match by_node.get(node).map(|v| v.running.get(id)) {
                Some(Some(running)) if running == pid => {}
                Some(running) => {
                    return Err(Violation::new(
                        Invariant::RegistriesAgree,
                        format!(
                        "the registry binds {id} on {node} as {pid}, it runs there as {running:?}"
                    ),
                    ))
                }
                None => {
                    return Err(Violation::new(
                        Invariant::RegistriesAgree,
                        format!("the registry binds {id} on {node}, which is down"),
                    ))
                }
            }
        }
    }
    for view in views {
        for (id, pid) in &view.running {
            if first.registry.get(id).and_then(|n| n.get(&view.node)) != Some(pid) {
                return Err(Violation::new(
                    Invariant::RegistriesAgree,
                    format!(
                        "{id} runs on {} as {pid} but the registry says {:?}",
                        view.node,
                        first.registry.get(id)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Each child of the (agreed) registry runs exactly once, on its ring owner among `members`.
pub fn each_once_on_its_owner(views: &[NodeView], members: &[NodeName]) -> Result<(), Violation> {
    each_once_where_placed(views, members, &BTreeMap::new())
}

/// Each child of the (agreed) registry runs exactly once: on its ring owner among `members`,
/// or for a child in `guided` (its node, and whether it may fall back), on that node, or
/// anywhere if it may fall back (it never migrates back from where the ring put it).
pub fn each_once_where_placed(
    views: &[NodeView],
    members: &[NodeName],
    guided: &BTreeMap<ChildId, (NodeName, bool)>,
) -> Result<(), Violation> {
    let Some(first) = views.first() else {
        return Ok(());
    };
    let ring = HashRing::new(members.iter().cloned());
    for (id, nodes) in &first.registry {
        let on: Vec<&NodeName> = nodes.keys().collect();
        let owner = match guided.get(id) {
            Some((_, true)) => on.first().copied(),
            Some((node, false)) => Some(node),
            None => ring.owner(id),
        };
        if on.len() != 1 || Some(on[0]) != owner {
            return Err(Violation::new(
                Invariant::RegistriesAgree,
                format!("{id} runs on {on:?}, its owner is {owner:?}"),
            ));
        }
    }
    Ok(())
}

/// With `k` replicas: every child in the registry (the first view's; [`registries_agree`]
/// checks the others agree) is bound on exactly its first `k` ring owners among `members`.
pub fn replicas_on_owners(
    views: &[NodeView],
    members: &[NodeName],
    k: usize,
) -> Result<(), Violation> {
    let Some(first) = views.first() else {
        return Ok(());
    };
    let ring = HashRing::new(members.iter().cloned());
    for (id, nodes) in &first.registry {
        let on: BTreeSet<&NodeName> = nodes.keys().collect();
        let owners: BTreeSet<&NodeName> = ring.owners(id, k).into_iter().collect();
        if on != owners {
            return Err(Violation::new(
                Invariant::RegistriesAgree,
                format!("{id} runs on {on:?}, its {k} owners are {owners:?}"),
            ));
        }
    }
    Ok(())
}

/// In a load-balanced run: every child in the registry (the first view's) is bound on exactly
/// the nodes its row records (`expected`: the placement the start chose by load, or its ring
/// owners once those nodes are gone).
pub fn runs_where_recorded(
    views: &[NodeView],
    expected: &BTreeMap<ChildId, BTreeSet<NodeName>>,
) -> Result<(), Violation> {
    let Some(first) = views.first() else {
        return Ok(());
    };
    for (id, nodes) in &first.registry {
        let on: BTreeSet<&NodeName> = nodes.keys().collect();
        let recorded: BTreeSet<&NodeName> = expected.get(id).into_iter().flatten().collect();
        if on != recorded {
            return Err(Violation::new(
                Invariant::LoadBalanced,
                format!("{id} runs on {on:?}, its row records {recorded:?}"),
            ));
        }
    }
    Ok(())
}

/// In a load-balanced run at quiescence: the children per node (`children`) call for no move
/// (`core::load::plan_rebalance` with `threshold`), or the busiest node has no child it may
/// move to the idlest (`movable(from, to)`).
pub fn no_rebalance_left_undone(
    children: &BTreeMap<NodeName, u64>,
    threshold: f64,
    movable: impl Fn(&NodeName, &NodeName) -> bool,
) -> Result<(), Violation> {
    let Some(plan) = crate::core::load::plan_rebalance(children, threshold, u64::MAX) else {
        return Ok(());
    };
    if movable(&plan.from, &plan.to) {
        return Err(Violation::new(
            Invariant::LoadBalanced,
            format!(
                "children per node {children:?}: {} could still move {} to {}",
                plan.from, plan.count, plan.to
            ),
        ));
    }
    Ok(())
}

/// With replicas: the nodes that hold a child's active replica, as each sees it (`active`:
/// child -> `(node, the members it sees)`), are never two that see the same members.
pub fn one_active_replica(
    active: &BTreeMap<ChildId, Vec<(NodeName, Vec<NodeName>)>>,
) -> Result<(), Violation> {
    for (id, holders) in active {
        for (i, (a, seen_a)) in holders.iter().enumerate() {
            if let Some((b, _)) = holders[i + 1..].iter().find(|(_, seen_b)| seen_b == seen_a) {
                return Err(Violation::new(
                    Invariant::OneActiveReplica,
                    format!(
                        "{id} is active on both {a} and {b}, which see the same members {seen_a:?}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Watches that no node's declared version goes backwards while it keeps its disk.
#[derive(Default)]
pub struct VersionWatch {
    /// The highest version seen per node and disk.
    seen: BTreeMap<(NodeName, u64), u64>,
}

impl VersionWatch {
    /// Takes `version` as seen on `node` (its disk in generation `disk`).
    pub fn observe(&mut self, node: &NodeName, disk: u64, version: u64) -> Result<(), Violation> {
        let seen = self.seen.entry((node.clone(), disk)).or_insert(version);
        if version < *seen {
            return Err(Violation::new(
                Invariant::VersionsMonotonic,
                format!(
                    "{node}'s declared version went from {} back to {version}",
                    *seen
                ),
            ));
        }
        *seen = version;
        Ok(())
    }
}

/// Watches how long each child runs on a node that is not its owner.
pub struct PlacementWatch {
    bound_ms: u64,
    /// `(node, child)` -> since when it runs there off its owner.
    misplaced: BTreeMap<(NodeName, ChildId), u64>,
}

impl PlacementWatch {
    /// A watch allowing `bound_ms` off the owner.
    pub fn new(bound_ms: u64) -> Self {
        Self {
            bound_ms,
            misplaced: BTreeMap::new(),
        }
    }

    /// Takes what runs now: `placements` yields `(node, child, owner)` for every running
    /// instance, with the owner over the nodes `node` can reach.
    pub fn observe<'a>(
        &mut self,
        now_ms: u64,
        placements: impl IntoIterator<Item = (&'a NodeName, &'a ChildId, Option<&'a NodeName>)>,
    ) -> Result<(), Violation> {
        let mut still = BTreeMap::new();
        for (node, id, owner) in placements {
            if owner == Some(node) {
                continue;
            }
            let key = (node.clone(), id.clone());
            let since = self.misplaced.get(&key).copied().unwrap_or(now_ms);
            if now_ms.saturating_sub(since) > self.bound_ms {
                return Err(Violation::new(
                    Invariant::PlacementBounded,
                    format!(
                        "{id} has run on {node} for {} ms while its owner is {owner:?} (bound {} ms)",
                        now_ms - since,
                        self.bound_ms
                    ),
                ));
            }
            still.insert(key, since);
        }
        self.misplaced = still;
        Ok(())
    }
}

/// After a whole-cluster outage only the declared list returns (every simulated hub runs
/// auto-recovery, so its registry backend opens with `recovery_replay` off): none of `gone`,
/// the plain children that ran before an outage and were not started again since, runs
/// anywhere or is listed in any node's registry, whatever backend kept the rows.
pub fn undeclared_stays_gone(
    views: &[NodeView],
    gone: &BTreeSet<ChildId>,
) -> Result<(), Violation> {
    for view in views {
        let back = gone
            .iter()
            .find(|id| view.running.contains_key(*id) || view.registry.contains_key(*id));
        if let Some(id) = back {
            return Err(Violation::new(
                Invariant::StoppedStaysStopped,
                format!(
                    "plain child {id} ran before a whole-cluster outage and is back on {} \
                     (running: {}); only the declared list returns",
                    view.node,
                    view.running.contains_key(id)
                ),
            ));
        }
    }
    Ok(())
}

/// No request was answered twice; with `all`, every request was answered.
pub fn requests_answered(ledger: &Ledger, all: bool) -> Result<(), Violation> {
    let bad = if all {
        ledger.unanswered()
    } else {
        ledger.answered_twice()
    };
    match bad.first() {
        None => Ok(()),
        Some((id, request)) => Err(Violation::new(
            Invariant::RequestsAnswered,
            format!(
                "request {id} ({} through {} at {} ms) was answered {} times",
                request.what, request.node, request.issued_ms, request.answers
            ),
        )),
    }
}

pub mod answers;
pub mod declared;
pub use answers::answers_truthful;
pub use declared::{
    declared_lists_agree, declared_run_as_decided, declared_run_as_decided_with, judge_declared,
    DeclaredVerdict,
};

#[cfg(test)]
mod tests;
