//! Passes as scenarios, and the promises every plan keeps whatever the registry holds.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::model::{ChildSpec, Metadata, Pid};

pub(super) const NODES: [&str; 5] = ["a@h", "b@h", "c@h", "d@h", "e@h"];

pub(crate) fn row(id: &str, durable: bool, bound: &[(&str, Pid)]) -> Row {
    let mut row = Row::authored(
        ChildSpec::new(id, "counter"),
        Metadata::new(),
        "a@h",
        0,
        durable,
    )
    .unwrap();
    for (node, pid) in bound {
        row.node_pids.insert((*node).to_owned(), *pid);
    }
    row
}

fn nodes(names: &[&str]) -> BTreeSet<NodeName> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

pub(super) fn declared(ids: &[&str]) -> DeclaredList {
    let mut list = DeclaredList::new();
    for id in ids {
        list.add(ChildSpec::new(*id, "counter"), Metadata::new(), "a@h")
            .unwrap();
    }
    list
}

/// The first id `{prefix}{i}` that `owner` owns in `ring`.
fn owned_by(ring: &HashRing, owner: &str, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|id| ring.owner(&ChildId::from(id.as_str())).map(String::as_str) == Some(owner))
        .unwrap()
}

fn ids(rows: &BTreeMap<NodeName, Vec<Row>>) -> BTreeMap<NodeName, Vec<String>> {
    rows.iter()
        .map(|(n, rows)| {
            (
                n.clone(),
                rows.iter().map(|r| r.spec.id.to_string()).collect(),
            )
        })
        .collect()
}

fn guided(mut row: Row, node: &str, fallback: bool) -> Row {
    crate::core::guided::Guided {
        nodes: vec![node.to_owned()],
        fallback,
        by_load: false,
    }
    .write(&mut row.metadata);
    row
}

#[test]
fn a_guided_child_stays_put_and_is_re_placed_only_on_its_node_or_if_allowed() {
    let me = "a@h".to_owned();
    let up = nodes(&["b@h"]);
    let ring = HashRing::new(["a@h", "b@h"]);
    let theirs = owned_by(&ring, "b@h", "x");
    let theirs2 = owned_by(&ring, "b@h", "y");
    let orphan = owned_by(&ring, "b@h", "z");
    let orphan2 = owned_by(&ring, "b@h", "w");
    let kept = owned_by(&ring, "b@h", "k");
    let rows = [
        // Runs here, guided here although b owns it on the ring: it stays.
        guided(row(&theirs, false, &[("a@h", 1)]), "a@h", false),
        // Runs here and on its own node b (a partition let the ring place it): gives way.
        guided(row(&theirs2, false, &[("a@h", 2), ("b@h", 3)]), "b@h", true),
        // Runs here and on b, its node c is gone and it may fall back: the copy on its ring
        // owner b stays.
        guided(row(&kept, false, &[("a@h", 4), ("b@h", 5)]), "c@h", true),
        // Its node c is gone, no fallback: it waits.
        guided(row(&orphan, false, &[]), "c@h", false),
        // Its node c is gone, fallback: the ring places it (on b).
        guided(row(&orphan2, false, &[]), "c@h", true),
    ];
    let live = Liveness {
        me: &me,
        up: &up,
        in_grace: &BTreeSet::new(),
    };
    let plan = plan_redistribution(&rows, &ring, live, DeclaredKnowledge::Off, &BTreeSet::new());
    assert_eq!(
        ids(&plan.migrations),
        BTreeMap::from([("b@h".to_owned(), vec![theirs2, kept])])
    );
    assert_eq!(
        ids(&plan.replacements),
        BTreeMap::from([("b@h".to_owned(), vec![orphan2])])
    );
}

#[test]
fn a_joining_owner_takes_its_children_from_this_node() {
    let me = "a@h".to_owned();
    let up = nodes(&["b@h"]);
    let ring = HashRing::new(["a@h", "b@h"]);
    let mine = owned_by(&ring, "a@h", "x");
    let theirs = owned_by(&ring, "b@h", "x");
    let rows = [
        row(&mine, false, &[("a@h", 1)]),
        row(&theirs, false, &[("a@h", 2)]),
    ];
    let live = Liveness {
        me: &me,
        up: &up,
        in_grace: &BTreeSet::new(),
    };
    let plan = plan_redistribution(&rows, &ring, live, DeclaredKnowledge::Off, &BTreeSet::new());
    assert_eq!(
        ids(&plan.migrations),
        BTreeMap::from([("b@h".to_owned(), vec![theirs])])
    );
    assert!(plan.replacements.is_empty());
}

