//! Merge rules for rows that two nodes wrote independently.
//!
//! A row has two parts with different owners:
//! - the *authored* part (spec, metadata, hub bookkeeping) is resolved by the higher `epoch`,
//!   ties going to the lexicographically lower `changed_by`; the winner is adopted verbatim, so
//!   every node converges on the same value whatever order it hears the versions in;
//! - `node_pids` is a set of per-node observations: a payload from node N touches only N's entry,
//!   and a child missing from N's payload removes nothing else.

use std::cmp::Ordering;

use super::row::{HubMeta, NodeName, Pid, Row};

/// The total order of authored versions: higher epoch first, then lower `changed_by`, then
/// lower content.
pub trait AuthoredOrder {
    /// `Greater` when `self` beats `other`.
    fn authored_cmp(&self, other: &Self) -> Ordering;
}

/// The order of two authors' stamps alone (`Greater` when `a` was authored after `b`): higher
/// epoch, then lower `changed_by`. A removal carries only a stamp, and it is weighed against a
/// row's by this order.
pub fn stamp_cmp(a: &HubMeta, b: &HubMeta) -> Ordering {
    a.epoch
        .cmp(&b.epoch)
        .then_with(|| b.changed_by.cmp(&a.changed_by))
}

impl AuthoredOrder for Row {
    fn authored_cmp(&self, other: &Self) -> Ordering {
        stamp_cmp(&self.hub, &other.hub)
            // Same epoch from the same node with different content (a node that lost its memory
            // and re-authored an epoch): fall back to the content itself, so the order stays
            // total and every node still picks the same winner.
            .then_with(|| content_key(other).cmp(&content_key(self)))
    }
}

/// The authored content as bytes, compared only to break the rarest ties.
fn content_key(row: &Row) -> Vec<u8> {
    bincode::serialize(&(&row.spec, &row.metadata, &row.hub)).unwrap_or_default()
}

/// The winner of two authored versions (the node_pids of `local` are kept).
///
/// Returns `true` when `incoming` won and the authored part changed.
pub fn merge_authored(local: &mut Row, incoming: &Row) -> bool {
    if incoming.authored_cmp(local) == Ordering::Greater {
        local.spec = incoming.spec.clone();
        local.metadata = incoming.metadata.clone();
        local.hub = incoming.hub.clone();
        true
    } else {
        false
    }
}

/// Records node `from`'s observation of the child: `Some(pid)` binds, `None` unbinds. Only
/// `from`'s entry is touched.
pub fn apply_observation(row: &mut Row, from: &str, pid: Option<Pid>) {
    match pid {
        Some(pid) => {
            row.node_pids.insert(from.to_owned(), pid);
        }
        None => {
            row.node_pids.remove(from);
        }
    }
}

/// Merges a row received from node `from` into the local copy.
///
/// The authored part goes to the winner of [`AuthoredOrder`]; `from`'s own observation of the
/// child is taken from `incoming`, every other node's observation stays as the local copy has it.
pub fn merge_rows(local: Option<Row>, incoming: &Row, from: &NodeName) -> Row {
    let mut merged = match local {
        None => {
            let mut row = incoming.clone();
            // Only the sender's own observation is authoritative; other nodes speak for themselves.
            row.node_pids.retain(|node, _| node == from);
            row
        }
        Some(mut local) => {
            merge_authored(&mut local, incoming);
            local
        }
    };
    apply_observation(&mut merged, from, incoming.node_pids.get(from).copied());
    merged
}

/// [`merge_rows`] taking the incoming row by value: the same result, without copying
/// `incoming` when there is no local row (a peer's delta for children this node has not seen
/// yet, the common case while a batch of starts replicates).
pub fn merge_rows_owned(local: Option<Row>, incoming: Row, from: &NodeName) -> Row {
    match local {
        None => {
            let mut row = incoming;
            // A peer's delta names its own binding alone (the common case): kept as it came.
            if !(row.node_pids.len() == 1 && row.node_pids.contains_key(from)) {
                let pid = row.node_pids.get(from).copied();
                row.node_pids.retain(|node, _| node == from);
                apply_observation(&mut row, from, pid);
            }
            row
        }
        Some(mut local) => {
            merge_into(&mut local, incoming, from);
            local
        }
    }
}

