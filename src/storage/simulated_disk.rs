//! A disk in memory for the deterministic simulator: it survives the crash of the node that uses
//! it (the simulator keeps it across restarts), can be lost (wiped, like a replaced disk), can
//! be slow, and can fill up (every batch that writes fails with "no space" until it is freed;
//! batches that only delete still succeed).
//!
//! Writes are applied one batch after another by a writer task in the node's runtime: a batch
//! waits the disk's latency (virtual time under a paused runtime), is applied, then answered, so a
//! write is durable exactly when it is acknowledged. A node's crash ([`SimulatedDisk::crash`])
//! loses the batches not applied yet, as a power cut loses what was not synced: none of them was
//! acknowledged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;

use super::engine::{CommitStats, Done, KvOp};
use super::{StorageError, WriteFault};

/// A disk in memory, shared between the incarnations of one simulated node.
#[derive(Debug)]
pub struct SimulatedDisk {
    path: PathBuf,
    state: Mutex<DiskState>,
    commits: AtomicU64,
    failed: AtomicU64,
    /// Told whenever the queue of batches empties.
    drained: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct DiskState {
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The declared list's seeded marker: the first durable version, once written.
    marker: Option<u64>,
    latency: Duration,
    /// The disk is full: batches that put anything fail.
    full: bool,
    /// Bumped by every crash and wipe: a writer of an earlier incarnation applies nothing more.
    incarnation: u64,
    writer: Option<mpsc::UnboundedSender<(u64, Vec<KvOp>, Done)>>,
    /// Batches queued and not applied (or lost) yet.
    queued: usize,
}

impl SimulatedDisk {
    /// An empty disk; `name` shows in paths and logs (`sim://<name>`).
    pub fn new(name: &str) -> Self {
        Self {
            path: PathBuf::from(format!("sim://{name}")),
            state: Mutex::new(DiskState::default()),
            commits: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            drained: tokio::sync::Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, DiskState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every batch from now on waits `latency` before it is applied.
    pub fn set_latency(&self, latency: Duration) {
        self.state().latency = latency;
    }

    /// The disk fills up (`true`) or gets space back (`false`).
    pub fn set_full(&self, full: bool) {
        self.state().full = full;
    }

    /// The node using the disk crashed: batches not applied yet are lost.
    pub fn crash(&self) {
        let mut state = self.state();
        state.incarnation += 1;
        state.writer = None;
        state.queued = 0;
        self.drained.notify_waiters();
    }

    /// Waits until every batch queued so far is applied (or lost): what dropping an LMDB store
    /// does before the same file can be opened again, so that a store reopened by a restarted
    /// actor never interleaves with the writes of the store it replaces.
    pub async fn settled(&self) {
        loop {
            let drained = self.drained.notified();
            if self.state().queued == 0 {
                return;
            }
            drained.await;
        }
    }

    /// The disk is lost: every entry and the marker are gone (and what was in flight).
    pub fn wipe(&self) {
        let mut state = self.state();
        state.incarnation += 1;
        state.writer = None;
        state.queued = 0;
        state.entries.clear();
        state.marker = None;
        self.drained.notify_waiters();
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        let state = self.state();
        state.entries.is_empty() && state.marker.is_none()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn marker(&self) -> Option<u64> {
        self.state().marker
    }

    pub(crate) fn ensure_marker(&self, version: u64) {
        self.state().marker.get_or_insert(version);
    }

    pub(crate) fn stats(&self) -> CommitStats {
        let commits = self.commits.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        CommitStats {
            commits,
            batches_ok: commits,
            batches_failed: failed,
        }
    }

    /// Visits every entry in key order.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        for (key, value) in &self.state().entries {
            f(key, value);
        }
    }

    /// Queues a batch; `done` runs once it is applied. Needs a tokio runtime (the writer task
    /// runs in it); without one `done` is handed back uncalled.
    pub(crate) fn submit_with(
        self: &std::sync::Arc<Self>,
        ops: Vec<KvOp>,
        done: Done,
    ) -> Result<(), Done> {
        let mut state = self.state();
        let incarnation = state.incarnation;
        if state.writer.is_none() {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return Err(done);
            };
            let (tx, rx) = mpsc::unbounded_channel();
            runtime.spawn(write_loop(std::sync::Arc::downgrade(self), rx));
            state.writer = Some(tx);
        }
        let Some(writer) = state.writer.as_ref() else {
            return Err(done);
        };
        writer
            .send((incarnation, ops, done))
            .map_err(|mpsc::error::SendError((_, _, done))| done)?;
        state.queued += 1;
        Ok(())
    }