#[test]
fn a_node_within_its_grace_still_counts_as_running_its_children() {
    let me = "a@h".to_owned();
    let ring = HashRing::new(["a@h"]);
    let rows = [row("x", false, &[("b@h", 1)])];
    let in_grace = nodes(&["b@h"]);
    let live = Liveness {
        me: &me,
        up: &BTreeSet::new(),
        in_grace: &in_grace,
    };
    let plan = plan_redistribution(&rows, &ring, live, DeclaredKnowledge::Off, &BTreeSet::new());
    assert_eq!(plan, RedistributionPlan::default(), "a flap moves nothing");
    let live = Liveness {
        in_grace: &BTreeSet::new(),
        ..live
    };
    let plan = plan_redistribution(&rows, &ring, live, DeclaredKnowledge::Off, &BTreeSet::new());
    assert_eq!(
        ids(&plan.replacements),
        BTreeMap::from([("a@h".to_owned(), vec!["x".to_owned()])]),
        "once the grace is over the stub is re-placed on its owner"
    );
}

#[test]
fn a_stale_durable_row_comes_back_only_if_declared() {
    let me = "a@h".to_owned();
    let ring = HashRing::new(["a@h"]);
    let rows = [
        row("kept", true, &[]),
        row("stopped", true, &[]),
        row("plain", false, &[]),
    ];
    let live = Liveness {
        me: &me,
        up: &BTreeSet::new(),
        in_grace: &BTreeSet::new(),
    };
    let list = declared(&["kept"]);
    let plan = plan_redistribution(
        &rows,
        &ring,
        live,
        DeclaredKnowledge::Current(&list),
        &BTreeSet::new(),
    );
    assert_eq!(
        ids(&plan.replacements),
        BTreeMap::from([(
            "a@h".to_owned(),
            vec!["kept".to_owned(), "plain".to_owned()]
        )])
    );
    assert_eq!(plan.held_back, vec![ChildId::from("stopped")]);
    let plan = plan_redistribution(
        &rows,
        &ring,
        live,
        DeclaredKnowledge::Untrusted,
        &BTreeSet::new(),
    );
    assert_eq!(
        ids(&plan.replacements),
        BTreeMap::from([("a@h".to_owned(), vec!["plain".to_owned()])]),
        "an untrusted copy lets no durable row come back"
    );
}

#[test]
fn children_in_flight_are_left_alone() {
    let me = "a@h".to_owned();
    let up = nodes(&["b@h"]);
    let ring = HashRing::new(["b@h"]);
    let rows = [
        row("moving", false, &[("a@h", 1)]),
        row("orphan", false, &[]),
    ];
    let busy = BTreeSet::from([ChildId::from("moving"), ChildId::from("orphan")]);
    let live = Liveness {
        me: &me,
        up: &up,
        in_grace: &BTreeSet::new(),
    };
    let plan = plan_redistribution(&rows, &ring, live, DeclaredKnowledge::Off, &busy);
    assert_eq!(plan, RedistributionPlan::default());
}

/// An arbitrary situation: who is up, in grace, on the ring; rows bound anywhere; a declared
/// list; children in flight.
#[derive(Debug, Clone)]
pub(super) struct Situation {
    pub(super) me: NodeName,
    pub(super) up: BTreeSet<NodeName>,
    pub(super) in_grace: BTreeSet<NodeName>,
    pub(super) ring: Vec<NodeName>,
    pub(super) rows: Vec<Row>,
    pub(super) declared: Vec<String>,
    pub(super) trusted: Option<bool>,
    pub(super) busy: BTreeSet<ChildId>,
}

