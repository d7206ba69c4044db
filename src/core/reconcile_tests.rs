//! Rounds as scenarios (docs/recovery.md, "Rounds"), and the invariants every plan keeps.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::model::{ChildSpec, Metadata};

const NODES: [&str; 3] = ["n1", "n2", "n3"];

fn declared(ids: &[&str]) -> DeclaredList {
    let mut list = DeclaredList::new();
    for id in ids {
        list.add(ChildSpec::new(*id, "counter"), Metadata::new(), "n1")
            .unwrap();
    }
    list
}

fn row(id: &str, durable: bool, bound: &[(&str, Pid)]) -> Row {
    let mut row = Row::authored(
        ChildSpec::new(id, "counter"),
        Metadata::new(),
        "n1",
        0,
        durable,
    )
    .unwrap();
    for (node, pid) in bound {
        row.node_pids.insert((*node).to_owned(), *pid);
    }
    row
}

/// A toy ring: the owner is picked by the id's first byte.
fn owner(id: &ChildId) -> NodeName {
    let b = id.as_str().as_bytes()[0] as usize;
    NODES[b % NODES.len()].to_owned()
}

fn plan(list: &DeclaredList, rows: &[Row], local: &str) -> ReconcilePlan {
    plan_round(list, rows, owner, local, &BTreeSet::new(), false)
}

#[test]
fn after_a_whole_cluster_outage_every_declared_child_returns() {
    let list = declared(&["a", "b", "c"]);
    let p = plan(&list, &[], "n2");
    let ids: Vec<&str> = p.starts.iter().map(|s| s.child.spec.id.as_str()).collect();
    assert_eq!(ids, vec!["a", "b", "c"]);
    assert_eq!(p.starts[0].owner, owner(&"a".into()));
    assert_eq!(p.stats.candidates, 3);
    assert_eq!(p.stats.orphans, 3);
    assert_eq!(p.stats.started, 3);
    assert!(p.stops.is_empty() && p.remove_rows.is_empty());
}

#[test]
fn a_single_node_rejoin_is_an_empty_diff() {
    let list = declared(&["a", "b"]);
    let rows = [row("a", true, &[("n1", 1)]), row("b", true, &[("n3", 2)])];
    let p = plan(&list, &rows, "n2");
    assert!(p.starts.is_empty() && p.stops.is_empty() && p.duplicates.is_empty());
    assert_eq!(
        p.stats,
        RoundStats {
            candidates: 2,
            ..RoundStats::default()
        }
    );
}

#[test]
fn a_child_stopped_during_an_absence_stays_dead() {
    // "b" was stopped while this node was away: it is gone from the list, and its row is gone.
    let list = declared(&["a"]);
    let p = plan(&list, &[], "n2");
    assert_eq!(p.starts.len(), 1);
    assert_eq!(p.starts[0].child.spec.id.as_str(), "a");
}

#[test]
fn a_stop_that_crashed_halfway_is_finished_by_the_node_running_it() {
    let list = declared(&[]);
    let rows = [row("x", true, &[("n2", 7)])];
    let on_n2 = plan(&list, &rows, "n2");
    assert_eq!(
        on_n2.stops,
        vec![LocalStop {
            id: "x".into(),
            pid: 7,
            reason: StopReason::Undeclared
        }]
    );
    assert_eq!(on_n2.stats.stopped_undeclared, 1);
    assert!(
        plan(&list, &rows, "n1").stops.is_empty(),
        "n1 stops only its own"
    );
}

#[test]
fn a_child_that_was_never_durable_is_not_touched() {
    let list = declared(&[]);
    let rows = [row("plain", false, &[("n2", 7)]), row("idle", false, &[])];
    for node in NODES {
        let p = plan(&list, &rows, node);
        assert!(p.stops.is_empty() && p.remove_rows.is_empty() && p.starts.is_empty());
    }
}

#[test]
fn a_stale_durable_row_is_removed_wherever_it_is_held() {
    let list = declared(&["kept"]);
    let rows = [row("s", true, &[]), row("kept", true, &[])];
    for node in NODES {
        assert_eq!(
            plan(&list, &rows, node).remove_rows,
            vec![ChildId::from("s")]
        );
    }
}

