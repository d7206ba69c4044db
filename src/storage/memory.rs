//! The default backend: an in-memory concurrent map, the counterpart of ETS.
//!
//! Readers never wait on a writer for long (a write locks one shard of the map), which keeps
//! `child_lookup` on the hot path cheap. Nothing survives a restart: the node rebuilds its copy
//! from its peers.

use std::collections::BTreeMap;

use bincode::Options;
use dashmap::DashMap;

use super::{Commit, Mutation, PageIds, Placement, Storage, StoredRow};
use crate::clock::Clock;
use crate::model::{
    ChildArgs, ChildId, ChildSpec, HubMeta, Metadata, NodeName, Pid, Restart, Row, Shutdown,
};

/// In-memory registry storage.
///
/// Every node keeps a row for every child of the cluster, so a row's size is multiplied by the
/// cluster's size: each is kept packed (its fields encoded in one allocation, about 60 bytes
/// for a typical child, keyed by the id, which is itself inline up to 24 bytes) rather than as
/// a `Row` of half a dozen allocations and a map node (about 860 bytes). Reads hand out owned
/// rows as before; unpacking one costs what cloning it did.
#[derive(Default)]
pub struct MemoryStorage {
    rows: DashMap<ChildId, PackedRow>,
    /// The time of day TTLs are measured with.
    clock: Clock,
}

/// A stored row without its id (the map's key): expiry first, so that visibility is decided
/// without unpacking the rest. The node that authored the row is left out when it is the node
/// the row is bound to (first): the usual case, a host recording its own child, so the name is
/// not kept twice.
struct PackedRow(Box<[u8]>);

/// The packed encoding: bincode with variable-length integers.
fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_varint_encoding()
}

type BodyRef<'a> = (
    Option<u64>,
    &'a str,
    &'a str,
    Restart,
    Shutdown,
    &'a BTreeMap<NodeName, Pid>,
    &'a Metadata,
    HubMetaRef<'a>,
);

/// [`HubMeta`] as packed: `changed_by` is `None` when it is the first bound node.
type HubMetaRef<'a> = (u64, Option<&'a str>, u64, bool);

type Body = (
    Option<u64>,
    String,
    String,
    Restart,
    Shutdown,
    BTreeMap<NodeName, Pid>,
    Metadata,
    (u64, Option<String>, u64, bool),
);

impl PackedRow {
    fn pack(row: &Row, expires_at_ms: Option<u64>) -> Self {
        let body: BodyRef<'_> = (
            expires_at_ms,
            &row.spec.kind,
            row.spec.args.as_json_text(),
            row.spec.restart,
            row.spec.shutdown,
            &row.node_pids,
            &row.metadata,
            (
                row.hub.epoch,
                match row.node_pids.keys().next() {
                    Some(first) if *first == row.hub.changed_by => None,
                    _ => Some(row.hub.changed_by.as_str()),
                },
                row.hub.changed_at_ms,
                row.hub.durable,
            ),
        );
        // Strings, integers and maps of them always encode into a vector.
        let bytes = codec()
            .serialize(&body)
            .expect("a row's fields encode into a vector");
        Self(bytes.into_boxed_slice())
    }

    fn expires_at_ms(&self) -> Option<u64> {
        codec()
            .allow_trailing_bytes()
            .deserialize::<Option<u64>>(&self.0)
            .ok()
            .flatten()
    }

    fn is_live(&self, now_ms: u64) -> bool {
        self.expires_at_ms().is_none_or(|at| at > now_ms)
    }

    /// Reads the fields a placement needs, borrowing the strings into `nodes`. `None` if
    /// expired at `now_ms`.
    fn placement<'a>(&'a self, now_ms: u64, nodes: &mut Vec<(&'a str, Pid)>) -> Option<&'a str> {
        // A map encodes as its length and its pairs, which reads back as a sequence of pairs.
        type Head<'a> = (
            Option<u64>,
            &'a str,
            &'a str,
            Restart,
            Shutdown,
            Vec<(&'a str, Pid)>,
        );
        let (expires_at_ms, kind, _, _, _, bound): Head<'a> = codec()
            .allow_trailing_bytes()
            .deserialize(&self.0)
            .expect("a packed row decodes as it was encoded");
        if expires_at_ms.is_some_and(|at| at <= now_ms) {
            return None;
        }
        *nodes = bound;
        Some(kind)
    }

    fn unpack(&self, id: &ChildId) -> StoredRow {
        // Only `pack` wrote these bytes; a failure would be a bug in this file.
        let (expires_at_ms, kind, args, restart, shutdown, node_pids, metadata, hub): Body =
            codec()
                .deserialize(&self.0)
                .expect("a packed row decodes as it was encoded");
        let (epoch, changed_by, changed_at_ms, durable) = hub;
        let changed_by = match changed_by {
            Some(name) => name,
            None => node_pids.keys().next().cloned().unwrap_or_default(),
        };
        let hub = HubMeta {
            epoch,
            changed_by,
            changed_at_ms,
            durable,
        };
        StoredRow {
            row: Row {
                spec: ChildSpec {
                    id: id.clone(),
                    kind,
                    args: ChildArgs::from_json_text(args),
                    restart,
                    shutdown,
                },
                node_pids,
                metadata,
                hub,
            },
            expires_at_ms,
        }
    }
}

