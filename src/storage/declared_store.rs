//! The node's own store of its adopted declared list (docs/recovery.md,
//! "Where it is stored"): every node persists its adopted copy in its own store beside the
//! registry file, whatever the registry backend.
//!
//! Layout, in the hub's directory `<data_dir>/process_hub/<hub_id>/`:
//! - `declared.lmdb`: an LMDB store on the shared engine (`crate::storage::engine`: group
//!   commit, durable when `Ok`, format marker `declared` v[`DECLARED_FORMAT_VERSION`], a newer
//!   marker refuses to open, an unreadable file is rotated to `declared.lmdb.corrupt-<stamp>`).
//!   One header entry (version, last mutator, child count) and one entry per declared child, so
//!   a mutation writes two small entries in one transaction instead of the whole list, and many
//!   concurrent durable starts share one fsync.
//! - `declared.seeded`: the seeded marker, written (and fsync'd) once the first list is
//!   durable. It lives in its own file so that it survives the list file's corruption or loss:
//!   it is the durable evidence that says "a list existed here; its absence is a loss, not an
//!   empty list".
//!
//! Opening reports what was found as a [`StoredList`]: `Readable`, `Missing`, or `Corrupt` (the
//! file was rotated aside). A corrupt list is never returned as an empty one; the boot decision
//! (`crate::core::boot::decide_boot`) weighs it against the evidence.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::core::boot::LocalList;
use crate::core::declared::list::{DeclaredChange, DeclaredChild, DeclaredChildren, DeclaredList};
use crate::model::{ChildId, NodeName};
use crate::storage::declared_on_disk::{OnDisk, Recorded};
use crate::storage::engine::{format, CommitStats, DiskOptions, Engine, KvOp, StoreSpec};
#[cfg(feature = "sim")]
use crate::storage::SimulatedDisk;
use crate::storage::{Commit, StorageError};

/// The declared list's file name in the hub's directory.
pub const DECLARED_FILE: &str = "declared.lmdb";
/// The seeded marker's file name, beside the list file.
pub const SEEDED_MARKER_FILE: &str = "declared.seeded";
/// The newest declared-store format this release reads and writes.
pub const DECLARED_FORMAT_VERSION: u32 = 1;

pub(crate) const DECLARED: StoreSpec = StoreSpec {
    file_name: DECLARED_FILE,
    kind: "declared",
    format_version: DECLARED_FORMAT_VERSION,
};

const HEADER_KEY: &[u8] = b"h";
const CHILD_PREFIX: u8 = b'c';

#[derive(Serialize, Deserialize)]
struct Header {
    version: u64,
    last_mutated_by: Option<NodeName>,
    count: u64,
}

/// What the store held when it was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredList {
    /// A list that decoded and is consistent.
    Readable(DeclaredList),
    /// Nothing was ever stored (or the file is gone).
    Missing,
    /// The stored list was unreadable and has been moved aside; the store is now empty.
    Corrupt {
        /// Where the unreadable file went, when known.
        rotated_to: Option<PathBuf>,
    },
}

impl StoredList {
    /// The boot decision's view of it.
    pub fn to_local(&self) -> LocalList {
        match self {
            StoredList::Readable(list) => LocalList::Readable(list.clone()),
            StoredList::Missing => LocalList::Missing,
            StoredList::Corrupt { .. } => LocalList::Corrupt,
        }
    }
}

/// What a log line says of a [`StoredList`]: its stamp and size, never its children (a list of
/// a million children printed whole is a line of hundreds of megabytes, formatted in memory).
impl std::fmt::Display for StoredList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoredList::Readable(list) => write!(
                f,
                "readable (version {}, {} children, last mutated by {})",
                list.version(),
                list.len(),
                list.last_mutated_by().unwrap_or("nobody")
            ),
            StoredList::Missing => f.write_str("missing"),
            StoredList::Corrupt { rotated_to } => match rotated_to {
                Some(path) => write!(f, "corrupt (moved to {})", path.display()),
                None => f.write_str("corrupt"),
            },
        }
    }
}

