//! What the simulator's children did with their state, as they tell it: the ground truth the
//! hot-swap invariants ([`super::invariants::Invariant::HandoverStateKept`],
//! [`super::invariants::Invariant::NoAckedMessageLostAcrossMove`]) judge the hub's moves by.
//!
//! A child's state is the set of increments (`SimChildMsg::Add`, each numbered once in a run)
//! it applied. Every instance is an *incarnation*; a fresh start begins a *lineage*, and an
//! instance that imports a handed-over state continues its exporter's lineage. The children
//! run in the run's process, so each writes what it does here as it does it, in one global
//! order (`seq`): which increments it applied, what it exported and imported. The run marks an
//! increment acknowledged when the call that carried it is answered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::invariants::{Invariant, Violation};
use crate::model::ChildId;

/// The state a simulated child hands over: its lineage, its exporter, what it applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandedState {
    /// The lineage the state belongs to.
    pub lineage: u64,
    /// The incarnation that exported it.
    pub exporter: u64,
    /// The increments applied.
    pub applied: BTreeSet<u64>,
    /// Casts seen per sender: `(tag, [last, count, in order])`.
    pub senders: Vec<(u64, [u64; 3])>,
}

/// One instance of a simulated child.
#[derive(Clone, Debug, Default)]
pub struct Incarnation {
    /// Its lineage (a fresh one, or its exporter's once it imported).
    pub lineage: u64,
    /// The increments in its state.
    pub applied: BTreeSet<u64>,
    /// It imported a handed-over state.
    pub imported: bool,
    /// It handled a message other than an import before any import (or none ever came).
    pub handled_before_import: bool,
}

/// One increment applied by an incarnation.
#[derive(Clone, Copy, Debug)]
struct Applied {
    seq: u64,
    incarnation: u64,
    lineage: u64,
    n: u64,
    /// Applied while the cluster was partitioned.
    split: bool,
}

/// One import of a handed-over state.
#[derive(Clone, Debug)]
struct Imported {
    seq: u64,
    importer: u64,
    state: HandedState,
}

/// A hot move the hub reported as handed over: the instance on the new node that must have
/// taken the state.
#[derive(Clone, Debug)]
struct Expected {
    id: ChildId,
    what: String,
    pid: u64,
}

/// The run's record of every child instance's state.
#[derive(Debug, Default)]
pub struct StateBook {
    seq: u64,
    next_incarnation: u64,
    next_lineage: u64,
    /// Incarnations by number.
    incarnations: BTreeMap<u64, Incarnation>,
    /// Incarnations by their actor's pid.
    by_pid: BTreeMap<u64, u64>,
    applied: Vec<Applied>,
    imports: Vec<Imported>,
    acked: BTreeSet<u64>,
    expected: Vec<Expected>,
    /// The cluster is partitioned now.
    split: bool,
}

