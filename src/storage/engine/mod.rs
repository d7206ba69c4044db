//! A small durable key-value engine on LMDB, shared by every store the hub keeps on disk.
//!
//! The registry is one store; the declared list will be another, in its own file beside it. Both
//! need the same things, so they live here once, at the level of bytes:
//! - one LMDB environment per file (`NO_SUB_DIR`: `<dir>/<file>` plus LMDB's `<dir>/<file>-lock`),
//!   with two named databases: `meta` (the marker, see [`format`]) and `data` (the entries);
//! - writes through [`group_commit`]: one writer thread, one transaction and fsync per group of
//!   queued batches, every waiter answered only after its batch is on disk;
//! - reads in short read transactions from any thread (no thread-local reader slots, so any
//!   number of runtime threads may read);
//! - on open, the marker check (newer format refuses to open) and corruption handling (an
//!   unreadable file is rotated to `<file>.corrupt-<stamp>`, logged at ERROR, and replaced by an
//!   empty store). A file is read with plain reads before it is mapped ([`preflight`]): a
//!   truncated file would otherwise kill the process with `SIGBUS`.
//!
//! Nothing here answers a write before it is synced: every commit uses LMDB's default, fully
//! synchronous flags (`NO_SYNC`, `NO_META_SYNC`, `MAP_ASYNC` and `WRITE_MAP` are never used), so
//! a commit has synced its data pages and then its meta page when it returns.

pub(crate) mod format;
mod group_commit;
mod identity;
mod preflight;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};
use serde::{Deserialize, Serialize};

pub use group_commit::CommitStats;
pub(crate) use group_commit::Done;
use group_commit::{GroupCommitter, GroupFailure, GroupSink};
pub use identity::FileIdentity;

use super::{Commit, StorageError, WriteFault};
use format::MarkerCheck;

/// How a disk store is opened: its map size and how it commits.
///
/// Deserializes with defaults for missing fields, so a config file may set only `map_size`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiskOptions {
    /// The size the store's memory map starts at, in bytes. LMDB maps are sparse, so a large
    /// value costs address space, not disk. A write that does not fit doubles the map (up to
    /// `max_map_size`) and is retried, so a full map is never a lasting state. Rounded up to a
    /// multiple of the page size. Default 1 GiB.
    pub map_size: usize,
    /// The largest the map may grow to; `None` (default) grows it as far as the address space
    /// allows. A write that does not fit even then fails with [`StorageError::Write`] and the
    /// store stays usable for writes that fit.
    pub max_map_size: Option<usize>,
    /// How writes are committed. Default [`CommitMode::Group`].
    pub commit_mode: CommitMode,
}

impl Default for DiskOptions {
    fn default() -> Self {
        Self {
            map_size: 1 << 30,
            max_map_size: None,
            commit_mode: CommitMode::Group,
        }
    }
}

/// How a disk store turns submitted batches into fsyncs. Both modes answer `Ok` only once the
/// batch is on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitMode {
    /// Concurrent batches share one transaction and fsync (default).
    #[default]
    Group,
    /// Every batch gets its own transaction and fsync: Elixir's ProcessHub's profile, kept as the
    /// baseline of the storage benchmark.
    PerOperation,
}

/// What one store is: its file name in the store directory, the kind written in its marker, and
/// the newest format version this release writes and reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StoreSpec {
    pub file_name: &'static str,
    pub kind: &'static str,
    pub format_version: u32,
}

/// One change at the byte level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KvOp {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete(Vec<u8>),
    Clear,
    /// Rewrites the store's format marker as it is: a write that changes nothing, to learn
    /// whether the disk takes writes again (a probe while writes fail).
    Touch,
}

/// Checks one stored entry on open; an `Err` marks the store corrupt.
pub(crate) type Validate<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> Result<(), String>;

type Db = Database<Bytes, Bytes>;

