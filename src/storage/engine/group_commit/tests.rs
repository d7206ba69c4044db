use super::*;
use std::sync::{Condvar, Mutex};

/// A sink that records every group it commits, fails batches it is told to, and can hold the
/// first commit until released (so that later submissions pile up behind it).
#[derive(Clone, Default)]
struct Probe {
    inner: Arc<(Mutex<ProbeState>, Condvar)>,
}

#[derive(Default)]
struct ProbeState {
    groups: Vec<Vec<u32>>,
    committed: Vec<u32>,
    /// Every successful commit's batches, in order.
    commits: Vec<Vec<u32>>,
    fail_apply: Vec<u32>,
    fail_commit_when_grouped: bool,
    hold_first: bool,
    released: bool,
}

impl Probe {
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
        let ids: Vec<u32> = batches.iter().map(|b| **b).collect();
        st.committed.extend(&ids);
        st.commits.push(ids);
        Ok(())
    }
}

/// `(batch, outcome, how many commits the sink had made when it was answered)`.
type Answered = Arc<Mutex<Vec<(u32, Result<(), StorageError>, usize)>>>;

fn collect(probe: &Probe) -> (Answered, impl Fn(u32) -> Done) {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let (a, probe) = (answers.clone(), probe.clone());
    let make = move |id: u32| -> Done {
        let (a, probe) = (a.clone(), probe.clone());
        Box::new(move |r| {
            let seen = probe.state().commits.len();
            a.lock().unwrap().push((id, r, seen));
        })
    };
    (answers, make)
}

/// Every `Ok` was handed out only after the commit that carried its batch.
fn assert_ok_only_when_committed(probe: &Probe, answers: &Answered) {
    let st = probe.state();
    for (id, outcome, seen) in answers.lock().unwrap().iter() {
        if outcome.is_err() {
            continue;
        }
        let at = st
            .commits
            .iter()
            .position(|ids| ids.contains(id))
            .unwrap_or_else(|| panic!("batch {id} answered Ok but never committed"));
        assert!(
            *seen > at,
            "batch {id} answered Ok after {seen} commits, its commit is number {at}: {:?}",
            st.commits
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
fn queued_batches_share_one_commit() {
    let probe = Probe::default();
    let answers = run_held(&probe, 1..=50);
    assert_eq!(
        probe.state().groups,
        vec![vec![0], (1..=50).collect::<Vec<_>>()]
    );
    assert_ok_only_when_committed(&probe, &answers);
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), 51);
    assert!(answers.iter().all(|(_, r, _)| r.is_ok()));
    // Answered in apply order.
    assert!(answers.windows(2).all(|w| w[0].0 < w[1].0));
}

#[test]
fn a_lone_writer_commits_each_batch_by_itself() {
    let probe = Probe::default();
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
    assert_eq!(stats.batches_ok, 5);
    assert_eq!(probe.state().groups.len(), 5);
    assert_ok_only_when_committed(&probe, &answers);
}

#[test]
fn only_the_failing_batch_gets_the_error() {
    let probe = Probe::default();
    probe.state().fail_apply = vec![7];
    let answers = run_held(&probe, 1..=10);
    assert_ok_only_when_committed(&probe, &answers);
    let answers = answers.lock().unwrap();
    let ids: Vec<u32> = answers.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, (0..=10).collect::<Vec<_>>(), "apply order");
    for (id, r, _) in answers.iter() {
        assert_eq!(r.is_err(), *id == 7, "batch {id}: {r:?}");
    }
    let st = probe.state();
    assert_eq!(st.committed, vec![0, 1, 2, 3, 4, 5, 6, 8, 9, 10]);
}

#[test]
fn a_failed_commit_is_retried_batch_by_batch() {
    let probe = Probe::default();
    probe.state().fail_commit_when_grouped = true;
    let answers = run_held(&probe, 1..=3);
    assert_ok_only_when_committed(&probe, &answers);
    let answers = answers.lock().unwrap();
    let outcomes: Vec<bool> = answers.iter().map(|(_, r, _)| r.is_ok()).collect();
    assert_eq!(outcomes, vec![true; 4], "{answers:?}");
    let st = probe.state();
    assert_eq!(st.committed, vec![0, 1, 2, 3]);
    assert_eq!(st.commits, vec![vec![0], vec![1], vec![2], vec![3]]);
}

#[test]
fn answered_writers_share_the_next_commit_with_those_queued_meanwhile() {
    // Batch 0 commits (held) while batch 1 queues. When 0 is answered, its writer comes back
    // with batch 2: the writer holds the next group open for it instead of committing 1 alone.
    // The held commit is long and the cap generous, so no timing decides the outcome.
    let probe = Probe::default();
    probe.state().hold_first = true;
    let committer =
        GroupCommitter::spawn_with("t".into(), probe.clone(), 1024, Duration::from_secs(30))
            .unwrap();
    let (back_tx, back_rx) = mpsc::channel();
    assert!(committer
        .submit(0, Box::new(move |r| back_tx.send(r).unwrap()))
        .is_ok());
    wait_until(|| probe.state().groups.len() == 1);
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    assert!(committer
        .submit(1, Box::new(move |r| tx.send((1, r)).unwrap()))
        .is_ok());
    // The commit of batch 0 takes a while: that is how long the writer may wait for its writer.
    std::thread::sleep(Duration::from_millis(300));
    probe.release();
    back_rx.recv().unwrap().unwrap();
    assert!(committer
        .submit(2, Box::new(move |r| tx2.send((2, r)).unwrap()))
        .is_ok());
    assert_eq!(rx.recv().unwrap(), (1, Ok(())));
    assert_eq!(rx.recv().unwrap(), (2, Ok(())));
    assert_eq!(probe.state().groups, vec![vec![0], vec![1, 2]]);
    let stats = committer.stats();
    assert_eq!((stats.commits, stats.batches_ok), (2, 3));
}

#[test]
fn a_group_where_every_batch_fails_answers_each_with_its_error() {
    // Each batch fails even alone (as with a full map): 4096 splits, answered in order.
    let probe = Probe::default();
    probe.state().fail_apply = (0..=4095).collect();
    let answers = run_held(&probe, 1..=4095);
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), 4096);
    for (i, (id, r, _)) in answers.iter().enumerate() {
        assert_eq!(*id as usize, i, "apply order");
        assert_eq!(r, &Err(StorageError::Backend(format!("bad {id}"))));
    }
    assert!(probe.state().committed.is_empty());
}

#[test]
fn a_panicking_callback_does_not_keep_the_others_from_their_answers() {
    let probe = Probe::default();
    probe.state().hold_first = true;
    let committer = GroupCommitter::spawn("t".into(), probe.clone(), 1024).unwrap();
    let (tx, rx) = mpsc::channel();
    assert!(committer.submit(0, Box::new(|_| {})).is_ok());
    wait_until(|| probe.state().groups.len() == 1);
    for i in 1..=3u32 {
        let tx = tx.clone();
        let done: Done = Box::new(move |r| {
            assert!(i != 2, "a caller's callback panics");
            tx.send((i, r)).unwrap();
        });
        assert!(committer.submit(i, done).is_ok());
    }
    probe.release();
    assert_eq!(rx.recv().unwrap(), (1, Ok(())));
    assert_eq!(rx.recv().unwrap(), (3, Ok(())));
    // The notifier survived: later groups are answered too.
    let tx2 = tx.clone();
    assert!(committer
        .submit(4, Box::new(move |r| tx2.send((4, r)).unwrap()))
        .is_ok());
    assert_eq!(rx.recv().unwrap(), (4, Ok(())));
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
