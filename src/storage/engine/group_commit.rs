//! Group commit: many writers, one transaction, one fsync.
//!
//! A dedicated writer thread owns every write transaction. Writers enqueue their batch (the queue
//! order is the apply order) and get called back once it is durable. The thread blocks on the
//! queue while idle; when a batch arrives it takes everything already queued behind it, applies
//! all of it in one transaction, commits (which fsyncs), and then answers each waiter. A lone
//! writer therefore pays exactly one fsync per write and waits for nothing else, while 64
//! concurrent writers share one fsync between them: the queue fills up during each fsync.
//!
//! Waking the waiters is handed to a second thread, so the writer starts the next transaction
//! (with whatever queued meanwhile) while the previous group's writers are still being woken:
//! on a small machine the wake-ups, not the disk, would otherwise bound throughput. Waiters are
//! still answered strictly in apply order, by that one thread.
//!
//! Starting at once has a cost under load: the writers just answered are still waking up, so
//! the next group would hold only those that queued during the last fsync, and the writers would
//! split into two smaller cohorts taking turns. So when the last group held more than one batch
//! (writers are busy), the writer gathers a little longer: until the writers just answered are
//! back on top of those already queued, for at most half the last commit's duration (and never
//! more than [`MAX_GATHER`]). After a group of one (a lone writer, or an idle store) it never
//! waits.
//!
//! A failing batch must not fail its neighbours. When a group does not go through, the thread
//! splits it: the batches before the failing one are committed together, the failing one is
//! retried alone (and gets the error if it fails again), the rest form a new group. If the commit
//! itself fails, every batch is retried on its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::storage::StorageError;

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
    /// Applies `batches` in order in one transaction and commits it durably, or commits nothing.
    fn write_group(&mut self, batches: &[&Self::Batch]) -> Result<(), GroupFailure>;
}

/// Counters of what the writer did, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed (each one fsync).
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
            answers: Vec::new(),
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

/// Takes whatever is queued, up to `max` batches in `group`.
fn drain<B>(rx: &mpsc::Receiver<Job<B>>, group: &mut Vec<Job<B>>, max: usize) {
    while group.len() < max {
        match rx.try_recv() {
            Ok(job) => group.push(job),
            Err(_) => break,
        }
    }
}

/// What the previous group looked like, to decide whether the next one may gather.
#[derive(Default)]
struct LastGroup {
    batches: usize,
    commit_time: Duration,
}

impl LastGroup {
    /// Whether a group that has `queued` batches should gather more, and if so how many to
    /// wait for and until when. Only when the last group shows concurrent writers (more than
    /// one batch): those just answered are expected back, on top of what is queued already.
    /// The wait lasts at most half the last commit (and [`MAX_GATHER`]). A lone writer never
    /// waits.
    fn gather(&self, queued: usize, max_group: usize) -> Option<(usize, Instant)> {
        let target = (queued + self.batches).min(max_group);
        (self.batches > 1 && queued < target).then(|| {
            let wait = (self.commit_time / 2).min(MAX_GATHER);
            (target, Instant::now() + wait)
        })
    }
}

/// The longest a group waits for returning writers, whatever the disk's speed.
const MAX_GATHER: Duration = Duration::from_millis(2);

struct Writer<S> {
    sink: S,
    counters: Arc<Counters>,
    answers: Answers,
}

impl<S: GroupSink> Writer<S> {
    fn run(
        mut self,
        rx: mpsc::Receiver<Job<S::Batch>>,
        notify: mpsc::Sender<Answers>,
        max_group: usize,
    ) {
        // Blocking here is the "no waiting window": an idle writer commits the first batch the
        // moment it arrives, together with whatever queued up behind it in the meantime.
        let mut last = LastGroup::default();
        while let Ok(first) = rx.recv() {
            let mut group = vec![first];
            drain(&rx, &mut group, max_group);
            if let Some((target, deadline)) = last.gather(group.len(), max_group) {
                // Writers are busy: the ones just answered are coming back. Give them a moment
                // to share this fsync instead of forming a second, half-empty group behind it.
                while group.len() < target {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    match rx.recv_timeout(deadline - now) {
                        Ok(job) => {
                            group.push(job);
                            drain(&rx, &mut group, target);
                        }
                        Err(_) => break,
                    }
                }
            }
            let began = Instant::now();
            last.batches = group.len();
            self.commit_isolated(group);
            last.commit_time = began.elapsed();
            let answers = std::mem::take(&mut self.answers);
            if let Err(mpsc::SendError(answers)) = notify.send(answers) {
                // The notifier is gone (it panicked in a callback): answer here instead.
                for (done, outcome) in answers {
                    done(outcome);
                }
            }
        }
    }