/// A node's declared-list store. Saves are submitted in order and resolve once durable.
pub struct DeclaredStore {
    medium: Medium,
    /// The children the saves submitted so far leave on disk, so a whole list (an adopted
    /// copy: one per leader broadcast on every peer) writes only what differs from it instead
    /// of every child. A failed save makes its owner reopen the store, which reloads this.
    /// The saved list's own children, shared with it (`storage::declared_on_disk`), so they
    /// cost nothing beside the list. `None` when what is on disk is not a list (see
    /// [`Self::resync`]): the next save rewrites the whole list.
    on_disk: std::sync::Mutex<Option<OnDisk>>,
}

/// What [`DeclaredStore::resync`] found on disk.
#[derive(Debug)]
pub enum Resynced {
    /// A list, or nothing (`None`).
    List(Option<DeclaredList>),
    /// Entries that do not form a list (a write that failed while later ones succeeded left
    /// a header without all of its children): the next save rewrites the whole list.
    Torn {
        /// What does not fit.
        reason: String,
    },
}

impl DeclaredStore {
    /// The hub's directory, `<data_dir>/process_hub/<hub_id>/` (the registry's default one).
    pub fn dir_for(data_dir: &Path, hub_id: &str) -> PathBuf {
        data_dir.join("process_hub").join(hub_id)
    }

    /// Opens (or creates) the store in `dir` and reports what it held.
    ///
    /// Fails with [`StorageError::NewerFormat`] when a newer release wrote the store (the file
    /// is left untouched). A corrupt store is rotated aside and reported as
    /// [`StoredList::Corrupt`]; the returned store is then empty and writable.
    pub fn open(dir: &Path, options: &DiskOptions) -> Result<(Self, StoredList), StorageError> {
        let path = dir.join(DECLARED_FILE);
        let before = rotated_files(dir);
        let mut validate = |key: &[u8], value: &[u8]| validate_entry(key, value);
        let mut engine = Engine::open(dir, DECLARED, options, &mut validate)?;
        let rotated = newest_new(&before, &rotated_files(dir));
        let found = match rotated {
            Some(rotated_to) => StoredList::Corrupt {
                rotated_to: Some(rotated_to),
            },
            None => match load(|visit| engine.for_each(visit).map_err(|e| e.to_string())) {
                Ok(Some(list)) => StoredList::Readable(list),
                Ok(None) => StoredList::Missing,
                Err(reason) => {
                    // Consistent entries but an inconsistent list: treat it like any corrupt
                    // store, aside and empty.
                    drop(engine);
                    let rotated_to =
                        format::rotate_aside(&path).map_err(|e| StorageError::Open {
                            path: path.clone(),
                            message: format!("declared list is corrupt ({reason}): {e}"),
                        })?;
                    tracing::error!(
                        path = %path.display(),
                        rotated_to = %rotated_to.display(),
                        %reason,
                        "corrupt declared list moved aside"
                    );
                    engine = Engine::open(dir, DECLARED, options, &mut validate)?;
                    StoredList::Corrupt {
                        rotated_to: Some(rotated_to),
                    }
                }
            },
        };
        let marker = Arc::new(SeededMarker::new(dir.join(SEEDED_MARKER_FILE)));
        if let StoredList::Readable(list) = &found {
            // A list stored before the marker existed (or whose marker was lost) still counts.
            marker.ensure(list.version());
        }
        if let StoredList::Corrupt { rotated_to } = &found {
            tracing::error!(
                path = %path.display(),
                rotated_to = ?rotated_to,
                seeded_marker = marker.present(),
                "the declared list was unreadable; it is reported as lost, not as empty"
            );
        }
        let on_disk = match &found {
            StoredList::Readable(list) => OnDisk::of(list),
            StoredList::Missing | StoredList::Corrupt { .. } => OnDisk::default(),
        };
        let store = Self {
            medium: Medium::Lmdb { engine, marker },
            on_disk: std::sync::Mutex::new(Some(on_disk)),
        };
        Ok((store, found))
    }