/// An open store. Dropping it finishes queued writes, stops the writer thread and closes the
/// file, so the same path can be opened again right after.
pub(crate) struct Engine {
    // Field order is drop order: the writer (which holds an `Env` clone) goes first, so the
    // environment really closes when the engine is dropped.
    writer: GroupCommitter<Vec<KvOp>>,
    env: Env<WithoutTls>,
    data: Db,
    path: PathBuf,
    /// What the store holds (`registry`, `declared`): the `store` label of its metrics.
    kind: &'static str,
    identity: Arc<FileIdentity>,
    /// Read transactions hold it shared; the writer takes it exclusively to grow the map, which
    /// LMDB allows only while no transaction of the process is open.
    resizing: Arc<RwLock<()>>,
}

/// Why an open attempt failed: a corrupt file is rotated, anything else is reported.
enum OpenFailure {
    Corrupt(String),
    Fatal(StorageError),
}

impl Engine {
    /// Opens (or creates) the store `spec.file_name` in `dir`, rotating it aside if it is
    /// corrupt. `validate` sees every entry once; an entry it rejects marks the store corrupt.
    pub(crate) fn open(
        dir: &Path,
        spec: StoreSpec,
        options: &DiskOptions,
        validate: Validate<'_>,
    ) -> Result<Self, StorageError> {
        let path = dir.join(spec.file_name);
        std::fs::create_dir_all(dir).map_err(|e| StorageError::Open {
            path: path.clone(),
            message: format!("cannot create directory {}: {e}", dir.display()),
        })?;
        match Self::try_open(&path, spec, options, validate) {
            Ok(engine) => Ok(engine),
            Err(OpenFailure::Fatal(error)) => Err(error),
            Err(OpenFailure::Corrupt(reason)) => {
                let rotated = format::rotate_aside(&path).map_err(|e| StorageError::Open {
                    path: path.clone(),
                    message: format!("store is corrupt ({reason}) and cannot be moved aside: {e}"),
                })?;
                tracing::error!(
                    path = %path.display(),
                    rotated_to = %rotated.display(),
                    %reason,
                    "corrupt store moved aside; starting with an empty one"
                );
                let mut accept_all = |_: &[u8], _: &[u8]| Ok(());
                Self::try_open(&path, spec, options, &mut accept_all).map_err(|f| match f {
                    OpenFailure::Fatal(e) => e,
                    OpenFailure::Corrupt(reason) => StorageError::Open {
                        path: path.clone(),
                        message: format!("fresh store is unreadable: {reason}"),
                    },
                })
            }
        }
    }

    fn try_open(
        path: &Path,
        spec: StoreSpec,
        options: &DiskOptions,
        validate: Validate<'_>,
    ) -> Result<Self, OpenFailure> {
        let fatal = |message: String| {
            OpenFailure::Fatal(StorageError::Open {
                path: path.to_owned(),
                message,
            })
        };
        // A file LMDB would map but not hold (truncated) kills the process with SIGBUS on the
        // first read of a missing page: it is judged before the map exists.
        match preflight::check(path) {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err(OpenFailure::Corrupt(reason)),
            Err(e) => return Err(fatal(format!("cannot read the store file: {e}"))),
        }
        let env = open_env(path, options).map_err(|e| classify(e, &fatal))?;
        let (meta, data) = prepare(&env, path, spec)?;
        {
            let rtxn = env.read_txn().map_err(|e| classify(e, &fatal))?;
            let iter = data.iter(&rtxn).map_err(|e| classify(e, &fatal))?;
            for entry in iter {
                let (key, value) = entry.map_err(|e| classify(e, &fatal))?;
                validate(key, value).map_err(OpenFailure::Corrupt)?;
            }
        }
        let identity = Arc::new(
            FileIdentity::of(path)
                .map_err(|e| fatal(format!("cannot stat the opened store: {e}")))?,
        );
        let resizing = Arc::new(RwLock::new(()));
        let max_group = match options.commit_mode {
            CommitMode::Group => 4096,
            CommitMode::PerOperation => 1,
        };
        let sink = LmdbSink {
            env: env.clone(),
            meta,
            data,
            path: path.to_owned(),
            identity: identity.clone(),
            resizing: resizing.clone(),
            max_map_size: options.max_map_size,
        };
        let writer = GroupCommitter::spawn(format!("ph-writer-{}", spec.kind), sink, max_group)
            .map_err(|e| fatal(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            writer,
            env,
            data,
            path: path.to_owned(),
            kind: spec.kind,
            identity,
            resizing,
        })
    }

