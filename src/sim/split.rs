//! The invariants of a network in parts.
//!
//! - **`quorum_one_side`** ([`SplitWatch`], quorum runs): while the cluster is split cleanly
//!   (every up node reaches exactly the nodes of its own side: the sides are cliques), no child
//!   runs on two sides at once for longer than the partition-detection bound.
//! - **`double_run_bounded`** ([`DoubleRunWatch`], every run): no child runs on more nodes than
//!   its replicas within nodes connected through some path (a connected component of the up
//!   nodes over the links that work both ways) for longer than the stated bound. A partial
//!   partition (a reaches b, b reaches c, a does not reach c) gives a and c each their own view
//!   of the members; a node that acts on its own view re-places the other's children, and they
//!   run twice with no end. Clean splits are the component's own business: both sides of a
//!   divergent split run a child by design, so a child is judged within each component, never
//!   across two. A child is timed from when it was first seen twice in one component, or from
//!   the last change of that component's shape (its nodes and the links between them that do
//!   not work), whichever is later: the hub resolves a component that is not a clique once its
//!   shape has been stable for `stable_after`, and states its bound from the last change
//!   (`core::reachability::bound`). A change that puts the child's nodes apart restarts its
//!   clock too.

use std::collections::{BTreeMap, BTreeSet};

use super::invariants::{Invariant, Violation};
use super::trace::short;
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

/// The connected components of `nodes` over the links `works` says work (sorted, each
/// sorted).
pub fn components(
    nodes: &[NodeName],
    works: impl Fn(&NodeName, &NodeName) -> bool,
) -> Vec<BTreeSet<NodeName>> {
    let mut left: BTreeSet<&NodeName> = nodes.iter().collect();
    let mut out = Vec::new();
    while let Some(first) = left.pop_first() {
        let mut component = BTreeSet::from([first.clone()]);
        let mut frontier = vec![first];
        while let Some(node) = frontier.pop() {
            let reached: Vec<&NodeName> = left.iter().copied().filter(|n| works(node, n)).collect();
            for n in reached {
                left.remove(n);
                component.insert(n.clone());
                frontier.push(n);
            }
        }
        out.push(component);
    }
    out
}

/// The longest a child ran too many times in one component, so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DoubleRun {
    /// How long, in virtual milliseconds.
    pub ms: u64,
    /// What, where and since when (empty when no child ever ran twice).
    pub what: String,
}

/// A connected component's shape: its nodes, and the links between them that do not work.
pub type Shape = (BTreeSet<NodeName>, Links);

/// Links between nodes, as `(lower, higher)` name pairs.
pub type Links = BTreeSet<(NodeName, NodeName)>;

/// Each component's down links, by its nodes, and since when they have been so.
type Shapes = BTreeMap<BTreeSet<NodeName>, (Links, u64)>;

/// Children running too many times within one connected component, and since when.
#[derive(Debug)]
pub struct DoubleRunWatch {
    bound_ms: u64,
    since: BTreeMap<ChildId, u64>,
    /// Each component's shape at the last observation, and since when it has been so.
    shapes: Shapes,
    worst: DoubleRun,
}

impl DoubleRunWatch {
    /// A watch allowing a child `bound_ms` on more nodes than its replicas.
    pub fn new(bound_ms: u64) -> Self {
        Self {
            bound_ms,
            since: BTreeMap::new(),
            shapes: BTreeMap::new(),
            worst: DoubleRun::default(),
        }
    }

    /// The bound it holds children to.
    pub fn bound_ms(&self) -> u64 {
        self.bound_ms
    }

    /// The longest double run seen so far.
    pub fn worst(&self) -> &DoubleRun {
        &self.worst
    }

