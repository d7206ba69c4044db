//! The `durable` backend: memory for reads, mirrored
//! synchronously to the same LMDB file the `lmdb` backend uses.
//!
//! Reads hit the in-memory copy only, so the hot path never touches the disk. A write goes to
//! memory first (visible at once), then to LMDB through group commit; its commit
//! answers `Ok` once fsync'd. If the disk write fails, the memory write is rolled back before
//! the caller hears the error. On open the disk copy is replayed into memory, so reads are
//! authoritative from the start.
//!
//! Rolling back must not undo someone else's later write. Every key written by a batch still in
//! flight keeps a short queue of `(batch, value before it)`. When a batch fails, a key that no
//! later batch touched gets its old value back; otherwise the next batch in the queue inherits
//! the old value as its own "before" (it is what the disk holds), and memory already shows that
//! later write. The queue order is the disk's apply order because both are decided under one
//! lock, and outcomes arrive in that order from the store's single notifier thread.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::engine::{CommitStats, DiskOptions, Engine, KvOp};
use super::memory::MemoryStorage;
use super::registry_file::{decode, encode_put, expiry, open_registry};
use super::{now_ms, Commit, Mutation, Storage, StorageError, StoredRow};
use crate::model::{ChildId, FastHashMap, Row};

/// Registry storage in memory, mirrored to disk (LMDB); every `Ok` fsync'd.
pub struct DurableStorage {
    shared: Arc<Shared>,
    engine: Engine,
}

struct Shared {
    memory: MemoryStorage,
    in_flight: Mutex<InFlight>,
}

#[derive(Default)]
struct InFlight {
    next_batch: u64,
    by_key: FastHashMap<ChildId, VecDeque<Before>>,
}

/// The value a key had before an in-flight batch wrote it.
struct Before {
    batch: u64,
    stored: Option<StoredRow>,
}

impl DurableStorage {
    /// Opens (or creates) the registry in the store directory `dir` (file `dir/registry.lmdb`,
    /// the same file as [`LmdbStorage`](super::LmdbStorage)) and loads it into memory.
    ///
    /// Corruption, newer formats and other open failures are handled as by
    /// [`LmdbStorage::open`](super::LmdbStorage::open).
    pub fn open(dir: &Path, options: &DiskOptions) -> Result<Self, StorageError> {
        let engine = open_registry(dir, options)?;
        let memory = MemoryStorage::new();
        let mut loaded = Ok(());
        engine.for_each(|_, value| match decode(value) {
            Ok(stored) => memory.restore_stored(&stored.row.spec.id.clone(), Some(stored)),
            // The open check decoded every row; a failure here is a bug, not a disk problem.
            Err(e) => loaded = Err(e.to_string()),
        })?;
        loaded.map_err(|message| StorageError::Open {
            path: engine.path().to_owned(),
            message: format!("replay into memory failed: {message}"),
        })?;
        Ok(Self {
            shared: Arc::new(Shared {
                memory,
                in_flight: Mutex::new(InFlight::default()),
            }),
            engine,
        })
    }

    /// The registry's file.
    pub fn file_path(&self) -> &Path {
        self.engine.path()
    }

