//! Each check on hand-made histories: what it accepts and what it catches.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::sim::ledger::{Acknowledged, Decision, Ledger};

fn stamp(version: u64, by: &str, digest: u64) -> ListStamp {
    ListStamp {
        version,
        last_mutated_by: (version > 0).then(|| by.to_owned()),
        digest,
    }
}

fn ids(names: &[&str]) -> Vec<ChildId> {
    names.iter().map(|n| ChildId::from(*n)).collect()
}

fn set(names: &[&str]) -> BTreeSet<ChildId> {
    ids(names).into_iter().collect()
}

fn decision(
    base: ListStamp,
    result: ListStamp,
    declared: &[&str],
    undeclared: &[&str],
) -> Decision {
    Decision {
        author: result.last_mutated_by.clone().unwrap_or_default(),
        base,
        result,
        declared: ids(declared),
        undeclared: ids(undeclared),
        untouched: Vec::new(),
        cleared: false,
    }
}

fn ledger(decisions: Vec<Decision>, acknowledged: Vec<Acknowledged>) -> Ledger {
    let mut ledger = Ledger::default();
    ledger.decisions = decisions;
    ledger.acknowledged = acknowledged;
    ledger
}

fn ack(request: u64, start: bool, names: &[&str]) -> Acknowledged {
    Acknowledged {
        request,
        start,
        ids: ids(names),
    }
}

#[test]
fn acknowledged_mutations_in_the_final_lineage_are_in_force() {
    let v0 = stamp(0, "", 0);
    let v1 = stamp(1, "a", 11);
    let v2 = stamp(2, "a", 12);
    let ledger = ledger(
        vec![
            decision(v0, v1.clone(), &["x", "y"], &[]),
            decision(v1, v2.clone(), &[], &["x"]),
        ],
        vec![ack(1, true, &["x", "y"]), ack(2, false, &["x"])],
    );
    let verdict = judge_declared(&ledger, &v2, &set(&["y"])).unwrap();
    assert_eq!(verdict.starts_in_force, 1);
    assert_eq!(verdict.stops_in_force, 1);
    assert_eq!(verdict.superseded, 0);
    assert_eq!(verdict.stopped, set(&["x"]));
}

#[test]
fn the_losing_side_of_a_fork_is_superseded_not_a_violation() {
    // Both sides of a partition mutated version 1; b's copy won.
    let v0 = stamp(0, "", 0);
    let v1 = stamp(1, "a", 11);
    let a2 = stamp(2, "a", 21);
    let b2 = stamp(2, "b", 22);
    let ledger = ledger(
        vec![
            decision(v0, v1.clone(), &["x"], &[]),
            decision(v1.clone(), a2, &["lost"], &[]),
            decision(v1, b2.clone(), &["kept"], &[]),
        ],
        vec![
            ack(1, true, &["x"]),
            ack(2, true, &["lost"]),
            ack(3, true, &["kept"]),
        ],
    );
    let verdict = judge_declared(&ledger, &b2, &set(&["x", "kept"])).unwrap();
    assert_eq!(verdict.starts_in_force, 2);
    assert_eq!(verdict.superseded, 1);
}

#[test]
fn an_acknowledgement_no_leader_decided_is_a_violation() {
    let v0 = stamp(0, "", 0);
    let v1 = stamp(1, "a", 11);
    let mut ledger = ledger(
        vec![decision(v0, v1.clone(), &["x"], &[])],
        vec![ack(1, true, &["x"]), ack(2, true, &["ghost"])],
    );
    let err = judge_declared(&ledger, &v1, &set(&["x"])).unwrap_err();
    assert_eq!(err.invariant, Invariant::DeclaredRunOnce);
    ledger.acknowledged = vec![ack(3, false, &["x"])];
    let err = judge_declared(&ledger, &v1, &set(&["x"])).unwrap_err();
    assert_eq!(err.invariant, Invariant::StoppedStaysStopped);
}

#[test]
fn a_copy_that_is_not_what_its_leaders_decided_is_a_violation() {
    let v0 = stamp(0, "", 0);
    let v1 = stamp(1, "a", 11);
    let ledger = ledger(vec![decision(v0, v1.clone(), &["x"], &[])], Vec::new());
    let err = judge_declared(&ledger, &v1, &set(&["x", "intruder"])).unwrap_err();
    assert_eq!(err.invariant, Invariant::DeclaredRunOnce);
    let err = judge_declared(&ledger, &stamp(3, "c", 99), &set(&[])).unwrap_err();
    assert!(err.detail.contains("history breaks"), "{err}");
}

#[test]
fn declared_children_run_once_and_stopped_ones_not_at_all() {
    let running = |pairs: &[(&str, &[&str])]| -> BTreeMap<ChildId, BTreeMap<NodeName, Pid>> {
        pairs
            .iter()
            .map(|(id, nodes)| {
                let nodes = nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| ((*n).to_owned(), i as Pid))
                    .collect();
                (ChildId::from(*id), nodes)
            })
            .collect()
    };
    let durable = set(&["x", "y", "z"]);
    let ok = running(&[("x", &["a"]), ("y", &["b"])]);
    declared_run_as_decided(&ok, &set(&["x", "y"]), &durable, &set(&["z"])).unwrap();
    let twice = running(&[("x", &["a", "b"]), ("y", &["b"])]);
    let err = declared_run_as_decided(&twice, &set(&["x", "y"]), &durable, &set(&[])).unwrap_err();
    assert_eq!(err.invariant, Invariant::DeclaredRunOnce);
    let back = running(&[("x", &["a"]), ("y", &["b"]), ("z", &["c"])]);
    let err =
        declared_run_as_decided(&back, &set(&["x", "y"]), &durable, &set(&["z"])).unwrap_err();
    assert_eq!(err.invariant, Invariant::StoppedStaysStopped);
}

