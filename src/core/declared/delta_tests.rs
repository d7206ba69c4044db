//! Deltas: applying one to its base yields exactly the sender's copy; anything else is refused.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::core::declared::list::content_digest;
use crate::model::{ChildSpec, Metadata};

fn spec(id: &str) -> ChildSpec {
    ChildSpec::new(id, "counter")
}

fn meta(tag: u8) -> Metadata {
    let mut m = Metadata::new();
    if tag > 0 {
        m.insert("tag".into(), tag.to_string());
    }
    m
}

/// One leader mutation of a random sequence.
#[derive(Clone, Debug)]
enum Op {
    Add(&'static str, u8),
    Remove(&'static str),
    Clear,
}

fn arb_op() -> impl Strategy<Value = Op> {
    let id = prop::sample::select(vec!["a", "b", "c", "d", "e", "f"]);
    prop_oneof![
        6 => (id.clone(), 0u8..3).prop_map(|(id, tag)| Op::Add(id, tag)),
        4 => id.prop_map(Op::Remove),
        1 => Just(Op::Clear),
    ]
}

/// Applies `ops` as the leader `by` would, returning the changes in order.
fn mutate(list: &mut DeclaredList, ops: &[Op], by: &str) -> Vec<DeclaredChange> {
    ops.iter()
        .map(|op| match op {
            Op::Add(id, tag) => list.add(spec(id), meta(*tag), by).unwrap(),
            Op::Remove(id) => list.remove(&ChildId::from(*id), by),
            Op::Clear => list.clear(by),
        })
        .collect()
}

/// A leader's operation: its base stamp, its copy after, and the delta it broadcasts.
fn operation(start: &DeclaredList, ops: &[Op], by: &str) -> (DeclaredList, Option<DeclaredDelta>) {
    let mut leader = start.clone();
    let base = leader.stamp();
    let changes = mutate(&mut leader, ops, by);
    let delta = DeclaredDelta::between(base, &leader, &changes);
    (leader, delta)
}

proptest! {
    /// Applying the delta of any sequence of mutations to its base yields exactly the leader's
    /// copy (content, version, mutator, digest), and the changes it reports persist that copy.
    #[test]
    fn a_delta_applied_to_its_base_is_the_leaders_copy(
        setup in prop::collection::vec(arb_op(), 0..12),
        ops in prop::collection::vec(arb_op(), 1..12),
        by in prop::sample::select(vec!["n1", "n2"]),
    ) {
        let mut start = DeclaredList::new();
        mutate(&mut start, &setup, "n1");
        let (leader, delta) = operation(&start, &ops, by);
        let Some(delta) = delta else {
            // Nothing changed: the leader broadcasts nothing.
            prop_assert_eq!(&leader, &start);
            return Ok(());
        };
        let mut peer = start.clone();
        let outcome = peer.apply_delta(&delta);
        prop_assert!(matches!(outcome, DeltaOutcome::Applied(_)), "{:?}", outcome);
        prop_assert_eq!(&peer, &leader);
        prop_assert_eq!(peer.digest(), content_digest(leader.children().iter()));
        // The delta survives the wire.
        let bytes = bincode::serialize(&delta).unwrap();
        prop_assert_eq!(&bincode::deserialize::<DeclaredDelta>(&bytes).unwrap(), &delta);
        // A second delivery changes nothing.
        prop_assert_eq!(peer.apply_delta(&delta), DeltaOutcome::Ignored);
        prop_assert_eq!(&peer, &leader);
    }

    /// A peer whose copy is not the base never applies the delta: it keeps its copy and asks
    /// for the whole one when the delta's result would win, else ignores it.
    #[test]
    fn a_peer_not_at_the_base_never_applies_it(
        setup in prop::collection::vec(arb_op(), 0..8),
        other in prop::collection::vec(arb_op(), 1..8),
        ops in prop::collection::vec(arb_op(), 1..8),
    ) {
        let mut start = DeclaredList::new();
        mutate(&mut start, &setup, "n1");
        let mut peer = start.clone();
        mutate(&mut peer, &other, "n2");
        let (_leader, delta) = operation(&start, &ops, "n1");
        let Some(delta) = delta else { return Ok(()) };
        prop_assume!(peer.stamp() != delta.base && peer.stamp() != delta.target);
        let before = peer.clone();
        let outcome = peer.apply_delta(&delta);
        prop_assert_eq!(&peer, &before);
        let wins = announced_ahead(
            &before,
            delta.target.version,
            delta.target.last_mutated_by.as_deref(),
        );
        let same_stamp = before.version() == delta.target.version
            && before.last_mutated_by() == delta.target.last_mutated_by.as_deref();
        if wins || same_stamp {
            prop_assert_eq!(outcome, DeltaOutcome::NeedWhole);
        } else {
            prop_assert_eq!(outcome, DeltaOutcome::Ignored);
        }
    }
}

#[test]
fn a_peer_behind_the_base_fetches_the_whole_copy() {
    let mut start = DeclaredList::new();
    mutate(&mut start, &[Op::Add("a", 0)], "n1");
    let (mid, first) = operation(&start, &[Op::Add("b", 0)], "n1");
    let (last, second) = operation(&mid, &[Op::Remove("a")], "n1");
    let (first, second) = (first.unwrap(), second.unwrap());
    // The first delta was lost: the second one cannot be proven against `start`.
    let mut peer = start.clone();
    assert_eq!(peer.apply_delta(&second), DeltaOutcome::NeedWhole);
    assert_eq!(peer, start);
    // Delivered out of order, each applies once its base is there.
    assert!(matches!(peer.apply_delta(&first), DeltaOutcome::Applied(_)));
    assert!(matches!(
        peer.apply_delta(&second),
        DeltaOutcome::Applied(_)
    ));
    assert_eq!(peer, last);
    // A late copy of the first delta is ignored.
    assert_eq!(peer.apply_delta(&first), DeltaOutcome::Ignored);
}

#[test]
fn the_digest_tells_apart_two_copies_with_one_stamp() {
    // n1 authored version 1 twice with different content (it lost its disk in between).
    let mut before_loss = DeclaredList::new();
    mutate(&mut before_loss, &[Op::Add("a", 0)], "n1");
    let mut after_loss = DeclaredList::new();
    mutate(&mut after_loss, &[Op::Add("z", 0)], "n1");
    assert_eq!(before_loss.version(), after_loss.version());
    assert_eq!(before_loss.last_mutated_by(), after_loss.last_mutated_by());
    assert_ne!(before_loss.stamp(), after_loss.stamp());
    // A delta based on the new copy is refused by a peer holding the old one...
    let (_, delta) = operation(&after_loss, &[Op::Add("b", 0)], "n1");
    let mut peer = before_loss.clone();
    assert_eq!(peer.apply_delta(&delta.unwrap()), DeltaOutcome::NeedWhole);
    assert_eq!(peer, before_loss);
    // ...and so is a delta whose target has the peer's stamp but other content.
    let (_, delta) = operation(&DeclaredList::new(), &[Op::Add("z", 0)], "n1");
    let mut peer = before_loss.clone();
    assert_eq!(peer.apply_delta(&delta.unwrap()), DeltaOutcome::NeedWhole);
}

#[test]
fn a_delta_whose_changes_do_not_yield_the_target_is_refused() {
    let start = DeclaredList::new();
    let (_, delta) = operation(&start, &[Op::Add("a", 0), Op::Add("b", 0)], "n1");
    let mut delta = delta.unwrap();
    delta.changes.pop();
    let mut peer = start.clone();
    assert_eq!(peer.apply_delta(&delta), DeltaOutcome::NeedWhole);
    assert_eq!(peer, start);
}

#[test]
fn the_digest_is_maintained_like_a_recomputation() {
    let mut list = DeclaredList::new();
    assert_eq!(list.digest(), 0);
    mutate(
        &mut list,
        &[
            Op::Add("a", 0),
            Op::Add("b", 1),
            Op::Add("a", 2),
            Op::Remove("b"),
        ],
        "n1",
    );
    let children: BTreeMap<ChildId, DeclaredChild> = list
        .children()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let rebuilt = DeclaredList::from_parts(list.version(), children, Some("n1".into()));
    assert_eq!(rebuilt.digest(), list.digest());
    assert_eq!(rebuilt, list);
    // A decoded copy recomputes it.
    let decoded: DeclaredList = bincode::deserialize(&bincode::serialize(&list).unwrap()).unwrap();
    assert_eq!(decoded.digest(), list.digest());
    list.clear("n1");
    assert_eq!(list.digest(), 0);
}
