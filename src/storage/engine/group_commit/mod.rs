//! Group commit: many writers, one transaction, one fsync.
//!
//! A dedicated writer thread owns every write transaction. Writers enqueue their batch (the queue
//! order is the apply order) and get called back once it is durable. The thread blocks on the
//! queue while idle; when a batch arrives it takes everything already queued behind it, applies
//! all of it in one transaction and commits; the commit syncs the disk before it returns.
//!
//! One wait is added, and only under load ([`Returning`]): the writers a commit has just
//! answered come straight back with their next write, so the next group is held open until they
//! are in it too, at most as long as a commit takes (and [`returning::MAX_GATHER`]). Without
//! it, concurrent writers split into cohorts that take turns, each fsync carrying one cohort;
//! with it, every fsync carries all of them. An idle store and a writer with one write at a time
//! never wait: the first batch after a pause commits at once, and such a writer's group is
//! complete when it is back. A caller that keeps several writes in flight and does not come back
//! when answered makes holds run to their bound; holds that do not pay off are skipped more and
//! more often ([`Backoff`]).
//!
//! Waking the waiters is handed to a second thread, so the writer starts gathering the next group
//! while the previous group's writers are still being woken: on a small machine the wake-ups
//! would otherwise lengthen every cycle. Waiters are still answered strictly in apply order, by
//! that one thread.
//!
//! A failing batch must not fail its neighbours. When a group does not go through, the thread
//! splits it: the batches before the failing one are committed together, the failing one is
//! retried alone (and gets the error if it fails again), the rest form a new group. If the commit
//! itself fails, every batch is retried on its own.

mod returning;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::storage::StorageError;
use returning::{Backoff, Returning};

/// Called once with a batch's outcome, on the notifier thread, in apply order.
pub(crate) type Done = Box<dyn FnOnce(Result<(), StorageError>) + Send>;

/// Why a group did not commit.
#[derive(Debug)]
pub(crate) enum GroupFailure {
    /// Applying the batch at `index` failed; nothing of the group was committed.
    Apply { index: usize, error: StorageError },
    /// Every batch applied but the commit failed; nothing was committed.
    Commit(StorageError),
}

/// What the writer thread writes to: applies a group of batches in one transaction.
pub(crate) trait GroupSink: Send + 'static {
    /// One caller's unit of atomicity.
    type Batch: Send + 'static;
    /// Applies `batches` in order in one transaction and commits it durably (synced before it
    /// returns `Ok`), or commits nothing.
    fn write_group(&mut self, batches: &[&Self::Batch]) -> Result<(), GroupFailure>;
}

/// Counters of what the writer did, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed (each one syncs the disk).
    pub commits: u64,
    /// Batches that became durable.
    pub batches_ok: u64,
    /// Batches answered with an error.
    pub batches_failed: u64,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    batches_ok: AtomicU64,
    batches_failed: AtomicU64,
    /// Batches ever submitted: with what the writer has taken, how many are queued.
    submitted: AtomicU64,
    /// The commit metrics, once the hub named this store.
    metrics: crate::telemetry::metrics::StoreMetrics,
}

struct Job<B> {
    batch: B,
    done: Done,
}

/// The handle of a writer thread. Dropping it lets the thread finish what is queued, then joins
/// it, so the sink (and the files it holds) are released when the drop returns.
pub(crate) struct GroupCommitter<B: Send + 'static> {
    queue: Option<mpsc::Sender<Job<B>>>,
    threads: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
}

/// Outcomes of one group, in apply order, on their way to the notifier thread.
type Answers = Vec<(Done, Result<(), StorageError>)>;

