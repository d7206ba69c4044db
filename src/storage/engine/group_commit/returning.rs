//! How long the writer holds a group open for the writers it has just answered.
//!
//! Writers that wait for their own write before their next one come back right after their
//! answer. If the writer committed the moment the first batch arrived, the writers would split
//! into cohorts that take turns (one committing while the other comes back), and each fsync would
//! carry only one cohort. Holding the group open until the answered writers are back lets every
//! fsync carry all of them. The wait is bounded so that writers that do not come back cost little,
//! it never applies to an idle store or a writer with one write at a time, and it backs off
//! ([`Backoff`]) where it does not pay off. Pure decision logic, no IO.

use std::time::{Duration, Instant};

/// The longest a group is held open for returning writers, whatever the disk's speed.
pub(super) const MAX_GATHER: Duration = Duration::from_millis(1);

/// Writers expected back after an answer: the group to wait for and until when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Returning {
    /// The group size worth waiting for: what was already queued when the answer went out plus
    /// the writers it answered.
    target: usize,
    /// When waiting stops paying off: as long after the answer as the commit took (a commit's
    /// time is what waiting may cost at most), and never more than a cap ([`MAX_GATHER`]).
    until: Instant,
}

impl Returning {
    /// After answering `answered` batches at `now`, with `queued` batches submitted before the
    /// answer and not yet taken, and the last commit having taken `commit_took`; a group is
    /// held at most `cap`. `None` when nobody was answered.
    pub(super) fn after_answer(
        answered: usize,
        queued: usize,
        now: Instant,
        commit_took: Duration,
        cap: Duration,
        max_group: usize,
    ) -> Option<Self> {
        (answered > 0).then(|| Self {
            target: (queued + answered).min(max_group),
            until: now + commit_took.min(cap),
        })
    }

    /// How much longer a group of `len` batches should wait at `now`: `None` to commit now
    /// (the group is complete, or waiting no longer pays off).
    pub(super) fn wait(&self, len: usize, now: Instant) -> Option<Duration> {
        (!self.complete(len) && now < self.until).then(|| self.until - now)
    }

    /// Whether a group of `len` batches holds everyone expected.
    pub(super) fn complete(&self, len: usize) -> bool {
        len >= self.target
    }
}

/// The most holds skipped in a row after holds that did not pay off: `2^5 - 1`.
const MAX_MISSES: u32 = 5;

/// Whether holding groups open has been paying off lately.
///
/// Not every answered batch brings its writer back: a caller that keeps several writes in flight
/// and moves on (an actor submitting its mutations one after another) is answered batch by batch
/// but submits at its own pace, and for it a hold would run to its bound every time. So a hold
/// that ends at its bound short of its group makes the writer skip the next holds — 1, then 3,
/// 7, 15, up to 31 in a row — and a hold that completes its group resets that.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    /// Holds in a row that ended at their bound.
    misses: u32,
    /// Holds still to skip.
    skip: u32,
}

impl Backoff {
    /// Whether the next group may be held open; counts a skipped hold.
    pub(super) fn may_hold(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// A hold ended, with its group `complete` or at its bound.
    pub(super) fn held(&mut self, complete: bool) {
        if complete {
            self.misses = 0;
        } else {
            self.misses = (self.misses + 1).min(MAX_MISSES);
            self.skip = (1 << self.misses) - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: Duration = Duration::from_micros(400);

    #[test]
    fn nobody_answered_nobody_awaited() {
        assert_eq!(
            Returning::after_answer(0, 5, Instant::now(), COMMIT, MAX_GATHER, 4096),
            None
        );
    }

    #[test]
    fn a_lone_writer_commits_as_soon_as_it_is_back() {
        let now = Instant::now();
        let r = Returning::after_answer(1, 0, now, COMMIT, MAX_GATHER, 4096).unwrap();
        assert_eq!(r.wait(1, now), None);
    }

    #[test]
    fn the_queued_cohort_waits_for_the_answered_one() {
        let now = Instant::now();
        // 32 answered while 32 others were queued: hold the group until all 64 are in it.
        let r = Returning::after_answer(32, 32, now, COMMIT, MAX_GATHER, 4096).unwrap();
        let later = now + Duration::from_micros(100);
        assert_eq!(r.wait(32, later), Some(Duration::from_micros(300)));
        assert_eq!(r.wait(63, later), Some(Duration::from_micros(300)));
        assert_eq!(r.wait(64, later), None);
    }

    #[test]
    fn the_wait_ends_a_commit_after_the_answer() {
        let now = Instant::now();
        let r = Returning::after_answer(64, 0, now, COMMIT, MAX_GATHER, 4096).unwrap();
        assert_eq!(r.wait(10, now + COMMIT), None);
        // An idle store: the first batch after a pause is committed at once.
        assert_eq!(r.wait(1, now + Duration::from_secs(1)), None);
    }

    #[test]
    fn a_slow_commit_never_holds_a_group_longer_than_the_cap() {
        let now = Instant::now();
        let r =
            Returning::after_answer(64, 0, now, Duration::from_secs(2), MAX_GATHER, 4096).unwrap();
        assert_eq!(r.wait(1, now), Some(MAX_GATHER));
        assert_eq!(r.wait(1, now + MAX_GATHER), None);
    }

    #[test]
    fn holds_that_do_not_pay_off_are_skipped_more_and_more() {
        let mut backoff = Backoff::default();
        assert!(backoff.may_hold());
        let mut skipped = Vec::new();
        for _ in 0..7 {
            backoff.held(false);
            let mut n = 0;
            while !backoff.may_hold() {
                n += 1;
            }
            skipped.push(n);
        }
        assert_eq!(skipped, vec![1, 3, 7, 15, 31, 31, 31]);
        // A hold that completes its group: every next group may be held again.
        backoff.held(true);
        assert!(backoff.may_hold() && backoff.may_hold());
        backoff.held(false);
        assert!(
            !backoff.may_hold(),
            "one miss after a success skips one hold"
        );
        assert!(backoff.may_hold());
    }

    #[test]
    fn the_target_never_exceeds_a_group() {
        let now = Instant::now();
        let r = Returning::after_answer(4000, 4000, now, COMMIT, MAX_GATHER, 4096).unwrap();
        assert_eq!(r.wait(4096, now), None);
        assert!(r.wait(4095, now).is_some());
    }
}