#[test]
fn a_duplicate_is_reduced_to_the_owner_instance() {
    let list = declared(&["a"]);
    let keep = owner(&"a".into());
    let rows = [row("a", true, &[("n1", 1), ("n2", 2), ("n3", 3)])];
    let mut stopped = Vec::new();
    for node in NODES {
        let p = plan(&list, &rows, node);
        assert_eq!(p.duplicates.len(), 1);
        assert_eq!(p.duplicates[0].keep, keep);
        assert!(p.starts.is_empty());
        stopped.extend(p.stops.iter().map(|s| (node, s.pid, s.reason)));
    }
    assert_eq!(stopped.len(), 2);
    assert!(stopped
        .iter()
        .all(|(n, _, r)| *n != keep && *r == StopReason::Duplicate));
}

#[test]
fn a_duplicate_off_its_owner_keeps_the_lowest_node() {
    let list = declared(&["a"]);
    let o = owner(&"a".into());
    let others: Vec<&str> = NODES.iter().copied().filter(|n| *n != o).collect();
    let rows = [row("a", true, &[(others[0], 1), (others[1], 2)])];
    assert_eq!(plan(&list, &rows, others[0]).stops, vec![]);
    assert_eq!(plan(&list, &rows, others[1]).stops.len(), 1);
}

#[test]
fn a_mid_migration_child_starts_only_after_two_orphan_rounds() {
    let list = declared(&["m"]);
    let rows = [row("m", true, &[])];
    let first = plan_round(&list, &rows, owner, "n1", &BTreeSet::new(), false);
    assert!(first.starts.is_empty());
    assert_eq!(first.stats.skipped_pending, 1);
    assert_eq!(first.stats.orphans, 1);
    let second = plan_round(&list, &rows, owner, "n1", &first.pending, false);
    assert_eq!(second.starts.len(), 1);
    assert_eq!(second.stats.skipped_pending, 0);
    assert!(second.pending.is_empty());

    // If the migration finishes in between, nothing is started and nothing stays pending.
    let landed = [row("m", true, &[("n2", 4)])];
    let done = plan_round(&list, &landed, owner, "n1", &first.pending, false);
    assert!(done.starts.is_empty() && done.pending.is_empty());
}

#[test]
fn a_parked_round_does_nothing() {
    let list = declared(&["a"]);
    let rows = [row("x", true, &[("n1", 1)]), row("s", true, &[])];
    let pending: BTreeSet<ChildId> = [ChildId::from("a")].into();
    let p = plan_round(&list, &rows, owner, "n1", &pending, true);
    assert!(p.parked);
    assert!(p.starts.is_empty() && p.stops.is_empty() && p.remove_rows.is_empty());
    assert_eq!(p.pending, pending);
}

const IDS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// A random world: a declared subset, and rows with a durable flag and bindings on any nodes.
fn arb_world() -> impl Strategy<Value = (DeclaredList, Vec<Row>, BTreeSet<ChildId>)> {
    let ids = prop::collection::btree_set(prop::sample::select(IDS.to_vec()), 0..6);
    let rows = prop::collection::btree_map(
        prop::sample::select(IDS.to_vec()),
        (any::<bool>(), prop::collection::btree_set(0usize..3, 0..4)),
        0..6,
    );
    let pending = prop::collection::btree_set(prop::sample::select(IDS.to_vec()), 0..3);
    (ids, rows, pending).prop_map(|(ids, rows, pending)| {
        let ids: Vec<&str> = ids.into_iter().collect();
        let rows = rows
            .into_iter()
            .map(|(id, (durable, nodes))| {
                let bound: Vec<(&str, Pid)> = nodes
                    .into_iter()
                    .map(|i| (NODES[i], i as Pid + 10))
                    .collect();
                row(id, durable, &bound)
            })
            .collect();
        (
            declared(&ids),
            rows,
            pending.into_iter().map(ChildId::from).collect(),
        )
    })
}

