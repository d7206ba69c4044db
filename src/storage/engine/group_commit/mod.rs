//! Group commit: many writers, one transaction, one flush.
//!
//! A dedicated writer thread owns every write transaction. Writers enqueue their batch (the queue
//! order is the apply order) and get called back once it is durable. The thread blocks on the
//! queue while idle; when a batch arrives it takes everything already queued behind it, applies
//! all of it in one transaction and commits. A group never waits to fill while anything is
//! queued or the store is idle: a lone writer pays exactly one commit and flush per write and
//! waits for nothing else, while 64 concurrent writers share one commit between them, because
//! the queue fills up while the disk works.
//!
//! The commit and its flush are pipelined when the sink allows it ([`Committed::AwaitsFlush`],
//! the LMDB sink in [`CommitMode::Group`](super::CommitMode::Group)): a commit syncs its data
//! pages and writes its marker page, but leaves the marker to the *next* flush. If batches are
//! queued, that next flush is the next group's commit, which syncs the disk (covering the
//! previous marker) before writing its own marker; only then are the previous group's writers
//! answered. If nothing is queued, the writer flushes explicitly and answers. Under load this
//! halves the flushes per group and overlaps one group's writers waking up and coming back with
//! the next group's commit; a lone writer still gets its flush straight after its commit. One
//! case waits ([`Step::Linger`]): nothing is queued, a group awaits its flush, and the commit
//! just made answered other writers, who are on their way back. Then the writer waits for them
//! (until as many batches as it answered are queued), at most as long as the last commit took
//! (and [`MAX_LINGER`]), and lets their commit be the flush: an explicit flush would occupy the
//! disk as long and carry no write.
//! Sinks that flush within the commit ([`Committed::Durable`]) are answered right after it.
//!
//! Waking the waiters is handed to a second thread, so the writer starts the next transaction
//! (with whatever queued meanwhile) while the previous group's writers are still being woken:
//! on a small machine the wake-ups, not the disk, would otherwise bound throughput. Waiters are
//! still answered strictly in apply order, by that one thread.
//!
//! A failing batch must not fail its neighbours. When a group does not go through, the thread
//! splits it: the batches before the failing one are committed together, the failing one is
//! retried alone (and gets the error if it fails again), the rest form a new group. If the commit
//! itself fails, every batch is retried on its own. A commit that fails, or a flush that fails,
//! answers the batches still awaiting a flush with its error: whether they reached the disk is
//! then unknown, and an `Ok` must mean durable.

mod outcomes;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::storage::StorageError;
use outcomes::{Outcome, Outcomes};

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

/// What a successful commit made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Committed {
    /// The group, and everything committed before it, is on disk.
    Durable,
    /// Everything committed before the group is on disk; the group itself is committed (readers
    /// see it) and is on disk once the next commit succeeds or [`GroupSink::flush`] does.
    AwaitsFlush,
}

/// What the writer thread writes to: applies a group of batches in one transaction.
pub(crate) trait GroupSink: Send + 'static {
    /// One caller's unit of atomicity.
    type Batch: Send + 'static;
    /// Applies `batches` in order in one transaction and commits it, or commits nothing. A
    /// successful commit flushes the disk after everything committed before it.
    fn write_group(&mut self, batches: &[&Self::Batch]) -> Result<Committed, GroupFailure>;
    /// Makes every committed group durable. Called only after a commit that answered
    /// [`Committed::AwaitsFlush`], when no other group is queued to flush it.
    fn flush(&mut self) -> Result<(), StorageError>;
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
    /// Explicit flushes: a commit whose marker no later commit flushed, because nothing was
    /// queued behind it (the idle or lone-writer case of a pipelined store).
    pub flushes: u64,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    batches_ok: AtomicU64,
    batches_failed: AtomicU64,
    flushes: AtomicU64,
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
type Answers = Vec<Outcome<Done>>;

