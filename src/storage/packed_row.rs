//! How the in-memory registry keeps one row: its fields, its id included, encoded in a single
//! allocation of about 35 bytes for a typical child.
//!
//! Every node keeps a row for every child of the cluster, so a row's size is multiplied by the
//! cluster's size. A row as a [`Row`] is half a dozen allocations and a map node (about 860
//! bytes); packed, it is bincode with variable-length integers, where the names that repeat
//! across rows (kinds, node names) are a small index into a table the store shares ([`Names`]),
//! `null` arguments are one byte, and the time of the last change is counted from the store's
//! creation. The id comes first, so that the map can hold the packed bytes alone and still find
//! a row by its id.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use bincode::Options;
use serde::{Deserialize, Serialize};

use super::packed_read::{self, Cursor, Head, Tail};
use super::StoredRow;
use crate::model::{
    ChildArgs, ChildId, ChildSpec, FastHashMap, HubMeta, Metadata, NodeName, Pid, Restart, Row,
    Shutdown,
};

/// Names interned at most: beyond it (a cluster with thousands of distinct kinds or nodes),
/// names are kept inline in each row, so the table stays bounded whatever peers send.
const MAX_NAMES: usize = 4096;

/// The longest name interned, in bytes; longer ones are kept inline. With [`MAX_NAMES`], the
/// table holds at most about half a megabyte, even when a peer fills it with junk names.
const MAX_INTERNED_LEN: usize = 128;

/// A name as packed: an index into the store's [`Names`], or the text itself.
#[derive(Serialize, Deserialize)]
pub(super) enum PackedName<'a> {
    Interned(u32),
    Inline(&'a str),
}

/// The kind and node names of one store, each kept once. Append-only (an index, once given,
/// names the same text for the store's life) and bounded by [`MAX_NAMES`]. Readers take a
/// snapshot ([`Names::snapshot`]) and hold no lock while they read rows.
#[derive(Default)]
pub(super) struct Names {
    table: RwLock<Arc<NameTable>>,
}

/// One version of the table: a new name makes a new version (names are few and rarely new).
#[derive(Default)]
pub(super) struct NameTable {
    by_index: Vec<Arc<str>>,
    index: FastHashMap<Arc<str>, u32>,
}

impl NameTable {
    /// The text of `name`. A table read after the row was written (under its shard's lock)
    /// knows every index the row holds: only `Names::intern` makes indexes, before the row is
    /// stored, and the table only grows.
    fn resolve<'a>(&'a self, name: &PackedName<'a>) -> &'a str {
        match name {
            PackedName::Interned(i) => {
                let text = self.by_index.get(*i as usize);
                debug_assert!(
                    text.is_some(),
                    "name {i} read from a table older than its row"
                );
                text.map_or("", |s| s)
            }
            PackedName::Inline(text) => text,
        }
    }
}

impl Names {
    /// The table as it is now.
    pub fn snapshot(&self) -> Arc<NameTable> {
        self.table.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn intern<'a>(&self, name: &'a str) -> PackedName<'a> {
        if name.len() > MAX_INTERNED_LEN {
            return PackedName::Inline(name);
        }
        let known = self
            .table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .index
            .get(name)
            .copied();
        if let Some(i) = known {
            return PackedName::Interned(i);
        }
        let mut table = self.table.write().unwrap_or_else(|p| p.into_inner());
        if let Some(&i) = table.index.get(name) {
            return PackedName::Interned(i);
        }
        if table.by_index.len() >= MAX_NAMES {
            return PackedName::Inline(name);
        }
        let mut next = NameTable {
            by_index: table.by_index.clone(),
            index: table.index.clone(),
        };
        let i = next.by_index.len() as u32;
        let text: Arc<str> = name.into();
        next.by_index.push(text.clone());
        next.index.insert(text, i);
        *table = Arc::new(next);
        PackedName::Interned(i)
    }
}

/// A stored row, its id first and its expiry second, so that the id is found and liveness
/// decided without unpacking the rest. The node that authored the row is left out when it is
/// the node the row is bound to (first): the usual case, a host recording its own child.
pub(super) struct PackedRow(Box<[u8]>);

/// The packed encoding: bincode with variable-length integers.
/// `N` bytes of a packed row as an array (the caller sliced exactly `N`).
fn le<const N: usize>(bytes: &[u8]) -> [u8; N] {
    bytes.try_into().expect("a slice of the array's length")
}