proptest! {
    /// A plan never starts a child absent from the declared list (a stopped child stays dead).
    #[test]
    fn never_starts_an_undeclared_child((list, rows, pending) in arb_world(), local in 0usize..3) {
        let p = plan_round(&list, &rows, owner, NODES[local], &pending, false);
        for s in &p.starts {
            prop_assert!(list.contains(&s.child.spec.id));
        }
    }

    /// A plan never stops the keeper instance of a declared child, and only stops local
    /// instances.
    #[test]
    fn never_stops_a_declared_keeper((list, rows, pending) in arb_world(), local in 0usize..3) {
        let node = NODES[local];
        let p = plan_round(&list, &rows, owner, node, &pending, false);
        for stop in &p.stops {
            let row = rows.iter().find(|r| r.id() == &stop.id).unwrap();
            prop_assert_eq!(row.node_pids.get(node), Some(&stop.pid));
            if list.contains(&stop.id) {
                prop_assert_eq!(stop.reason, StopReason::Duplicate);
                let keep = duplicate_keeper(row, &owner(&stop.id)).unwrap();
                prop_assert_ne!(keep.as_str(), node);
            }
        }
    }

    /// Parked plans are empty.
    #[test]
    fn parked_plans_are_empty((list, rows, pending) in arb_world(), local in 0usize..3) {
        let p = plan_round(&list, &rows, owner, NODES[local], &pending, true);
        prop_assert!(p.starts.is_empty() && p.stops.is_empty() && p.remove_rows.is_empty());
        prop_assert_eq!(p.stats, RoundStats::default());
    }

    /// The union over all nodes of the duplicate stops leaves exactly one instance of each
    /// declared child: its keeper's, the ring owner's whenever the owner holds one.
    #[test]
    fn duplicate_stops_leave_exactly_the_keeper((list, rows, pending) in arb_world()) {
        let mut alive: Vec<(ChildId, NodeName)> = rows
            .iter()
            .flat_map(|r| r.node_pids.keys().map(move |n| (r.id().clone(), n.clone())))
            .collect();
        for node in NODES {
            let p = plan_round(&list, &rows, owner, node, &pending, false);
            for s in p.stops.iter().filter(|s| s.reason == StopReason::Duplicate) {
                alive.retain(|(id, n)| !(id == &s.id && n == node));
            }
        }
        for r in rows.iter().filter(|r| list.contains(r.id()) && !r.node_pids.is_empty()) {
            let left: Vec<&NodeName> =
                alive.iter().filter(|(id, _)| id == r.id()).map(|(_, n)| n).collect();
            prop_assert_eq!(left.len(), 1);
            let o = owner(r.id());
            if r.node_pids.contains_key(&o) {
                prop_assert_eq!(left[0], &o);
            }
        }
    }

    /// Every declared child is accounted for exactly once per round.
    #[test]
    fn orphan_accounting_adds_up((list, rows, pending) in arb_world(), local in 0usize..3) {
        let p = plan_round(&list, &rows, owner, NODES[local], &pending, false);
        prop_assert_eq!(p.stats.orphans, p.stats.started + p.stats.skipped_pending);
        prop_assert!(p.stats.orphans <= p.stats.candidates);
        prop_assert_eq!(p.pending.len(), p.stats.skipped_pending);
    }
}

/// Two owners per child: `n1` then `n2` for every id.
fn two_owners(_: &ChildId, _: Option<&Row>) -> Vec<NodeName> {
    vec!["n1".to_owned(), "n2".to_owned()]
}

#[test]
fn a_declared_child_missing_a_replica_is_submitted_again() {
    let list = declared(&["x"]);
    let rows = [row("x", true, &[("n2", 7)])];
    let p = plan_replicated_round(&list, &rows, two_owners, "n3", &BTreeSet::new(), false);
    assert_eq!(p.starts.len(), 1, "{p:?}");
    assert_eq!(p.starts[0].owner, "n1");
    assert_eq!(p.stats.under_replicated, 1);
    assert!(p.stops.is_empty() && p.duplicates.is_empty());
    // On both owners: nothing to do.
    let rows = [row("x", true, &[("n1", 1), ("n2", 7)])];
    let p = plan_replicated_round(&list, &rows, two_owners, "n3", &BTreeSet::new(), false);
    assert!(p.starts.is_empty() && p.stops.is_empty(), "{p:?}");
}

#[test]
fn a_declared_child_on_more_nodes_than_owners_keeps_its_owners_instances() {
    let list = declared(&["x"]);
    let rows = [row("x", true, &[("n1", 1), ("n2", 2), ("n3", 3)])];
    for local in NODES {
        let p = plan_replicated_round(&list, &rows, two_owners, local, &BTreeSet::new(), false);
        assert_eq!(p.duplicates.len(), 1);
        assert_eq!(p.duplicates[0].keep, "n1");
        let stops: Vec<&str> = p.stops.iter().map(|s| s.id.as_str()).collect();
        if local == "n3" {
            assert_eq!(stops, ["x"], "the instance off the owners goes");
        } else {
            assert!(stops.is_empty(), "{local} keeps its replica");
        }
    }
}