    /// The identity of the store's file as opened, to check whether its path still leads there.
    pub(crate) fn identity(&self) -> Arc<FileIdentity> {
        self.identity.clone()
    }

    /// The store's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Enqueues a batch; `done` runs on the store's notifier thread, in submission order, once
    /// the batch is on disk or has failed (then nothing of it was written). If the store is
    /// closed, `done` is handed back uncalled.
    pub(crate) fn submit_with(&self, ops: Vec<KvOp>, done: Done) -> Result<(), Done> {
        self.writer.submit(ops, done)
    }

    /// Enqueues a batch and returns the commit that resolves once it is on disk.
    pub(crate) fn submit(&self, ops: Vec<KvOp>) -> Commit {
        let (sender, commit) = Commit::pending();
        if let Err(done) = self.submit_with(ops, Box::new(move |outcome| sender.resolve(outcome))) {
            done(Err(StorageError::Closed));
        }
        commit
    }

    /// Reads one entry and maps it while the read transaction is open.
    pub(crate) fn get<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, StorageError> {
        let _no_resize = self.resizing.read().unwrap_or_else(|e| e.into_inner());
        let rtxn = self.env.read_txn().map_err(|e| self.read_error(e))?;
        let value = self.data.get(&rtxn, key).map_err(|e| self.read_error(e))?;
        Ok(value.map(f))
    }

    /// Visits every entry in key order within one read transaction (a consistent snapshot).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) -> Result<(), StorageError> {
        let _no_resize = self.resizing.read().unwrap_or_else(|e| e.into_inner());
        let rtxn = self.env.read_txn().map_err(|e| self.read_error(e))?;
        for entry in self.data.iter(&rtxn).map_err(|e| self.read_error(e))? {
            let (key, value) = entry.map_err(|e| self.read_error(e))?;
            f(key, value);
        }
        Ok(())
    }

    /// Names the hub and node whose metrics this store's commits are recorded in.
    pub(crate) fn label_metrics(&self, hub: &str, node: &str) {
        self.writer.label_metrics(hub, node, self.kind);
    }

    /// What the writer has committed so far.
    pub(crate) fn stats(&self) -> CommitStats {
        self.writer.stats()
    }

    fn read_error(&self, e: heed::Error) -> StorageError {
        StorageError::Backend(format!("read from {} failed: {e}", self.path.display()))
    }
}

fn open_env(path: &Path, options: &DiskOptions) -> heed::Result<Env<WithoutTls>> {
    let page = page_size();
    let map_size = options.map_size.max(page).div_ceil(page) * page;
    let mut builder = EnvOpenOptions::new().read_txn_without_tls();
    builder.map_size(map_size).max_dbs(4).max_readers(1024);
    // SAFETY: NO_SUB_DIR only changes the file layout (a file instead of a directory); every
    // other flag stays LMDB's synchronous default. The memory map is only touched through heed,
    // and the files are only modified through LMDB.
    unsafe {
        builder.flags(EnvFlags::NO_SUB_DIR);
        builder.open(path)
    }
}