impl<B: Send + 'static> GroupCommitter<B> {
    /// Starts the writer thread. `max_group` caps the batches per transaction (1 turns group
    /// commit off: one transaction and fsync per batch).
    pub(crate) fn spawn<S>(name: String, sink: S, max_group: usize) -> std::io::Result<Self>
    where
        S: GroupSink<Batch = B>,
    {
        Self::spawn_with(name, sink, max_group, returning::MAX_GATHER)
    }

    /// [`spawn`](Self::spawn) with another cap on how long a group is held open for returning
    /// writers (tests make it long, so that timing cannot decide what they check).
    fn spawn_with<S>(
        name: String,
        sink: S,
        max_group: usize,
        max_gather: Duration,
    ) -> std::io::Result<Self>
    where
        S: GroupSink<Batch = B>,
    {
        let (queue, rx) = mpsc::channel::<Job<B>>();
        let (notify, answers) = mpsc::channel::<Answers>();
        let counters = Arc::new(Counters::default());
        let notifier = std::thread::Builder::new()
            .name(format!("{name}-notify"))
            .spawn(move || {
                for group in answers {
                    answer_all(group);
                }
            })?;
        let writer = Writer {
            sink,
            counters: counters.clone(),
            max_group: max_group.max(1),
            max_gather,
            taken: 0,
            returning: None,
            backoff: Backoff::default(),
            last_commit: Duration::ZERO,
        };
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || writer.run(rx, notify))?;
        Ok(Self {
            queue: Some(queue),
            threads: vec![thread, notifier],
            counters,
        })
    }

    /// Enqueues a batch; `done` is called once it is durable or has failed. Batches apply in the
    /// order of `submit` calls. If the writer is gone, `done` is handed back uncalled, so that a
    /// caller holding a lock the callback needs can release it first.
    pub(crate) fn submit(&self, batch: B, done: Done) -> Result<(), Done> {
        let job = Job { batch, done };
        let Some(queue) = &self.queue else {
            return Err(job.done);
        };
        // Counted before it is queued, so the writer never sees more taken than submitted.
        self.counters.submitted.fetch_add(1, Ordering::Relaxed);
        queue.send(job).map_err(|mpsc::SendError(job)| job.done)
    }

    /// Names the hub and node whose metrics this writer's commits are recorded in.
    pub(crate) fn label_metrics(&self, hub: &str, node: &str, store: &'static str) {
        self.counters.metrics.label(hub, node, store);
    }

    /// What the writer has done so far.
    pub(crate) fn stats(&self) -> CommitStats {
        CommitStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            batches_ok: self.counters.batches_ok.load(Ordering::Relaxed),
            batches_failed: self.counters.batches_failed.load(Ordering::Relaxed),
        }
    }
}

impl<B: Send + 'static> Drop for GroupCommitter<B> {
    fn drop(&mut self) {
        // The writer drains the queue and exits, which ends the notifier after the last answer.
        self.queue.take();
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::error!("storage writer thread panicked");
            }
        }
    }
}

/// Calls every callback of a group, in order. A callback that panics is logged and does not keep
/// the batches after it (durable as well) from being answered.
fn answer_all(answers: Answers) {
    for (done, outcome) in answers {
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(outcome)));
        if called.is_err() {
            tracing::error!(
                "a storage write's callback panicked; the next ones are still answered"
            );
        }
    }
}

/// Takes whatever is queued, up to `max` batches in `group`.
fn drain<B>(rx: &mpsc::Receiver<Job<B>>, group: &mut Vec<Job<B>>, max: usize) {
    while group.len() < max {
        match rx.try_recv() {
            Ok(job) => group.push(job),
            Err(_) => break,
        }
    }
}

struct Writer<S> {
    sink: S,
    counters: Arc<Counters>,
    max_group: usize,
    /// The longest a group is held open for returning writers.
    max_gather: Duration,
    /// Batches taken off the queue so far.
    taken: u64,
    /// The writers the last answer woke, expected back with their next batch.
    returning: Option<Returning>,
    /// Whether holding groups open for returning writers has been paying off.
    backoff: Backoff,
    /// How long the last commit took: what holding a group open may cost at most.
    last_commit: Duration,
}