#[test]
fn only_a_plan_that_does_and_carries_nothing_is_quiet() {
    let list = declared(&["a", "b"]);
    let rows = [row("a", true, &[("n1", 1)]), row("b", true, &[("n3", 2)])];
    assert!(plan(&list, &rows, "n2").is_quiet(), "everything runs");
    assert!(!plan(&list, &[], "n2").is_quiet(), "orphans to start");
    let unbound = [row("a", true, &[("n1", 1)]), row("b", true, &[])];
    assert!(!plan(&list, &unbound, "n2").is_quiet(), "a pending child");
    let parked = plan_round(&list, &rows, owner, "n2", &BTreeSet::new(), true);
    assert!(!parked.is_quiet(), "a parked round");
    let quiet = QuietRound {
        inputs: RoundInputs {
            declared_version: 2,
            registry_generation: 7,
            peers: vec!["n1".into()],
        },
        stats: RoundStats::default(),
    };
    assert!(quiet.stands_for(&quiet.inputs.clone()));
    for changed in [
        RoundInputs {
            declared_version: 3,
            ..quiet.inputs.clone()
        },
        RoundInputs {
            registry_generation: 8,
            ..quiet.inputs.clone()
        },
        RoundInputs {
            peers: vec!["n1".into(), "n3".into()],
            ..quiet.inputs.clone()
        },
    ] {
        assert!(!quiet.stands_for(&changed));
    }
}

fn start_ids(p: &ReconcilePlan) -> Vec<&str> {
    p.starts.iter().map(|s| s.child.spec.id.as_str()).collect()
}

#[test]
fn the_owner_submits_first_and_every_node_a_round_later() {
    // After a whole-cluster outage every node sees every child as an orphan.
    let list = declared(&IDS);
    let mut total = 0;
    for node in NODES {
        let mut first = plan(&list, &[], node);
        defer_to_owners(&mut first, node);
        for start in &first.starts {
            assert_eq!(start.owner, node, "a first round submits only its own");
        }
        assert_eq!(first.starts.len() + first.deferred.len(), IDS.len());
        assert_eq!(first.stats.started, first.starts.len());
        assert_eq!(first.stats.deferred_to_owner, first.deferred.len());
        assert!(!first.is_quiet() || first.deferred.is_empty());
        total += first.starts.len();
        // The owners did nothing: the next round (no deferral) submits every orphan.
        let next = plan(&list, &[], node);
        assert_eq!(start_ids(&next), IDS.to_vec());
    }
    assert_eq!(total, IDS.len(), "each child submitted once over the nodes");
}

#[test]
fn a_parked_round_defers_nothing() {
    let list = declared(&["a", "b", "c"]);
    let mut p = plan_round(
        &list,
        std::iter::empty::<&Row>(),
        owner,
        "n1",
        &BTreeSet::new(),
        true,
    );
    defer_to_owners(&mut p, "n1");
    assert!(p.starts.is_empty() && p.deferred.is_empty());
    assert_eq!(p.stats.deferred_to_owner, 0);
}

#[test]
fn an_unbound_row_or_a_missing_replica_is_not_deferred() {
    // An unbound row waited its round as `pending` already.
    let list = declared(&IDS);
    let rows: Vec<Row> = IDS.iter().map(|id| row(id, true, &[])).collect();
    let pending: BTreeSet<ChildId> = rows.iter().map(|r| r.id().clone()).collect();
    let mut p = plan_round(&list, &rows, owner, "n1", &pending, false);
    defer_to_owners(&mut p, "n1");
    assert_eq!(p.starts.len(), IDS.len());
    assert!(p.deferred.is_empty());
    // A child on one of its two owners: the other replica is submitted, not deferred.
    let list = declared(&["a"]);
    let rows = [row("a", true, &[("n1", 1)])];
    let mut p = plan_replicated_round(
        &list,
        rows.iter(),
        two_owners,
        "n3",
        &BTreeSet::new(),
        false,
    );
    defer_to_owners(&mut p, "n3");
    assert_eq!(start_ids(&p), vec!["a"]);
}

proptest! {
    /// Deferral only ever removes starts this node does not own, and never invents one.
    #[test]
    fn deferral_keeps_every_start_it_owns(
        ids in proptest::collection::btree_set("[a-z]{1,4}", 0..20),
        node in 0usize..3,
    ) {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let list = declared(&ids);
        let local = NODES[node];
        let all = plan(&list, &[], local);
        let mut first = plan(&list, &[], local);
        defer_to_owners(&mut first, local);
        for start in &all.starts {
            let kept = first.starts.iter().any(|s| s.child.spec.id == start.child.spec.id);
            prop_assert_eq!(kept, start.owner == local);
            prop_assert_eq!(first.deferred.contains(&start.child.spec.id), !kept);
        }
        prop_assert_eq!(first.starts.len() + first.deferred.len(), all.starts.len());
    }
}