/// Checks the marker and opens the `meta` and `data` databases, creating both in a fresh store.
fn prepare(env: &Env<WithoutTls>, path: &Path, spec: StoreSpec) -> Result<(Db, Db), OpenFailure> {
    let fatal = |message: String| {
        OpenFailure::Fatal(StorageError::Open {
            path: path.to_owned(),
            message,
        })
    };
    let mut wtxn = env.write_txn().map_err(|e| classify(e, &fatal))?;
    let meta: Option<Db> = env
        .open_database(&wtxn, Some(format::META_DB))
        .map_err(|e| classify(e, &fatal))?;
    let data: Option<Db> = env
        .open_database(&wtxn, Some(format::DATA_DB))
        .map_err(|e| classify(e, &fatal))?;
    let (meta, data) = match (meta, data) {
        (Some(meta), data) => {
            let version = meta
                .get(&wtxn, format::FORMAT_KEY)
                .map_err(|e| classify(e, &fatal))?;
            let kind = meta
                .get(&wtxn, format::KIND_KEY)
                .map_err(|e| classify(e, &fatal))?;
            match format::check_marker(version, kind, spec.kind, spec.format_version) {
                MarkerCheck::Supported => {}
                MarkerCheck::Newer { found } => {
                    return Err(OpenFailure::Fatal(StorageError::NewerFormat {
                        path: path.to_owned(),
                        found,
                        supported: spec.format_version,
                    }))
                }
                MarkerCheck::OtherKind { found } => {
                    return Err(fatal(format!(
                        "the file holds a {found} store, not a {} store",
                        spec.kind
                    )))
                }
                MarkerCheck::Garbled => {
                    return Err(OpenFailure::Corrupt("format marker is garbled".into()))
                }
            }
            let data = match data {
                Some(data) => data,
                None => env
                    .create_database(&mut wtxn, Some(format::DATA_DB))
                    .map_err(|e| classify(e, &fatal))?,
            };
            (meta, data)
        }
        (None, Some(_)) => return Err(OpenFailure::Corrupt("format marker is missing".into())),
        (None, None) => {
            let meta: Db = env
                .create_database(&mut wtxn, Some(format::META_DB))
                .map_err(|e| classify(e, &fatal))?;
            let version = format::encode_version(spec.format_version);
            meta.put(&mut wtxn, format::FORMAT_KEY, &version)
                .and_then(|()| meta.put(&mut wtxn, format::KIND_KEY, spec.kind.as_bytes()))
                .map_err(|e| classify(e, &fatal))?;
            let data = env
                .create_database(&mut wtxn, Some(format::DATA_DB))
                .map_err(|e| classify(e, &fatal))?;
            (meta, data)
        }
    };
    wtxn.commit().map_err(|e| classify(e, &fatal))?;
    Ok((meta, data))
}

/// Sorts an LMDB error met while opening: damage to the file is corruption (rotate it), anything
/// else (permissions, a full disk, the store already open in this process) is reported as is,
/// because rotating a healthy store would throw its data away.
fn classify(e: heed::Error, fatal: &impl Fn(String) -> OpenFailure) -> OpenFailure {
    use heed::MdbError as M;
    match &e {
        heed::Error::Mdb(
            M::Invalid | M::Corrupted | M::PageNotFound | M::VersionMismatch | M::Incompatible,
        )
        | heed::Error::Decoding(_) => OpenFailure::Corrupt(e.to_string()),
        _ => fatal(e.to_string()),
    }
}

fn page_size() -> usize {
    // LMDB requires the map size to be a multiple of the OS page size; 64 KiB is a multiple of
    // every common page size (4 KiB, 16 KiB, 64 KiB).
    64 * 1024
}

/// The writer thread's side of the store: applies groups of batches in one write transaction.
struct LmdbSink {
    env: Env<WithoutTls>,
    meta: Db,
    data: Db,
    path: PathBuf,
    identity: Arc<FileIdentity>,
    resizing: Arc<RwLock<()>>,
    max_map_size: Option<usize>,
}

/// Why one attempt at a group failed.
enum Attempt {
    /// The map is full: grow it and try again.
    MapFull(GroupFailure),
    Failed(GroupFailure),
}

