//! Registry storage: where a node keeps its copy of the registry.
//!
//! One trait, several backends (docs/storage.md):
//! - [`MemoryStorage`] (default): concurrent reads that never wait on writers, like ETS;
//!   nothing survives a restart.
//! - [`LmdbStorage`] (`lmdb`): on disk only; reads are LMDB lookups.
//! - [`DurableStorage`] (`durable`): reads from memory, every
//!   write mirrored to the same LMDB file before it is acknowledged.
//! - any type implementing [`Storage`], whose mutations may fail.
//!
//! Every mutation returns a [`Commit`] that resolves once the write is as durable as the backend
//! promises: for disk backends an `Ok` means fsync'd. Submitting is ordered (two submissions from
//! one caller apply in submission order), waiting is separate, so a single-writer actor can keep
//! many writes in flight and let the backend batch them into one fsync.

mod commit;
pub mod custom;
mod data_dir_lock;
mod declared_on_disk;
pub mod declared_store;
mod durable;
pub(crate) mod engine;
mod error;
mod lmdb;
mod memory;
mod packed_read;
mod packed_row;
mod registry_file;
mod row_counts;
#[cfg(feature = "sim")]
mod simulated_disk;
#[cfg(feature = "sim")]
mod simulated_registry;
pub(crate) mod write_fault;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::sync_digest::BindingDigest;
use crate::model::{ChildId, NodeName, Pid, Row};

pub use crate::config::registry_backend::BackendConfig;
pub use commit::{Commit, CommitSender};
pub use custom::{CustomBackend, StorageFactory};
pub use data_dir_lock::{DataDirLock, DataDirLockError, DATA_DIR_LOCK_FILE};
pub use durable::DurableStorage;
pub use engine::{CommitMode, CommitStats, DiskOptions, FileIdentity};
pub use error::{StorageError, WriteFault};
pub use lmdb::LmdbStorage;
pub use memory::MemoryStorage;
pub use registry_file::{REGISTRY_FILE, REGISTRY_FORMAT_VERSION};
pub use row_counts::RegistryCounts;
#[cfg(feature = "sim")]
pub use simulated_disk::SimulatedDisk;
#[cfg(feature = "sim")]
pub use simulated_registry::SimulatedDurableStorage;

/// A row as stored, with its optional expiry (wall-clock ms since the Unix epoch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRow {
    /// The row.
    pub row: Row,
    /// When the row stops being visible; `None` for never.
    pub expires_at_ms: Option<u64>,
}

impl StoredRow {
    /// Whether the row is still visible at `now_ms`.
    pub fn is_live(&self, now_ms: u64) -> bool {
        unexpired(self.expires_at_ms, || now_ms)
    }
}

/// The one rule of expiry, for every read of a row: visible until the millisecond it expires
/// at. The clock (`now_ms`) is read only for a row that can expire.
pub(crate) fn unexpired(expires_at_ms: Option<u64>, now_ms: impl FnOnce() -> u64) -> bool {
    expires_at_ms.is_none_or(|at| at > now_ms())
}

/// One change to the registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Insert or replace the row with the row's id; with a TTL it disappears from reads after it.
    Put {
        /// The row.
        row: Row,
        /// How long the row stays visible; `None` for always.
        ttl: Option<Duration>,
    },
    /// Remove the row with this id (a no-op when absent).
    Remove(ChildId),
    /// Remove every row.
    Clear,
}

impl Mutation {
    /// A put without TTL.
    pub fn put(row: Row) -> Self {
        Mutation::Put { row, ttl: None }
    }
}

/// Wall-clock milliseconds since the Unix epoch (TTL expiry and diagnostics only), for the
/// backends that keep no [`Clock`](crate::clock::Clock) of their own.
pub fn now_ms() -> u64 {
    crate::clock::Clock::system().now_ms()
}