impl MemoryStorage {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose TTLs follow `clock`.
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            rows: DashMap::new(),
            clock,
        }
    }

    fn put(&self, row: &Row, ttl: Option<std::time::Duration>, now: u64) {
        let expires_at_ms = ttl.map(|ttl| now + ttl.as_millis() as u64);
        self.rows
            .insert(row.spec.id.clone(), PackedRow::pack(row, expires_at_ms));
    }

    /// Applies a batch; infallible in memory. Shared with the `durable` backend, which keeps its
    /// read copy here.
    pub fn apply_in_memory(&self, batch: &[Mutation]) {
        let now = self.clock.now_ms();
        for mutation in batch {
            match mutation {
                Mutation::Put { row, ttl } => self.put(row, *ttl, now),
                Mutation::Remove(id) => {
                    self.rows.remove(id);
                }
                Mutation::Clear => self.rows.clear(),
            }
        }
    }

    /// Applies a batch it owns (every registry write of every node goes through here).
    pub fn apply_owned(&self, batch: Vec<Mutation>) {
        self.apply_in_memory(&batch);
    }

    /// The stored entry, expired or not (used to roll back a failed disk write).
    pub fn get_stored(&self, id: &ChildId) -> Option<StoredRow> {
        self.rows.get(id).map(|e| e.value().unpack(e.key()))
    }

    /// Replaces or removes the stored entry verbatim.
    pub fn restore_stored(&self, id: &ChildId, stored: Option<StoredRow>) {
        match stored {
            Some(stored) => {
                self.rows.insert(
                    id.clone(),
                    PackedRow::pack(&stored.row, stored.expires_at_ms),
                );
            }
            None => {
                self.rows.remove(id);
            }
        }
    }

    /// Every stored entry, expired or not.
    pub fn export_stored(&self) -> Vec<StoredRow> {
        self.rows
            .iter()
            .map(|e| e.value().unpack(e.key()))
            .collect()
    }
}

impl Storage for MemoryStorage {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn submit(&self, batch: Vec<Mutation>) -> Commit {
        self.apply_owned(batch);
        Commit::ready(Ok(()))
    }

    fn applies_on_submit(&self) -> bool {
        true
    }

    fn get(&self, id: &ChildId) -> Option<Row> {
        let now = self.clock.now_ms();
        let entry = self.rows.get(id)?;
        let stored = entry.value().unpack(entry.key());
        stored.is_live(now).then_some(stored.row)
    }