impl LmdbSink {
    fn write_error(&self, e: heed::Error) -> StorageError {
        let fault = match &e {
            heed::Error::Io(io) => WriteFault::of_os_error(io),
            _ => WriteFault::Io,
        };
        StorageError::Write {
            path: self.path.clone(),
            message: e.to_string(),
            fault,
        }
    }

    fn attempt(&self, batches: &[&Vec<KvOp>]) -> Result<(), Attempt> {
        let failed = |e: heed::Error, wrap: &dyn Fn(StorageError) -> GroupFailure| {
            let full = matches!(e, heed::Error::Mdb(heed::MdbError::MapFull));
            let failure = wrap(self.write_error(e));
            if full {
                Attempt::MapFull(failure)
            } else {
                Attempt::Failed(failure)
            }
        };
        let mut wtxn = self
            .env
            .write_txn()
            .map_err(|e| failed(e, &GroupFailure::Commit))?;
        for (index, batch) in batches.iter().enumerate() {
            for op in batch.iter() {
                let applied = match op {
                    KvOp::Put { key, value } => self.data.put(&mut wtxn, key, value),
                    KvOp::Delete(key) => self.data.delete(&mut wtxn, key).map(|_| ()),
                    KvOp::Clear => self.data.clear(&mut wtxn),
                    KvOp::Touch => self.touch(&mut wtxn),
                };
                if let Err(e) = applied {
                    // Dropping the transaction aborts it: nothing of the group is written.
                    return Err(failed(e, &|error| GroupFailure::Apply { index, error }));
                }
            }
        }
        wtxn.commit().map_err(|e| failed(e, &GroupFailure::Commit))
    }

    /// Puts the format marker back unchanged: LMDB copies the page it sits on, so the commit
    /// writes and syncs pages like any other, without changing what the store holds.
    fn touch(&self, wtxn: &mut heed::RwTxn<'_>) -> heed::Result<()> {
        let current = self.meta.get(wtxn, format::FORMAT_KEY)?.map(<[u8]>::to_vec);
        match current {
            Some(version) => self.meta.put(wtxn, format::FORMAT_KEY, &version),
            None => Ok(()),
        }
    }

    /// Doubles the map, if the bound allows; `false` when it cannot grow.
    fn grow(&self) -> bool {
        let current = self.env.info().map_size;
        let Some(doubled) = current.checked_mul(2) else {
            return false;
        };
        let target = match self.max_map_size {
            Some(max) if current >= max => return false,
            Some(max) => doubled.min(max.div_ceil(page_size()) * page_size()),
            None => doubled,
        };
        // No read transaction may be open while LMDB remaps; the writer has none open here.
        let _exclusive = self.resizing.write().unwrap_or_else(|e| e.into_inner());
        // SAFETY: no transaction of this environment is active: the writer's was dropped before
        // this call and every reader holds `resizing` shared for its transaction's lifetime.
        match unsafe { self.env.resize(target) } {
            Ok(()) => {
                tracing::info!(path = %self.path.display(), from = current, to = target,
                    "store map full: map grown");
                true
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "store map cannot grow");
                false
            }
        }
    }
}

impl GroupSink for LmdbSink {
    type Batch = Vec<KvOp>;

    fn write_group(&mut self, batches: &[&Vec<KvOp>]) -> Result<(), GroupFailure> {
        // Checked before every commit, so no write is acknowledged into a removed file.
        if let Err(message) = self.identity.check() {
            return Err(GroupFailure::Commit(StorageError::Write {
                path: self.path.clone(),
                message,
                fault: WriteFault::Gone,
            }));
        }
        loop {
            match self.attempt(batches) {
                Ok(()) => return Ok(()),
                Err(Attempt::Failed(failure)) => return Err(failure),
                Err(Attempt::MapFull(failure)) => {
                    if !self.grow() {
                        return Err(failure);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
