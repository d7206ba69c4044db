//! The counts a store keeps as its rows change: how many rows, how many nobody runs, the
//! bindings on each node with their digest ([`crate::core::sync_digest`]), the rows of each
//! kind.
//!
//! What reads them is polled, or periodic, over the whole registry: `GET /v1/registry/summary`
//! (every `poll_ms` of a benchmark, a dashboard), a node's figures (`GET /v1/cluster`), and
//! the periodic sync, which sends the digest of this node's bindings instead of its rows.
//! Counted by a scan, each costs every row of the copy; kept up to date on write, each costs
//! the nodes and kinds there are, and a write pays for the row it changes (its old version
//! counted out, its new one in).

use std::collections::BTreeMap;

use super::packed_row::CountView;
use crate::core::sync_digest::{binding_hash, BindingDigest};
use crate::model::{NodeName, Row};

/// A registry copy in a few numbers, kept on write.
///
/// Rows are counted as stored: a stub whose TTL ran out counts until the Registry sweeps it
/// (it is bound nowhere, so the digests never see it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryCounts {
    /// Rows stored.
    pub rows: u64,
    /// Rows with no binding.
    pub unbound: u64,
    /// The bindings on each node: how many, and their digest. A node with none is absent.
    pub per_node: BTreeMap<NodeName, BindingDigest>,
    /// Rows of each kind. A kind with none is absent.
    pub per_kind: BTreeMap<String, u64>,
    /// Rows bound on one node only, by that node. A node with none is absent. What tells,
    /// while one node is down and its bindings not reaped yet, how many rows run nowhere else.
    pub sole: BTreeMap<NodeName, u64>,
}

impl RegistryCounts {
    /// The counts of `rows`, computed from scratch (what the maintained counts must equal).
    pub fn of_rows<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Self {
        let mut counts = Self::default();
        for row in rows {
            counts.add(&CountView::of_row(row));
        }
        counts
    }

    /// The digest of the bindings on `node` (empty when it runs nothing here).
    pub fn bindings_on(&self, node: &str) -> BindingDigest {
        self.per_node.get(node).copied().unwrap_or_default()
    }

    /// Counts a row in.
    pub(super) fn add(&mut self, row: &CountView<'_>) {
        self.rows += 1;
        self.unbound += u64::from(row.nodes.is_empty());
        // The kind's name is copied the first time only (every start counts its row in).
        match self.per_kind.get_mut(row.kind) {
            Some(n) => *n += 1,
            None => {
                self.per_kind.insert(row.kind.to_owned(), 1);
            }
        }
        if let [(node, _)] = row.nodes.as_slice() {
            match self.sole.get_mut(*node) {
                Some(n) => *n += 1,
                None => {
                    self.sole.insert((*node).to_owned(), 1);
                }
            }
        }
        for (node, pid) in &row.nodes {
            let hash = binding_hash(row.id, *pid, row.epoch, row.author);
            match self.per_node.get_mut(*node) {
                Some(digest) => digest.add(hash),
                None => {
                    self.per_node
                        .insert((*node).to_owned(), BindingDigest::of([hash]));
                }
            }
        }
    }