    /// Opens the store kept on a simulated disk (the deterministic simulator's nodes), and
    /// reports what it held. An inconsistent list is reported [`StoredList::Corrupt`] and the
    /// disk wiped, as a rotated file leaves an empty store.
    #[cfg(feature = "sim")]
    pub fn open_simulated(disk: Arc<SimulatedDisk>) -> (Self, StoredList) {
        let found = match load(|visit| {
            disk.for_each(visit);
            Ok(())
        }) {
            Ok(Some(list)) => StoredList::Readable(list),
            Ok(None) => StoredList::Missing,
            Err(reason) => {
                tracing::error!(disk = %disk.path().display(), %reason, "corrupt declared list on a simulated disk");
                let marker = disk.marker();
                disk.wipe();
                if let Some(version) = marker {
                    disk.ensure_marker(version);
                }
                StoredList::Corrupt { rotated_to: None }
            }
        };
        if let StoredList::Readable(list) = &found {
            disk.ensure_marker(list.version());
        }
        let on_disk = match &found {
            StoredList::Readable(list) => OnDisk::of(list),
            StoredList::Missing | StoredList::Corrupt { .. } => OnDisk::default(),
        };
        let store = Self {
            medium: Medium::Simulated(disk),
            on_disk: std::sync::Mutex::new(Some(on_disk)),
        };
        (store, found)
    }

    /// The list file.
    pub fn path(&self) -> &Path {
        match &self.medium {
            Medium::Lmdb { engine, .. } => engine.path(),
            #[cfg(feature = "sim")]
            Medium::Simulated(disk) => disk.path(),
        }
    }

    /// The list file's identity as opened, to check without writing that its path still leads
    /// to it (`None` for the simulator's disk).
    pub fn identity(&self) -> Option<std::sync::Arc<crate::storage::FileIdentity>> {
        match &self.medium {
            Medium::Lmdb { engine, .. } => Some(engine.identity()),
            #[cfg(feature = "sim")]
            Medium::Simulated(_) => None,
        }
    }

    /// Reads the stored list back and makes it the base of later saves: after a failed write
    /// the saves' idea of what is on disk may be ahead of it, and this puts it back. Call it
    /// only once every submitted save has been answered.
    pub fn resync(&self) -> Result<Resynced, StorageError> {
        let read = match &self.medium {
            Medium::Lmdb { engine, .. } => {
                load_checked(|visit| engine.for_each(visit).map_err(|e| e.to_string()))
            }
            #[cfg(feature = "sim")]
            Medium::Simulated(disk) => load_checked(|visit| {
                disk.for_each(visit);
                Ok(())
            }),
        };
        let mut on_disk = self.on_disk.lock().unwrap_or_else(|e| e.into_inner());
        match read.map_err(StorageError::Backend)? {
            Ok(loaded) => {
                *on_disk = Some(loaded.as_ref().map(OnDisk::of).unwrap_or_default());
                Ok(Resynced::List(loaded))
            }
            Err(reason) => {
                *on_disk = None;
                Ok(Resynced::Torn { reason })
            }
        }
    }

    /// Whether the seeded marker exists beside the list (durable evidence).
    pub fn seeded_marker_present(&self) -> bool {
        match &self.medium {
            Medium::Lmdb { marker, .. } => marker.present(),
            #[cfg(feature = "sim")]
            Medium::Simulated(disk) => disk.marker().is_some(),
        }
    }

    /// Persists one mutation's change (`list` is the list after it). Durable when the commit
    /// resolves `Ok`. An `Unchanged` change writes nothing.
    pub fn save_change(&self, list: &DeclaredList, change: &DeclaredChange) -> Commit {
        self.save_changes(list, std::slice::from_ref(change))
    }