impl<B: Send + 'static> GroupCommitter<B> {
    /// Starts the writer thread. `max_group` caps the batches per transaction (1 turns group
    /// commit off: one transaction and fsync per batch).
    pub(crate) fn spawn<S>(name: String, sink: S, max_group: usize) -> std::io::Result<Self>
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
                    for (done, outcome) in group {
                        done(outcome);
                    }
                }
            })?;
        let writer = Writer {
            sink,
            counters: counters.clone(),
            outcomes: Outcomes::default(),
            expected: 0,
            last_commit: Duration::ZERO,
        };
        let max_group = max_group.max(1);
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || writer.run(rx, notify, max_group))?;
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
        queue.send(job).map_err(|mpsc::SendError(job)| job.done)
    }

    /// What the writer has done so far.
    pub(crate) fn stats(&self) -> CommitStats {
        CommitStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            batches_ok: self.counters.batches_ok.load(Ordering::Relaxed),
            batches_failed: self.counters.batches_failed.load(Ordering::Relaxed),
            flushes: self.counters.flushes.load(Ordering::Relaxed),
        }
    }
}

impl<B: Send + 'static> Drop for GroupCommitter<B> {
    fn drop(&mut self) {
        // The writer drains the queue, flushes and exits, which ends the notifier after the
        // last answer.
        self.queue.take();
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::error!("storage writer thread panicked");
            }
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

/// What the writer does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Commit the queued batches (the commit also flushes what awaits a flush).
    Commit,
    /// Nothing is queued, committed batches await a flush, and the writers the last commit
    /// answered are on their way back: wait for them, at most as long as a flush takes, and
    /// let their commit be the flush. A flush in its place would cost the disk as much
    /// and carry no new write.
    Linger,
    /// Nothing is queued, committed batches await a flush and nobody is expected: flush now.
    Flush,
    /// Nothing to do: block until a batch arrives (or the store closes).
    Wait,
}

/// The writer's decision. `awaits_flush`: committed batches wait for a flush; `queued`: a batch
/// is queued; `expected`: the last commit answered writers of an earlier group, who may be back
/// soon. An idle store or a lone writer never waits (a lone writer is answered only by its own
/// flush, so nobody is expected).
fn next_step(awaits_flush: bool, queued: bool, expected: bool) -> Step {
    match (queued, awaits_flush, expected) {
        (true, _, _) => Step::Commit,
        (false, true, true) => Step::Linger,
        (false, true, false) => Step::Flush,
        (false, false, _) => Step::Wait,
    }
}

/// The longest the writer lingers for returning writers, whatever the disk's speed.
const MAX_LINGER: Duration = Duration::from_millis(1);

struct Writer<S> {
    sink: S,
    counters: Arc<Counters>,
    outcomes: Outcomes<Done>,
    /// How many batches of an earlier group the last commit answered: writers expected back
    /// (see [`Step::Linger`]).
    expected: usize,
    /// How long the last commit took: what a flush costs, the bound of a linger.
    last_commit: Duration,
}

impl<S: GroupSink> Writer<S> {
    fn run(
        mut self,
        rx: mpsc::Receiver<Job<S::Batch>>,
        notify: mpsc::Sender<Answers>,
        max_group: usize,
    ) {
        loop {
            let queued = rx.try_recv().ok();
            let step = next_step(
                self.outcomes.awaits_flush(),
                queued.is_some(),
                self.expected > 0,
            );
            let mut group = Vec::new();
            match step {
                Step::Commit => group.extend(queued),
                Step::Linger => {
                    self.linger(&rx, &mut group, max_group);
                    if group.is_empty() {
                        self.flush();
                    }
                }
                Step::Flush => self.flush(),
                // Blocking here is the "no waiting window": an idle writer commits the first
                // batch the moment it arrives, together with whatever queued up behind it.
                Step::Wait => match rx.recv() {
                    Ok(job) => group.push(job),
                    Err(mpsc::RecvError) => break,
                },
            }
            if !group.is_empty() {
                drain(&rx, &mut group, max_group);
                // A successful commit answers the batches that await a flush: their writers are
                // the ones expected back afterwards.
                self.expected = self.outcomes.unflushed();
                let began = Instant::now();
                self.commit_isolated(group);
                self.last_commit = began.elapsed();
            }
            self.hand_out(&notify);
        }
    }