/// What a read of a packed row expects: only `pack` wrote these bytes.
const DECODES: &str = "a packed row decodes as it was encoded";

fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_varint_encoding()
}

/// The fields a placement reads, first: id, expiry, kind, arguments (`None`: `null`), restart,
/// shutdown, bindings.
type PackedHead<'a> = (
    &'a str,
    Option<u64>,
    PackedName<'a>,
    Option<&'a str>,
    Restart,
    Shutdown,
    Vec<(PackedName<'a>, Pid)>,
);

/// The fields in the order they are packed: the head, the metadata, then the epoch, the author
/// unless it is the first bound node, the change time from the base, durable. (bincode lays a
/// nested tuple out as its fields in order, so the head reads back alone.)
type Packed<'a, Meta> = (
    PackedHead<'a>,
    Meta,
    (u64, Option<PackedName<'a>>, i64, bool),
);

/// A row's fields a placement needs, borrowed from the packed row and the name table.
pub(super) struct PlacementView<'a> {
    pub id: &'a str,
    pub kind: &'a str,
    pub nodes: Vec<(&'a str, Pid)>,
}

/// A row's fields the store's counts and binding digests read
/// ([`crate::core::sync_digest`]): its id, kind, bindings and authored version.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct CountView<'a> {
    pub id: &'a str,
    pub kind: &'a str,
    pub nodes: Vec<(&'a str, Pid)>,
    pub epoch: u64,
    pub author: &'a str,
}

impl<'a> CountView<'a> {
    /// What [`PackedRow::count_view`] reads of `row` packed, read from the row itself (a
    /// write has the row at hand: decoding what it just packed cost about a tenth of a
    /// start's registry write).
    pub fn of_row(row: &'a Row) -> Self {
        Self {
            id: row.spec.id.as_str(),
            kind: &row.spec.kind,
            nodes: row
                .node_pids
                .iter()
                .map(|(node, pid)| (node.as_str(), *pid))
                .collect(),
            epoch: row.hub.epoch,
            author: &row.hub.changed_by,
        }
    }
}