#[test]
fn versions_may_not_go_back_while_the_disk_is_kept() {
    let mut watch = VersionWatch::default();
    let node = "a@sim".to_owned();
    watch.observe(&node, 0, 3).unwrap();
    watch.observe(&node, 0, 5).unwrap();
    assert_eq!(
        watch.observe(&node, 0, 4).unwrap_err().invariant,
        Invariant::VersionsMonotonic
    );
    // A lost disk starts over.
    watch.observe(&node, 1, 0).unwrap();
}

#[test]
fn a_child_off_its_owner_is_tolerated_only_within_the_bound() {
    let mut watch = PlacementWatch::new(1_000);
    let (a, b) = ("a@sim".to_owned(), "b@sim".to_owned());
    let x = ChildId::from("x");
    watch.observe(0, [(&a, &x, Some(&b))]).unwrap();
    watch.observe(900, [(&a, &x, Some(&b))]).unwrap();
    let err = watch.observe(1_500, [(&a, &x, Some(&b))]).unwrap_err();
    assert_eq!(err.invariant, Invariant::PlacementBounded);
    // Once it reached its owner the clock starts over.
    let mut watch = PlacementWatch::new(1_000);
    watch.observe(0, [(&a, &x, Some(&b))]).unwrap();
    watch.observe(900, [(&b, &x, Some(&b))]).unwrap();
    watch.observe(1_500, [(&a, &x, Some(&b))]).unwrap();
}

#[test]
fn registries_must_agree_and_tell_the_truth() {
    let view = |node: &str, running: &[(&str, Pid)], registry: &[(&str, &str, Pid)]| NodeView {
        node: node.to_owned(),
        running: running
            .iter()
            .map(|(id, pid)| (ChildId::from(*id), *pid))
            .collect(),
        registry: registry
            .iter()
            .fold(BTreeMap::new(), |mut m, (id, n, pid)| {
                m.entry(ChildId::from(*id))
                    .or_insert_with(BTreeMap::new)
                    .insert((*n).to_owned(), *pid);
                m
            }),
        members: vec!["a@sim".into(), "b@sim".into()],
        declared: None,
    };
    let rows = [("x", "a@sim", 1), ("y", "b@sim", 2)];
    let good = [
        view("a@sim", &[("x", 1)], &rows),
        view("b@sim", &[("y", 2)], &rows),
    ];
    registries_agree(&good).unwrap();
    let differ = [
        view("a@sim", &[("x", 1)], &rows),
        view("b@sim", &[("y", 2)], &rows[..1]),
    ];
    assert_eq!(
        registries_agree(&differ).unwrap_err().invariant,
        Invariant::RegistriesAgree
    );
    let lying = [view("a@sim", &[], &rows), view("b@sim", &[("y", 2)], &rows)];
    assert!(registries_agree(&lying)
        .unwrap_err()
        .detail
        .contains("runs there as None"));
    let unrecorded = [
        view("a@sim", &[("x", 1), ("z", 9)], &rows),
        view("b@sim", &[("y", 2)], &rows),
    ];
    assert!(registries_agree(&unrecorded).is_err());
}

#[test]
fn a_request_must_be_answered_exactly_once() {
    let mut ledger = Ledger::default();
    let r = ledger.issue("start".into(), "a@sim", 0);
    requests_answered(&ledger, false).unwrap();
    assert_eq!(
        requests_answered(&ledger, true).unwrap_err().invariant,
        Invariant::RequestsAnswered
    );
    ledger.answered(r);
    requests_answered(&ledger, true).unwrap();
    ledger.answered(r);
    assert!(requests_answered(&ledger, false).is_err());
}

#[test]
fn a_plain_child_from_before_an_outage_must_not_return_nor_linger() {
    let view = |running: &[&str], listed: &[&str]| NodeView {
        node: "a@sim".to_owned(),
        running: running.iter().map(|id| (ChildId::from(*id), 1)).collect(),
        registry: listed
            .iter()
            .map(|id| (ChildId::from(*id), BTreeMap::new()))
            .collect(),
        members: vec!["a@sim".into()],
        declared: None,
    };
    let gone = set(&["p1"]);
    undeclared_stays_gone(&[view(&["d1"], &["d1"])], &gone).unwrap();
    let running = undeclared_stays_gone(&[view(&["p1"], &["p1"])], &gone).unwrap_err();
    assert_eq!(running.invariant, Invariant::StoppedStaysStopped);
    // A row without a host still answers lookups: it must be gone too.
    let lingering = undeclared_stays_gone(&[view(&[], &["p1"])], &gone).unwrap_err();
    assert_eq!(lingering.invariant, Invariant::StoppedStaysStopped);
}