    /// What the writer has committed so far (each commit is one fsync).
    pub fn commit_stats(&self) -> CommitStats {
        self.engine.stats()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, InFlight> {
        // The guarded data stays consistent even if a holder panicked: every update is a
        // single push or pop.
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Settles batch `batch` once the disk answered: forget its before-values, and on failure
    /// put back what the disk still holds.
    fn settle(&self, batch: u64, keys: &[ChildId], failed: bool) {
        let mut in_flight = self.lock();
        for id in keys {
            let Some(queue) = in_flight.by_key.get_mut(id) else {
                continue;
            };
            let Some(at) = queue.iter().position(|b| b.batch == batch) else {
                continue;
            };
            let Some(mine) = queue.remove(at) else {
                continue;
            };
            if failed {
                match queue.get_mut(at) {
                    Some(later) => later.stored = mine.stored,
                    None => self.memory.restore_stored(id, mine.stored),
                }
            }
            if queue.is_empty() {
                in_flight.by_key.remove(id);
            }
        }
    }
}

impl Storage for DurableStorage {
    fn fault(&self) -> Option<String> {
        self.engine.identity().check().err()
    }

    fn probe(&self) -> Commit {
        self.engine.submit(vec![KvOp::Touch])
    }

    fn name(&self) -> &'static str {
        "durable"
    }

    fn label_metrics(&self, hub: &str, node: &str) {
        self.engine.label_metrics(hub, node);
    }

    fn submit(&self, batch: Vec<Mutation>) -> Commit {
        let now = now_ms();
        // Encode outside the lock; the memory values are exactly what goes to disk.
        let mut ops = Vec::with_capacity(batch.len());
        let mut writes = Vec::with_capacity(batch.len());
        for mutation in batch {
            match mutation {
                Mutation::Put { row, ttl } => {
                    let expires_at_ms = expiry(now, ttl);
                    match encode_put(&row, expires_at_ms) {
                        Ok(op) => ops.push(op),
                        Err(e) => return Commit::ready(Err(e)),
                    }
                    writes.push(Write::Put(StoredRow { row, expires_at_ms }));
                }
                Mutation::Remove(id) => {
                    ops.push(KvOp::Delete(id.as_str().as_bytes().to_vec()));
                    writes.push(Write::Remove(id));
                }
                Mutation::Clear => {
                    ops.push(KvOp::Clear);
                    writes.push(Write::Clear);
                }
            }
        }

        let (sender, commit) = Commit::pending();
        let memory = &self.shared.memory;
        let mut in_flight = self.shared.lock();
        let batch_no = in_flight.next_batch;
        in_flight.next_batch += 1;
        // First touch of each key in this batch: its value before the batch.
        let mut before: FastHashMap<ChildId, Option<StoredRow>> = FastHashMap::default();
        for write in writes {
            match write {
                Write::Put(stored) => {
                    let id = stored.row.spec.id.clone();
                    before
                        .entry(id.clone())
                        .or_insert_with(|| memory.get_stored(&id));
                    memory.restore_stored(&id, Some(stored));
                }
                Write::Remove(id) => {
                    before
                        .entry(id.clone())
                        .or_insert_with(|| memory.get_stored(&id));
                    memory.restore_stored(&id, None);
                }
                Write::Clear => {
                    for stored in memory.export_stored() {
                        before
                            .entry(stored.row.spec.id.clone())
                            .or_insert(Some(stored));
                    }
                    memory.apply_in_memory(&[Mutation::Clear]);
                }
            }
        }
        let mut keys = Vec::with_capacity(before.len());
        for (id, stored) in before {
            in_flight
                .by_key
                .entry(id.clone())
                .or_default()
                .push_back(Before {
                    batch: batch_no,
                    stored,
                });
            keys.push(id);
        }
        let shared = self.shared.clone();
        // Enqueued under the lock so that the disk applies batches in the order memory did.
        let refused = self.engine.submit_with(
            ops,
            Box::new(move |outcome| {
                shared.settle(batch_no, &keys, outcome.is_err());
                sender.resolve(outcome);
            }),
        );
        drop(in_flight);
        if let Err(done) = refused {
            // The writer is gone: roll back like any failed write (the lock is released, the
            // callback takes it).
            done(Err(StorageError::Closed));
        }
        commit
    }

    fn get(&self, id: &ChildId) -> Option<Row> {
        self.shared.memory.get(id)
    }

    fn export_all(&self) -> Vec<Row> {
        self.shared.memory.export_all()
    }

    fn len(&self) -> usize {
        self.shared.memory.len()
    }

    fn expired_ids(&self) -> Vec<ChildId> {
        self.shared.memory.expired_now()
    }

    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        self.shared.memory.for_each_row(f)
    }

    fn for_each_placement(&self, f: &mut dyn FnMut(super::Placement<'_>)) {
        self.shared.memory.for_each_placement(f)
    }

    fn page_after(&self, after: Option<&ChildId>, limit: usize) -> Vec<Row> {
        self.shared.memory.page_after(after, limit)
    }

    fn contains(&self, id: &ChildId) -> bool {
        self.shared.memory.contains(id)
    }

    fn counts(&self) -> Option<super::RegistryCounts> {
        Some(self.shared.memory.counts_now())
    }

    fn binding_digest(&self, node: &str) -> Option<crate::core::sync_digest::BindingDigest> {
        Some(self.shared.memory.digest_of(node))
    }

    fn rows_bound_to(&self, node: &str) -> Vec<Row> {
        self.shared.memory.rows_on(node)
    }

    fn rows_where(&self, wanted: &mut dyn FnMut(super::Placement<'_>) -> bool) -> Vec<Row> {
        self.shared.memory.rows_where(wanted)
    }

    fn generation(&self) -> Option<u64> {
        self.shared.memory.generation()
    }

    fn bound_nodes(&self, id: &ChildId) -> Option<Vec<crate::model::NodeName>> {
        self.shared.memory.bound_nodes(id)
    }

    fn each_bound_node(&self, id: &ChildId, each: &mut dyn FnMut(&str)) -> bool {
        self.shared.memory.each_bound_node(id, each)
    }

    fn version_and_bindings(
        &self,
        id: &ChildId,
    ) -> Option<(u64, Vec<(crate::model::NodeName, crate::model::Pid)>)> {
        self.shared.memory.version_and_bindings(id)
    }

    fn version(&self, id: &ChildId) -> Option<u64> {
        self.shared.memory.version(id)
    }

    fn is_durable(&self, id: &ChildId) -> bool {
        self.shared.memory.is_durable(id)
    }
}

enum Write {
    Put(StoredRow),
    Remove(ChildId),
    Clear,
}
