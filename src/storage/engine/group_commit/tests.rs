use super::*;
use std::sync::{Condvar, Mutex};

/// A sink that records every group and flush it sees, fails batches it is told to, can defer
/// its flushes (as the pipelined LMDB sink does), and can hold the first commit until released
/// (so that later submissions pile up behind it).
#[derive(Clone, Default)]
struct Probe {
    inner: Arc<(Mutex<ProbeState>, Condvar)>,
}

#[derive(Default)]
struct ProbeState {
    groups: Vec<Vec<u32>>,
    committed: Vec<u32>,
    /// Every successful commit (`Commit(batches)`) and flush, in order.
    events: Vec<Event>,
    fail_apply: Vec<u32>,
    fail_commit_when_grouped: bool,
    fail_flush: bool,
    defer_flush: bool,
    hold_first: bool,
    released: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Commit(Vec<u32>),
    Flush,
}

impl Probe {
    fn new(defer_flush: bool) -> Self {
        let probe = Self::default();
        probe.state().defer_flush = defer_flush;
        probe
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ProbeState> {
        self.inner.0.lock().unwrap()
    }

    fn release(&self) {
        self.state().released = true;
        self.inner.1.notify_all();
    }
}

impl GroupSink for Probe {
    type Batch = u32;
    fn write_group(&mut self, batches: &[&u32]) -> Result<Committed, GroupFailure> {
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
        let ids: Vec<u32> = batches.iter().map(|b| **b).collect();
        st.committed.extend(&ids);
        st.events.push(Event::Commit(ids));
        Ok(if st.defer_flush {
            Committed::AwaitsFlush
        } else {
            Committed::Durable
        })
    }

