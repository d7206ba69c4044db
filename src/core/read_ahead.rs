//! The rows a node's re-placement will read, read during its grace.
//!
//! When a node's grace ends, the redistribution pass walks every placement to find the rows
//! that can move and reads those whole: at 10,000 children a few milliseconds before the
//! first child runs again, at a million well over a second. Half-way through the grace the
//! Coordinator reads them ahead, as the pass would read them once the grace is over. The pass
//! takes them instead of walking the store only if nothing it depends on changed in between:
//! no write to the store (its [`crate::storage::Storage::generation`]), and the same ring,
//! peers, graces, replication factor and busy children. Otherwise it walks as before, so a
//! read-ahead can cost a walk but never change what moves.

use std::collections::BTreeSet;

use crate::model::{ChildId, NodeName, Row};

/// What decides which rows a redistribution pass reads (`core::redistribution::may_plan`),
/// besides the rows themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassInputs {
    /// The ring's members.
    pub ring: BTreeSet<NodeName>,
    /// The peers up.
    pub up: BTreeSet<NodeName>,
    /// The nodes down but still within their grace.
    pub in_grace: BTreeSet<NodeName>,
    /// Children a migration, a retry, a replica's stop or the boot hold already has in hand.
    pub busy: BTreeSet<ChildId>,
    /// The replication factor.
    pub factor: usize,
}

/// Rows read ahead for a pass, with what they were read under.
#[derive(Debug)]
pub struct ReadAhead {
    generation: u64,
    inputs: PassInputs,
    rows: Vec<Row>,
}

impl ReadAhead {
    /// `rows`, read from a store at `generation` under `inputs`.
    pub fn new(generation: u64, inputs: PassInputs, rows: Vec<Row>) -> Self {
        Self {
            generation,
            inputs,
            rows,
        }
    }

    /// The rows read ahead, if they are what a pass reading now would read: the store still at
    /// the same generation and the same inputs. A row nothing runs (a stub) can expire without
    /// a write, so each of those is kept only if `still_stored` says so.
    pub fn take_if(
        self,
        generation: Option<u64>,
        inputs: &PassInputs,
        still_stored: impl Fn(&ChildId) -> bool,
    ) -> Option<Vec<Row>> {
        if generation != Some(self.generation) || *inputs != self.inputs {
            return None;
        }
        let mut rows = self.rows;
        rows.retain(|row| !row.node_pids.is_empty() || still_stored(&row.spec.id));
        Some(rows)
    }

    /// How many rows were read.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row was read.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::redistribution::tests::row;

    fn names(list: &[&str]) -> BTreeSet<NodeName> {
        list.iter().map(|n| NodeName::from(*n)).collect()
    }

    fn inputs() -> PassInputs {
        PassInputs {
            ring: names(&["a", "b"]),
            up: names(&["b"]),
            in_grace: BTreeSet::new(),
            busy: BTreeSet::new(),
            factor: 1,
        }
    }

    fn ahead() -> ReadAhead {
        ReadAhead::new(
            7,
            inputs(),
            vec![row("bound", false, &[("c", 1)]), row("stub", false, &[])],
        )
    }

    fn ids(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| r.spec.id.as_str()).collect()
    }

    #[test]
    fn rows_read_ahead_are_taken_when_nothing_changed() {
        let rows = ahead().take_if(Some(7), &inputs(), |_| true).unwrap();
        assert_eq!(ids(&rows), ["bound", "stub"]);
    }

    #[test]
    fn a_write_since_the_read_leaves_the_pass_to_walk() {
        assert!(ahead().take_if(Some(8), &inputs(), |_| true).is_none());
        assert!(ahead().take_if(None, &inputs(), |_| true).is_none());
    }

    #[test]
    fn other_inputs_leave_the_pass_to_walk() {
        let changes: [fn(&mut PassInputs); 5] = [
            |i| {
                i.ring.insert(NodeName::from("c"));
            },
            |i| {
                i.up.insert(NodeName::from("a"));
            },
            |i| {
                i.in_grace.insert(NodeName::from("c"));
            },
            |i| {
                i.busy.insert(ChildId::from("bound"));
            },
            |i| i.factor = 2,
        ];
        for change in changes {
            let mut now = inputs();
            change(&mut now);
            assert!(
                ahead().take_if(Some(7), &now, |_| true).is_none(),
                "{now:?}"
            );
        }
    }

    #[test]
    fn a_stub_that_expired_since_is_not_taken_and_a_bound_row_is_not_looked_up() {
        let looked_up = std::cell::RefCell::new(Vec::new());
        let rows = ahead()
            .take_if(Some(7), &inputs(), |id| {
                looked_up.borrow_mut().push(id.clone());
                false
            })
            .unwrap();
        assert_eq!(ids(&rows), ["bound"]);
        assert_eq!(looked_up.into_inner(), vec![ChildId::from("stub")]);
    }
}