    fn apply(&self, incarnation: u64, ops: Vec<KvOp>) -> Result<(), StorageError> {
        let mut state = self.state();
        if state.incarnation != incarnation {
            return Err(StorageError::Closed);
        }
        let writes = ops.iter().any(|op| matches!(op, KvOp::Put { .. }));
        if state.full && writes {
            self.failed.fetch_add(1, Ordering::Relaxed);
            state.queued = state.queued.saturating_sub(1);
            if state.queued == 0 {
                self.drained.notify_waiters();
            }
            return Err(StorageError::Write {
                path: self.path.clone(),
                message: "No space left on device (simulated)".into(),
                fault: WriteFault::NoSpace,
            });
        }
        for op in ops {
            match op {
                KvOp::Put { key, value } => {
                    state.entries.insert(key, value);
                }
                KvOp::Delete(key) => {
                    state.entries.remove(&key);
                }
                KvOp::Clear => state.entries.clear(),
                KvOp::Touch => {}
            }
        }
        self.commits.fetch_add(1, Ordering::Relaxed);
        state.queued = state.queued.saturating_sub(1);
        if state.queued == 0 {
            self.drained.notify_waiters();
        }
        Ok(())
    }
}

/// Applies the queued batches in order, each after the disk's latency.
async fn write_loop(
    disk: std::sync::Weak<SimulatedDisk>,
    mut rx: mpsc::UnboundedReceiver<(u64, Vec<KvOp>, Done)>,
) {
    while let Some((incarnation, ops, done)) = rx.recv().await {
        let Some(latency) = disk.upgrade().map(|d| d.state().latency) else {
            return;
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let Some(disk) = disk.upgrade() else {
            return;
        };
        match disk.apply(incarnation, ops) {
            Ok(()) => done(Ok(())),
            // The node crashed meanwhile: the batch is lost and nobody waits for it.
            Err(StorageError::Closed) => return,
            Err(e) => done(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn put(k: &str) -> KvOp {
        KvOp::Put {
            key: k.as_bytes().to_vec(),
            value: b"v".to_vec(),
        }
    }

    fn keys(disk: &SimulatedDisk) -> Vec<String> {
        let mut keys = Vec::new();
        disk.for_each(|k, _| keys.push(String::from_utf8_lossy(k).into_owned()));
        keys
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_on_the_disk_when_it_is_answered_and_a_crash_loses_only_the_unanswered() {
        let disk = Arc::new(SimulatedDisk::new("n1"));
        disk.set_latency(Duration::from_millis(50));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let submitted = disk.submit_with(vec![put("a")], Box::new(move |r| tx.send(r).unwrap()));
        assert!(submitted.is_ok());
        rx.await.unwrap().unwrap();
        assert_eq!(keys(&disk), vec!["a"]);
        let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = answered.clone();
        let submitted = disk.submit_with(
            vec![put("b")],
            Box::new(move |_| flag.store(true, Ordering::SeqCst)),
        );
        assert!(submitted.is_ok());
        tokio::time::sleep(Duration::from_millis(10)).await;
        disk.crash();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(keys(&disk), vec!["a"], "the unanswered batch is lost");
        assert!(!answered.load(Ordering::SeqCst));
        disk.ensure_marker(3);
        disk.ensure_marker(5);
        assert_eq!(disk.marker(), Some(3));
        disk.wipe();
        assert!(disk.is_empty());
    }
}
