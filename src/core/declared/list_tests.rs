//! Scenarios and properties of the declared list, in the words of docs/recovery.md.

use proptest::prelude::*;

use super::*;
use crate::model::Metadata;

fn spec(id: &str) -> ChildSpec {
    ChildSpec::new(id, "counter")
}

fn list_with(ids: &[&str], by: &str) -> DeclaredList {
    let mut list = DeclaredList::new();
    for id in ids {
        list.add(spec(id), Metadata::new(), by).unwrap();
    }
    list
}

#[test]
fn every_mutation_moves_the_version_by_one() {
    let mut list = DeclaredList::new();
    assert_eq!(list.version(), 0);
    assert_eq!(
        list.add(spec("a"), Metadata::new(), "n1").unwrap(),
        DeclaredChange::Put("a".into())
    );
    assert_eq!(list.version(), 1);
    assert_eq!(list.last_mutated_by(), Some("n1"));
    list.add(spec("b"), Metadata::new(), "n1").unwrap();
    assert_eq!(
        list.remove(&"a".into(), "n2"),
        DeclaredChange::Removed("a".into())
    );
    assert_eq!(list.version(), 3);
    assert_eq!(list.last_mutated_by(), Some("n2"));
    assert!(!list.contains(&"a".into()));
    assert!(list.contains(&"b".into()));
}

#[test]
fn repeating_a_mutation_changes_nothing() {
    let mut list = list_with(&["a"], "n1");
    assert_eq!(
        list.add(spec("a"), Metadata::new(), "n1").unwrap(),
        DeclaredChange::Unchanged
    );
    assert_eq!(list.remove(&"zz".into(), "n1"), DeclaredChange::Unchanged);
    assert_eq!(list.version(), 1);
    let mut meta = Metadata::new();
    meta.insert("tag".into(), "x".into());
    assert_eq!(
        list.add(spec("a"), meta.clone(), "n1").unwrap(),
        DeclaredChange::Put("a".into())
    );
    assert_eq!(list.version(), 2);
    assert_eq!(list.get(&"a".into()).unwrap().metadata, meta);
}

#[test]
fn durable_requires_a_permanent_child() {
    let mut list = DeclaredList::new();
    for restart in [Restart::Transient, Restart::Temporary] {
        let err = list
            .add(spec("t").with_restart(restart), Metadata::new(), "n1")
            .unwrap_err();
        assert_eq!(
            err,
            DeclaredError::DurableRequiresPermanent {
                id: "t".into(),
                restart
            }
        );
    }
    let mut meta = Metadata::new();
    meta.insert(RESERVED_METADATA_KEY.into(), "x".into());
    assert!(matches!(
        list.add(spec("r"), meta, "n1"),
        Err(DeclaredError::ReservedMetadataKey { .. })
    ));
    assert_eq!(list.version(), 0, "a rejected child is not a mutation");
}

#[test]
fn clear_is_one_mutation() {
    let mut list = list_with(&["a", "b", "c"], "n1");
    assert_eq!(list.clear("op"), DeclaredChange::Cleared);
    assert!(list.is_empty());
    assert_eq!(list.version(), 4);
}

#[test]
fn the_higher_version_is_adopted_whole() {
    let mut local = list_with(&["a", "b"], "n1");
    let mut newer = local.clone();
    newer.remove(&"a".into(), "n1");
    newer.add(spec("c"), Metadata::new(), "n1").unwrap();
    let outcome = local.adopt(&newer);
    assert_eq!(
        outcome,
        Adoption::Replaced {
            previous_version: 2,
            tiebreak: None
        }
    );
    assert_eq!(local, newer);
    // The older copy never comes back.
    let older = list_with(&["a", "b"], "n1");
    assert_eq!(local.adopt(&older), Adoption::Kept { tiebreak: None });
    assert_eq!(local, newer);
}

