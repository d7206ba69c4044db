//! The default backend: an in-memory concurrent map, the counterpart of ETS.
//!
//! Readers never wait on a writer for long (a write locks one shard of the map), which keeps
//! `child_lookup` on the hot path cheap. Nothing survives a restart: the node rebuilds its copy
//! from its peers.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::HashTable;

use super::packed_row::{CountView, NameTable, Names, PackedRow};
use super::row_counts::RegistryCounts;
use super::{Commit, Mutation, PageIds, Placement, Storage, StoredRow};
use crate::clock::Clock;
use crate::core::sync_digest::BindingDigest;
use crate::model::{ChildId, NodeName, Pid, Row};

/// Shards of the map: a write locks one, so readers rarely wait.
const SHARDS: usize = 16;

/// A shard at or below this many slots is not shrunk (not worth a rehash).
const MIN_SHRINK_CAPACITY: usize = 64;

/// In-memory registry storage.
///
/// Every node keeps a row for every child of the cluster, so a row's size is multiplied by the
/// cluster's size: each row is one packed allocation with its id inside ([`PackedRow`], about
/// 35 bytes for a typical child), and the map's slot is that allocation's pointer, so a row
/// costs about 75 bytes on a node where a `Row` in an ordered map cost about 860. Reads hand
/// out owned rows; unpacking one costs what cloning it did.
pub struct MemoryStorage {
    shards: Box<[RwLock<HashTable<PackedRow>>]>,
    /// Hashes ids (keyed per store, since ids come from callers and peers).
    hasher: crate::model::TableHasher,
    /// The kind and node names the rows refer to.
    names: Names,
    /// The time change times are packed relative to (the store's creation).
    base_ms: u64,
    /// The time of day TTLs are measured with.
    clock: Clock,
    /// The rows' counts and each node's binding digest, kept on write (every write changes
    /// them under its shard's lock, so they always match what the shards hold).
    counts: Mutex<RegistryCounts>,
    /// Writes applied so far ([`Storage::generation`]), counted under the written shard's lock.
    writes: AtomicU64,
}