impl<S: GroupSink> Writer<S> {
    fn run(mut self, rx: mpsc::Receiver<Job<S::Batch>>, notify: mpsc::Sender<Answers>) {
        // Blocking here is the "no waiting window" of an idle store: the first batch is
        // committed the moment it arrives, together with whatever queued up behind it.
        while let Ok(first) = rx.recv() {
            let mut group = vec![first];
            drain(&rx, &mut group, self.max_group);
            if let Some(returning) = self.returning.take() {
                if self.backoff.may_hold() {
                    let complete = gather(&rx, &mut group, returning, self.max_group);
                    self.backoff.held(complete);
                }
            }
            self.taken += group.len() as u64;
            let mut answers = Vec::with_capacity(group.len());
            let began = Instant::now();
            let writes = group.len();
            self.commit_isolated(group, &mut answers);
            self.last_commit = began.elapsed();
            self.counters.metrics.commit(self.last_commit, writes);
            self.hand_out(answers, &notify);
        }
    }

    /// Sends a group's answers to the notifier thread, in apply order, and notes who will be
    /// back.
    fn hand_out(&mut self, answers: Answers, notify: &mpsc::Sender<Answers>) {
        let failed = answers.iter().filter(|(_, r)| r.is_err()).count() as u64;
        let ok = answers.len() as u64 - failed;
        self.counters.batches_ok.fetch_add(ok, Ordering::Relaxed);
        self.counters
            .batches_failed
            .fetch_add(failed, Ordering::Relaxed);
        // Read before the answers go out: whatever is queued now was not sent by a writer
        // this answer wakes.
        let queued = self
            .counters
            .submitted
            .load(Ordering::Relaxed)
            .saturating_sub(self.taken);
        self.returning = Returning::after_answer(
            answers.len(),
            usize::try_from(queued).unwrap_or(usize::MAX),
            Instant::now(),
            self.last_commit,
            self.max_gather,
            self.max_group,
        );
        if let Err(mpsc::SendError(answers)) = notify.send(answers) {
            // The notifier is gone: answer here instead.
            answer_all(answers);
        }
    }

    /// Commits `jobs` in one transaction if possible, otherwise splits them so that only the
    /// batches that fail on their own get an error. Records every job's outcome, in order.
    /// Iterative: a group where every batch fails (a full map) is split 4096 times, which
    /// recursion would pay for in stack.
    fn commit_isolated(&mut self, jobs: Vec<Job<S::Batch>>, answers: &mut Answers) {
        // Groups still to commit, the next one last (so that answers keep the apply order).
        let mut todo = vec![jobs];
        while let Some(mut jobs) = todo.pop() {
            if jobs.is_empty() {
                continue;
            }
            let outcome = {
                let batches: Vec<&S::Batch> = jobs.iter().map(|j| &j.batch).collect();
                self.sink.write_group(&batches)
            };
            match outcome {
                Ok(()) => {
                    self.counters.commits.fetch_add(1, Ordering::Relaxed);
                    answers.extend(jobs.into_iter().map(|job| (job.done, Ok(()))));
                }
                Err(GroupFailure::Apply { error, .. } | GroupFailure::Commit(error))
                    if jobs.len() == 1 =>
                {
                    answers.extend(jobs.pop().map(|job| (job.done, Err(error))));
                }
                Err(GroupFailure::Apply { index, .. }) => {
                    // The batches before the failing one together, the failing one alone (it
                    // gets the error if it fails again), then the rest.
                    let index = index.min(jobs.len() - 1);
                    let rest = jobs.split_off(index + 1);
                    let failing = jobs.split_off(index);
                    todo.extend([rest, failing, jobs]);
                }
                Err(GroupFailure::Commit(_)) => {
                    todo.extend(jobs.into_iter().rev().map(|job| vec![job]));
                }
            }
        }
    }
}

/// Holds `group` open until the writers expected back are in it, or waiting no longer pays off.
/// Returns whether the group was completed (a closed store counts as complete: nobody is late).
fn gather<B>(
    rx: &mpsc::Receiver<Job<B>>,
    group: &mut Vec<Job<B>>,
    returning: Returning,
    max_group: usize,
) -> bool {
    while let Some(wait) = returning.wait(group.len(), Instant::now()) {
        match rx.recv_timeout(wait) {
            Ok(job) => {
                group.push(job);
                drain(rx, group, max_group);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => return false,
            Err(mpsc::RecvTimeoutError::Disconnected) => return true,
        }
    }
    // `wait` ends at the bound too: the group is complete only if it says so.
    returning.complete(group.len())
}

#[cfg(test)]
mod tests;