    /// Waits for the writers the last commit answered to come back, until as many batches as
    /// were answered are queued, for at most as long as the last commit took (and
    /// [`MAX_LINGER`]).
    fn linger(
        &mut self,
        rx: &mpsc::Receiver<Job<S::Batch>>,
        group: &mut Vec<Job<S::Batch>>,
        max_group: usize,
    ) {
        let target = std::mem::take(&mut self.expected).min(max_group);
        let deadline = Instant::now() + self.last_commit.min(MAX_LINGER);
        while group.len() < target {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(job) => {
                    group.push(job);
                    drain(rx, group, target);
                }
                Err(_) => break,
            }
        }
    }

    /// Flushes the committed batches that await it and settles them.
    fn flush(&mut self) {
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        match self.sink.flush() {
            Ok(()) => self.outcomes.flushed(),
            Err(error) => {
                tracing::error!(%error, "storage flush failed; the writes it covered get the error");
                self.outcomes.flush_failed(&error);
            }
        }
    }

    /// Sends the answers that are ready to the notifier thread, in apply order.
    fn hand_out(&mut self, notify: &mpsc::Sender<Answers>) {
        let answers = self.outcomes.take_ready();
        if answers.is_empty() {
            return;
        }
        let failed = answers.iter().filter(|(_, r)| r.is_err()).count() as u64;
        let ok = answers.len() as u64 - failed;
        self.counters.batches_ok.fetch_add(ok, Ordering::Relaxed);
        self.counters
            .batches_failed
            .fetch_add(failed, Ordering::Relaxed);
        if let Err(mpsc::SendError(answers)) = notify.send(answers) {
            // The notifier is gone (it panicked in a callback): answer here instead.
            for (done, outcome) in answers {
                done(outcome);
            }
        }
    }

    /// Commits `jobs` in one transaction if possible, otherwise splits them so that only the
    /// batches that fail on their own get an error. Records every job's outcome, in order.
    fn commit_isolated(&mut self, mut jobs: Vec<Job<S::Batch>>) {
        if jobs.is_empty() {
            return;
        }
        let outcome = {
            let batches: Vec<&S::Batch> = jobs.iter().map(|j| &j.batch).collect();
            self.sink.write_group(&batches)
        };
        match outcome {
            Ok(committed) => {
                self.counters.commits.fetch_add(1, Ordering::Relaxed);
                self.outcomes
                    .committed(jobs.into_iter().map(|job| job.done), committed);
            }
            Err(GroupFailure::Apply { error, .. }) if jobs.len() == 1 => {
                if let Some(job) = jobs.pop() {
                    self.outcomes.failed(job.done, error);
                }
            }
            Err(GroupFailure::Commit(error)) if jobs.len() == 1 => {
                // The failed commit may have been a failed flush: what awaited one is unknown.
                self.outcomes.flush_failed(&error);
                if let Some(job) = jobs.pop() {
                    self.outcomes.failed(job.done, error);
                }
            }
            Err(GroupFailure::Apply { index, .. }) => {
                let index = index.min(jobs.len() - 1);
                let rest = jobs.split_off(index + 1);
                let failing = jobs.pop();
                self.commit_isolated(jobs);
                if let Some(failing) = failing {
                    self.commit_isolated(vec![failing]);
                }
                self.commit_isolated(rest);
            }
            Err(GroupFailure::Commit(error)) => {
                self.outcomes.flush_failed(&error);
                for job in jobs {
                    self.commit_isolated(vec![job]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