#[test]
fn a_tie_with_different_content_goes_to_the_lowest_mutating_node() {
    // A partition: both sides mutated version 3 -> 4 differently.
    let base = list_with(&["a", "b", "c"], "n1");
    let mut left = base.clone();
    left.remove(&"a".into(), "n1");
    let mut right = base;
    right.add(spec("d"), Metadata::new(), "n3").unwrap();
    assert_eq!(left.version(), right.version());

    let mut on_right = right.clone();
    let outcome = on_right.adopt(&left);
    let expected = Tiebreak {
        version: 4,
        winner: Some("n1".into()),
        loser: Some("n3".into()),
    };
    assert_eq!(outcome.tiebreak(), Some(&expected));
    assert!(outcome.replaced());
    assert_eq!(on_right, left);

    let mut on_left = left.clone();
    let outcome = on_left.adopt(&right);
    assert_eq!(
        outcome,
        Adoption::Kept {
            tiebreak: Some(expected)
        }
    );
    assert_eq!(on_left, left);
}

#[test]
fn an_identical_copy_is_no_tiebreak() {
    let a = list_with(&["a"], "n1");
    let mut b = a.clone();
    assert_eq!(b.adopt(&a), Adoption::Kept { tiebreak: None });
    assert_eq!(tiebreak_between(&a, &b), None);
}

fn durable_row(id: &str, restart: Restart, durable: bool) -> Row {
    Row::authored(
        spec(id).with_restart(restart),
        Metadata::new(),
        "n1",
        0,
        durable,
    )
    .unwrap()
}

#[test]
fn first_boot_seeds_version_one_from_durable_rows() {
    let rows = [
        durable_row("a", Restart::Permanent, true),
        durable_row("b", Restart::Permanent, false),
        durable_row("c", Restart::Transient, true),
    ];
    let (list, rejected) = DeclaredList::seed_from_rows(&rows, "n2");
    assert_eq!(list.version(), 1);
    assert_eq!(list.last_mutated_by(), Some("n2"));
    assert_eq!(
        list.children().keys().collect::<Vec<_>>(),
        vec![&ChildId::from("a")]
    );
    assert_eq!(rejected, vec![ChildId::from("c")]);

    let (empty, _) = DeclaredList::seed_from_rows(&rows[1..2], "n2");
    assert_eq!(
        empty,
        DeclaredList::new(),
        "no durable rows: nothing to seed"
    );
}

#[test]
fn boot_adopts_the_highest_copy() {
    let local = list_with(&["a"], "n1");
    let peer = list_with(&["a", "b", "c"], "n2");
    let manifest = list_with(&["a", "b"], "n1");
    let (best, ties) = highest([&local, &peer, &manifest]).unwrap();
    assert_eq!(best, &peer);
    assert!(ties.is_empty());
    assert!(highest(std::iter::empty()).is_none());
}

#[test]
fn the_list_survives_serde() {
    let list = list_with(&["a", "b"], "n1");
    let json = serde_json::to_string(&list).unwrap();
    assert_eq!(serde_json::from_str::<DeclaredList>(&json).unwrap(), list);
    let bin = bincode::serialize(&list).unwrap();
    assert_eq!(bincode::deserialize::<DeclaredList>(&bin).unwrap(), list);
}

/// The list's encoding is the one of the `BTreeMap`-based list it replaced (wire frames and
/// stored copies of older builds decode, and theirs decode here).
#[test]
fn the_encoding_is_the_one_of_the_btreemap_list() {
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct OldList {
        version: u64,
        children: BTreeMap<ChildId, DeclaredChild>,
        last_mutated_by: Option<NodeName>,
    }
    let mut meta = Metadata::new();
    meta.insert("k".into(), "v".into());
    let mut list = list_with(&["b", "a", "c"], "n1");
    list.add(spec("d"), meta, "n2").unwrap();
    let old = OldList {
        version: list.version(),
        children: list
            .children()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        last_mutated_by: list.last_mutated_by().map(str::to_owned),
    };
    let bin = bincode::serialize(&list).unwrap();
    assert_eq!(bin, bincode::serialize(&old).unwrap());
    assert_eq!(bincode::deserialize::<OldList>(&bin).unwrap(), old);
    let json = serde_json::to_string(&list).unwrap();
    assert_eq!(json, serde_json::to_string(&old).unwrap());
    assert_eq!(serde_json::from_str::<DeclaredList>(&json).unwrap(), list);
}

