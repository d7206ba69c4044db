//! [`may_plan`]: a pass over the rows it accepts plans what a pass over every row plans.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::tests::{declared, row, situation, Situation, NODES};
use super::*;
use crate::core::guided::Guided;

/// The rows of `rows` that [`may_plan`] accepts, read from the id and the bindings only.
fn candidates(
    rows: &[Row],
    ring: &HashRing,
    factor: usize,
    live: Liveness<'_>,
    busy: &BTreeSet<ChildId>,
) -> Vec<Row> {
    rows.iter()
        .filter(|r| {
            may_plan(
                &r.spec.id,
                r.node_pids.keys().map(String::as_str),
                ring,
                factor,
                live,
                busy,
            )
        })
        .cloned()
        .collect()
}

/// A guided mark for some rows: (row index, node index, fallback, by load).
type Marks = Vec<(usize, usize, bool, bool)>;

fn guide(rows: &mut [Row], marks: &Marks) {
    for (i, node, fallback, by_load) in marks {
        if let Some(row) = rows.get_mut(*i) {
            Guided {
                nodes: vec![NODES[*node].to_owned()],
                fallback: *fallback,
                by_load: *by_load,
            }
            .write(&mut row.metadata);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// For random registries (rows bound anywhere, stubs, guided children), rings (with nodes
    /// that joined and nodes that left or are in their grace), factors, declared lists and
    /// children in flight: the plan over the candidates is the plan over every row.
    #[test]
    fn planning_over_the_candidates_is_planning_over_every_row(
        s in situation(),
        factor in 1usize..4,
        extra_ring in prop::collection::btree_set(0usize..5, 0..3),
        marks in prop::collection::vec((0usize..40, 0usize..5, any::<bool>(), any::<bool>()), 0..12),
    ) {
        let Situation { me, up, in_grace, mut ring, mut rows, declared: names, trusted, busy } = s;
        // Rings the Coordinator may hold for a moment too: a node on it that is not up.
        ring.extend(extra_ring.iter().map(|i| NODES[*i].to_owned()));
        let ring = HashRing::new(ring);
        guide(&mut rows, &marks);
        let list = declared(&names.iter().map(String::as_str).collect::<Vec<_>>());
        let knowledge = match trusted {
            None => DeclaredKnowledge::Off,
            Some(false) => DeclaredKnowledge::Untrusted,
            Some(true) => DeclaredKnowledge::Current(&list),
        };
        let live = Liveness { me: &me, up: &up, in_grace: &in_grace };
        let every = plan_replicated_redistribution(&rows, &ring, factor, live, knowledge, &busy);
        let some = candidates(&rows, &ring, factor, live, &busy);
        let planned = plan_replicated_redistribution(&some, &ring, factor, live, knowledge, &busy);
        prop_assert_eq!(planned, every);
    }
}

/// Three nodes, every child bound to its ring owner: a pass reads nothing while all are up,
/// only the rows of the node that left once it is gone, and, when a node joins, only the rows
/// this node runs that the joiner now owns.
#[test]
fn a_pass_reads_the_rows_of_the_nodes_that_left_or_whose_owner_changed() {
    let three = ["a@h", "b@h", "c@h"];
    let ring = HashRing::new(three);
    let rows: Vec<Row> = (0..300)
        .map(|i| {
            let id = format!("c{i}");
            let owner = ring.owner(&ChildId::from(id.as_str())).unwrap().clone();
            row(&id, false, &[(owner.as_str(), i)])
        })
        .collect();
    let bound_to = |node: &str| -> Vec<ChildId> {
        rows.iter()
            .filter(|r| r.node_pids.contains_key(node))
            .map(|r| r.spec.id.clone())
            .collect()
    };
    let ids = |rows: Vec<Row>| rows.into_iter().map(|r| r.spec.id).collect::<Vec<_>>();
    let me = "a@h".to_owned();
    let busy = BTreeSet::new();
    let none = BTreeSet::new();

    let up: BTreeSet<NodeName> = ["b@h", "c@h"].map(str::to_owned).into();
    let live = Liveness {
        me: &me,
        up: &up,
        in_grace: &none,
    };
    assert!(candidates(&rows, &ring, 1, live, &busy).is_empty());

    // c is gone (its grace is over): its rows, and only those.
    let up: BTreeSet<NodeName> = ["b@h"].map(str::to_owned).into();
    let two = HashRing::new(["a@h", "b@h"]);
    let live = Liveness {
        me: &me,
        up: &up,
        in_grace: &none,
    };
    let read = ids(candidates(&rows, &two, 1, live, &busy));
    assert!(!read.is_empty());
    assert_eq!(read, bound_to("c@h"));
    // Within its grace nothing is read.
    let grace: BTreeSet<NodeName> = ["c@h"].map(str::to_owned).into();
    let live = Liveness {
        me: &me,
        up: &up,
        in_grace: &grace,
    };
    assert!(candidates(&rows, &two, 1, live, &busy).is_empty());

    // d joins: the rows this node runs that d owns now.
    let four = HashRing::new(["a@h", "b@h", "c@h", "d@h"]);
    let up: BTreeSet<NodeName> = ["b@h", "c@h", "d@h"].map(str::to_owned).into();
    let live = Liveness {
        me: &me,
        up: &up,
        in_grace: &none,
    };
    let moving: Vec<ChildId> = rows
        .iter()
        .filter(|r| {
            r.node_pids.contains_key(&me)
                && four.owner(&r.spec.id).map(String::as_str) == Some("d@h")
        })
        .map(|r| r.spec.id.clone())
        .collect();
    assert!(!moving.is_empty());
    assert_eq!(ids(candidates(&rows, &four, 1, live, &busy)), moving);
}