    /// Commits `jobs` in one transaction if possible, otherwise splits them so that only the
    /// batches that fail on their own get an error. Answers every job, in order.
    fn commit_isolated(&mut self, mut jobs: Vec<Job<S::Batch>>) {
        if jobs.is_empty() {
            return;
        }
        let outcome = {
            let batches: Vec<&S::Batch> = jobs.iter().map(|j| &j.batch).collect();
            self.sink.write_group(&batches)
        };
        match outcome {
            Ok(()) => {
                self.counters.commits.fetch_add(1, Ordering::Relaxed);
                for job in jobs {
                    self.answer(job, Ok(()));
                }
            }
            Err(GroupFailure::Apply { error, .. } | GroupFailure::Commit(error))
                if jobs.len() == 1 =>
            {
                if let Some(job) = jobs.pop() {
                    self.answer(job, Err(error));
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
            Err(GroupFailure::Commit(_)) => {
                for job in jobs {
                    self.commit_isolated(vec![job]);
                }
            }
        }
    }

    fn answer(&mut self, job: Job<S::Batch>, outcome: Result<(), StorageError>) {
        let counter = if outcome.is_ok() {
            &self.counters.batches_ok
        } else {
            &self.counters.batches_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.answers.push((job.done, outcome));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};

    /// A sink that records every group it sees, fails batches it is told to, and can hold the
    /// first commit until released (so that later submissions pile up behind it).
    #[derive(Clone, Default)]
    struct Probe {
        inner: Arc<(Mutex<ProbeState>, Condvar)>,
    }

    #[derive(Default)]
    struct ProbeState {
        groups: Vec<Vec<u32>>,
        committed: Vec<u32>,
        fail_apply: Vec<u32>,
        fail_commit_when_grouped: bool,
        hold_first: bool,
        released: bool,
    }

    impl GroupSink for Probe {
        type Batch = u32;
        fn write_group(&mut self, batches: &[&u32]) -> Result<(), GroupFailure> {
            let (lock, cvar) = &*self.inner;
            let mut st = lock.lock().unwrap();
            st.groups.push(batches.iter().map(|b| **b).collect());
            if st.hold_first && st.groups.len() == 1 {
                cvar.notify_all();
                while !st.released {
                    st = cvar.wait(st).unwrap();
                }
            }
            if let Some(index) = batches.iter().position(|b| st.fail_apply.contains(b)) {
                return Err(GroupFailure::Apply {
                    index,
                    error: StorageError::Backend(format!("bad {}", batches[index])),
                });
            }
            if st.fail_commit_when_grouped && batches.len() > 1 {
                return Err(GroupFailure::Commit(StorageError::Backend("commit".into())));
            }
            st.committed.extend(batches.iter().map(|b| **b));
            Ok(())
        }
    }

    type Answered = Arc<Mutex<Vec<(u32, Result<(), StorageError>)>>>;

    fn collect() -> (Answered, impl Fn(u32) -> Done) {
        let answers = Arc::new(Mutex::new(Vec::new()));
        let a = answers.clone();
        let make = move |id: u32| -> Done {
            let a = a.clone();
            Box::new(move |r| a.lock().unwrap().push((id, r)))
        };
        (answers, make)
    }

    fn wait_until(cond: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(
                std::time::Instant::now() < deadline,
                "condition not reached"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn queued_batches_share_one_commit() {
        let probe = Probe::default();
        probe.inner.0.lock().unwrap().hold_first = true;
        let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
        let (answers, done) = collect();
        assert!(committer.submit(0, done(0)).is_ok());
        // Wait until the writer is inside the first commit, then queue 50 more behind it.
        wait_until(|| probe.inner.0.lock().unwrap().groups.len() == 1);
        for i in 1..=50 {
            assert!(committer.submit(i, done(i)).is_ok());
        }
        {
            let mut st = probe.inner.0.lock().unwrap();
            st.released = true;
            probe.inner.1.notify_all();
        }
        drop(committer);
        let st = probe.inner.0.lock().unwrap();
        assert_eq!(st.groups, vec![vec![0], (1..=50).collect::<Vec<_>>()]);
        let answers = answers.lock().unwrap();
        assert_eq!(answers.len(), 51);
        assert!(answers.iter().all(|(_, r)| r.is_ok()));
        // Answered in apply order.
        assert!(answers.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn only_a_busy_writer_gathers_and_never_for_long() {
        let idle = LastGroup {
            batches: 1,
            commit_time: Duration::from_millis(1),
        };
        assert_eq!(idle.gather(1, 4096), None, "a lone writer never waits");
        assert_eq!(idle.gather(5, 4096), None);
        assert_eq!(LastGroup::default().gather(1, 4096), None);
        let busy = LastGroup {
            batches: 40,
            commit_time: Duration::from_secs(1),
        };
        let before = Instant::now();
        let (target, until) = busy.gather(3, 4096).expect("busy: gather");
        assert_eq!(target, 43, "what is queued plus the writers just answered");
        assert!(until <= Instant::now() + MAX_GATHER);
        assert!(until >= before);
        assert_eq!(busy.gather(3, 20).map(|(t, _)| t), Some(20), "capped");
        assert_eq!(busy.gather(20, 20), None, "a full group goes at once");
        let fast = LastGroup {
            batches: 40,
            commit_time: Duration::from_micros(300),
        };
        let (_, until) = fast.gather(0, 4096).unwrap();
        assert!(until <= Instant::now() + Duration::from_micros(150));
    }

    #[test]
    fn a_lone_writer_commits_each_batch_by_itself() {
        let probe = Probe::default();
        let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
        for i in 0..5 {
            let (tx, rx) = mpsc::channel();
            let submitted = committer.submit(i, Box::new(move |r| tx.send(r).unwrap()));
            assert!(submitted.is_ok());
            rx.recv().unwrap().unwrap();
        }
        assert_eq!(committer.stats().commits, 5);
        assert_eq!(probe.inner.0.lock().unwrap().groups.len(), 5);
    }

    #[test]
    fn only_the_failing_batch_gets_the_error() {
        let probe = Probe::default();
        {
            let mut st = probe.inner.0.lock().unwrap();
            st.hold_first = true;
            st.fail_apply = vec![7];
        }
        let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
        let (answers, done) = collect();
        assert!(committer.submit(0, done(0)).is_ok());
        wait_until(|| probe.inner.0.lock().unwrap().groups.len() == 1);
        for i in 1..=10 {
            assert!(committer.submit(i, done(i)).is_ok());
        }
        {
            probe.inner.0.lock().unwrap().released = true;
            probe.inner.1.notify_all();
        }
        drop(committer);
        let answers = answers.lock().unwrap();
        let ids: Vec<u32> = answers.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, (0..=10).collect::<Vec<_>>());
        for (id, r) in answers.iter() {
            assert_eq!(r.is_err(), *id == 7, "batch {id}: {r:?}");
        }
        let st = probe.inner.0.lock().unwrap();
        assert_eq!(st.committed, vec![0, 1, 2, 3, 4, 5, 6, 8, 9, 10]);
    }

    #[test]
    fn a_failed_commit_is_retried_batch_by_batch() {
        let probe = Probe::default();
        {
            let mut st = probe.inner.0.lock().unwrap();
            st.hold_first = true;
            st.fail_commit_when_grouped = true;
        }
        let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
        let (answers, done) = collect();
        assert!(committer.submit(0, done(0)).is_ok());
        wait_until(|| probe.inner.0.lock().unwrap().groups.len() == 1);
        for i in 1..=3 {
            assert!(committer.submit(i, done(i)).is_ok());
        }
        {
            probe.inner.0.lock().unwrap().released = true;
            probe.inner.1.notify_all();
        }
        drop(committer);
        assert!(answers.lock().unwrap().iter().all(|(_, r)| r.is_ok()));
        assert_eq!(probe.inner.0.lock().unwrap().committed, vec![0, 1, 2, 3]);
    }

    #[test]
    fn submitting_after_the_writer_is_gone_fails_cleanly() {
        let probe = Probe::default();
        let mut committer = GroupCommitter::spawn("t".into(), probe, 8).unwrap();
        committer.queue.take();
        let (tx, rx) = mpsc::channel();
        let Err(done) = committer.submit(1, Box::new(move |r| tx.send(r).unwrap())) else {
            panic!("the writer is gone");
        };
        assert!(rx.try_recv().is_err(), "handed back uncalled");
        done(Err(StorageError::Closed));
        assert_eq!(rx.recv().unwrap(), Err(StorageError::Closed));
    }
}