impl Default for MemoryStorage {
    fn default() -> Self {
        Self::with_clock(Clock::default())
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
            shards: (0..SHARDS).map(|_| RwLock::new(HashTable::new())).collect(),
            hasher: Default::default(),
            names: Names::default(),
            base_ms: clock.now_ms(),
            clock,
            counts: Mutex::default(),
            writes: AtomicU64::new(0),
        }
    }

    /// Counts a write, while the shard it changed is still locked.
    fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Release);
    }

    /// The hash of an id's bytes: a stored row is hashed from its packed bytes as they stand
    /// (no check that they are text: they were packed from a `str`), a looked-up id likewise.
    fn hash(&self, id: &[u8]) -> u64 {
        self.hasher.hash_one(id)
    }

    fn shard_of(&self, hash: u64) -> &RwLock<HashTable<PackedRow>> {
        // The table itself uses the low bits and the top seven; the shard takes others.
        &self.shards[(hash >> 32) as usize % SHARDS]
    }

    fn read(&self, hash: u64) -> RwLockReadGuard<'_, HashTable<PackedRow>> {
        self.shard_of(hash)
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, hash: u64) -> RwLockWriteGuard<'_, HashTable<PackedRow>> {
        self.shard_of(hash)
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `f` with every stored row, expired or not, and the names it refers to, shard by
    /// shard (each shard read-locked while its rows are visited). The names are read once the
    /// shard is locked: a writer interns a row's names before it locks the row's shard, so they
    /// cover every row the shard holds.
    fn for_each_packed(&self, mut f: impl FnMut(&NameTable, &PackedRow)) {
        for shard in self.shards.iter() {
            let table = shard.read().unwrap_or_else(|p| p.into_inner());
            let names = self.names.snapshot();
            for packed in table.iter() {
                f(&names, packed);
            }
        }
    }

    fn lock_counts(&self) -> MutexGuard<'_, RegistryCounts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn put_packed(&self, packed: PackedRow) {
        self.put_counted(packed, None);
    }

    /// Stores `packed`; `view` is what its counts read, when the caller has it from the row
    /// (else it is decoded from `packed`).
    fn put_counted(&self, packed: PackedRow, view: Option<CountView<'_>>) {
        let hash = self.hash(packed.id_bytes());
        let mut table = self.write(hash);
        let found = table.find_mut(hash, |row| row.id_bytes() == packed.id_bytes());
        {
            // The row's names were interned before its shard was locked.
            let names = self.names.snapshot();
            let mut counts = self.lock_counts();
            if let Some(old) = found.as_deref() {
                counts.remove(&old.count_view(&names));
            }
            match view {
                Some(view) => counts.add(&view),
                None => counts.add(&packed.count_view(&names)),
            }
        }
        match found {
            Some(slot) => *slot = packed,
            None => {
                table.insert_unique(hash, packed, |row| self.hash(row.id_bytes()));
            }
        }
        self.wrote();
    }

    fn remove_id(&self, id: &str) {
        let hash = self.hash(id.as_bytes());
        let mut table = self.write(hash);
        if let Ok(entry) = table.find_entry(hash, |row| row.id_bytes() == id.as_bytes()) {
            self.lock_counts()
                .remove(&entry.get().count_view(&self.names.snapshot()));
            entry.remove();
            self.wrote();
            // A shard emptied by a large stop gives its slots back (halving at a quarter full,
            // so a shard that fills and empties repeatedly does not rehash at every step).
            if table.capacity() > MIN_SHRINK_CAPACITY && table.len() * 4 < table.capacity() {
                let keep = table.len() * 2;
                table.shrink_to(keep, |row| self.hash(row.id_bytes()));
            }
        }
    }

    fn get_packed<T>(&self, id: &str, f: impl FnOnce(&PackedRow) -> T) -> Option<T> {
        let hash = self.hash(id.as_bytes());
        self.read(hash)
            .find(hash, |row| row.id_bytes() == id.as_bytes())
            .map(f)
    }

    /// Whether a row found by a point read has not expired. The clock is read only for a row
    /// that can expire (a tombstone or a row written with a time to live): a start and a stop
    /// read the store several times a child, and most rows never expire.
    fn live(&self, packed: &PackedRow) -> bool {
        super::unexpired(packed.expires_at_ms(), || self.clock.now_ms())
    }

    /// Unpacks a row found under its shard's lock (so the names cover it, as in
    /// [`Self::for_each_packed`]).
    fn unpack(&self, packed: &PackedRow) -> StoredRow {
        packed.unpack(&self.names.snapshot(), self.base_ms)
    }

    fn put(&self, row: &Row, ttl: Option<std::time::Duration>, now: u64) {
        let expires_at_ms = ttl.map(|ttl| now + ttl.as_millis() as u64);
        let packed = PackedRow::pack(row, expires_at_ms, &self.names, self.base_ms);
        self.put_counted(packed, Some(CountView::of_row(row)));
    }

    /// Applies a batch; infallible in memory. Shared with the `durable` backend, which keeps its
    /// read copy here.
    pub fn apply_in_memory(&self, batch: &[Mutation]) {
        let now = self.clock.now_ms();
        for mutation in batch {
            match mutation {
                Mutation::Put { row, ttl } => self.put(row, *ttl, now),
                Mutation::Remove(id) => self.remove_id(id.as_str()),
                Mutation::Clear => {
                    let mut shards: Vec<_> = self
                        .shards
                        .iter()
                        .map(|s| s.write().unwrap_or_else(|p| p.into_inner()))
                        .collect();
                    for shard in shards.iter_mut() {
                        **shard = HashTable::new();
                    }
                    *self.lock_counts() = RegistryCounts::default();
                    self.wrote();
                }
            }
        }
    }

    /// Applies a batch it owns (every registry write of every node goes through here).
    pub fn apply_owned(&self, batch: Vec<Mutation>) {
        self.apply_in_memory(&batch);
    }

    /// The stored entry, expired or not (used to roll back a failed disk write).
    pub fn get_stored(&self, id: &ChildId) -> Option<StoredRow> {
        self.get_packed(id.as_str(), |packed| self.unpack(packed))
    }

    /// Replaces or removes the stored entry verbatim.
    pub fn restore_stored(&self, id: &ChildId, stored: Option<StoredRow>) {
        match stored {
            Some(stored) => {
                debug_assert_eq!(
                    &stored.row.spec.id, id,
                    "a row is restored under its own id"
                );
                self.put_packed(PackedRow::pack(
                    &stored.row,
                    stored.expires_at_ms,
                    &self.names,
                    self.base_ms,
                ))
            }
            None => self.remove_id(id.as_str()),
        }
    }

    /// Every stored entry, expired or not.
    pub fn export_stored(&self) -> Vec<StoredRow> {
        let mut rows = Vec::new();
        self.for_each_packed(|names, packed| rows.push(packed.unpack(names, self.base_ms)));
        rows
    }

    /// The ids of the entries stored but expired ([`Storage::expired_ids`]).
    pub fn expired_now(&self) -> Vec<ChildId> {
        let now = self.clock.now_ms();
        let mut ids = Vec::new();
        self.for_each_packed(|_, packed| {
            if !packed.is_live(now) {
                ids.push(ChildId::from(packed.id()));
            }
        });
        ids
    }

    /// The counts kept on write ([`Storage::counts`]).
    pub fn counts_now(&self) -> RegistryCounts {
        self.lock_counts().clone()
    }

    /// The digest of the bindings on `node` ([`Storage::binding_digest`]).
    pub fn digest_of(&self, node: &str) -> BindingDigest {
        self.lock_counts().bindings_on(node)
    }

    /// Every live row bound on `node`, in no particular order: one pass over the rows, and
    /// only those bound there are unpacked ([`Storage::rows_bound_to`]). A node that runs
    /// nothing here costs nothing.
    pub fn rows_on(&self, node: &str) -> Vec<Row> {
        let expected = self.digest_of(node).count as usize;
        let mut rows = Vec::with_capacity(expected);
        if expected == 0 {
            return rows;
        }
        let now = self.clock.now_ms();
        self.for_each_packed(|names, packed| {
            if packed.live_on(names, node, now) {
                rows.push(packed.unpack(names, self.base_ms).row);
            }
        });
        rows
    }

    /// Pushes onto `rows` every live row whose placement `wanted` accepts, unpacked in the
    /// same walk.
    fn rows_into(&self, rows: &mut Vec<Row>, wanted: &mut dyn FnMut(Placement<'_>) -> bool) {
        let now = self.clock.now_ms();
        self.for_each_packed(|names, packed| {
            if let Some(view) = packed.placement(names, now) {
                let accepted = wanted(Placement {
                    id: &ChildId::from(view.id),
                    kind: view.kind,
                    nodes: &view.nodes,
                });
                if accepted {
                    rows.push(packed.unpack(names, self.base_ms).row);
                }
            }
        });
    }

    /// The slots the shards hold, for tests of their release.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|p| p.into_inner()).capacity())
            .sum()
    }

    /// The packed size of the row stored under `id`, for tests of the layout.
    #[cfg(test)]
    fn packed_len(&self, id: &str) -> Option<usize> {
        self.get_packed(id, PackedRow::len)
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

    fn counts(&self) -> Option<RegistryCounts> {
        Some(self.counts_now())
    }

    fn binding_digest(&self, node: &str) -> Option<BindingDigest> {
        Some(self.digest_of(node))
    }

    fn rows_bound_to(&self, node: &str) -> Vec<Row> {
        self.rows_on(node)
    }

    fn rows_where(&self, wanted: &mut dyn FnMut(Placement<'_>) -> bool) -> Vec<Row> {
        let mut rows = Vec::new();
        self.rows_into(&mut rows, wanted);
        rows
    }

    fn generation(&self) -> Option<u64> {
        Some(self.writes.load(Ordering::Acquire))
    }

    fn get(&self, id: &ChildId) -> Option<Row> {
        self.get_packed(id.as_str(), |packed| {
            self.live(packed).then(|| self.unpack(packed).row)
        })
        .flatten()
    }

    fn export_all(&self) -> Vec<Row> {
        let now = self.clock.now_ms();
        let mut rows = Vec::new();
        self.for_each_packed(|names, packed| {
            if packed.is_live(now) {
                rows.push(packed.unpack(names, self.base_ms).row);
            }
        });
        rows.sort_unstable_by(|a, b| a.spec.id.cmp(&b.spec.id));
        rows
    }

    fn len(&self) -> usize {
        let now = self.clock.now_ms();
        let mut count = 0;
        self.for_each_packed(|_, packed| count += usize::from(packed.is_live(now)));
        count
    }

    fn expired_ids(&self) -> Vec<ChildId> {
        self.expired_now()
    }

    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        let now = self.clock.now_ms();
        self.for_each_packed(|names, packed| {
            if packed.is_live(now) {
                f(&packed.unpack(names, self.base_ms).row);
            }
        });
    }

    fn contains(&self, id: &ChildId) -> bool {
        self.get_packed(id.as_str(), |packed| self.live(packed))
            .unwrap_or(false)
    }

    fn bound_nodes(&self, id: &ChildId) -> Option<Vec<NodeName>> {
        self.get_packed(id.as_str(), |packed| {
            self.live(packed)
                .then(|| packed.bound_nodes(&self.names.snapshot()))
        })
        .flatten()
    }

    fn each_bound_node(&self, id: &ChildId, each: &mut dyn FnMut(&str)) -> bool {
        self.get_packed(id.as_str(), |packed| {
            let live = self.live(packed);
            if live {
                packed.each_bound_node(&self.names.snapshot(), each);
            }
            live
        })
        .unwrap_or(false)
    }

    fn version_and_bindings(&self, id: &ChildId) -> Option<(u64, Vec<(NodeName, Pid)>)> {
        self.get_packed(id.as_str(), |packed| {
            self.live(packed).then(|| {
                let names = self.names.snapshot();
                let view = packed.count_view(&names);
                let nodes = view
                    .nodes
                    .iter()
                    .map(|(node, pid)| ((*node).to_owned(), *pid))
                    .collect();
                (view.epoch, nodes)
            })
        })
        .flatten()
    }

    fn version(&self, id: &ChildId) -> Option<u64> {
        self.get_packed(id.as_str(), |packed| {
            self.live(packed).then(|| packed.epoch())
        })
        .flatten()
    }

    fn is_durable(&self, id: &ChildId) -> bool {
        self.get_packed(id.as_str(), |packed| self.live(packed) && packed.durable())
            .unwrap_or(false)
    }

    fn for_each_placement(&self, f: &mut dyn FnMut(Placement<'_>)) {
        let now = self.clock.now_ms();
        self.for_each_packed(|names, packed| {
            if let Some(view) = packed.placement(names, now) {
                f(Placement {
                    id: &ChildId::from(view.id),
                    kind: view.kind,
                    nodes: &view.nodes,
                });
            }
        });
    }

    fn page_after(&self, after: Option<&ChildId>, limit: usize) -> Vec<Row> {
        let now = self.clock.now_ms();
        let mut ids = PageIds::new(after, limit);
        self.for_each_packed(|_, packed| {
            if packed.is_live(now) {
                ids.offer(&ChildId::from(packed.id()));
            }
        });
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

    /// A reader compares generations to know whether what it read is still what is stored:
    /// every write moves it, reads do not, and a removal of nothing is no write.
    #[test]
    fn the_generation_moves_with_every_write_and_only_then() {
        let s = MemoryStorage::new();
        let g0 = s.generation().unwrap();
        s.insert(row("a")).unwrap();
        let g1 = s.generation().unwrap();
        assert_ne!(g0, g1);
        let _ = (
            s.get(&"a".into()),
            s.export_all(),
            s.rows_where(&mut |_| true),
        );
        s.for_each_placement(&mut |_| {});
        assert_eq!(s.generation(), Some(g1), "reads leave it");
        s.insert(row("a")).unwrap();
        let g2 = s.generation().unwrap();
        assert_ne!(g1, g2, "a row replaced");
        s.remove(&"missing".into()).unwrap();
        assert_eq!(s.generation(), Some(g2), "nothing removed");
        s.remove(&"a".into()).unwrap();
        let g3 = s.generation().unwrap();
        assert_ne!(g2, g3, "a row removed");
        s.clear_all().unwrap();
        assert_ne!(s.generation(), Some(g3), "cleared");
    }

    /// `rows_where` reads whole exactly the rows whose placement is accepted.
    #[test]
    fn rows_where_unpacks_the_accepted_rows_in_one_walk() {
        let s = MemoryStorage::new();
        for id in ["a1", "b1", "a2"] {
            s.insert(row(id)).unwrap();
        }
        let mut got: Vec<ChildId> = s
            .rows_where(&mut |p| p.id.as_str().starts_with('a'))
            .into_iter()
            .map(|r| r.spec.id)
            .collect();
        got.sort();
        assert_eq!(got, [ChildId::from("a1"), ChildId::from("a2")]);
        assert_eq!(s.rows_where(&mut |_| true).len(), 3);
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

    /// Readers walking every shard while a writer stores rows with names never seen before:
    /// every row they see reads back whole (its names were interned before its shard took it).
    #[test]
    fn rows_with_new_names_read_back_whole_during_a_walk() {
        let s = std::sync::Arc::new(MemoryStorage::new());
        let writer = {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..2_000 {
                    let mut r = row(&format!("c{i}"));
                    r.spec.kind = format!("kind-{i}");
                    r.node_pids.insert(format!("n{i}@h"), i);
                    s.insert(r).unwrap();
                }
            })
        };
        let check = |r: &Row| {
            let i = r.spec.id.as_str().trim_start_matches('c');
            assert_eq!(r.spec.kind, format!("kind-{i}"));
            assert_eq!(r.node_pids.keys().next(), Some(&format!("n{i}@h")));
        };
        while !writer.is_finished() {
            s.export_all().iter().for_each(check);
            s.for_each_placement(&mut |p| {
                let i = p.id.as_str().trim_start_matches('c');
                assert_eq!(p.kind, format!("kind-{i}"));
                assert_eq!(p.nodes[0].0, format!("n{i}@h"));
            });
        }
        writer.join().unwrap();
        assert_eq!(s.export_all().len(), 2_000);
        s.export_all().iter().for_each(check);
    }

    #[test]
    fn removing_most_rows_gives_the_slots_back() {
        let s = MemoryStorage::new();
        let ids: Vec<ChildId> = (0..20_000).map(|i| format!("c{i}").into()).collect();
        s.apply(
            ids.iter()
                .map(|id| Mutation::put(row(id.as_str())))
                .collect(),
        )
        .unwrap();
        let full = s.capacity();
        assert!(full >= 20_000);
        s.apply(ids[100..].iter().cloned().map(Mutation::Remove).collect())
            .unwrap();
        assert_eq!(s.len(), 100);
        assert!(
            s.capacity() < full / 8,
            "{} of {full} slots kept",
            s.capacity()
        );
        for id in &ids[..100] {
            assert!(s.contains(id), "{id} survives the shrinking");
        }
        s.clear_all().unwrap();
        assert_eq!(s.capacity(), 0);
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
        // The expired entry is still stored (swept by the janitor), just not visible; a boot
        // finds it through `expired_ids`.
        assert!(s.get_stored(&"short".into()).is_some());
        assert_eq!(Storage::expired_ids(&s), vec![ChildId::from("short")]);
    }

    /// What `each_bound_node` calls back with, as `bound_nodes` answers it.
    fn each_bound(s: &MemoryStorage, id: &ChildId) -> Option<Vec<NodeName>> {
        let mut nodes = Vec::new();
        s.each_bound_node(id, &mut |node| nodes.push(node.to_owned()))
            .then_some(nodes)
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
        assert_eq!(
            s.bound_nodes(r.id()),
            Some(vec!["n1@h".to_owned(), "n2@h".to_owned()])
        );
        assert_eq!(s.bound_nodes(&ChildId::from("absent")), None);
        assert_eq!(
            each_bound(&s, r.id()),
            Some(vec!["n1@h".to_owned(), "n2@h".to_owned()])
        );
        assert_eq!(each_bound(&s, &ChildId::from("absent")), None);
        // What a start's record and a start read of a row, without unpacking it.
        assert_eq!(
            s.version_and_bindings(r.id()),
            Some((
                1 << 40,
                vec![("n1@h".to_owned(), u64::MAX), ("n2@h".to_owned(), 0)]
            ))
        );
        assert!(r.hub.durable && s.is_durable(r.id()));
        assert_eq!(s.version(r.id()), Some(1 << 40));
        assert_eq!(s.version(&ChildId::from("absent")), None);
        assert_eq!(s.version_and_bindings(&ChildId::from("absent")), None);
        assert!(!s.is_durable(&ChildId::from("absent")));
        assert_eq!(s.export_all(), vec![r.clone()]);
        let plain = MemoryStorage::new();
        plain.insert(row("plain")).unwrap();
        assert!(!plain.is_durable(&ChildId::from("plain")));
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
        assert_eq!(s.version_and_bindings(r.id()), None, "expired");
        assert_eq!(s.version(r.id()), None, "expired");
        assert!(!s.is_durable(r.id()), "expired");
        assert_eq!(
            s.bound_nodes(r.id()),
            None,
            "expired rows are bound nowhere"
        );
        assert_eq!(each_bound(&s, r.id()), None, "expired");
        let mut unbound = r.clone();
        unbound.spec.id = "unbound".into();
        unbound.node_pids.clear();
        s.insert(unbound.clone()).unwrap();
        assert_eq!(s.bound_nodes(unbound.id()), Some(Vec::new()));
        assert_eq!(each_bound(&s, unbound.id()), Some(Vec::new()));
        assert_eq!(
            s.version_and_bindings(unbound.id()),
            Some((1 << 40, Vec::new()))
        );
        assert_eq!(s.version(unbound.id()), Some(1 << 40));
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
        // Left out only when it is the bound node: its (interned) name's two bytes less (the
        // rest differs by the ids' lengths).
        let size = |id: &str| s.packed_len(id).unwrap();
        assert_eq!(
            size("other"),
            size("own") + ("other".len() - "own".len()) + 2
        );
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