/// [`merge_rows`] into `local`, taking `incoming` by value (the winner's authored part is
/// moved, not copied). Answers whether `local` changed: the incoming version won, or `from`'s
/// binding moved. A registry skips the write of a merge that changes nothing, without keeping
/// a copy of the row to compare with.
pub fn merge_into(local: &mut Row, incoming: Row, from: &str) -> bool {
    let pid = incoming.node_pids.get(from).copied();
    // `Greater` only for a different authored part: equal content ties (`content_key`).
    let won = incoming.authored_cmp(local) == Ordering::Greater;
    if won {
        local.spec = incoming.spec;
        local.metadata = incoming.metadata;
        local.hub = incoming.hub;
    }
    let rebound = local.node_pids.get(from).copied() != pid;
    if rebound {
        apply_observation(local, from, pid);
    }
    won || rebound
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, HubMeta, Metadata};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn row(epoch: u64, by: &str, kind: &str, pids: &[(&str, u64)]) -> Row {
        Row {
            spec: ChildSpec::new("c", kind),
            node_pids: pids.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
            metadata: Metadata::new(),
            hub: HubMeta {
                epoch,
                changed_by: by.into(),
                changed_at_ms: 0,
                durable: false,
            },
        }
    }

    #[test]
    fn owned_merge_equals_borrowed_merge() {
        let incoming = [
            row(1, "a", "k", &[("a", 1)]),
            row(1, "a", "k", &[("a", 1), ("b", 2)]),
            row(3, "b", "k2", &[("b", 7)]),
            row(1, "a", "k", &[]),
        ];
        let locals = [
            None,
            Some(row(2, "c", "old", &[("c", 3)])),
            Some(row(1, "a", "k", &[("a", 9)])),
            Some(row(5, "a", "k", &[])),
            Some(row(1, "a", "k", &[("a", 1)])),
            Some(row(3, "b", "k2", &[("b", 7), ("c", 1)])),
        ];
        for from in ["a".to_string(), "b".to_string()] {
            for inc in &incoming {
                for local in &locals {
                    let borrowed = merge_rows(local.clone(), inc, &from);
                    assert_eq!(
                        merge_rows_owned(local.clone(), inc.clone(), &from),
                        borrowed,
                        "from {from}, incoming {inc:?}, local {local:?}"
                    );
                    // A merge into a local row says whether it changed it.
                    if let Some(local) = local {
                        let mut merged = local.clone();
                        let changed = merge_into(&mut merged, inc.clone(), &from);
                        assert_eq!(merged, borrowed);
                        assert_eq!(changed, merged != *local, "from {from}, incoming {inc:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn higher_epoch_wins_and_ties_go_to_lower_node() {
        let mut local = row(2, "b", "old", &[]);
        assert!(merge_authored(&mut local, &row(3, "z", "new", &[])));
        assert_eq!(local.spec.kind, "new");
        assert!(merge_authored(&mut local, &row(3, "a", "tie", &[])));
        assert_eq!(local.spec.kind, "tie");
        assert!(!merge_authored(&mut local, &row(3, "c", "loser", &[])));
        assert!(!merge_authored(&mut local, &row(1, "a", "stale", &[])));
        assert_eq!(local.spec.kind, "tie");
    }

    #[test]
    fn observation_from_a_node_touches_only_its_entry() {
        let local = row(1, "a", "k", &[("a", 1), ("b", 2)]);
        let incoming = row(1, "a", "k", &[("c", 7)]);
        let merged = merge_rows(Some(local), &incoming, &"b".to_string());
        // b's payload does not mention b: b no longer runs it. a's entry is untouched and c's
        // entry (claimed by b about c) is ignored.
        assert_eq!(merged.node_pids, BTreeMap::from([("a".to_string(), 1)]));
    }

    #[test]
    fn a_clock_far_in_the_future_does_not_win() {
        let mut local = row(5, "a", "current", &[]);
        let mut bogus = row(4, "a", "bogus-clock", &[]);
        bogus.hub.changed_at_ms = u64::MAX;
        assert!(!merge_authored(&mut local, &bogus));
        assert_eq!(local.spec.kind, "current");
    }

    /// One payload: what node `from` sent about the child.
    #[derive(Clone, Debug)]
    struct Payload {
        from: String,
        row: Row,
    }

    fn payloads() -> impl Strategy<Value = Vec<Payload>> {
        // Each node sends one payload (its latest view); authored parts vary freely.
        proptest::collection::vec(
            (
                0u64..5,
                0usize..4,
                0usize..3,
                proptest::option::of(1u64..100),
            ),
            1..6,
        )
        .prop_map(|items| {
            let nodes = ["n0", "n1", "n2", "n3", "n4", "n5"];
            items
                .into_iter()
                .enumerate()
                .map(|(i, (epoch, by, kind, pid))| {
                    let from = nodes[i].to_string();
                    let mut r = row(epoch, nodes[by], ["x", "y", "z"][kind], &[]);
                    if let Some(pid) = pid {
                        r.node_pids.insert(from.clone(), pid);
                    }
                    // Noise: claims about other nodes must be ignored.
                    r.node_pids.insert("n9".into(), 999);
                    Payload { from, row: r }
                })
                .collect()
        })
    }

    fn fold(order: &[Payload]) -> Row {
        let mut acc: Option<Row> = None;
        for p in order {
            acc = Some(merge_rows(acc, &p.row, &p.from));
        }
        acc.expect("at least one payload")
    }

    proptest! {
        /// Merging the same payloads in any order yields the same row on every node.
        #[test]
        fn merge_is_order_independent(ps in payloads(), seed in any::<u64>()) {
            let a = fold(&ps);
            let mut shuffled = ps.clone();
            let mut s = seed;
            for i in (1..shuffled.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (s >> 33) as usize % (i + 1));
            }
            let b = fold(&shuffled);
            prop_assert_eq!(a, b);
        }

        /// Batching does not matter: a node that receives the payloads in batches, the batches in
        /// reverse order, reaches the same row as one that took them one by one.
        #[test]
        fn merge_is_batch_order_independent(ps in payloads(), split in 0usize..6) {
            let split = split.min(ps.len());
            let whole = fold(&ps);
            let (left, right) = ps.split_at(split);
            let mut reordered: Vec<Payload> = right.to_vec();
            reordered.extend_from_slice(left);
            prop_assert_eq!(fold(&reordered), whole);
        }

        /// A merge into a local row, each payload in turn, gives what the borrowed merge gives,
        /// and says it changed the row exactly when it did.
        #[test]
        fn a_merge_into_a_row_reports_its_change(ps in payloads()) {
            let mut acc = ps[0].row.clone();
            for p in &ps {
                let before = acc.clone();
                let expected = merge_rows(Some(before.clone()), &p.row, &p.from);
                let changed = merge_into(&mut acc, p.row.clone(), &p.from);
                prop_assert_eq!(&acc, &expected);
                prop_assert_eq!(changed, acc != before);
            }
        }

        /// The authored winner is the maximum under the order, whatever the order of arrival.
        #[test]
        fn winner_is_the_maximum(ps in payloads()) {
            let merged = fold(&ps);
            let best = ps.iter().map(|p| &p.row).max_by(|a, b| a.authored_cmp(b)).unwrap();
            prop_assert_eq!(&merged.hub, &best.hub);
            prop_assert_eq!(&merged.spec, &best.spec);
        }
    }
}