    fn export_all(&self) -> Vec<Row> {
        let now = self.clock.now_ms();
        let mut rows: Vec<Row> = self
            .rows
            .iter()
            .map(|e| e.value().unpack(e.key()))
            .filter(|s| s.is_live(now))
            .map(|s| s.row)
            .collect();
        rows.sort_unstable_by(|a, b| a.spec.id.cmp(&b.spec.id));
        rows
    }

    fn len(&self) -> usize {
        let now = self.clock.now_ms();
        self.rows.iter().filter(|e| e.value().is_live(now)).count()
    }

    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        let now = self.clock.now_ms();
        for entry in self.rows.iter() {
            let stored = entry.value().unpack(entry.key());
            if stored.is_live(now) {
                f(&stored.row);
            }
        }
    }

    fn contains(&self, id: &ChildId) -> bool {
        let now = self.clock.now_ms();
        self.rows.get(id).is_some_and(|e| e.value().is_live(now))
    }

    fn for_each_placement(&self, f: &mut dyn FnMut(Placement<'_>)) {
        let now = self.clock.now_ms();
        for entry in self.rows.iter() {
            let mut nodes = Vec::new();
            if let Some(kind) = entry.value().placement(now, &mut nodes) {
                f(Placement {
                    id: entry.key(),
                    kind,
                    nodes: &nodes,
                });
            }
        }
    }

    fn page_after(&self, after: Option<&ChildId>, limit: usize) -> Vec<Row> {
        let now = self.clock.now_ms();
        let mut ids = PageIds::new(after, limit);
        for entry in self.rows.iter() {
            if entry.value().is_live(now) {
                ids.offer(entry.key());
            }
        }
        ids.into_ids()
            .iter()
            .filter_map(|id| self.get(id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};
    use std::time::Duration;

    fn row(id: &str) -> Row {
        Row::authored(ChildSpec::new(id, "k"), Metadata::new(), "n@h", 0, false).unwrap()
    }

    /// The registry relies on this when it skips its overlay: what `submit` was given is
    /// readable before the commit is looked at, and the commit is ready with `Ok`.
    #[test]
    fn a_submitted_batch_is_readable_at_once_and_its_commit_is_ready() {
        let s = MemoryStorage::new();
        assert!(s.applies_on_submit());
        let first = s.submit(vec![Mutation::put(row("a")), Mutation::put(row("b"))]);
        assert!(s.contains(&"a".into()) && s.contains(&"b".into()));
        let second = s.submit(vec![Mutation::Remove("a".into())]);
        assert!(!s.contains(&"a".into()));
        assert!(first.wait().is_ok() && second.wait().is_ok());
    }

    #[test]
    fn put_get_remove_clear() {
        let s = MemoryStorage::new();
        s.insert(row("a")).unwrap();
        s.insert(row("b")).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(&"a".into()).unwrap().spec.id.as_str(), "a");
        s.remove(&"a".into()).unwrap();
        assert!(!s.contains(&"a".into()));
        s.clear_all().unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn expired_rows_are_filtered_on_read() {
        let s = MemoryStorage::new();
        s.apply(vec![
            Mutation::Put {
                row: row("short"),
                ttl: Some(Duration::from_millis(0)),
            },
            Mutation::Put {
                row: row("long"),
                ttl: Some(Duration::from_secs(3600)),
            },
        ])
        .unwrap();
        assert!(s.get(&"short".into()).is_none());
        assert!(s.get(&"long".into()).is_some());
        assert_eq!(s.len(), 1);
        assert_eq!(s.export_all().len(), 1);
        // The expired entry is still stored (swept by the janitor), just not visible.
        assert!(s.get_stored(&"short".into()).is_some());
    }

    #[test]
    fn a_packed_row_reads_back_whole() {
        let s = MemoryStorage::new();
        let mut r = Row::authored(
            ChildSpec {
                id: "id-with-a-long-name-beyond-the-inline-limit".into(),
                kind: "kind".into(),
                args: crate::model::ChildArgs::from_json_text(r#"{"start":5}"#),
                restart: crate::model::Restart::Transient,
                shutdown: crate::model::Shutdown::Kill,
            },
            Metadata::from([("tag".to_owned(), "web".to_owned())]),
            "n1@h",
            u64::MAX - 1,
            true,
        )
        .unwrap();
        r.node_pids.insert("n1@h".into(), u64::MAX);
        r.node_pids.insert("n2@h".into(), 0);
        r.hub.epoch = 1 << 40;
        s.insert(r.clone()).unwrap();
        assert_eq!(s.get(r.id()), Some(r.clone()));
        assert_eq!(s.export_all(), vec![r.clone()]);
        let stored = s.get_stored(r.id()).unwrap();
        assert_eq!((stored.row, stored.expires_at_ms), (r.clone(), None));
        s.restore_stored(
            r.id(),
            Some(StoredRow {
                row: r.clone(),
                expires_at_ms: Some(7),
            }),
        );
        assert_eq!(s.get_stored(r.id()).unwrap().expires_at_ms, Some(7));
        assert!(s.get(r.id()).is_none(), "expired at 7 ms after the epoch");
    }

    #[test]
    fn the_author_reads_back_whether_or_not_it_is_the_bound_node() {
        let s = MemoryStorage::new();
        let author = |id: &str, by: &str, bound: &[&str]| {
            let mut r = row(id);
            r.hub.changed_by = by.to_owned();
            for (pid, node) in bound.iter().enumerate() {
                r.node_pids.insert((*node).to_owned(), pid as u64);
            }
            r
        };
        let rows = [
            author("own", "n1@h", &["n1@h"]),
            author("other", "n2@h", &["n1@h"]),
            author("second", "n2@h", &["n1@h", "n2@h"]),
            author("unbound", "n3@h", &[]),
            author("empty-author", "", &["n1@h"]),
            author("empty-both", "", &[]),
        ];
        for r in &rows {
            s.insert(r.clone()).unwrap();
        }
        for r in &rows {
            assert_eq!(s.get(r.id()).as_ref(), Some(r), "{}", r.id());
        }
        // Left out only when it is the bound node: its name and length byte less.
        let size = |id: &str| s.rows.get(&ChildId::from(id)).unwrap().0.len();
        assert_eq!(size("other"), size("own") + "n2@h".len() + 1);
    }

    #[test]
    fn placements_and_pages_read_only_live_rows() {
        let s = MemoryStorage::new();
        let mut batch = Vec::new();
        for i in 0..50 {
            let mut r = row(&format!("c{i:02}"));
            for n in 0..(i % 3) {
                r.node_pids.insert(format!("n{n}@h"), i as u64);
            }
            let ttl = (i % 7 == 0).then_some(Duration::ZERO);
            batch.push(Mutation::Put { row: r, ttl });
        }
        s.apply(batch).unwrap();
        let live = s.export_all();
        assert_eq!(live.len(), 42);
        let mut seen = Vec::new();
        s.for_each_placement(&mut |p| {
            let nodes: Vec<(String, u64)> = p
                .nodes
                .iter()
                .map(|(n, pid)| ((*n).to_owned(), *pid))
                .collect();
            seen.push((p.id.clone(), p.kind.to_owned(), nodes));
        });
        seen.sort();
        let expected: Vec<_> = live
            .iter()
            .map(|r| {
                let nodes = r.node_pids.iter().map(|(n, p)| (n.clone(), *p)).collect();
                (r.spec.id.clone(), r.spec.kind.clone(), nodes)
            })
            .collect();
        assert_eq!(seen, expected);
        // Walking pages of 5 sees every live row once, in order; each page holds one extra.
        let mut walked = Vec::new();
        let mut after: Option<ChildId> = None;
        loop {
            let mut page = s.page_after(after.as_ref(), 5);
            let more = page.len() > 5;
            page.truncate(5);
            after = page.last().map(|r| r.spec.id.clone());
            walked.extend(page);
            if !more {
                break;
            }
        }
        assert_eq!(walked, live);
    }
}