    fn flush(&mut self) -> Result<(), StorageError> {
        let mut st = self.state();
        assert!(st.defer_flush, "a durable sink is never asked to flush");
        if st.fail_flush {
            return Err(StorageError::Backend("flush".into()));
        }
        st.events.push(Event::Flush);
        Ok(())
    }
}

/// `(batch, outcome, how many commits and flushes the sink had done when it was answered)`.
type Answered = Arc<Mutex<Vec<(u32, Result<(), StorageError>, usize)>>>;

fn collect(probe: &Probe) -> (Answered, impl Fn(u32) -> Done) {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let (a, probe) = (answers.clone(), probe.clone());
    let make = move |id: u32| -> Done {
        let (a, probe) = (a.clone(), probe.clone());
        Box::new(move |r| {
            let seen = probe.state().events.len();
            a.lock().unwrap().push((id, r, seen));
        })
    };
    (answers, make)
}

/// Every `Ok` was handed out only after the disk was flushed behind its batch's commit: by that
/// commit itself for a durable sink, by a later commit or flush for a deferring one.
fn assert_ok_only_when_flushed(probe: &Probe, answers: &Answered) {
    let st = probe.state();
    for (id, outcome, seen) in answers.lock().unwrap().iter() {
        if outcome.is_err() {
            continue;
        }
        let at = st
            .events
            .iter()
            .position(|e| matches!(e, Event::Commit(ids) if ids.contains(id)))
            .unwrap_or_else(|| panic!("batch {id} answered Ok but never committed"));
        let flushed_by = if st.defer_flush { at + 1 } else { at };
        assert!(
            *seen > flushed_by,
            "batch {id} answered Ok after {seen} events, its flush is event {flushed_by}: {:?}",
            st.events
        );
    }
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

/// Submits batch 0, waits until the writer is inside its commit (held), queues `rest` behind
/// it, releases the commit and closes the committer.
fn run_held(probe: &Probe, rest: std::ops::RangeInclusive<u32>) -> Answered {
    probe.state().hold_first = true;
    let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
    let (answers, done) = collect(probe);
    assert!(committer.submit(0, done(0)).is_ok());
    wait_until(|| probe.state().groups.len() == 1);
    for i in rest {
        assert!(committer.submit(i, done(i)).is_ok());
    }
    probe.release();
    drop(committer);
    answers
}

#[test]
fn next_step_waits_only_for_writers_it_answered() {
    for expected in [false, true] {
        assert_eq!(
            next_step(false, true, expected),
            Step::Commit,
            "idle: at once"
        );
        assert_eq!(
            next_step(true, true, expected),
            Step::Commit,
            "it flushes the last group"
        );
        assert_eq!(
            next_step(false, false, expected),
            Step::Wait,
            "nothing to flush"
        );
    }
    assert_eq!(
        next_step(true, false, false),
        Step::Flush,
        "a lone writer: flush now"
    );
    assert_eq!(
        next_step(true, false, true),
        Step::Linger,
        "answered writers come back"
    );
}

#[test]
fn queued_batches_share_one_commit() {
    for defer in [false, true] {
        let probe = Probe::new(defer);
        let answers = run_held(&probe, 1..=50);
        let st = probe.state();
        assert_eq!(st.groups, vec![vec![0], (1..=50).collect::<Vec<_>>()]);
        // Deferred: the second commit flushed the first group's, one flush for the second.
        let flushes = st.events.iter().filter(|e| **e == Event::Flush).count();
        assert_eq!(flushes, usize::from(defer));
        drop(st);
        assert_ok_only_when_flushed(&probe, &answers);
        let answers = answers.lock().unwrap();
        assert_eq!(answers.len(), 51);
        assert!(answers.iter().all(|(_, r, _)| r.is_ok()));
        // Answered in apply order.
        assert!(answers.windows(2).all(|w| w[0].0 < w[1].0));
    }
}

#[test]
fn a_lone_writer_commits_and_flushes_each_batch_by_itself() {
    for defer in [false, true] {
        let probe = Probe::new(defer);
        let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
        let (answers, done) = collect(&probe);
        for i in 0..5 {
            let (tx, rx) = mpsc::channel();
            let done = done(i);
            let submitted = committer.submit(
                i,
                Box::new(move |r| {
                    done(r.clone());
                    tx.send(r).unwrap();
                }),
            );
            assert!(submitted.is_ok());
            // Answered without any later submission: nobody waits for a next writer.
            rx.recv().unwrap().unwrap();
        }
        let stats = committer.stats();
        assert_eq!(stats.commits, 5);
        assert_eq!(stats.flushes, if defer { 5 } else { 0 });
        assert_eq!(stats.batches_ok, 5);
        assert_eq!(probe.state().groups.len(), 5);
        assert_ok_only_when_flushed(&probe, &answers);
    }
}

#[test]
fn only_the_failing_batch_gets_the_error() {
    for defer in [false, true] {
        let probe = Probe::new(defer);
        probe.state().fail_apply = vec![7];
        let answers = run_held(&probe, 1..=10);
        assert_ok_only_when_flushed(&probe, &answers);
        let answers = answers.lock().unwrap();
        let ids: Vec<u32> = answers.iter().map(|(id, _, _)| *id).collect();
        assert_eq!(ids, (0..=10).collect::<Vec<_>>(), "apply order");
        for (id, r, _) in answers.iter() {
            assert_eq!(r.is_err(), *id == 7, "batch {id}: {r:?}");
        }
        let st = probe.state();
        assert_eq!(st.committed, vec![0, 1, 2, 3, 4, 5, 6, 8, 9, 10]);
    }
}

#[test]
fn a_failed_commit_is_retried_batch_by_batch() {
    for defer in [false, true] {
        let probe = Probe::new(defer);
        probe.state().fail_commit_when_grouped = true;
        let answers = run_held(&probe, 1..=3);
        assert_ok_only_when_flushed(&probe, &answers);
        let answers = answers.lock().unwrap();
        let outcomes: Vec<bool> = answers.iter().map(|(_, r, _)| r.is_ok()).collect();
        // Batch 0 was committed first. Deferred, it still awaited a flush when the grouped
        // commit failed: whether it is on disk is unknown, so it gets the error, never `Ok`.
        assert_eq!(outcomes, vec![!defer, true, true, true], "{answers:?}");
        assert_eq!(probe.state().committed, vec![0, 1, 2, 3]);
    }
}

#[test]
fn a_failed_flush_answers_the_error_and_the_store_goes_on() {
    let probe = Probe::new(true);
    probe.state().fail_flush = true;
    let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    assert!(committer
        .submit(1, Box::new(move |r| tx.send(r).unwrap()))
        .is_ok());
    assert_eq!(
        rx.recv().unwrap(),
        Err(StorageError::Backend("flush".into()))
    );
    probe.state().fail_flush = false;
    assert!(committer
        .submit(2, Box::new(move |r| tx2.send(r).unwrap()))
        .is_ok());
    assert_eq!(rx.recv().unwrap(), Ok(()));
    let stats = committer.stats();
    assert_eq!((stats.batches_ok, stats.batches_failed), (1, 1));
}

#[test]
fn closing_flushes_what_awaits_a_flush() {
    let probe = Probe::new(true);
    let answers = run_held(&probe, 1..=20);
    assert_eq!(probe.state().events.last(), Some(&Event::Flush));
    assert_ok_only_when_flushed(&probe, &answers);
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), 21);
    assert!(answers.iter().all(|(_, r, _)| r.is_ok()));
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