    /// Persists the changes of consecutive mutations in one commit (`list` is the list after
    /// the last): a batch of durable starts writes its children and one header, and many
    /// concurrent batches still share an fsync. A child put and then removed within the
    /// changes is only removed. Durable when the commit resolves `Ok`.
    pub fn save_changes(&self, list: &DeclaredList, changes: &[DeclaredChange]) -> Commit {
        let mut ops = Vec::with_capacity(changes.len() + 1);
        let mut guard = self.on_disk.lock().unwrap_or_else(|e| e.into_inner());
        let Some(on_disk) = guard.as_mut() else {
            // What is on disk is not a list: only a whole list repairs it.
            drop(guard);
            return self.save_whole(list);
        };
        for change in changes {
            match change {
                DeclaredChange::Unchanged => {}
                DeclaredChange::Put(id) => {
                    // Absent from `list`: a later change of the same batch removed it.
                    if let Some(child) = list.get(id) {
                        match encode_child(id, child) {
                            Ok(op) => ops.push(op),
                            Err(e) => return Commit::ready(Err(e)),
                        }
                    }
                }
                DeclaredChange::Removed(id) => ops.push(KvOp::Delete(child_key(id))),
                DeclaredChange::Cleared => ops.push(KvOp::Clear),
            }
        }
        if on_disk.record(list, changes) == Recorded::Copied {
            tracing::debug!(
                version = list.version(),
                "the declared list holds changes no save named; what is on disk is kept apart"
            );
        }
        drop(guard);
        if ops.is_empty() && changes.iter().all(|c| *c == DeclaredChange::Unchanged) {
            return Commit::ready(Ok(()));
        }
        ops.push(encode_header(list));
        self.submit(ops, list.version())
    }

    /// Persists a whole list, replacing what is stored (an adopted copy, a seed). Durable when
    /// the commit resolves `Ok`.
    ///
    /// Only the children that differ from what the earlier saves left are written (a leader's
    /// broadcast usually differs from the copy it replaces by one child), so adopting a copy
    /// costs a comparison in memory and a few writes, not a write per declared child.
    pub fn save_whole(&self, list: &DeclaredList) -> Commit {
        let mut on_disk = self.on_disk.lock().unwrap_or_else(|e| e.into_inner());
        let mut ops: Vec<KvOp> = Vec::new();
        let base = match on_disk.as_ref() {
            Some(base) => base.children().clone(),
            None => {
                // Not a list on disk: start from nothing.
                ops.push(KvOp::Clear);
                DeclaredChildren::new()
            }
        };
        let (removed, changed) = difference(&base, list);
        ops.extend(removed.iter().map(|id| KvOp::Delete(child_key(id))));
        for (id, child) in &changed {
            match encode_child(id, child) {
                Ok(op) => ops.push(op),
                Err(e) => return Commit::ready(Err(e)),
            }
        }
        // Now the same children as the list's, shared with it.
        *on_disk = Some(OnDisk::of(list));
        drop(on_disk);
        ops.push(encode_header(list));
        self.submit(ops, list.version())
    }

    /// Reads the stored list back (for diagnostics and tests; the hub keeps its copy in memory).
    pub fn load(&self) -> Result<Option<DeclaredList>, StorageError> {
        match &self.medium {
            Medium::Lmdb { engine, .. } => {
                load(|visit| engine.for_each(visit).map_err(|e| e.to_string()))
            }
            #[cfg(feature = "sim")]
            Medium::Simulated(disk) => load(|visit| {
                disk.for_each(visit);
                Ok(())
            }),
        }
        .map_err(StorageError::Backend)
    }

    /// Names the hub and node whose metrics this store's commits are recorded in.
    pub(crate) fn label_metrics(&self, hub: &str, node: &str) {
        match &self.medium {
            Medium::Lmdb { engine, .. } => engine.label_metrics(hub, node),
            #[cfg(feature = "sim")]
            Medium::Simulated(_) => {}
        }
    }