    /// Observes what runs where at `now_ms`, with the shapes of the connected components of
    /// the up nodes and `copies` the nodes each child should run on (its replicas).
    pub fn observe(
        &mut self,
        now_ms: u64,
        components: &[Shape],
        running: &BTreeMap<ChildId, BTreeMap<NodeName, Pid>>,
        copies: usize,
    ) -> Result<(), Violation> {
        let shapes: Shapes = components
            .iter()
            .map(|(nodes, down)| {
                let since = match self.shapes.get(nodes) {
                    Some((was, since)) if was == down => *since,
                    _ => now_ms,
                };
                (nodes.clone(), (down.clone(), since))
            })
            .collect();
        self.shapes = shapes;
        let mut double: BTreeSet<&ChildId> = BTreeSet::new();
        let mut violation = None;
        for (id, nodes) in running {
            let Some((component, (_, shaped))) = self
                .shapes
                .iter()
                .find(|(c, _)| nodes.keys().filter(|n| c.contains(*n)).count() > copies)
            else {
                continue;
            };
            double.insert(id);
            let first = *self.since.entry(id.clone()).or_insert(now_ms);
            let since = first.max(*shaped);
            let lasted = now_ms.saturating_sub(since);
            let on: Vec<&str> = nodes
                .keys()
                .filter(|n| component.contains(*n))
                .map(|n| short(n))
                .collect();
            let what = format!(
                "{id} on {on:?} since {since} ms, connected through {:?}",
                component.iter().map(|n| short(n)).collect::<Vec<_>>()
            );
            if lasted > self.worst.ms || self.worst.what.is_empty() {
                self.worst = DoubleRun {
                    ms: lasted,
                    what: what.clone(),
                };
            }
            if lasted > self.bound_ms && violation.is_none() {
                violation = Some(Violation {
                    invariant: Invariant::DoubleRunBounded,
                    detail: format!(
                        "{what}: {lasted} ms, past the bound of {} ms",
                        self.bound_ms
                    ),
                });
            }
        }
        self.since.retain(|id, _| double.contains(id));
        violation.map_or(Ok(()), Err)
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

    #[test]
    fn components_follow_working_links_through_any_path() {
        let nodes: Vec<NodeName> = ["a", "b", "c", "d"].map(String::from).to_vec();
        // a-b, b-c work; d is alone.
        let works = |x: &NodeName, y: &NodeName| {
            let mut pair = [x.as_str(), y.as_str()];
            pair.sort();
            matches!(pair, ["a", "b"] | ["b", "c"])
        };
        assert_eq!(
            components(&nodes, works),
            vec![set(&["a", "b", "c"]), set(&["d"])]
        );
        assert_eq!(
            components(&nodes, |_, _| true),
            vec![set(&["a", "b", "c", "d"])]
        );
        assert!(components(&[], |_, _| true).is_empty());
    }

    #[test]
    fn a_child_twice_in_one_component_past_the_bound_is_a_violation_and_the_worst_is_kept() {
        let id = ChildId::parse("x").unwrap();
        let on = |nodes: &[&str]| -> BTreeMap<ChildId, BTreeMap<NodeName, Pid>> {
            [(
                id.clone(),
                nodes.iter().map(|n| (n.to_string(), 1)).collect(),
            )]
            .into()
        };
        let clique = |nodes: &[&str]| (set(nodes), BTreeSet::new());
        let whole = vec![clique(&["a", "b", "c"])];
        let split = vec![clique(&["a", "b"]), clique(&["c"])];
        let mut watch = DoubleRunWatch::new(100);
        // On two sides of a split: not double within a component.
        watch.observe(0, &split, &on(&["a", "c"]), 1).unwrap();
        assert_eq!(watch.worst().ms, 0);
        assert!(watch.worst().what.is_empty());
        // Healed: timed from now, not from when it started on both sides.
        watch.observe(1_000, &whole, &on(&["a", "c"]), 1).unwrap();
        watch.observe(1_080, &whole, &on(&["a", "c"]), 1).unwrap();
        assert_eq!(watch.worst().ms, 80);
        // Resolved, then twice again: the clock restarts.
        watch.observe(1_090, &whole, &on(&["c"]), 1).unwrap();
        watch.observe(1_095, &whole, &on(&["a", "b"]), 1).unwrap();
        watch.observe(1_195, &whole, &on(&["a", "b"]), 1).unwrap();
        let v = watch
            .observe(1_196, &whole, &on(&["a", "b"]), 1)
            .unwrap_err();
        assert_eq!(v.invariant, Invariant::DoubleRunBounded);
        assert!(v.detail.contains("101 ms"), "{}", v.detail);
        assert_eq!(watch.worst().ms, 101);
        // Two copies of a child with two replicas are not double; three are.
        let mut watch = DoubleRunWatch::new(100);
        watch.observe(0, &whole, &on(&["a", "b"]), 2).unwrap();
        watch.observe(500, &whole, &on(&["a", "b"]), 2).unwrap();
        watch
            .observe(600, &whole, &on(&["a", "b", "c"]), 2)
            .unwrap();
        assert!(watch
            .observe(701, &whole, &on(&["a", "b", "c"]), 2)
            .is_err());
        // A change of the component's shape (a link inside it cut) restarts the clock: the hub
        // resolves a shape once it is stable; the same shape again keeps it running.
        let cut = vec![(
            set(&["a", "b", "c"]),
            BTreeSet::from([("a".to_string(), "c".to_string())]),
        )];
        let mut watch = DoubleRunWatch::new(100);
        watch.observe(0, &whole, &on(&["a", "c"]), 1).unwrap();
        watch.observe(90, &cut, &on(&["a", "c"]), 1).unwrap();
        watch.observe(180, &cut, &on(&["a", "c"]), 1).unwrap();
        assert_eq!(watch.worst().ms, 90);
        assert!(watch.observe(191, &cut, &on(&["a", "c"]), 1).is_err());
    }
}
