//! Which batches may be answered, and how, given what the disk has made durable so far.
//!
//! A commit whose sink defers its final flush ([`Committed::AwaitsFlush`]) is visible but not
//! yet known to be on disk; its batches are *held* until the next successful commit (whose own
//! flush covers everything committed before it) or an explicit flush. A batch that fails is
//! held behind them too, so that answers always go out in apply order. Pure bookkeeping, no IO:
//! the writer thread feeds it what happened and hands out what it releases.

use super::Committed;
use crate::storage::StorageError;

/// One batch's answer, waiting to be handed out.
pub(super) type Outcome<D> = (D, Result<(), StorageError>);

/// The outcomes of batches the writer has dealt with, in apply order. `D` is whatever the
/// writer needs to answer a batch (its callback).
#[derive(Debug)]
pub(super) struct Outcomes<D> {
    /// Since the last flush, in apply order: committed batches awaiting a flush (`Ok`) and
    /// failed batches behind them.
    held: Vec<Outcome<D>>,
    /// How many of `held` are committed and await a flush.
    unflushed: usize,
    /// Outcomes that may be handed out, in apply order.
    ready: Vec<Outcome<D>>,
}

impl<D> Default for Outcomes<D> {
    fn default() -> Self {
        Self {
            held: Vec::new(),
            unflushed: 0,
            ready: Vec::new(),
        }
    }
}

impl<D> Outcomes<D> {
    /// A group committed. Its commit flushed the disk after everything committed before it, so
    /// every held batch is now durable; the group's own batches are durable now or once the next
    /// flush succeeds, as `committed` says.
    pub(super) fn committed(&mut self, group: impl IntoIterator<Item = D>, committed: Committed) {
        self.release(None);
        for done in group {
            self.held.push((done, Ok(())));
            self.unflushed += 1;
        }
        if committed == Committed::Durable {
            self.release(None);
        }
    }

    /// A batch failed on its own; nothing of it was written. Answered after the batches applied
    /// before it.
    pub(super) fn failed(&mut self, done: D, error: StorageError) {
        self.held.push((done, Err(error)));
        if self.unflushed == 0 {
            self.release(None);
        }
    }

    /// An explicit flush succeeded: every held batch is durable.
    pub(super) fn flushed(&mut self) {
        self.release(None);
    }

    /// A flush failed, or a commit failed in a way that may have involved one: whether the held
    /// batches reached the disk is unknown, so they are answered with `error`, never `Ok`.
    pub(super) fn flush_failed(&mut self, error: &StorageError) {
        self.release(Some(error));
    }

    /// Whether committed batches wait for a flush before they may be answered.
    pub(super) fn awaits_flush(&self) -> bool {
        self.unflushed > 0
    }

    /// How many committed batches wait for a flush.
    pub(super) fn unflushed(&self) -> usize {
        self.unflushed
    }

    /// Takes the outcomes that may be handed out, in apply order.
    pub(super) fn take_ready(&mut self) -> Vec<Outcome<D>> {
        std::mem::take(&mut self.ready)
    }

    fn release(&mut self, failure: Option<&StorageError>) {
        self.ready.extend(
            self.held
                .drain(..)
                .map(|(done, outcome)| match (outcome, failure) {
                    (Ok(()), Some(error)) => (done, Err(error.clone())),
                    (outcome, _) => (done, outcome),
                }),
        );
        self.unflushed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> StorageError {
        StorageError::Backend(s.into())
    }

    fn ready(o: &mut Outcomes<u32>) -> Vec<(u32, Result<(), StorageError>)> {
        o.take_ready()
    }

    #[test]
    fn a_durable_commit_is_answered_at_once() {
        let mut o = Outcomes::default();
        o.committed([1, 2], Committed::Durable);
        assert!(!o.awaits_flush());
        assert_eq!(ready(&mut o), vec![(1, Ok(())), (2, Ok(()))]);
        assert!(ready(&mut o).is_empty());
    }

    #[test]
    fn a_deferred_commit_waits_for_the_next_commit_or_a_flush() {
        let mut o = Outcomes::default();
        o.committed([1, 2], Committed::AwaitsFlush);
        assert!(o.awaits_flush());
        assert!(ready(&mut o).is_empty(), "not known durable yet");
        // The next commit's flush covers the previous group; the new group waits in turn.
        o.committed([3], Committed::AwaitsFlush);
        assert_eq!(ready(&mut o), vec![(1, Ok(())), (2, Ok(()))]);
        assert!(o.awaits_flush());
        o.flushed();
        assert!(!o.awaits_flush());
        assert_eq!(ready(&mut o), vec![(3, Ok(()))]);
    }

    #[test]
    fn a_failed_batch_is_answered_in_apply_order() {
        let mut o = Outcomes::default();
        o.committed([1], Committed::AwaitsFlush);
        o.failed(2, err("bad"));
        assert!(
            ready(&mut o).is_empty(),
            "behind batch 1, which awaits a flush"
        );
        o.committed([3], Committed::AwaitsFlush);
        assert_eq!(ready(&mut o), vec![(1, Ok(())), (2, Err(err("bad")))]);
        // With nothing awaiting a flush, a failure is answered at once.
        o.flushed();
        o.failed(4, err("bad"));
        assert_eq!(ready(&mut o), vec![(3, Ok(())), (4, Err(err("bad")))]);
        assert!(!o.awaits_flush());
    }

    #[test]
    fn a_failed_flush_never_answers_ok() {
        let mut o = Outcomes::default();
        o.committed([1, 2], Committed::AwaitsFlush);
        o.failed(3, err("own"));
        o.flush_failed(&err("flush"));
        assert_eq!(
            ready(&mut o),
            vec![
                (1, Err(err("flush"))),
                (2, Err(err("flush"))),
                (3, Err(err("own")))
            ]
        );
        assert!(!o.awaits_flush());
        // The store goes on: a later commit is answered normally.
        o.committed([4], Committed::Durable);
        assert_eq!(ready(&mut o), vec![(4, Ok(()))]);
    }
}