    /// What the writer has committed so far.
    pub fn stats(&self) -> CommitStats {
        match &self.medium {
            Medium::Lmdb { engine, .. } => engine.stats(),
            #[cfg(feature = "sim")]
            Medium::Simulated(disk) => disk.stats(),
        }
    }

    fn submit(&self, ops: Vec<KvOp>, version: u64) -> Commit {
        let (sender, commit) = Commit::pending();
        let submitted = match &self.medium {
            Medium::Lmdb { engine, marker } => {
                let marker = marker.clone();
                engine.submit_with(
                    ops,
                    Box::new(move |outcome: Result<(), StorageError>| {
                        if outcome.is_ok() {
                            marker.ensure(version);
                        }
                        sender.resolve(outcome);
                    }),
                )
            }
            #[cfg(feature = "sim")]
            Medium::Simulated(disk) => {
                let marked = disk.clone();
                disk.submit_with(
                    ops,
                    Box::new(move |outcome: Result<(), StorageError>| {
                        if outcome.is_ok() {
                            marked.ensure_marker(version);
                        }
                        sender.resolve(outcome);
                    }),
                )
            }
        };
        if let Err(done) = submitted {
            done(Err(StorageError::Closed));
        }
        commit
    }
}

/// Where the store's bytes live.
enum Medium {
    /// An LMDB file on the shared engine, with the seeded marker file beside it.
    Lmdb {
        engine: Engine,
        marker: Arc<SeededMarker>,
    },
    /// The simulator's in-memory disk (entries and marker together).
    #[cfg(feature = "sim")]
    Simulated(Arc<SimulatedDisk>),
}

/// What turns the children `on_disk` into `list`'s: the ids to delete and the entries to put.
fn difference(
    on_disk: &DeclaredChildren,
    list: &DeclaredList,
) -> (Vec<ChildId>, Vec<(ChildId, DeclaredChild)>) {
    if on_disk.ptr_eq(list.children()) {
        return (Vec::new(), Vec::new());
    }
    let removed = on_disk
        .keys()
        .filter(|id| list.get(id).is_none())
        .cloned()
        .collect();
    let changed = list
        .children()
        .iter()
        .filter(|(id, child)| on_disk.get(*id) != Some(*child))
        .map(|(id, child)| (id.clone(), child.clone()))
        .collect();
    (removed, changed)
}

/// The seeded marker file, written once.
struct SeededMarker {
    path: PathBuf,
    written: AtomicBool,
}

impl SeededMarker {
    fn new(path: PathBuf) -> Self {
        let written = AtomicBool::new(path.is_file());
        Self { path, written }
    }

    fn present(&self) -> bool {
        self.written.load(Ordering::Acquire) || self.path.is_file()
    }

    /// Writes the marker if it is not there yet. A failure is logged and retried on the next
    /// save: the list itself is durable, only the evidence is missing.
    fn ensure(&self, version: u64) {
        if self.written.load(Ordering::Acquire) {
            return;
        }
        match write_marker(&self.path, version) {
            Ok(()) => self.written.store(true, Ordering::Release),
            Err(e) => tracing::error!(
                path = %self.path.display(),
                error = %e,
                "cannot write the seeded marker; a later loss of the list could not be told \
                 from an empty list"
            ),
        }
    }
}

fn write_marker(path: &Path, version: u64) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)?;
    writeln!(
        file,
        "process_hub declared list seeded; first durable version {version}"
    )?;
    file.sync_all()?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn child_key(id: &ChildId) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.as_str().len() + 1);
    key.push(CHILD_PREFIX);
    key.extend_from_slice(id.as_str().as_bytes());
    key
}

fn encode_child(id: &ChildId, child: &DeclaredChild) -> Result<KvOp, StorageError> {
    let value = bincode::serialize(child).map_err(|e| StorageError::Codec {
        id: id.to_string(),
        message: e.to_string(),
    })?;
    Ok(KvOp::Put {
        key: child_key(id),
        value,
    })
}

