//! The declared list's invariants: the nodes agree on one copy, the copy is exactly what its
//! leaders decided (its lineage), every acknowledged mutation in force is in it, and what it
//! declares runs exactly once while what was stopped stays stopped.

use std::collections::{BTreeMap, BTreeSet};

use super::{Invariant, NodeView, Violation};
use crate::core::declared::delta::ListStamp;
use crate::model::{ChildId, NodeName, Pid};
use crate::sim::ledger::{Decision, Ledger};

/// The nodes agree on one declared copy; returns it.
pub fn declared_lists_agree(
    views: &[NodeView],
) -> Result<Option<(ListStamp, BTreeSet<ChildId>)>, Violation> {
    let mut agreed: Option<&(ListStamp, BTreeSet<ChildId>)> = None;
    for view in views {
        let Some(copy) = &view.declared else {
            return Err(Violation::new(
                Invariant::DeclaredRunOnce,
                format!("{} has no usable declared copy (parked)", view.node),
            ));
        };
        match agreed {
            None => agreed = Some(copy),
            Some(first) if first == copy => {}
            Some(first) => {
                return Err(Violation::new(
                    Invariant::DeclaredRunOnce,
                    format!(
                        "declared copies differ: v{} by {:?} on {} vs v{} by {:?}",
                        first.0.version,
                        first.0.last_mutated_by,
                        views[0].node,
                        copy.0.version,
                        copy.0.last_mutated_by
                    ),
                ))
            }
        }
    }
    Ok(agreed.cloned())
}

/// What the final declared list owes the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeclaredVerdict {
    /// Acknowledged durable starts whose decision is in the final list's lineage.
    pub starts_in_force: usize,
    /// Acknowledged durable stops whose decision is in the lineage (and not re-declared after).
    pub stops_in_force: usize,
    /// Acknowledged mutations that lost to another leader's (the documented divergence).
    pub superseded: usize,
    /// The requests of those whose decision is not in the final list's lineage at all (a
    /// mutation re-declared later is superseded, not lost).
    pub lost_requests: Vec<u64>,
    /// Children acknowledged stopped, in force: they must not run.
    pub stopped: BTreeSet<ChildId>,
}

type StampKey = (u64, Option<NodeName>, u64);

fn key(stamp: &ListStamp) -> StampKey {
    (stamp.version, stamp.last_mutated_by.clone(), stamp.digest)
}

/// Judges the final declared copy (`stamp`, `children`) against what the leaders decided and
/// what the run was told.
pub fn judge_declared(
    ledger: &Ledger,
    stamp: &ListStamp,
    children: &BTreeSet<ChildId>,
) -> Result<DeclaredVerdict, Violation> {
    // The lineage of the final copy: the decisions that led to it, oldest first.
    let changing: BTreeMap<StampKey, &Decision> = ledger
        .decisions
        .iter()
        .filter(|d| d.result != d.base)
        .map(|d| (key(&d.result), d))
        .collect();
    let mut lineage: Vec<&Decision> = Vec::new();
    let mut cursor = stamp.clone();
    while cursor.version > 0 {
        let Some(decision) = changing.get(&key(&cursor)) else {
            return Err(Violation::new(
                Invariant::DeclaredRunOnce,
                format!(
                    "the final copy's history breaks at v{} by {:?}: no leader decided it",
                    cursor.version, cursor.last_mutated_by
                ),
            ));
        };
        lineage.push(decision);
        cursor = decision.base.clone();
    }
    lineage.reverse();
    let position: BTreeMap<StampKey, usize> = std::iter::once((key(&cursor), 0))
        .chain(
            lineage
                .iter()
                .enumerate()
                .map(|(i, d)| (key(&d.result), i + 1)),
        )
        .collect();
    // The copy is exactly what its leaders decided.
    let mut folded = BTreeSet::new();
    for decision in &lineage {
        if decision.cleared {
            folded.clear();
        }
        folded.extend(decision.declared.iter().cloned());
        for id in &decision.undeclared {
            folded.remove(id);
        }
    }
    if &folded != children {
        let extra: Vec<&ChildId> = children.difference(&folded).take(3).collect();
        let missing: Vec<&ChildId> = folded.difference(children).take(3).collect();
        return Err(Violation::new(
            Invariant::DeclaredRunOnce,
            format!("the agreed copy is not what its leaders decided: extra {extra:?}, missing {missing:?}"),
        ));
    }
    let mut verdict = DeclaredVerdict::default();
    for ack in &ledger.acknowledged {
        let decided = |d: &&Decision| {
            ack.ids.iter().all(|id| {
                if ack.start {
                    d.declared.contains(id)
                } else {
                    d.names(id) && !d.declared.contains(id)
                }
            })
        };
        let candidates: Vec<&Decision> = ledger.decisions.iter().filter(decided).collect();
        if candidates.is_empty() {
            let invariant = if ack.start {
                Invariant::DeclaredRunOnce
            } else {
                Invariant::StoppedStaysStopped
            };
            return Err(Violation::new(
                invariant,
                format!(
                    "request {}: a durable {} of {:?} was acknowledged, but no leader decided it",
                    ack.request,
                    if ack.start { "start" } else { "stop" },
                    ack.ids
                ),
            ));
        }
        let Some(at) = candidates
            .iter()
            .filter_map(|d| position.get(&key(&d.result)).copied())
            .max()
        else {
            verdict.superseded += 1;
            verdict.lost_requests.push(ack.request);
            continue;
        };
        if ack.start {
            verdict.starts_in_force += 1;
            continue;
        }
        let redeclared_later = lineage[at..]
            .iter()
            .any(|d| ack.ids.iter().any(|id| d.declared.contains(id)));
        if redeclared_later {
            verdict.superseded += 1;
        } else {
            verdict.stops_in_force += 1;
            verdict.stopped.extend(ack.ids.iter().cloned());
        }
    }
    Ok(verdict)
}

/// Every child of the final declared list runs exactly once; no other durable child runs (one
/// acknowledged stopped least of all).
pub fn declared_run_as_decided(
    running: &BTreeMap<ChildId, BTreeMap<NodeName, Pid>>,
    declared: &BTreeSet<ChildId>,
    durable: &BTreeSet<ChildId>,
    stopped: &BTreeSet<ChildId>,
) -> Result<(), Violation> {
    declared_run_as_decided_with(running, declared, durable, stopped, 1)
}

/// [`declared_run_as_decided`] with `copies` instances per declared child (its replicas).
pub fn declared_run_as_decided_with(
    running: &BTreeMap<ChildId, BTreeMap<NodeName, Pid>>,
    declared: &BTreeSet<ChildId>,
    durable: &BTreeSet<ChildId>,
    stopped: &BTreeSet<ChildId>,
    copies: usize,
) -> Result<(), Violation> {
    for id in declared {
        let on = running.get(id).map_or(0, BTreeMap::len);
        if on != copies {
            return Err(Violation::new(
                Invariant::DeclaredRunOnce,
                format!(
                    "declared {id} runs {on} times ({:?})",
                    running.get(id).map(|n| n.keys().collect::<Vec<_>>())
                ),
            ));
        }
    }
    for id in durable.difference(declared) {
        if let Some(nodes) = running.get(id) {
            let invariant = if stopped.contains(id) {
                Invariant::StoppedStaysStopped
            } else {
                Invariant::DeclaredRunOnce
            };
            return Err(Violation::new(
                invariant,
                format!(
                    "durable {id} is not declared but runs on {:?}",
                    nodes.keys().collect::<Vec<_>>()
                ),
            ));
        }
    }
    Ok(())
}