/// Where a node keeps its registry copy.
///
/// Implementations must make reads safe to call from any thread at any time, and must apply the
/// batches of successive `submit` calls in call order.
pub trait Storage: Send + Sync + 'static {
    /// A short name for logs and benchmarks (`memory`, `lmdb`, `durable`, ...).
    fn name(&self) -> &'static str;

    /// Names the hub and node that use this store, for the metrics it records itself (the
    /// on-disk stores' commit time and writes per commit carry `hub` and `node` like every
    /// other series): a store is opened before its hub knows the node's name, so the hub calls
    /// this when it spawns. The default, for a store that records no metrics, does nothing.
    fn label_metrics(&self, hub: &str, node: &str) {
        let _ = (hub, node);
    }

    /// Why the store cannot take writes right now, checked without writing (its file was
    /// removed or replaced under it); `None` when nothing is known to be wrong. Health reports
    /// it. The default knows of nothing.
    fn fault(&self) -> Option<String> {
        None
    }

    /// A write that changes nothing the store holds but reaches the disk like any other, in
    /// order after every earlier submission: while writes fail, the hub probes with it to tell
    /// when the disk takes writes again (health turns back to `ok`) even when no request comes.
    /// The default, for backends whose writes cannot fail, answers `Ok` at once.
    fn probe(&self) -> Commit {
        Commit::ready(Ok(()))
    }

    /// Applies `batch` atomically, in order after every earlier submission. The returned
    /// [`Commit`] resolves to `Ok` once the batch is as durable as the backend promises, or to
    /// the error that kept it from being applied (then none of it is visible).
    fn submit(&self, batch: Vec<Mutation>) -> Commit;

    /// Whether `submit` applies the batch before it returns and never fails it: a read right
    /// after `submit` sees the batch, and its [`Commit`] is ready with `Ok`. The registry then
    /// applies a write turn's mutations as it plans them instead of keeping a copy of each
    /// row until the turn commits (one row copy less per write, on every node). The default,
    /// `false`, is right for any backend that writes to a disk or can refuse a write.
    fn applies_on_submit(&self) -> bool {
        false
    }

    /// The rows' counts, kept up to date on write ([`RegistryCounts`]): what the registry
    /// summary and a node's figures read without a pass over every row. `None` (the default)
    /// for a backend that keeps none; the readers then count by a pass.
    fn counts(&self) -> Option<RegistryCounts> {
        None
    }

    /// The digest of the bindings this store holds on `node`, kept up to date on write
    /// ([`crate::core::sync_digest`]): the periodic sync sends this node's own instead of its
    /// rows, and compares a peer's with its own of the peer. `None` (the default) for a
    /// backend that keeps none: its node sends and asks for full syncs, as before digests.
    fn binding_digest(&self, node: &str) -> Option<BindingDigest> {
        let _ = node;
        None
    }

    /// Every live row bound on `node`, in no particular order: what a full sync sends, and
    /// what a peer's full sync or a reap unbinds. The default reads the placements and then
    /// each row bound there; a backend that can unpack the rows in the same pass does.
    fn rows_bound_to(&self, node: &str) -> Vec<Row> {
        self.rows_where(&mut |p| p.nodes.iter().any(|(n, _)| *n == node))
    }

    /// Every live row whose placement `wanted` accepts, in no particular order: a pass that
    /// reads whole only the rows that can matter to it (a redistribution, a reap). The default
    /// reads the placements and then each accepted row; a backend that can unpack the rows in
    /// the same walk does, without looking each one up again.
    fn rows_where(&self, wanted: &mut dyn FnMut(Placement<'_>) -> bool) -> Vec<Row> {
        let mut ids = Vec::new();
        self.for_each_placement(&mut |p| {
            if wanted(p) {
                ids.push(p.id.clone());
            }
        });
        ids.iter().filter_map(|id| self.get(id)).collect()
    }

    /// A number that changes with every write the store applies: a reader that read it before
    /// and after reading the rows, and reads it again later, knows whether the rows it read are
    /// still what the store holds (`core::read_ahead`). `None` for a store that keeps none.
    fn generation(&self) -> Option<u64> {
        None
    }

    /// The live row with this id.
    fn get(&self, id: &ChildId) -> Option<Row>;

    /// Every live row, in id order: every node walks its copy alike, so the passes and syncs
    /// built from it do not depend on a hash map's layout.
    fn export_all(&self) -> Vec<Row>;

    /// The ids of the rows stored but expired, in no particular order. An expired row stays
    /// stored until it is removed, and it reads as live again if the wall clock is set back
    /// past its expiry: a node's boot removes them ([`crate::core::boot_rows`]), so that a
    /// stub swept by its TTL in a previous run cannot come back. Empty for a store that keeps
    /// no expired rows.
    fn expired_ids(&self) -> Vec<ChildId> {
        Vec::new()
    }

    /// The number of live rows.
    fn len(&self) -> usize {
        self.export_all().len()
    }

    /// Whether there are no live rows.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a live row with this id exists.
    fn contains(&self, id: &ChildId) -> bool {
        self.get(id).is_some()
    }

    /// The nodes the live row with this id is bound to (`None`: no live row, an empty list: a
    /// row nothing runs). What a stop needs to route each child, without reading its spec,
    /// arguments and metadata: a store that keeps rows packed answers from the bindings alone.
    fn bound_nodes(&self, id: &ChildId) -> Option<Vec<NodeName>> {
        self.get(id).map(|row| row.node_pids.into_keys().collect())
    }

    /// Calls `each` with every node the live row with this id is bound to, in the row's
    /// order, and answers whether there is such a row: [`Self::bound_nodes`] without a copy of
    /// any name, for the reads that look at the names once (a stop routes each child by them,
    /// then unbinds it). `each` runs while the store holds the row (a read lock of its shard in
    /// memory), so it must not read or write the store.
    fn each_bound_node(&self, id: &ChildId, each: &mut dyn FnMut(&str)) -> bool {
        match self.bound_nodes(id) {
            Some(nodes) => {
                nodes.iter().for_each(|node| each(node));
                true
            }
            None => false,
        }
    }

    /// The authored version and the bindings of the live row with this id: what a new version
    /// of a row written over it keeps, read without its spec, arguments and metadata by a store
    /// that keeps rows packed (a re-placement writes over a row of a node gone).
    fn version_and_bindings(&self, id: &ChildId) -> Option<(u64, Vec<(NodeName, Pid)>)> {
        self.get(id)
            .map(|row| (row.hub.epoch, row.node_pids.into_iter().collect()))
    }

    /// The authored version of the live row with this id: what decides whether a peer's upsert
    /// outranks it, read without unpacking the row by a store that keeps rows packed.
    fn version(&self, id: &ChildId) -> Option<u64> {
        self.get(id).map(|row| row.hub.epoch)
    }

    /// Whether the live row with this id is declared (durable): what a start of a child with a
    /// row keeps, read without unpacking the row by a store that keeps rows packed.
    fn is_durable(&self, id: &ChildId) -> bool {
        self.get(id).is_some_and(|row| row.hub.durable)
    }

    /// Applies a batch and blocks until it is durable.
    fn apply(&self, batch: Vec<Mutation>) -> Result<(), StorageError> {
        self.submit(batch).wait()
    }

    /// Inserts or replaces one row and blocks until it is durable.
    fn insert(&self, row: Row) -> Result<(), StorageError> {
        self.apply(vec![Mutation::put(row)])
    }

    /// Removes one row and blocks until the removal is durable.
    fn remove(&self, id: &ChildId) -> Result<(), StorageError> {
        self.apply(vec![Mutation::Remove(id.clone())])
    }

    /// Removes every row and blocks until that is durable.
    fn clear_all(&self) -> Result<(), StorageError> {
        self.apply(vec![Mutation::Clear])
    }

    /// Calls `f` with every live row (order unspecified), without copying the registry when
    /// the backend can avoid it: for counts and summaries polled often (the admin API's
    /// `GET /v1/registry/summary`), where [`Storage::export_all`] would clone every row.
    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        for row in self.export_all() {
            f(&row);
        }
    }

    /// Calls `f` with where every live row runs (order unspecified): what counts, summaries and
    /// metrics read, polled often over the whole registry. A backend that keeps rows packed
    /// answers it without unpacking them whole; the default goes through
    /// [`Storage::for_each_row`].
    fn for_each_placement(&self, f: &mut dyn FnMut(Placement<'_>)) {
        self.for_each_row(&mut |row| {
            let nodes: Vec<(&str, Pid)> = row
                .node_pids
                .iter()
                .map(|(n, p)| (n.as_str(), *p))
                .collect();
            f(Placement {
                id: &row.spec.id,
                kind: &row.spec.kind,
                nodes: &nodes,
            });
        });
    }

    /// The live rows with the `limit` smallest ids after `after` (all of them from the start
    /// for `None`), in id order, plus the next one if any: a page of the registry without
    /// copying the rest of it.
    fn page_after(&self, after: Option<&ChildId>, limit: usize) -> Vec<Row> {
        let mut ids = PageIds::new(after, limit);
        self.for_each_placement(&mut |p| ids.offer(p.id));
        ids.into_ids()
            .iter()
            .filter_map(|id| self.get(id))
            .collect()
    }
}

