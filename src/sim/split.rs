//! The quorum runs' invariant while the cluster is split: no child runs on two sides at once for
//! longer than the partition-detection bound.
//!
//! Judged only while the split is clean (every up node reaches exactly the nodes of its own
//! side: the sides are cliques). A partial partition (a reaches b, b reaches c, a does not reach
//! c) gives each node its own view of the members, and a count of members seen cannot keep a
//! child from running on both a and c: that would take leases or consensus, which no strategy
//! of Elixir's ProcessHub has either (docs/strategies.md).

use std::collections::{BTreeMap, BTreeSet};

use super::invariants::{Invariant, Violation};
use crate::core::quorum::{PartitionTolerance, QuorumTracker};
use crate::model::{ChildId, NodeName, Pid};

/// Children seen on two sides of a clean split, and since when.
#[derive(Debug)]
pub struct SplitWatch {
    bound_ms: u64,
    since: BTreeMap<ChildId, u64>,
}

/// The sides of a clean split of the up nodes (`components`: each up node with the nodes it
/// reaches, itself included); `None` when the split is partial.
pub fn clean_sides(
    components: &BTreeMap<NodeName, BTreeSet<NodeName>>,
) -> Option<Vec<BTreeSet<NodeName>>> {
    let mut sides: Vec<BTreeSet<NodeName>> = Vec::new();
    for (node, side) in components {
        if !side.contains(node) {
            return None;
        }
        for other in side {
            if components.get(other) != Some(side) {
                return None;
            }
        }
        if !sides.contains(side) {
            sides.push(side.clone());
        }
    }
    Some(sides)
}

/// Whether a side of `members` nodes lacks quorum under `strategy` whatever the largest
/// membership seen (`None`: not decidable from the count alone, as for a dynamic quorum).
pub fn lacks_quorum(strategy: &PartitionTolerance, members: usize) -> Option<bool> {
    match strategy {
        PartitionTolerance::DynamicQuorum { .. } => None,
        // A fresh tracker counts a majority of the configured size, which the largest
        // membership seen can only raise.
        _ => Some(!QuorumTracker::new(strategy.clone(), members).has_quorum(members)),
    }
}

impl SplitWatch {
    /// A watch allowing a child `bound_ms` on two sides (the time the minority takes to see the
    /// split and stop its children).
    pub fn new(bound_ms: u64) -> Self {
        Self {
            bound_ms,
            since: BTreeMap::new(),
        }
    }

    /// Observes what runs where at `now_ms`, with the split's sides (`None`: partial, not
    /// judged; one side: whole).
    pub fn observe(
        &mut self,
        now_ms: u64,
        sides: Option<&[BTreeSet<NodeName>]>,
        running: &BTreeMap<ChildId, BTreeMap<NodeName, Pid>>,
    ) -> Result<(), Violation> {
        let Some(sides) = sides.filter(|s| s.len() > 1) else {
            self.since.clear();
            return Ok(());
        };
        let mut split: BTreeSet<&ChildId> = BTreeSet::new();
        for (id, nodes) in running {
            let on: BTreeSet<usize> = nodes
                .keys()
                .filter_map(|n| sides.iter().position(|s| s.contains(n)))
                .collect();
            if on.len() > 1 {
                split.insert(id);
                let since = *self.since.entry(id.clone()).or_insert(now_ms);
                if now_ms.saturating_sub(since) > self.bound_ms {
                    return Err(Violation {
                        invariant: Invariant::QuorumOneSide,
                        detail: format!(
                            "{id} runs on {:?}, on {} sides of the split {sides:?}, for {} ms",
                            nodes.keys().collect::<Vec<_>>(),
                            on.len(),
                            now_ms - since
                        ),
                    });
                }
            }
        }
        self.since.retain(|id, _| split.contains(id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(nodes: &[&str]) -> BTreeSet<NodeName> {
        nodes.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_child_on_two_sides_past_the_bound_is_a_violation_and_partial_splits_are_not_judged() {
        let clean: BTreeMap<NodeName, BTreeSet<NodeName>> = [
            ("a".to_string(), set(&["a", "b"])),
            ("b".to_string(), set(&["a", "b"])),
            ("c".to_string(), set(&["c"])),
        ]
        .into();
        let sides = clean_sides(&clean).unwrap();
        assert_eq!(sides.len(), 2);
        let mut partial = clean.clone();
        partial.insert("b".into(), set(&["a", "b", "c"]));
        assert!(clean_sides(&partial).is_none());

        let id = ChildId::parse("x").unwrap();
        let both: BTreeMap<ChildId, BTreeMap<NodeName, Pid>> = [(
            id.clone(),
            [("a".to_string(), 1), ("c".to_string(), 2)].into(),
        )]
        .into();
        let one: BTreeMap<ChildId, BTreeMap<NodeName, Pid>> = [(
            id.clone(),
            [("a".to_string(), 1), ("b".to_string(), 2)].into(),
        )]
        .into();
        let mut watch = SplitWatch::new(100);
        watch.observe(0, Some(&sides), &both).unwrap();
        watch.observe(100, Some(&sides), &both).unwrap();
        let v = watch.observe(101, Some(&sides), &both).unwrap_err();
        assert_eq!(v.invariant, Invariant::QuorumOneSide);
        // Two nodes of one side (a hot move) are fine; the clock restarts when it resolves.
        let mut watch = SplitWatch::new(100);
        watch.observe(0, Some(&sides), &both).unwrap();
        watch.observe(50, Some(&sides), &one).unwrap();
        watch.observe(120, Some(&sides), &both).unwrap();
        watch.observe(200, Some(&sides), &both).unwrap();
        // Partial or whole: not judged.
        watch.observe(500, None, &both).unwrap();
        watch.observe(1000, Some(&sides[..1]), &both).unwrap();
    }
}