pub(super) fn situation() -> impl Strategy<Value = Situation> {
    let node = || prop::sample::select(NODES.to_vec()).prop_map(str::to_owned);
    let rows = (
        0..40usize,
        any::<bool>(),
        prop::collection::btree_map(node(), 1..1000u64, 0..3),
    );
    (
        node(),
        prop::collection::btree_set(node(), 0..5),
        prop::collection::btree_set(node(), 0..5),
        prop::collection::btree_set(node(), 0..5),
        prop::collection::vec(rows, 0..40),
        prop::collection::btree_set(0..40usize, 0..20),
        prop::option::of(any::<bool>()),
        prop::collection::btree_set(0..40usize, 0..5),
    )
        .prop_map(|(me, up, grace, ring, rows, declared, trusted, busy)| {
            let up: BTreeSet<NodeName> = up.into_iter().filter(|n| *n != me).collect();
            let in_grace = grace
                .into_iter()
                .filter(|n| *n != me && !up.contains(n))
                .collect();
            // The Coordinator's ring holds this node and peers that are up (a peer that
            // said goodbye is out of it while still up).
            let mut ring: Vec<NodeName> = ring.into_iter().filter(|n| up.contains(n)).collect();
            ring.push(me.clone());
            let mut seen = BTreeSet::new();
            let rows = rows
                .into_iter()
                .filter(|(i, _, _)| seen.insert(*i))
                .map(|(i, durable, bound)| {
                    let mut r = row(&format!("c{i}"), durable, &[]);
                    r.node_pids = bound;
                    r
                })
                .collect();
            Situation {
                me,
                up,
                in_grace,
                ring,
                rows,
                declared: declared.into_iter().map(|i| format!("c{i}")).collect(),
                trusted,
                busy: busy
                    .into_iter()
                    .map(|i| ChildId::from(format!("c{i}")))
                    .collect(),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_plan_keeps_its_promises(s in situation()) {
        let ring = HashRing::new(s.ring.iter().cloned());
        let list = declared(&s.declared.iter().map(String::as_str).collect::<Vec<_>>());
        let knowledge = match s.trusted {
            None => DeclaredKnowledge::Off,
            Some(false) => DeclaredKnowledge::Untrusted,
            Some(true) => DeclaredKnowledge::Current(&list),
        };
        let live = Liveness { me: &s.me, up: &s.up, in_grace: &s.in_grace };
        let plan = plan_redistribution(&s.rows, &ring, live, knowledge, &s.busy);
        // A caller that hands its rows over gets the same plan, with the rows moved in.
        let owned = plan_redistribution(s.rows.clone(), &ring, live, knowledge, &s.busy);
        prop_assert_eq!(&owned, &plan);

        // Every child has exactly one target: it appears at most once in the plan.
        let mut planned = BTreeSet::new();
        for id in plan.children() {
            prop_assert!(planned.insert(id.clone()), "{} planned twice", id);
            prop_assert!(!s.busy.contains(id), "{} is in flight", id);
        }
        // Never migrate to a non-member, nor to this node; only what runs here migrates, and
        // only to its owner.
        for (target, rows) in &plan.migrations {
            prop_assert!(s.up.contains(target), "migration to {} which is not up", target);
            prop_assert!(target != &s.me);
            for r in rows {
                prop_assert!(r.node_pids.contains_key(&s.me));
                prop_assert_eq!(ring.owner(&r.spec.id), Some(target));
            }
        }
        for (target, rows) in &plan.replacements {
            prop_assert!(target == &s.me || s.up.contains(target), "re-placement to {}", target);
            for r in rows {
                prop_assert_eq!(ring.owner(&r.spec.id), Some(target));
                // Only children no live node runs.
                let runs_somewhere = r
                    .node_pids
                    .keys()
                    .any(|n| n == &s.me || s.up.contains(n) || s.in_grace.contains(n));
                prop_assert!(!runs_somewhere, "{} runs on a live node", r.spec.id);
                // Never a durable row the declared list does not hold.
                if r.hub.durable {
                    match s.trusted {
                        None => {}
                        Some(false) => prop_assert!(false, "durable {} re-placed untrusted", r.spec.id),
                        Some(true) => prop_assert!(list.contains(&r.spec.id)),
                    }
                }
            }
        }
        // Nothing is forgotten: a child running here owned by an up peer migrates, and a child
        // no live node runs is re-placed or held back.
        for r in &s.rows {
            let id = &r.spec.id;
            if s.busy.contains(id) {
                continue;
            }
            let owner = ring.owner(id).unwrap();
            let live_somewhere = r.node_pids.keys().any(|n| {
                n == &s.me || s.up.contains(n) || s.in_grace.contains(n)
            });
            if r.node_pids.contains_key(&s.me) && owner != &s.me {
                prop_assert!(planned.contains(id), "{} should migrate to {}", id, owner);
            } else if !live_somewhere {
                prop_assert!(
                    planned.contains(id) || plan.held_back.contains(id),
                    "{} is an orphan nobody re-places",
                    id
                );
            }
        }
    }
}

/// The owners of `id` on `ring` with `k` replicas.
fn owners(ring: &HashRing, id: &str, k: usize) -> Vec<NodeName> {
    ring.owners(&ChildId::from(id), k)
        .into_iter()
        .cloned()
        .collect()
}

#[test]
fn a_replica_on_a_node_that_is_no_longer_an_owner_moves_to_the_joiner() {
    // Three nodes, k = 2; d joins and takes one of x's two owner slots.
    let before = HashRing::new(["a@h", "b@h", "c@h"]);
    let after = HashRing::new(["a@h", "b@h", "c@h", "d@h"]);
    let id = (0..)
        .map(|i| format!("x{i}"))
        .find(|id| {
            let now = owners(&after, id, 2);
            now.contains(&"d@h".to_owned()) && !now.contains(&owners(&before, id, 2)[1])
        })
        .unwrap();
    let was = owners(&before, &id, 2);
    let leaving = was[1].clone();
    let bound: Vec<(&str, Pid)> = vec![(was[0].as_str(), 1), (leaving.as_str(), 2)];
    let rows = [row(&id, false, &bound)];
    let up: BTreeSet<NodeName> = NODES[..4]
        .iter()
        .filter(|n| **n != leaving)
        .map(|n| (*n).to_owned())
        .collect();
    let plan = plan_replicated_redistribution(
        &rows,
        &after,
        2,
        Liveness {
            me: &leaving,
            up: &up,
            in_grace: &BTreeSet::new(),
        },
        DeclaredKnowledge::Off,
        &BTreeSet::new(),
    );
    assert_eq!(
        ids(&plan.migrations),
        BTreeMap::from([("d@h".to_owned(), vec![id.clone()])])
    );
    assert!(plan.replacements.is_empty());
    // Every other node leaves it alone: two instances run.
    for me in NODES[..4].iter().filter(|n| **n != leaving) {
        let me = (*me).to_owned();
        let up: BTreeSet<NodeName> = NODES[..4]
            .iter()
            .filter(|n| **n != me)
            .map(|n| (*n).to_owned())
            .collect();
        let plan = plan_replicated_redistribution(
            &rows,
            &after,
            2,
            Liveness {
                me: &me,
                up: &up,
                in_grace: &BTreeSet::new(),
            },
            DeclaredKnowledge::Off,
            &BTreeSet::new(),
        );
        assert_eq!(plan, RedistributionPlan::default(), "on {me}");
    }
}

#[test]
fn a_lost_replica_is_re_created_on_the_new_owner_only_after_the_grace() {
    let full = HashRing::new(["a@h", "b@h", "c@h"]);
    let id = owned_by(&full, "a@h", "r");
    let was = owners(&full, &id, 2);
    // a (the active owner) died: the ring lost it; its instance is in grace.
    let ring = HashRing::new(["b@h", "c@h"]);
    let now = owners(&ring, &id, 2);
    let survivor = was[1].clone();
    let rows = [row(&id, false, &[("a@h", 1), (survivor.as_str(), 2)])];
    let me = "b@h".to_owned();
    let up = nodes(&["c@h"]);
    let plan = |in_grace: &BTreeSet<NodeName>| {
        plan_replicated_redistribution(
            &rows,
            &ring,
            2,
            Liveness {
                me: &me,
                up: &up,
                in_grace,
            },
            DeclaredKnowledge::Off,
            &BTreeSet::new(),
        )
    };
    assert_eq!(plan(&nodes(&["a@h"])), RedistributionPlan::default());
    // The grace is over and a's binding reaped: the owner without an instance gets one.
    let rows = [row(&id, false, &[(survivor.as_str(), 2)])];
    let plan = plan_replicated_redistribution(
        &rows,
        &ring,
        2,
        Liveness {
            me: &me,
            up: &up,
            in_grace: &BTreeSet::new(),
        },
        DeclaredKnowledge::Off,
        &BTreeSet::new(),
    );
    let missing: Vec<NodeName> = now.iter().filter(|n| **n != survivor).cloned().collect();
    assert_eq!(
        plan.replacements.keys().cloned().collect::<Vec<_>>(),
        missing
    );
}

#[test]
fn an_undeclared_durable_row_with_no_instance_is_held_back_whatever_the_factor() {
    let ring = HashRing::new(["a@h", "b@h"]);
    let rows = [row("d", true, &[])];
    let me = "a@h".to_owned();
    let list = declared(&[]);
    let plan = plan_replicated_redistribution(
        &rows,
        &ring,
        2,
        Liveness {
            me: &me,
            up: &nodes(&["b@h"]),
            in_grace: &BTreeSet::new(),
        },
        DeclaredKnowledge::Current(&list),
        &BTreeSet::new(),
    );
    assert_eq!(plan.held_back, vec![ChildId::from("d")]);
    assert!(plan.replacements.is_empty());
}

proptest! {
    /// Whatever runs where, a replicated pass only moves this node's instance off a node that
    /// is not an owner and to an owner, and only starts instances on owners that run none,
    /// never more than are missing.
    #[test]
    fn replicated_passes_only_fill_and_trim_owner_slots(
        members in proptest::collection::btree_set(0usize..5, 1..5),
        me_index in 0usize..5,
        bound in proptest::collection::btree_set(0usize..5, 0..4),
        k in 2usize..4,
        child in "[a-z]{1,4}",
    ) {
        let mut members: BTreeSet<NodeName> = members.iter().map(|i| NODES[*i].to_owned()).collect();
        let me = NODES[me_index].to_owned();
        members.insert(me.clone());
        let ring = HashRing::new(members.iter().cloned());
        let up: BTreeSet<NodeName> = members.iter().filter(|n| **n != me).cloned().collect();
        let bound: Vec<(&str, Pid)> = bound.iter().map(|i| (NODES[*i], *i as Pid)).collect();
        let rows = [row(&child, false, &bound)];
        let live = Liveness { me: &me, up: &up, in_grace: &BTreeSet::new() };
        let (declared, busy) = (DeclaredKnowledge::Off, BTreeSet::new());
        let plan = plan_replicated_redistribution(&rows, &ring, k, live, declared, &busy);
        // Rows handed over plan alike (an instance started on several owners is copied).
        let owned = plan_replicated_redistribution(rows.clone(), &ring, k, live, declared, &busy);
        prop_assert_eq!(&owned, &plan);
        let owners = owners(&ring, &child, k);
        prop_assert!(plan.migrating() + plan.excess.len() <= 1);
        for id in &plan.excess {
            prop_assert_eq!(id.as_str(), child.as_str());
            prop_assert!(!owners.contains(&me));
            prop_assert!(owners.iter().all(|o| bound.iter().any(|(n, _)| n == o)));
        }
        for target in plan.migrations.keys() {
            prop_assert!(owners.contains(target));
            prop_assert!(!owners.contains(&me));
            prop_assert!(bound.iter().any(|(n, _)| *n == me));
        }
        let live_running = bound.iter().filter(|(n, _)| members.contains(*n)).count();
        prop_assert!(plan.replacing() <= k.min(owners.len()).saturating_sub(live_running));
        for target in plan.replacements.keys() {
            prop_assert!(owners.contains(target));
            prop_assert!(!bound.iter().any(|(n, _)| n == target));
        }
    }
}

proptest! {
    /// Every child of a re-placement is in exactly one batch, in the pass's order, each batch
    /// holds at most `REPLACEMENT_BATCH`, only the last is short, and each counts the
    /// children of the batches before it.
    #[test]
    fn a_replacement_goes_in_order_in_full_batches_each_counting_what_is_ahead(
        n in 0usize..2_600
    ) {
        let children: Vec<usize> = (0..n).collect();
        let batches = replacement_batches(children.clone());
        prop_assert_eq!(batches.len(), n.div_ceil(REPLACEMENT_BATCH));
        let mut ahead = 0;
        for (i, batch) in batches.iter().enumerate() {
            prop_assert_eq!(batch.ahead, ahead);
            prop_assert!(!batch.children.is_empty() && batch.children.len() <= REPLACEMENT_BATCH);
            if i + 1 < batches.len() {
                prop_assert_eq!(batch.children.len(), REPLACEMENT_BATCH);
            }
            ahead += batch.children.len();
        }
        let flat: Vec<usize> = batches.into_iter().flat_map(|b| b.children).collect();
        prop_assert_eq!(flat, children);
    }
}
