//! What a write turn's operations promise: the effects say what the write did, a node tells
//! only its own observation, re-authoring wins, unbinding is idempotent, and peers' upserts
//! converge in any order.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::model::{ChildSpec, Metadata};

const NODES: [&str; 4] = ["n1", "n2", "n3", "n4"];
const LOCAL: &str = "n1";
const TTL: Duration = Duration::from_secs(30);

fn rules(clustered: bool) -> WriteRules<'static> {
    WriteRules {
        local: LOCAL,
        clustered,
        stub_ttl: TTL,
    }
}

fn bindings() -> impl Strategy<Value = BTreeMap<NodeName, Pid>> {
    prop::collection::btree_map(
        prop::sample::select(NODES.to_vec()).prop_map(str::to_owned),
        1u64..5,
        0..4,
    )
}

fn row() -> impl Strategy<Value = Row> {
    (
        1u64..4,
        prop::sample::select(NODES.to_vec()),
        "[ab]",
        bindings(),
    )
        .prop_map(|(epoch, by, kind, node_pids)| {
            let mut row =
                Row::authored(ChildSpec::new("c", kind), Metadata::new(), by, 0, false).unwrap();
            row.hub.epoch = epoch;
            row.node_pids = node_pids;
            row
        })
}

/// An operation of a write turn on the row of child `c`.
#[derive(Clone, Debug)]
enum Op {
    Insert(Row),
    Reauthor(Row),
    SetPid(NodeName, Pid),
    Release(NodeName),
    Unbind(NodeName),
    RemoveUnbound,
    Upsert(NodeName, Row, bool),
}

fn node() -> impl Strategy<Value = NodeName> {
    prop::sample::select(NODES.to_vec()).prop_map(str::to_owned)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        row().prop_map(|mut r| {
            // A start binds the child on this node.
            r.node_pids = [(LOCAL.to_owned(), 9)].into();
            Op::Insert(r)
        }),
        row().prop_map(Op::Reauthor),
        (node(), 1u64..9).prop_map(|(n, p)| Op::SetPid(n, p)),
        node().prop_map(Op::Release),
        node().prop_map(Op::Unbind),
        Just(Op::RemoveUnbound),
        (node(), row(), any::<bool>()).prop_map(|(n, r, stub)| Op::Upsert(n, r, stub)),
    ]
}

fn is_member(node: &str) -> bool {
    node != "n4"
}

/// The node gone for good: not a member, past its grace.
fn is_gone(node: &str) -> bool {
    node == "n4"
}

fn plan(rules: &WriteRules<'_>, current: Option<Row>, op: Op) -> Option<RowChange> {
    match op {
        Op::Insert(row) => Some(insert(
            rules,
            current.as_ref().map(Standing::of),
            row,
            is_member,
        )),
        Op::Reauthor(row) => reauthor(rules, current, row),
        Op::SetPid(node, pid) => set_pid(rules, current, &node, pid),
        Op::Release(node) => release(rules, current, &node),
        Op::Unbind(node) => unbind(rules, current, &node),
        Op::RemoveUnbound => remove_unbound(rules, current).ok(),
        Op::Upsert(from, row, stub) => merge_upsert(current, row, &from, stub, is_gone),
    }
}

/// The row after the change, as the store holds it.
fn after(current: Option<Row>, change: &RowChange) -> Option<Row> {
    match &change.write {
        None => current,
        Some(RowWrite::Put(row)) | Some(RowWrite::Stub(row, _)) => Some(row.clone()),
        Some(RowWrite::Remove(_)) => None,
    }
}