/// A book shared by the run and its children.
pub type SharedBook = Arc<Mutex<StateBook>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl StateBook {
    /// A fresh instance (actor `pid`) begins: answers its incarnation and new lineage.
    pub fn born(&mut self, pid: u64) -> (u64, u64) {
        self.next_incarnation += 1;
        self.next_lineage += 1;
        let (incarnation, lineage) = (self.next_incarnation, self.next_lineage);
        self.incarnations.insert(
            incarnation,
            Incarnation {
                lineage,
                ..Incarnation::default()
            },
        );
        self.by_pid.insert(pid, incarnation);
        (incarnation, lineage)
    }

    /// `incarnation` handled a message that is not an import.
    pub fn handled(&mut self, incarnation: u64) {
        if let Some(i) = self.incarnations.get_mut(&incarnation) {
            if !i.imported {
                i.handled_before_import = true;
            }
        }
    }

    /// `incarnation` applied increment `n` to its state.
    pub fn apply(&mut self, incarnation: u64, n: u64) {
        self.seq += 1;
        let Some(i) = self.incarnations.get_mut(&incarnation) else {
            return;
        };
        i.applied.insert(n);
        self.applied.push(Applied {
            seq: self.seq,
            incarnation,
            lineage: i.lineage,
            n,
            split: self.split,
        });
    }

    /// The cluster is partitioned (or whole again). Both sides of a partition run a child (the
    /// hub is available rather than consistent there, and resolves the duplicates on heal), so
    /// increments applied meanwhile are not held to the fork check.
    pub fn set_split(&mut self, split: bool) {
        self.split = split;
    }

    /// `incarnation` imported `state`: it continues the state's lineage.
    pub fn import(&mut self, incarnation: u64, state: HandedState) {
        self.seq += 1;
        if let Some(i) = self.incarnations.get_mut(&incarnation) {
            i.lineage = state.lineage;
            i.applied = state.applied.clone();
            i.imported = true;
        }
        self.imports.push(Imported {
            seq: self.seq,
            importer: incarnation,
            state,
        });
    }

    /// The call that carried increment `n` was answered.
    pub fn acknowledged(&mut self, n: u64) {
        self.acked.insert(n);
    }

    /// The hub reported child `id` handed over (`what`, for messages) to the instance whose
    /// actor is `pid`.
    pub fn expect_import(&mut self, id: ChildId, what: String, pid: u64) {
        self.expected.push(Expected { id, what, pid });
    }

    /// Increments acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.len()
    }

    /// Imports so far.
    pub fn imports(&self) -> usize {
        self.imports.len()
    }

    /// Judges the hot-swap invariants on what happened so far.
    ///
    /// - [`Invariant::NoAckedMessageLostAcrossMove`]: every increment its exporter applied and
    ///   was acknowledged for before an import is in the imported state (lost in transit, or
    ///   answered by the old instance after its export, it is not);
    /// - [`Invariant::HandoverStateKept`]: an instance the hub reported as having taken the
    ///   state did take it before anything else; and no two instances of one lineage diverge
    ///   with both acknowledged (each acknowledged an increment the other lacks: a fork),
    ///   increments applied while the cluster was partitioned aside.
    pub fn check(&self) -> Result<(), Violation> {
        for import in &self.imports {
            let lost: Vec<u64> = self
                .applied
                .iter()
                .filter(|a| {
                    a.incarnation == import.state.exporter
                        && a.seq < import.seq
                        && self.acked.contains(&a.n)
                        && !import.state.applied.contains(&a.n)
                })
                .map(|a| a.n)
                .take(5)
                .collect();
            if !lost.is_empty() {
                return Err(Violation::new(
                    Invariant::NoAckedMessageLostAcrossMove,
                    format!(
                        "incarnation {} imported lineage {} from incarnation {} without the acknowledged increments {lost:?}",
                        import.importer, import.state.lineage, import.state.exporter
                    ),
                ));
            }
        }
        for expected in &self.expected {
            let Some(incarnation) = self.by_pid.get(&expected.pid) else {
                continue;
            };
            let i = &self.incarnations[incarnation];
            if i.handled_before_import {
                return Err(Violation::new(
                    Invariant::HandoverStateKept,
                    format!(
                        "{} ({}): the new instance (incarnation {incarnation}) handled a message without the state",
                        expected.id, expected.what
                    ),
                ));
            }
        }
        let mut by_lineage: BTreeMap<u64, BTreeMap<u64, BTreeSet<u64>>> = BTreeMap::new();
        for a in &self.applied {
            if self.acked.contains(&a.n) && !a.split {
                by_lineage
                    .entry(a.lineage)
                    .or_default()
                    .entry(a.incarnation)
                    .or_default()
                    .insert(a.n);
            }
        }
        for (lineage, incarnations) in &by_lineage {
            let acked: Vec<(&u64, &BTreeSet<u64>)> = incarnations.iter().collect();
            for (x, (a, acked_a)) in acked.iter().enumerate() {
                for (b, acked_b) in &acked[x + 1..] {
                    let (state_a, state_b) = (&self.incarnations[a], &self.incarnations[b]);
                    let a_only = acked_a.difference(&state_b.applied).next();
                    let b_only = acked_b.difference(&state_a.applied).next();
                    if let (Some(na), Some(nb)) = (a_only, b_only) {
                        return Err(Violation::new(
                            Invariant::HandoverStateKept,
                            format!(
                                "lineage {lineage} forked: incarnation {a} acknowledged {na} that {b} lacks, {b} acknowledged {nb} that {a} lacks"
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Writes to a shared book (from a child's handler).
pub fn with_book<T>(book: &SharedBook, f: impl FnOnce(&mut StateBook) -> T) -> T {
    f(&mut lock(book))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(book: &StateBook, incarnation: u64) -> HandedState {
        let i = &book.incarnations[&incarnation];
        HandedState {
            lineage: i.lineage,
            exporter: incarnation,
            applied: i.applied.clone(),
            senders: Vec::new(),
        }
    }

    #[test]
    fn a_move_that_keeps_every_acknowledged_increment_passes() {
        let mut book = StateBook::default();
        let (old, _) = book.born(1);
        book.apply(old, 1);
        book.acknowledged(1);
        let exported = state(&book, old);
        let (new, _) = book.born(2);
        book.expect_import("c1".into(), "n1 -> n2".into(), 2);
        book.import(new, exported);
        book.apply(new, 2);
        book.acknowledged(2);
        assert_eq!(book.check(), Ok(()));
    }

    #[test]
    fn an_increment_answered_after_the_export_is_lost_across_the_move() {
        let mut book = StateBook::default();
        let (old, _) = book.born(1);
        book.apply(old, 1);
        let exported = state(&book, old);
        // Answered by the old instance after its export, before the import.
        book.apply(old, 2);
        book.acknowledged(2);
        let (new, _) = book.born(2);
        book.import(new, exported);
        let broken = book.check().unwrap_err();
        assert_eq!(broken.invariant, Invariant::NoAckedMessageLostAcrossMove);
        assert!(broken.detail.contains("[2]"), "{broken}");
    }

    #[test]
    fn a_reported_handover_whose_instance_never_imported_is_caught() {
        let mut book = StateBook::default();
        let (old, _) = book.born(1);
        book.apply(old, 1);
        book.acknowledged(1);
        let (new, _) = book.born(2);
        book.expect_import("c1".into(), "n1 -> n2".into(), 2);
        assert_eq!(book.check(), Ok(()), "nothing handled yet");
        book.handled(new);
        book.apply(new, 2);
        let broken = book.check().unwrap_err();
        assert_eq!(broken.invariant, Invariant::HandoverStateKept);
    }

    #[test]
    fn two_instances_of_a_lineage_both_acknowledging_is_a_fork() {
        let mut book = StateBook::default();
        let (old, _) = book.born(1);
        book.apply(old, 1);
        book.acknowledged(1);
        let exported = state(&book, old);
        let (new, _) = book.born(2);
        book.import(new, exported);
        // The move was given up, but the new instance runs too: both answer.
        book.apply(old, 2);
        book.acknowledged(2);
        assert_eq!(book.check(), Ok(()), "only one side acknowledged yet");
        book.apply(new, 3);
        book.acknowledged(3);
        let broken = book.check().unwrap_err();
        assert_eq!(broken.invariant, Invariant::HandoverStateKept);
        assert!(broken.detail.contains("forked"), "{broken}");
    }

    #[test]
    fn both_sides_of_a_partition_may_acknowledge() {
        let mut book = StateBook::default();
        let (old, _) = book.born(1);
        let exported = state(&book, old);
        let (new, _) = book.born(2);
        book.import(new, exported);
        book.set_split(true);
        book.apply(old, 1);
        book.apply(new, 2);
        book.acknowledged(1);
        book.acknowledged(2);
        assert_eq!(book.check(), Ok(()));
    }

    #[test]
    fn fresh_instances_are_other_lineages_and_never_forks() {
        let mut book = StateBook::default();
        let (a, _) = book.born(1);
        let (b, _) = book.born(2);
        book.apply(a, 1);
        book.apply(b, 2);
        book.acknowledged(1);
        book.acknowledged(2);
        assert_eq!(book.check(), Ok(()));
    }
}