impl PackedRow {
    /// Packs `row`, interning its names in `names`; change times are kept relative to
    /// `base_ms`.
    pub fn pack(row: &Row, expires_at_ms: Option<u64>, names: &Names, base_ms: u64) -> Self {
        let args = row.spec.args.as_json_text();
        let author = match row.node_pids.keys().next() {
            Some(first) if *first == row.hub.changed_by => None,
            _ => Some(names.intern(&row.hub.changed_by)),
        };
        let fields: Packed<'_, &Metadata> = (
            (
                row.spec.id.as_str(),
                expires_at_ms,
                names.intern(&row.spec.kind),
                (args != ChildArgs::default().as_json_text()).then_some(args),
                row.spec.restart,
                row.spec.shutdown,
                row.node_pids
                    .iter()
                    .map(|(node, pid)| (names.intern(node), *pid))
                    .collect(),
            ),
            &row.metadata,
            (
                row.hub.epoch,
                author,
                row.hub.changed_at_ms.wrapping_sub(base_ms) as i64,
                row.hub.durable,
            ),
        );
        // Strings, integers and maps of them always encode into a vector.
        let bytes = codec()
            .serialize(&fields)
            .expect("a row's fields encode into a vector");
        Self(bytes.into_boxed_slice())
    }

    /// The bytes, for tests that check the layout's size.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The row's id. Read straight from its bytes (bincode's varint length, then the UTF-8
    /// text: `pack` writes the id first), not through the decoder: listings and walks read the
    /// id of every row they pass.
    pub fn id(&self) -> &str {
        std::str::from_utf8(self.id_bytes())
            .expect("a packed row's id is the text it was packed from")
    }

    /// The id's bytes: what the store hashes and compares, with no check that they are text.
    /// Bincode's varint: a length under 251 is its own byte; 251, 252 and 253 are followed by
    /// the length as a little-endian u16, u32 and u64.
    pub(crate) fn id_bytes(&self) -> &[u8] {
        let bytes = &self.0[..];
        let (len, at) = match bytes.first().copied() {
            Some(b) if b < 251 => (u64::from(b), 1),
            Some(251) => (u64::from(u16::from_le_bytes(le(&bytes[1..3]))), 3),
            Some(252) => (u64::from(u32::from_le_bytes(le(&bytes[1..5]))), 5),
            Some(253) => (u64::from_le_bytes(le(&bytes[1..9])), 9),
            _ => unreachable!("a packed row starts with its id's length"),
        };
        let end = at + usize::try_from(len).expect("an id that fits in memory");
        &bytes[at..end]
    }

    /// Whether the row has not expired at `now_ms`.
    pub fn is_live(&self, now_ms: u64) -> bool {
        super::unexpired(self.expires_at_ms(), || now_ms)
    }

    /// When the row expires, if it can.
    pub fn expires_at_ms(&self) -> Option<u64> {
        packed_read::expiry(&mut Cursor::new(&self.0)).expect(DECODES)
    }

    /// The nodes the row is bound on, in its order, whether or not it has expired: what a stop
    /// routes by and unbinds, read without the row's kind or pids.
    pub fn bound_nodes(&self, names: &NameTable) -> Vec<NodeName> {
        let mut nodes = Vec::new();
        self.each_bound_node(names, &mut |node| nodes.push(node.to_owned()));
        nodes
    }

    /// Calls `each` with the name of every node the row is bound on, in its order, whether or
    /// not it has expired.
    pub fn each_bound_node(&self, names: &NameTable, each: &mut dyn FnMut(&str)) {
        packed_read::bindings(&mut Cursor::new(&self.0), &mut |node, _| {
            each(names.resolve(&node))
        })
        .expect(DECODES);
    }

    /// Whether the row is live at `now_ms` and bound on `node`: how a reap and a full sync
    /// pick their rows out of every row, read without the row's id or kind and without a list.
    pub fn live_on(&self, names: &NameTable, node: &str, now_ms: u64) -> bool {
        let mut bound = false;
        let expires_at_ms = packed_read::bindings(&mut Cursor::new(&self.0), &mut |n, _| {
            bound = bound || names.resolve(&n) == node
        })
        .expect(DECODES);
        bound && super::unexpired(expires_at_ms, || now_ms)
    }

    /// The fields a placement needs, or `None` if expired at `now_ms`.
    pub fn placement<'a>(&'a self, names: &'a NameTable, now_ms: u64) -> Option<PlacementView<'a>> {
        let Head {
            id,
            expires_at_ms,
            kind,
            bound,
        } = packed_read::head(&mut Cursor::new(&self.0)).expect(DECODES);
        if !super::unexpired(expires_at_ms, || now_ms) {
            return None;
        }
        Some(PlacementView {
            id,
            kind: names.resolve(&kind),
            nodes: bound
                .iter()
                .map(|(node, pid)| (names.resolve(node), *pid))
                .collect(),
        })
    }

    /// What the store's counts and binding digests read of a row ([`CountView`]), without
    /// copying any of it (the metadata is passed over as borrowed text).
    pub fn count_view<'a>(&'a self, names: &'a NameTable) -> CountView<'a> {
        let mut cursor = Cursor::new(&self.0);
        let Head {
            id, kind, bound, ..
        } = packed_read::head(&mut cursor).expect(DECODES);
        let Tail { epoch, author, .. } = packed_read::tail(&mut cursor).expect(DECODES);
        let nodes: Vec<(&'a str, Pid)> = bound
            .iter()
            .map(|(node, pid)| (names.resolve(node), *pid))
            .collect();
        let author = match &author {
            Some(name) => names.resolve(name),
            None => nodes.first().map_or("", |(node, _)| node),
        };
        CountView {
            id,
            kind: names.resolve(&kind),
            nodes,
            epoch,
            author,
        }
    }

    /// Whether the row is declared (durable), read without copying any of it.
    pub fn durable(&self) -> bool {
        self.tail().durable
    }

    /// The row's authored version (its epoch), read without copying any of it.
    pub fn epoch(&self) -> u64 {
        self.tail().epoch
    }

    /// The fields after the metadata, the head passed over without keeping its bindings.
    fn tail(&self) -> Tail<'_> {
        let mut cursor = Cursor::new(&self.0);
        packed_read::skip_head(&mut cursor)
            .and_then(|()| packed_read::tail(&mut cursor))
            .expect(DECODES)
    }

    /// The whole row, with its expiry.
    pub fn unpack(&self, names: &NameTable, base_ms: u64) -> StoredRow {
        let ((id, expires_at_ms, kind, args, restart, shutdown, bound), metadata, hub): Packed<
            '_,
            Metadata,
        > = codec()
            .deserialize(&self.0)
            .expect("a packed row decodes as it was encoded");
        let (epoch, author, changed_at, durable) = hub;
        let node_pids: BTreeMap<NodeName, Pid> = bound
            .iter()
            .map(|(node, pid)| (names.resolve(node).to_owned(), *pid))
            .collect();
        let changed_by = match author {
            Some(name) => names.resolve(&name).to_owned(),
            None => node_pids.keys().next().cloned().unwrap_or_default(),
        };
        StoredRow {
            row: Row {
                spec: ChildSpec {
                    id: ChildId::from(id),
                    kind: names.resolve(&kind).to_owned(),
                    args: args.map(ChildArgs::from_json_text).unwrap_or_default(),
                    restart,
                    shutdown,
                },
                node_pids,
                metadata,
                hub: HubMeta {
                    epoch,
                    changed_by,
                    changed_at_ms: base_ms.wrapping_add(changed_at as u64),
                    durable,
                },
            },
            expires_at_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn names_are_interned_once_and_kept_inline_beyond_the_bound() {
        let names = Names::default();
        assert!(matches!(names.intern("a"), PackedName::Interned(0)));
        assert!(matches!(names.intern("b"), PackedName::Interned(1)));
        let long = "x".repeat(MAX_INTERNED_LEN + 1);
        assert!(matches!(names.intern(&long), PackedName::Inline(_)));
        assert!(matches!(names.intern("a"), PackedName::Interned(0)));
        for i in 2..MAX_NAMES {
            names.intern(&format!("n{i}"));
        }
        assert!(matches!(
            names.intern("beyond"),
            PackedName::Inline("beyond")
        ));
        assert!(matches!(names.intern("b"), PackedName::Interned(1)));
        let table = names.snapshot();
        assert_eq!(table.by_index.len(), MAX_NAMES);
        assert_eq!(table.resolve(&PackedName::Interned(1)), "b");
        assert_eq!(table.resolve(&PackedName::Inline("x")), "x");
    }

    fn arb_row() -> impl Strategy<Value = Row> {
        (
            "[a-z0-9-]{1,40}",
            prop_oneof!["[a-z]{1,8}", "[a-z]{129,140}"],
            prop_oneof![Just("null".to_owned()), ".{0,12}"],
            0..3u8,
            any::<Option<u64>>(),
            proptest::collection::btree_map("[a-z]{1,4}@h", any::<u64>(), 0..4),
            proptest::collection::btree_map("[a-z]{1,5}", ".{0,8}", 0..3),
            (any::<u64>(), "[a-z]{0,4}@?h?", any::<u64>(), any::<bool>()),
        )
            .prop_map(
                |(id, kind, args, restart, shutdown, node_pids, metadata, hub)| Row {
                    spec: ChildSpec {
                        id: ChildId::from(id),
                        kind,
                        args: ChildArgs::from_json_text(args),
                        restart: [Restart::Permanent, Restart::Transient, Restart::Temporary]
                            [restart as usize],
                        shutdown: shutdown.map_or(Shutdown::Kill, Shutdown::TimeoutMs),
                    },
                    node_pids,
                    metadata,
                    hub: HubMeta {
                        epoch: hub.0,
                        changed_by: hub.1,
                        changed_at_ms: hub.2,
                        durable: hub.3,
                    },
                },
            )
    }

    proptest! {
        #[test]
        fn every_row_reads_back_as_it_was_packed(
            rows in proptest::collection::vec(arb_row(), 1..8),
            expires in any::<Option<u64>>(),
            base in any::<u64>(),
        ) {
            let names = Names::default();
            let packed: Vec<PackedRow> =
                rows.iter().map(|row| PackedRow::pack(row, expires, &names, base)).collect();
            let table = names.snapshot();
            for (row, packed) in rows.iter().zip(&packed) {
                let stored = packed.unpack(&table, base);
                prop_assert_eq!(&stored.row, row);
                prop_assert_eq!(stored.expires_at_ms, expires);
                prop_assert_eq!(packed.id(), row.spec.id.as_str());
                // A write counts the row from the row itself: what the packed row reads.
                prop_assert_eq!(CountView::of_row(row), packed.count_view(&table));
                prop_assert_eq!(packed.durable(), row.hub.durable);
                prop_assert_eq!(packed.expires_at_ms(), expires);
                let bound_nodes: Vec<NodeName> = row.node_pids.keys().cloned().collect();
                prop_assert_eq!(packed.bound_nodes(&table), bound_nodes);
                // A reap's and a full sync's pick: live and bound on the node, at the expiry,
                // just before it, and for a node the row is not bound on.
                for at in [expires.map_or(0, |at| at.saturating_sub(1)), expires.unwrap_or(u64::MAX)] {
                    for node in row.node_pids.keys().map(String::as_str).chain(["absent@h"]) {
                        let expected = packed.is_live(at) && row.node_pids.contains_key(node);
                        prop_assert_eq!(packed.live_on(&table, node, at), expected);
                    }
                }
                let now = expires.map_or(0, |at| at.saturating_sub(1));
                let view = packed.placement(&table, now);
                prop_assert_eq!(view.is_some(), packed.is_live(now));
                if let Some(view) = view {
                    prop_assert_eq!(view.kind, row.spec.kind.as_str());
                    let bound: Vec<(&str, Pid)> =
                        row.node_pids.iter().map(|(n, p)| (n.as_str(), *p)).collect();
                    prop_assert_eq!(view.nodes, bound);
                }
            }
        }
    }

    #[test]
    fn an_id_of_every_length_class_reads_back_from_its_bytes() {
        let names = Names::default();
        // One-byte lengths, then a u16 length (251 and up); the key decoder agrees.
        for len in [0usize, 1, 24, 250, 251, 300, 65_535, 65_536] {
            let id: String = "é".repeat(len / 2) + &"x".repeat(len % 2);
            let row = Row::authored(
                ChildSpec::new(id.as_str(), "counter"),
                Metadata::new(),
                "n1@h",
                5,
                false,
            )
            .unwrap();
            let packed = PackedRow::pack(&row, Some(9), &names, 0);
            assert_eq!(packed.id(), id, "length {len}");
            let key = packed_read::key(&mut Cursor::new(&packed.0)).unwrap();
            assert_eq!(key, (id.as_str(), Some(9)), "length {len}");
            // The expiry read past the id, unread, agrees.
            assert_eq!(packed.expires_at_ms(), Some(9), "length {len}");
        }
    }

    #[test]
    fn the_direct_reads_agree_with_the_row_past_every_one_byte_length() {
        // Name indexes, argument and metadata lengths past 250 take bincode's longer varints.
        let names = Names::default();
        for i in 0..300 {
            names.intern(&format!("name-{i}"));
        }
        let mut spec = ChildSpec::new("child-1", "kind-after-300");
        spec.args = ChildArgs::from_json_text(format!("\"{}\"", "a".repeat(400)));
        spec.shutdown = Shutdown::TimeoutMs(70_000);
        let mut metadata = Metadata::new();
        metadata.insert("k".repeat(300), "v".repeat(70_000));
        let mut row = Row::authored(spec, metadata, "author-after-300", 9, true).unwrap();
        row.node_pids.insert("node-after-300".into(), u64::MAX);
        row.hub.epoch = 1 << 40;
        let packed = PackedRow::pack(&row, Some(u64::MAX - 1), &names, 0);
        let table = names.snapshot();
        assert_eq!(CountView::of_row(&row), packed.count_view(&table));
        assert!(packed.durable());
        assert!(packed.is_live(u64::MAX - 2) && !packed.is_live(u64::MAX - 1));
        let view = packed.placement(&table, 0).unwrap();
        assert_eq!(view.kind, "kind-after-300");
        assert_eq!(view.nodes, vec![("node-after-300", u64::MAX)]);
        assert_eq!(
            packed.bound_nodes(&table),
            vec!["node-after-300".to_owned()]
        );
        assert_eq!(packed.expires_at_ms(), Some(u64::MAX - 1));
        assert_eq!(packed.unpack(&table, 0).row, row);
    }

    #[test]
    fn a_typical_row_packs_into_a_small_allocation() {
        let names = Names::default();
        let base = 1_800_000_000_000;
        let mut row = Row::authored(
            ChildSpec::new("child-000123", "counter"),
            Metadata::new(),
            "n1@127.0.0.1",
            base + 3_600_000,
            false,
        )
        .unwrap();
        row.node_pids.insert("n1@127.0.0.1".into(), 4_321);
        let packed = PackedRow::pack(&row, None, &names, base);
        // Under 41 bytes, glibc's 48-byte chunk holds it.
        assert!(packed.len() <= 40, "{} bytes", packed.len());
        assert_eq!(packed.unpack(&names.snapshot(), base).row, row);
        // A change time before the base reads back too.
        row.hub.changed_at_ms = 5;
        let packed = PackedRow::pack(&row, None, &names, base);
        assert_eq!(packed.unpack(&names.snapshot(), base).row, row);
    }
}