proptest! {
    /// The effects reported after the commit say what the write did to the row.
    #[test]
    fn the_effects_say_what_the_write_did(current in proptest::option::of(row()), op in op(), clustered in any::<bool>()) {
        let Some(change) = plan(&rules(clustered), current.clone(), op) else {
            return Ok(());
        };
        let before = current.clone().map(|r| r.node_pids).unwrap_or_default();
        let now = after(current.clone(), &change);
        let now_pids = now.clone().map(|r| r.node_pids).unwrap_or_default();
        if let Some(write) = &change.write {
            prop_assert_eq!(write.id().as_str(), "c");
        }
        let removed = change.effects.iter().any(|e| matches!(e, RowEffect::Removed { .. }));
        prop_assert_eq!(removed, matches!(change.write, Some(RowWrite::Remove(_))));
        for effect in &change.effects {
            match effect {
                RowEffect::Bound { node, pid, new_row, .. } => {
                    prop_assert_eq!(now_pids.get(node), Some(pid));
                    prop_assert!(!*new_row || current.is_none());
                }
                RowEffect::PidUpdated { node, old, new, .. } => {
                    prop_assert_eq!(before.get(node), Some(old));
                    prop_assert_eq!(now_pids.get(node), Some(new));
                }
                RowEffect::Unbound { node, .. } => {
                    prop_assert!(before.contains_key(node));
                    prop_assert!(!now_pids.contains_key(node));
                }
                RowEffect::Removed { .. } => prop_assert!(now.is_none()),
            }
        }
        // A stub is a row nobody runs.
        if let Some(RowWrite::Stub(row, ttl)) = &change.write {
            prop_assert!(row.node_pids.is_empty());
            prop_assert_eq!(*ttl, TTL);
        }
    }

    /// A node tells its peers only its own observation, and only when it has peers; a change
    /// of another node's binding is not its to tell.
    #[test]
    fn a_node_tells_only_its_own_observation(current in proptest::option::of(row()), op in op(), clustered in any::<bool>()) {
        let about = match &op {
            Op::SetPid(n, _) | Op::Release(n) | Op::Unbind(n) => Some(n.clone()),
            _ => None,
        };
        let Some(change) = plan(&rules(clustered), current, op) else {
            return Ok(());
        };
        if let Some(told) = &change.told {
            prop_assert!(clustered);
            if let Some(node) = about {
                prop_assert_eq!(node.as_str(), LOCAL);
            }
            if let Told::Upsert(row) = told {
                prop_assert!(row.node_pids.keys().all(|n| n == LOCAL));
            }
        }
    }

    /// A start over a known child makes a version that wins every merge against it, and keeps
    /// the bindings other members speak for; a node no longer a member loses its binding.
    #[test]
    fn a_reinsert_wins_and_keeps_the_members(current in row(), incoming in row()) {
        let change = insert(
            &rules(true),
            Some(Standing::of(&current)),
            incoming.clone(),
            is_member,
        );
        let Some(RowWrite::Put(row)) = change.write else {
            return Err(TestCaseError::fail("an insert puts its row"));
        };
        prop_assert!(row.hub.epoch > current.hub.epoch);
        prop_assert_eq!(
            crate::model::merge_rows(Some(current.clone()), &row, &LOCAL.to_owned()).hub,
            row.hub.clone()
        );
        for (node, pid) in &current.node_pids {
            let expected = incoming.node_pids.get(node).or(
                (node != LOCAL && is_member(node)).then_some(pid),
            );
            prop_assert_eq!(row.node_pids.get(node), expected);
        }
    }

    /// Unbinding a node twice is unbinding it once: the second finds nothing to do. A row left
    /// unbound is a stub when handed over or reaped, and gone when stopped.
    #[test]
    fn unbinding_is_idempotent(current in row(), node in node(), stub in any::<bool>()) {
        let ttl = stub.then_some(TTL);
        let first = unbind_row(current.clone(), &node, ttl);
        let bound = current.node_pids.contains_key(&node);
        prop_assert_eq!(first == RowChange::default(), !bound);
        let left = current.node_pids.len() - usize::from(bound);
        match &first.write {
            Some(RowWrite::Stub(..)) => prop_assert!(stub && left == 0),
            Some(RowWrite::Remove(_)) => prop_assert!(!stub && left == 0),
            Some(RowWrite::Put(_)) => prop_assert!(left > 0),
            None => prop_assert!(!bound),
        }
        if let Some(row) = after(Some(current), &first) {
            prop_assert_eq!(unbind_row(row, &node, ttl), RowChange::default());
        }
    }

    /// Unbinding a row's only binding from the bindings alone is the full unbind, on a node
    /// that tells its peers nothing; a clustered node needs the row.
    #[test]
    fn an_unbind_of_the_sole_binding_is_the_full_unbind(
        mut current in row(), node in node(), pid in 1u64..5, clustered in any::<bool>(),
    ) {
        current.node_pids = BTreeMap::from([(node.clone(), pid)]);
        let id = current.spec.id.clone();
        let sole = unbind_sole(&rules(clustered), id, &node);
        if clustered {
            prop_assert!(sole.is_none());
        } else {
            prop_assert_eq!(sole, unbind(&rules(false), Some(current), &node));
        }
    }

    /// An upsert of a newer epoch merged from the stored row's version and bindings alone makes
    /// the very change that merging it into the whole stored row makes (row, effects, nothing
    /// told), stub or not, with or without a node gone.
    #[test]
    fn an_outranking_upsert_merges_from_the_version_and_bindings_alone(
        current in row(),
        incoming in row(),
        from in node(),
        stub in any::<bool>(),
        n4_gone in any::<bool>(),
    ) {
        let mut incoming = incoming;
        incoming.hub.epoch += current.hub.epoch;
        let standing = Standing::of(&current);
        prop_assert!(outranks(&incoming, standing.epoch));
        let gone = |node: &str| n4_gone && is_gone(node);
        prop_assert_eq!(
            merge_outranking(standing, incoming.clone(), &from, stub, gone),
            merge_upsert(Some(current), incoming, &from, stub, gone)
        );
    }

    /// Only a newer epoch outranks: an upsert of the stored epoch or an older one is merged into
    /// the whole row, whose authored part may win.
    #[test]
    fn only_a_newer_epoch_outranks(current in row(), incoming in row()) {
        let standing = Standing::of(&current);
        prop_assert_eq!(outranks(&incoming, standing.epoch), incoming.hub.epoch > current.hub.epoch);
    }

    /// Each peer's upsert applied in any order gives the same row, and an upsert applied again
    /// writes nothing.
    #[test]
    fn peers_upserts_converge_in_any_order(
        start in proptest::option::of(row()),
        upserts in prop::collection::btree_map(node(), row(), 1..4),
        rotate in 0usize..4,
    ) {
        let apply_all = |order: &[(&NodeName, &Row)]| {
            let mut current = start.clone();
            for (from, row) in order {
                if let Some(change) = merge_upsert(current.clone(), (*row).clone(), from, false, |_| false) {
                    current = after(current, &change);
                }
            }
            current
        };
        let order: Vec<(&NodeName, &Row)> = upserts.iter().collect();
        let mut other = order.clone();
        other.reverse();
        let k = rotate % other.len();
        other.rotate_left(k);
        let one = apply_all(&order);
        prop_assert_eq!(&one, &apply_all(&other));
        for (from, row) in &order {
            prop_assert!(merge_upsert(one.clone(), (*row).clone(), from, false, |_| false).is_none());
        }
    }

    /// A peer's deliberate removal never drops a row another node runs, nor one authored after
    /// the removal.
    #[test]
    fn a_peer_removal_keeps_what_others_run(current in row(), from in node(), hub in row().prop_map(|r| r.hub)) {
        match removed_by_peer(&current, &from, &hub) {
            PeerRemoval::Unbind => prop_assert!(current.node_pids.contains_key(&from)),
            PeerRemoval::RemoveStub => {
                prop_assert!(current.node_pids.is_empty());
                prop_assert_ne!(stamp_cmp(&current.hub, &hub), Ordering::Greater);
            }
            PeerRemoval::Keep => prop_assert!(
                !current.node_pids.contains_key(&from)
                    && (!current.node_pids.is_empty()
                        || stamp_cmp(&current.hub, &hub) == Ordering::Greater)
            ),
        }
    }
}