fn encode_header(list: &DeclaredList) -> KvOp {
    let header = Header {
        version: list.version(),
        last_mutated_by: list.last_mutated_by().map(str::to_owned),
        count: list.len() as u64,
    };
    // A header of an integer, an optional string and an integer always encodes.
    let value = bincode::serialize(&header).unwrap_or_default();
    KvOp::Put {
        key: HEADER_KEY.to_vec(),
        value,
    }
}

/// Checks one entry on open; a rejected entry marks the store corrupt.
fn validate_entry(key: &[u8], value: &[u8]) -> Result<(), String> {
    if key == HEADER_KEY {
        return bincode::deserialize::<Header>(value)
            .map(|_| ())
            .map_err(|e| format!("undecodable header: {e}"));
    }
    match key.split_first() {
        Some((&CHILD_PREFIX, id)) => {
            let child: DeclaredChild = bincode::deserialize(value)
                .map_err(|e| format!("undecodable entry {:?}: {e}", String::from_utf8_lossy(id)))?;
            if child.spec.id.as_str().as_bytes() == id {
                Ok(())
            } else {
                Err(format!(
                    "entry {:?} holds child {}",
                    String::from_utf8_lossy(id),
                    child.spec.id
                ))
            }
        }
        _ => Err(format!("unknown key {:?}", String::from_utf8_lossy(key))),
    }
}

/// Reads the list from the entries `visit` walks; `Ok(None)` for an empty store, `Err` for an
/// inconsistent one or one that cannot be read.
fn load(
    visit: impl FnOnce(&mut dyn FnMut(&[u8], &[u8])) -> Result<(), String>,
) -> Result<Option<DeclaredList>, String> {
    load_checked(visit)?
}

/// [`load`], telling a store that cannot be read (the outer `Err`) from entries that do not
/// form a list (the inner one).
#[allow(clippy::type_complexity)]
fn load_checked(
    visit: impl FnOnce(&mut dyn FnMut(&[u8], &[u8])) -> Result<(), String>,
) -> Result<Result<Option<DeclaredList>, String>, String> {
    let mut header: Option<Header> = None;
    let mut children = BTreeMap::new();
    let mut failure: Option<String> = None;
    visit(&mut |key, value| {
        if failure.is_some() {
            return;
        }
        if key == HEADER_KEY {
            match bincode::deserialize::<Header>(value) {
                Ok(h) => header = Some(h),
                Err(e) => failure = Some(format!("undecodable header: {e}")),
            }
        } else {
            match bincode::deserialize::<DeclaredChild>(value) {
                Ok(child) => {
                    children.insert(child.spec.id.clone(), child);
                }
                Err(e) => failure = Some(format!("undecodable entry: {e}")),
            }
        }
    })?;
    if let Some(reason) = failure {
        return Ok(Err(reason));
    }
    Ok(match header {
        None if children.is_empty() => Ok(None),
        None => Err(format!("{} children but no header", children.len())),
        Some(h) if h.count != children.len() as u64 => Err(format!(
            "header counts {} children, the store holds {}",
            h.count,
            children.len()
        )),
        Some(h) => Ok(Some(DeclaredList::from_parts(
            h.version,
            children,
            h.last_mutated_by,
        ))),
    })
}

/// The rotated copies of the list file in `dir`.
fn rotated_files(dir: &Path) -> Vec<PathBuf> {
    let prefix = format!("{DECLARED_FILE}.corrupt-");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The newest rotated file that appeared during the open, if any.
fn newest_new(before: &[PathBuf], after: &[PathBuf]) -> Option<PathBuf> {
    after.iter().rev().find(|p| !before.contains(p)).cloned()
}

#[cfg(test)]
#[path = "declared_store_tests.rs"]
mod tests;