/// A random copy: a version, a mutator among three nodes (or none), children among five ids.
fn arb_list() -> impl Strategy<Value = DeclaredList> {
    (
        0u64..4,
        prop::option::of(prop::sample::select(vec!["n1", "n2", "n3"])),
        prop::collection::btree_set(prop::sample::select(vec!["a", "b", "c", "d", "e"]), 0..4),
    )
        .prop_map(|(version, by, ids)| {
            let children = ids
                .into_iter()
                .map(|id| {
                    (
                        ChildId::from(id),
                        DeclaredChild {
                            spec: spec(id),
                            metadata: Metadata::new(),
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>();
            DeclaredList::from_parts(version, children, by.map(str::to_owned))
        })
}

proptest! {
    /// Every node converges on the same copy whatever order it hears the copies in.
    #[test]
    fn adoption_converges_in_any_order(
        copies in prop::collection::vec(arb_list(), 1..6),
        start in arb_list(),
        seed in any::<u64>(),
    ) {
        let mut forward = start.clone();
        for c in &copies { forward.adopt(c); }
        let mut shuffled = copies.clone();
        // A deterministic permutation from the seed.
        let n = shuffled.len();
        for i in 0..n {
            let j = (seed.wrapping_mul(i as u64 + 7) % n as u64) as usize;
            shuffled.swap(i, j);
        }
        let mut backward = start.clone();
        for c in shuffled.iter().rev() { backward.adopt(c); }
        prop_assert_eq!(&forward, &backward);
        // ...and that copy is the highest of all of them.
        let all: Vec<&DeclaredList> = copies.iter().chain(std::iter::once(&start)).collect();
        let (best, _) = highest(all).unwrap();
        prop_assert_eq!(&forward, best);
    }

    /// The order is total and antisymmetric, so "the winner" is well defined.
    #[test]
    fn precedence_is_a_total_order(a in arb_list(), b in arb_list()) {
        prop_assert_eq!(precedence(&a, &b), precedence(&b, &a).reverse());
        if precedence(&a, &b) == Ordering::Equal {
            prop_assert_eq!(a.children(), b.children());
        }
    }

    /// Adoption never lowers a copy's version.
    #[test]
    fn adoption_never_lowers_the_version(mut a in arb_list(), b in arb_list()) {
        let before = a.version();
        a.adopt(&b);
        prop_assert!(a.version() >= before);
        prop_assert_eq!(a.version(), before.max(b.version()));
    }

    /// A version announcement says "ahead" exactly when the announcer's copy would win the
    /// adoption on version and mutator, so the node that must fetch is the one that would adopt.
    #[test]
    fn an_announcement_is_ahead_when_its_copy_would_win(mine in arb_list(), theirs in arb_list()) {
        let ahead = announced_ahead(&mine, theirs.version(), theirs.last_mutated_by());
        let same_stamp = mine.version() == theirs.version()
            && mine.last_mutated_by() == theirs.last_mutated_by();
        if same_stamp {
            prop_assert!(!ahead);
        } else {
            prop_assert_eq!(ahead, precedence(&theirs, &mine) == Ordering::Greater);
        }
        // Never both ways: two nodes never fetch from each other for one difference.
        let reverse = announced_ahead(&theirs, mine.version(), mine.last_mutated_by());
        prop_assert!(!(ahead && reverse));
    }
}

#[test]
fn a_forged_length_prefix_is_an_error_not_an_allocation() {
    // A damaged frame or file claiming 2^34 children: decoding must fail at the end of the input,
    // not reserve room for them up front (an allocation failure aborts the process).
    let list = list_with(&["a", "b"], "n1");
    let mut bin = bincode::serialize(&list).unwrap();
    // The version (u64), then the children's length prefix (u64).
    bin[8..16].copy_from_slice(&(1u64 << 34).to_le_bytes());
    assert!(bincode::deserialize::<DeclaredList>(&bin).is_err());
}