fn bound(by: &str, pids: &[(&str, Pid)]) -> Row {
    let mut row = Row::authored(ChildSpec::new("c", "k"), Metadata::new(), by, 0, false).unwrap();
    row.node_pids = pids.iter().map(|(n, p)| ((*n).to_owned(), *p)).collect();
    row
}

#[test]
fn a_peers_upsert_drops_the_binding_of_a_node_gone_for_good_as_its_reap_would() {
    // The failover: n4's child re-placed on n2 (a newer version) reaches this node's stub.
    let mut placed = bound("n2", &[("n2", 7)]);
    placed.hub.epoch = 2;
    let change = merge_upsert(
        Some(bound("n4", &[("n4", 3)])),
        placed,
        "n2",
        false,
        is_gone,
    )
    .expect("the merge changes the row");
    let Some(RowWrite::Put(row)) = &change.write else {
        panic!("a put: {change:?}");
    };
    assert_eq!(row.node_pids, BTreeMap::from([("n2".to_owned(), 7)]));
    assert_eq!(
        change.effects,
        vec![
            RowEffect::Bound {
                id: ChildId::from("c"),
                node: "n2".into(),
                pid: 7,
                new_row: false
            },
            RowEffect::Unbound {
                id: ChildId::from("c"),
                node: "n4".into()
            },
        ]
    );
    // The same version again: only the gone binding changes, and only once.
    let again = bound("n2", &[("n2", 7), ("n4", 3)]);
    let change = merge_upsert(Some(again), bound("n2", &[("n2", 7)]), "n2", false, is_gone);
    assert!(
        matches!(&change, Some(c) if c.effects.len() == 1),
        "{change:?}"
    );
    let settled = bound("n2", &[("n2", 7)]);
    assert_eq!(
        merge_upsert(
            Some(settled),
            bound("n2", &[("n2", 7)]),
            "n2",
            false,
            is_gone
        ),
        None
    );
}

#[test]
fn a_gone_nodes_binding_stays_when_nothing_else_would_and_a_sender_speaks_for_itself() {
    // The sender lets the child go: the row would be bound nowhere, so the reap decides.
    let change = merge_upsert(
        Some(bound("n4", &[("n4", 3)])),
        bound("n4", &[]),
        "n2",
        false,
        is_gone,
    );
    assert_eq!(change, None);
    // A late frame of the gone node itself keeps its binding (the reap's to unbind).
    let change = merge_upsert(
        Some(bound("n2", &[("n2", 1)])),
        bound("n2", &[("n4", 3)]),
        "n4",
        false,
        is_gone,
    )
    .expect("n4 binds");
    let Some(RowWrite::Put(row)) = &change.write else {
        panic!("a put: {change:?}");
    };
    assert_eq!(row.node_pids.len(), 2, "{row:?}");
}
