//! An example of a custom registry backend ([`process_hub::storage::custom`]): rows kept
//! encoded in a map that stands for a disk, written by one writer thread with group commit,
//! with faults a test injects (failed commits, a held writer, a corrupt record). It keeps the
//! contract the hub relies on:
//! - batches apply atomically, in submission order; a commit answers `Ok` only once its batch
//!   is on the "disk", and an `Err` leaves none of it visible;
//! - batches queued while the writer is busy share one "fsync" (group commit);
//! - reads see what is committed, in id order;
//! - a record that does not decode is left out of the reads and said in `fault()`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use process_hub::storage::{
    Commit, CommitSender, CustomBackend, Mutation, Storage, StorageError, StorageFactory,
    WriteFault,
};
use process_hub::{ChildId, Row};

/// The "disk": encoded rows, and what was written to it. Outlives the stores opened on it.
#[derive(Default)]
pub struct MapDisk {
    records: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Durable writes ("fsyncs").
    pub commits: AtomicU64,
    /// Batches made durable.
    pub batches: AtomicU64,
    /// Batches submitted (probes included).
    pub submitted: AtomicU64,
    /// The next `n` commits fail.
    fail_next: AtomicU32,
    /// While set, the writer waits before committing (batches queue up behind it).
    held: AtomicBool,
}

impl MapDisk {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The next `n` commits fail with an I/O error.
    pub fn fail_next(&self, n: u32) {
        self.fail_next.store(n, Ordering::SeqCst);
    }

    /// Holds (or releases) the writer.
    pub fn hold(&self, on: bool) {
        self.held.store(on, Ordering::SeqCst);
    }

    /// Records on the disk.
    pub fn len(&self) -> usize {
        self.records.lock().unwrap().len()
    }

    /// Overwrites record `id` with bytes that do not decode.
    pub fn corrupt(&self, id: &str) {
        self.records
            .lock()
            .unwrap()
            .insert(id.to_owned(), vec![0xff, 0x00, 0x13]);
    }

    pub fn ids(&self) -> Vec<String> {
        self.records.lock().unwrap().keys().cloned().collect()
    }
}

type Job = (Vec<Mutation>, CommitSender);

/// A store over a [`MapDisk`].
pub struct FaultyMapStorage {
    disk: Arc<MapDisk>,
    view: Arc<RwLock<BTreeMap<ChildId, Row>>>,
    jobs: Mutex<mpsc::Sender<Job>>,
    fault: Option<String>,
}

impl FaultyMapStorage {
    /// Opens a store on `disk`: every record that decodes is read back; the others are left out
    /// and reported by `fault()`.
    pub fn open(disk: Arc<MapDisk>) -> Arc<Self> {
        let mut view = BTreeMap::new();
        let mut corrupt = Vec::new();
        for (id, bytes) in disk.records.lock().unwrap().iter() {
            match serde_json::from_slice::<Row>(bytes) {
                Ok(row) => {
                    view.insert(row.spec.id.clone(), row);
                }
                Err(_) => corrupt.push(id.clone()),
            }
        }
        let fault = (!corrupt.is_empty()).then(|| {
            format!(
                "{} corrupt record(s) skipped: {}",
                corrupt.len(),
                corrupt.join(", ")
            )
        });
        let view = Arc::new(RwLock::new(view));
        let (tx, rx) = mpsc::channel::<Job>();
        let writer_disk = disk.clone();
        let writer_view = view.clone();
        std::thread::spawn(move || writer(writer_disk, writer_view, rx));
        Arc::new(Self {
            disk,
            view,
            jobs: Mutex::new(tx),
            fault,
        })
    }

    /// A factory for `registry_backend = { type = "custom", name = ..., options = { disk = K } }`:
    /// the store of option `disk` (so a restarted hub reopens its disk); `fsync_ms` is checked.
    pub fn factory(disks: Arc<Mutex<BTreeMap<String, Arc<MapDisk>>>>) -> StorageFactory {
        Arc::new(move |backend: &CustomBackend<'_>| {
            if let Some(ms) = backend.options.get("fsync_ms") {
                ms.parse::<u64>().map_err(|_| {
                    StorageError::Backend(format!("fsync_ms must be a number, not {ms:?}"))
                })?;
            }
            let key =
                backend.options.get("disk").cloned().unwrap_or_else(|| {
                    format!("{}/{}", backend.data_dir.display(), backend.hub_id)
                });
            let disk = disks.lock().unwrap().entry(key).or_default().clone();
            Ok(FaultyMapStorage::open(disk) as Arc<dyn Storage>)
        })
    }
}

/// Commits queued batches in groups: one "fsync" for every batch queued meanwhile.
fn writer(disk: Arc<MapDisk>, view: Arc<RwLock<BTreeMap<ChildId, Row>>>, rx: mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        while disk.held.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut group = vec![first];
        while let Ok(job) = rx.try_recv() {
            group.push(job);
        }
        std::thread::sleep(Duration::from_millis(1)); // the "fsync"
        let failing = disk
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            for (_, done) in group {
                done.resolve(Err(StorageError::Write {
                    path: "map-disk".into(),
                    message: "injected I/O error".into(),
                    fault: WriteFault::Io,
                }));
            }
            continue;
        }
        {
            let mut records = disk.records.lock().unwrap();
            let mut rows = view.write().unwrap();
            for (batch, _) in &group {
                for mutation in batch {
                    match mutation {
                        Mutation::Put { row, .. } => {
                            let bytes = serde_json::to_vec(row).expect("rows encode");
                            records.insert(row.spec.id.to_string(), bytes);
                            rows.insert(row.spec.id.clone(), row.clone());
                        }
                        Mutation::Remove(id) => {
                            records.remove(id.as_str());
                            rows.remove(id);
                        }
                        Mutation::Clear => {
                            records.clear();
                            rows.clear();
                        }
                    }
                }
            }
        }
        disk.commits.fetch_add(1, Ordering::SeqCst);
        disk.batches.fetch_add(group.len() as u64, Ordering::SeqCst);
        for (_, done) in group {
            done.resolve(Ok(()));
        }
    }
}

impl Storage for FaultyMapStorage {
    fn name(&self) -> &'static str {
        "faulty_map"
    }

    fn fault(&self) -> Option<String> {
        self.fault.clone()
    }

    fn probe(&self) -> Commit {
        self.submit(Vec::new())
    }

    fn submit(&self, batch: Vec<Mutation>) -> Commit {
        let (done, commit) = Commit::pending();
        self.disk.submitted.fetch_add(1, Ordering::SeqCst);
        if let Err(mpsc::SendError((_, done))) = self.jobs.lock().unwrap().send((batch, done)) {
            done.resolve(Err(StorageError::Closed));
        }
        commit
    }

    fn get(&self, id: &ChildId) -> Option<Row> {
        self.view.read().unwrap().get(id).cloned()
    }

    fn export_all(&self) -> Vec<Row> {
        self.view.read().unwrap().values().cloned().collect()
    }

    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        for row in self.view.read().unwrap().values() {
            f(row);
        }
    }
}