/// Where one row's child runs, borrowed from the store for [`Storage::for_each_placement`].
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// The child.
    pub id: &'a ChildId,
    /// Its kind.
    pub kind: &'a str,
    /// The nodes it is bound to, with its pid on each (the row's `node_pids`, in name order).
    pub nodes: &'a [(&'a str, Pid)],
}

/// The `limit + 1` smallest ids after a cursor, picked from ids offered in any order.
pub(crate) struct PageIds<'a> {
    after: Option<&'a ChildId>,
    limit: usize,
    kept: std::collections::BTreeSet<ChildId>,
}

impl<'a> PageIds<'a> {
    pub(crate) fn new(after: Option<&'a ChildId>, limit: usize) -> Self {
        Self {
            after,
            limit,
            kept: std::collections::BTreeSet::new(),
        }
    }

    pub(crate) fn offer(&mut self, id: &ChildId) {
        if self.after.is_some_and(|after| id <= after) {
            return;
        }
        if self.kept.len() > self.limit && self.kept.last().is_some_and(|last| id >= last) {
            return;
        }
        self.kept.insert(id.clone());
        if self.kept.len() > self.limit + 1 {
            self.kept.pop_last();
        }
    }

    pub(crate) fn into_ids(self) -> Vec<ChildId> {
        self.kept.into_iter().collect()
    }
}

