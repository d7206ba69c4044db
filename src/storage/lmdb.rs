//! The `lmdb` backend: the registry lives on disk only.
//!
//! Reads open a short LMDB read transaction (a memory-mapped B-tree lookup, no copy of the
//! registry in RAM); writes go through group commit and answer `Ok` only once fsync'd. Pick it
//! when writes dominate and RAM is constrained.

use std::path::Path;

use super::engine::{CommitStats, DiskOptions, Engine, KvOp};
use super::registry_file::{decode, encode_batch, open_registry};
use super::{now_ms, Commit, Mutation, Storage, StorageError, StoredRow};
use crate::model::{ChildId, Row};

/// Registry storage on disk (LMDB), every `Ok` fsync'd.
pub struct LmdbStorage {
    engine: Engine,
}

impl LmdbStorage {
    /// Opens (or creates) the registry in the store directory `dir` (file
    /// `dir/registry.lmdb`).
    ///
    /// A corrupt file is moved to `registry.lmdb.corrupt-<stamp>`, logged at ERROR, and an empty
    /// registry is opened in its place. Fails with [`StorageError::NewerFormat`] if a newer
    /// release wrote the file, and with [`StorageError::Open`] if it cannot be opened for any
    /// other reason (permissions, already open in this process).
    pub fn open(dir: &Path, options: &DiskOptions) -> Result<Self, StorageError> {
        Ok(Self {
            engine: open_registry(dir, options)?,
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

    fn live_rows(&self, mut f: impl FnMut(StoredRow)) {
        let now = now_ms();
        let scanned = self.engine.for_each(|key, value| match decode(value) {
            Ok(stored) if stored.is_live(now) => f(stored),
            Ok(_) => {}
            Err(e) => undecodable(self.engine.path(), key, &e),
        });
        if let Err(e) = scanned {
            tracing::error!(error = %e, "registry scan failed");
        }
    }
}

fn undecodable(path: &Path, key: &[u8], e: &bincode::Error) {
    tracing::error!(
        path = %path.display(),
        key = %String::from_utf8_lossy(key),
        error = %e,
        "undecodable registry row skipped"
    );
}

impl Storage for LmdbStorage {
    fn fault(&self) -> Option<String> {
        self.engine.identity().check().err()
    }

    fn probe(&self) -> Commit {
        self.engine.submit(vec![KvOp::Touch])
    }

    fn name(&self) -> &'static str {
        "lmdb"
    }

    fn label_metrics(&self, hub: &str, node: &str) {
        self.engine.label_metrics(hub, node);
    }

    fn submit(&self, batch: Vec<Mutation>) -> Commit {
        match encode_batch(&batch, now_ms()) {
            Ok(ops) => self.engine.submit(ops),
            Err(e) => Commit::ready(Err(e)),
        }
    }

    fn get(&self, id: &ChildId) -> Option<Row> {
        let key = id.as_str().as_bytes();
        let found = self.engine.get(key, |value| match decode(value) {
            Ok(stored) => Some(stored),
            Err(e) => {
                undecodable(self.engine.path(), key, &e);
                None
            }
        });
        match found {
            Ok(stored) => stored
                .flatten()
                .filter(|s| s.is_live(now_ms()))
                .map(|s| s.row),
            Err(e) => {
                tracing::error!(error = %e, "registry read failed");
                None
            }
        }
    }

    fn export_all(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        self.live_rows(|stored| rows.push(stored.row));
        rows
    }

    fn expired_ids(&self) -> Vec<ChildId> {
        let now = now_ms();
        let mut ids = Vec::new();
        let scanned = self.engine.for_each(|key, value| match decode(value) {
            Ok(stored) if !stored.is_live(now) => ids.push(stored.row.spec.id),
            Ok(_) => {}
            Err(e) => undecodable(self.engine.path(), key, &e),
        });
        if let Err(e) = scanned {
            tracing::error!(error = %e, "registry scan failed");
        }
        ids
    }

    fn len(&self) -> usize {
        let mut n = 0;
        self.live_rows(|_| n += 1);
        n
    }

    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        self.live_rows(|stored| f(&stored.row));
    }
}