    /// Counts out a row that was counted in.
    pub(super) fn remove(&mut self, row: &CountView<'_>) {
        self.rows = self.rows.saturating_sub(1);
        self.unbound = self.unbound.saturating_sub(u64::from(row.nodes.is_empty()));
        if let Some(n) = self.per_kind.get_mut(row.kind) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_kind.remove(row.kind);
            }
        }
        if let [(node, _)] = row.nodes.as_slice() {
            if let Some(n) = self.sole.get_mut(*node) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.sole.remove(*node);
                }
            }
        }
        for (node, pid) in &row.nodes {
            if let Some(digest) = self.per_node.get_mut(*node) {
                digest.remove(binding_hash(row.id, *pid, row.epoch, row.author));
                if digest.count == 0 {
                    self.per_node.remove(*node);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};
    use crate::storage::{MemoryStorage, Mutation, Storage, StoredRow};
    use proptest::prelude::*;

    /// One write to a store: a row with some bindings, its version and kind, or a removal.
    #[derive(Clone, Debug)]
    enum Write {
        Put {
            id: u8,
            nodes: Vec<(u8, u64)>,
            epoch: u64,
            author: u8,
            kind: u8,
            tag: bool,
        },
        Remove(u8),
        Restore(u8),
        Clear,
    }

    fn write() -> impl Strategy<Value = Write> {
        prop_oneof![
            8 => (0u8..20, proptest::collection::vec((0u8..4, 0u64..3), 0..3), 1u64..3, 0u8..4, 0u8..2, any::<bool>())
                .prop_map(|(id, nodes, epoch, author, kind, tag)| Write::Put { id, nodes, epoch, author, kind, tag }),
            3 => (0u8..20).prop_map(Write::Remove),
            1 => (0u8..20).prop_map(Write::Restore),
            1 => Just(Write::Clear),
        ]
    }

    fn row(id: u8, nodes: &[(u8, u64)], epoch: u64, author: u8, kind: u8, tag: bool) -> Row {
        let metadata = if tag {
            Metadata::from([("tag".to_owned(), format!("t{id}"))])
        } else {
            Metadata::new()
        };
        let mut row = Row::authored(
            ChildSpec::new(format!("c{id}").as_str(), format!("k{kind}").as_str()),
            metadata,
            &format!("n{author}@h"),
            0,
            false,
        )
        .unwrap();
        row.hub.epoch = epoch;
        for (node, pid) in nodes {
            row.node_pids.insert(format!("n{node}@h"), *pid);
        }
        row
    }

    proptest! {
        /// Whatever the writes (puts over puts, removals, a rolled-back write restored, a
        /// clear), the counts and digests the memory store keeps equal those computed from
        /// scratch over the rows it holds, and a node's digest equals the digest of the rows
        /// bound on it.
        #[test]
        fn counts_kept_on_write_equal_counts_from_scratch(
            writes in proptest::collection::vec(write(), 0..60),
        ) {
            let store = MemoryStorage::new();
            for w in writes {
                match w {
                    Write::Put { id, nodes, epoch, author, kind, tag } => {
                        store.insert(row(id, &nodes, epoch, author, kind, tag)).unwrap();
                    }
                    Write::Remove(id) => store.remove(&format!("c{id}").into()).unwrap(),
                    Write::Restore(id) => {
                        let stored = StoredRow { row: row(id, &[(0, 9)], 7, 1, 0, false), expires_at_ms: None };
                        store.restore_stored(&stored.row.spec.id.clone(), Some(stored));
                    }
                    Write::Clear => store.apply(vec![Mutation::Clear]).unwrap(),
                }
            }
            let rows = store.export_all();
            let kept = store.counts().unwrap();
            prop_assert_eq!(&kept, &RegistryCounts::of_rows(&rows));
            for node in 0..4u8 {
                let node = format!("n{node}@h");
                let mut bound = store.rows_bound_to(&node);
                bound.sort_by(|a, b| a.spec.id.cmp(&b.spec.id));
                let expected: Vec<Row> = rows.iter().filter(|r| r.node_pids.contains_key(&node)).cloned().collect();
                prop_assert_eq!(&bound, &expected);
                prop_assert_eq!(
                    store.binding_digest(&node).unwrap(),
                    RegistryCounts::of_rows(&expected).bindings_on(&node)
                );
            }
        }
    }

    #[test]
    fn a_summary_reads_the_counts() {
        let store = MemoryStorage::new();
        store.insert(row(1, &[(0, 1)], 1, 0, 0, false)).unwrap();
        store
            .insert(row(2, &[(0, 2), (1, 3)], 1, 0, 1, true))
            .unwrap();
        store.insert(row(3, &[], 1, 0, 1, false)).unwrap();
        let counts = store.counts().unwrap();
        assert_eq!((counts.rows, counts.unbound), (3, 1));
        assert_eq!(counts.bindings_on("n0@h").count, 2);
        assert_eq!(counts.bindings_on("n1@h").count, 1);
        assert!(counts.bindings_on("n2@h").is_empty());
        assert_eq!(
            counts.per_kind,
            BTreeMap::from([("k0".to_owned(), 1), ("k1".to_owned(), 2)])
        );
        store.remove(&"c2".into()).unwrap();
        assert!(store.counts().unwrap().bindings_on("n1@h").is_empty());
        assert!(!store.counts().unwrap().per_node.contains_key("n1@h"));
    }
}