/// Opens the configured backend for `hub_id`, with default [`DiskOptions`] for disk backends.
///
/// Disk backends keep their registry in `<store dir>/registry.lmdb` (see
/// [`BackendConfig::disk_path`]); `lmdb` and `durable` share that file, so switching between
/// them keeps the data.
pub fn open_backend(
    config: &BackendConfig,
    data_dir: &Path,
    hub_id: &str,
) -> Result<Arc<dyn Storage>, StorageError> {
    open_backend_with(config, data_dir, hub_id, &DiskOptions::default())
}

/// Opens the configured backend for `hub_id` with explicit disk options (map size, commit
/// mode); the memory backend ignores them.
pub fn open_backend_with(
    config: &BackendConfig,
    data_dir: &Path,
    hub_id: &str,
    options: &DiskOptions,
) -> Result<Arc<dyn Storage>, StorageError> {
    let dir = config.disk_path(data_dir, hub_id);
    match (config, dir) {
        (BackendConfig::Lmdb { .. }, Some(dir)) => Ok(Arc::new(LmdbStorage::open(&dir, options)?)),
        (BackendConfig::Durable { .. }, Some(dir)) => {
            Ok(Arc::new(DurableStorage::open(&dir, options)?))
        }
        (BackendConfig::Custom { name, .. }, _) => Err(StorageError::Backend(format!(
            "registry backend {name:?} is a custom one: register its factory with HubBuilder::storage_backend"
        ))),
        _ => Ok(Arc::new(MemoryStorage::new())),
    }
}

impl crate::types::ChildStartError {
    /// The error of a start whose registry write failed: a full disk is told apart, because
    /// the caller may simply try again once space returns.
    pub fn of_storage(e: &StorageError) -> Self {
        let message = e.to_string();
        if e.is_no_space() {
            Self::InsufficientStorage { message }
        } else {
            Self::Storage { message }
        }
    }
}

impl crate::types::ChildStopError {
    /// The error of a stop whose registry write failed (a full disk told apart).
    pub fn of_storage(e: &StorageError) -> Self {
        let message = e.to_string();
        if e.is_no_space() {
            Self::InsufficientStorage { message }
        } else {
            Self::Storage { message }
        }
    }
}
