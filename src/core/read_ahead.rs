//! The plan of a node's re-placement, made during its grace.
//!
//! When a node's grace ends, the redistribution pass walks every placement to find the rows
//! that can move, reads those whole and plans what moves where: at 10,000 children a few
//! milliseconds before the first child runs again, at a million well over a second. Half-way
//! through the grace the Coordinator makes that plan ahead, as the pass would make it once the
//! grace is over. The pass takes it instead of walking the store only if nothing the plan
//! depends on changed in between: no write to the store (its
//! [`crate::storage::Storage::generation`]), the same ring, peers, graces, replication factor
//! and busy children, and the same declared list. Otherwise it plans as before, so a plan made
//! ahead can cost a walk but never change what moves.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::core::declared::list::DeclaredList;
use crate::core::redistribution::{DeclaredKnowledge, RedistributionPlan};
use crate::model::{ChildId, NodeName};

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

/// The declared list a pass plans under, held so that a plan made ahead can tell whether the
/// list it was made under is still the one published.
#[derive(Debug, Clone)]
pub enum DeclaredBasis {
    /// Auto-recovery is off.
    Off,
    /// This node's copy cannot be trusted (parked, or a peer announced a newer one).
    Untrusted,
    /// The copy this node trusts, as published.
    Current(Arc<DeclaredList>),
}

impl DeclaredBasis {
    /// What the pass knows of the declared list.
    pub fn knowledge(&self) -> DeclaredKnowledge<'_> {
        match self {
            Self::Off => DeclaredKnowledge::Off,
            Self::Untrusted => DeclaredKnowledge::Untrusted,
            Self::Current(list) => DeclaredKnowledge::Current(list),
        }
    }

    /// Whether both are the same knowledge: the same published copy, not merely an equal one
    /// (a copy published again is planned again).
    fn same_as(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Off, Self::Off) | (Self::Untrusted, Self::Untrusted) => true,
            (Self::Current(a), Self::Current(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A pass's plan made ahead, with what it was made under.
#[derive(Debug)]
pub struct ReadAhead {
    generation: u64,
    inputs: PassInputs,
    declared: DeclaredBasis,
    plan: RedistributionPlan,
}

impl ReadAhead {
    /// `plan`, made from a store at `generation` under `inputs` and `declared`.
    pub fn new(
        generation: u64,
        inputs: PassInputs,
        declared: DeclaredBasis,
        plan: RedistributionPlan,
    ) -> Self {
        Self {
            generation,
            inputs,
            declared,
            plan,
        }
    }

    /// The plan made ahead, if it is what a pass planning now would plan: the store still at
    /// the same generation, the same inputs and the same declared list. A row nothing runs (a
    /// stub) can expire without a write, so each re-placement of one is kept only if
    /// `still_stored` says so.
    pub fn take_if(
        self,
        generation: Option<u64>,
        inputs: &PassInputs,
        declared: &DeclaredBasis,
        still_stored: impl Fn(&ChildId) -> bool,
    ) -> Option<RedistributionPlan> {
        if generation != Some(self.generation)
            || *inputs != self.inputs
            || !declared.same_as(&self.declared)
        {
            return None;
        }
        let mut plan = self.plan;
        for rows in plan.replacements.values_mut() {
            rows.retain(|row| !row.node_pids.is_empty() || still_stored(&row.spec.id));
        }
        plan.replacements.retain(|_, rows| !rows.is_empty());
        Some(plan)
    }

    /// How many children the plan moves or starts.
    pub fn len(&self) -> usize {
        self.plan.migrating() + self.plan.replacing()
    }

    /// Whether the plan moves and starts nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::redistribution::tests::row;
    use crate::model::Row;
    use std::collections::BTreeMap;

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

    fn plan() -> RedistributionPlan {
        RedistributionPlan {
            replacements: BTreeMap::from([
                (
                    NodeName::from("b"),
                    vec![row("bound", false, &[("c", 1)]), row("stub", false, &[])],
                ),
                (NodeName::from("a"), vec![row("other-stub", false, &[])]),
            ]),
            ..RedistributionPlan::default()
        }
    }

    fn ahead_under(declared: DeclaredBasis) -> ReadAhead {
        ReadAhead::new(7, inputs(), declared, plan())
    }

    fn ahead() -> ReadAhead {
        ahead_under(DeclaredBasis::Off)
    }

    fn ids(plan: &RedistributionPlan) -> Vec<&str> {
        plan.replacements
            .values()
            .flatten()
            .map(|r: &Row| r.spec.id.as_str())
            .collect()
    }

    #[test]
    fn a_plan_made_ahead_is_taken_when_nothing_changed() {
        assert_eq!(ahead().len(), 3);
        let plan = ahead()
            .take_if(Some(7), &inputs(), &DeclaredBasis::Off, |_| true)
            .unwrap();
        assert_eq!(ids(&plan), ["other-stub", "bound", "stub"]);
    }

    #[test]
    fn a_write_since_the_plan_leaves_the_pass_to_walk() {
        let off = DeclaredBasis::Off;
        assert!(ahead()
            .take_if(Some(8), &inputs(), &off, |_| true)
            .is_none());
        assert!(ahead().take_if(None, &inputs(), &off, |_| true).is_none());
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
                ahead()
                    .take_if(Some(7), &now, &DeclaredBasis::Off, |_| true)
                    .is_none(),
                "{now:?}"
            );
        }
    }

    #[test]
    fn another_declared_list_leaves_the_pass_to_walk() {
        let list = Arc::new(DeclaredList::default());
        let same = DeclaredBasis::Current(list.clone());
        let taken = ahead_under(DeclaredBasis::Current(list.clone())).take_if(
            Some(7),
            &inputs(),
            &same,
            |_| true,
        );
        assert!(taken.is_some());
        // An equal list published again is another copy: planned again.
        let republished = DeclaredBasis::Current(Arc::new(DeclaredList::default()));
        let others = [DeclaredBasis::Off, DeclaredBasis::Untrusted, republished];
        for other in others {
            let taken = ahead_under(DeclaredBasis::Current(list.clone())).take_if(
                Some(7),
                &inputs(),
                &other,
                |_| true,
            );
            assert!(taken.is_none(), "{other:?}");
        }
        let untrusted = ahead_under(DeclaredBasis::Untrusted).take_if(
            Some(7),
            &inputs(),
            &DeclaredBasis::Untrusted,
            |_| true,
        );
        assert!(untrusted.is_some());
        assert!(ahead()
            .take_if(Some(7), &inputs(), &DeclaredBasis::Untrusted, |_| true)
            .is_none());
    }

    #[test]
    fn a_stub_that_expired_since_is_not_re_placed_and_a_bound_row_is_not_looked_up() {
        let looked_up = std::cell::RefCell::new(Vec::new());
        let plan = ahead()
            .take_if(Some(7), &inputs(), &DeclaredBasis::Off, |id| {
                looked_up.borrow_mut().push(id.clone());
                false
            })
            .unwrap();
        assert_eq!(ids(&plan), ["bound"]);
        // An owner left with nothing to start is no batch at all.
        assert_eq!(
            plan.replacements.keys().collect::<Vec<_>>(),
            [&NodeName::from("b")]
        );
        assert_eq!(
            looked_up.into_inner(),
            vec![ChildId::from("other-stub"), ChildId::from("stub")]
        );
    }
}
