//! When a stub left to its owner is sent to that owner anyway.
//!
//! A survivor leaves the stubs another owner re-places to that owner (the owner holds them too
//! and re-places them in its own pass) and looks at them again when the retry timer fires: a
//! stub no node runs by then is sent to its owner, for an owner that never held the row or
//! restarted empty. At a million children an owner re-places its share in about 15 s, so the
//! look a second after the pass found most of that share still idle and sent all of it: each
//! survivor started the other's share a second time, each start answered `already_started`.
//! Now a look sends the idle stubs only when their owners took none of them since the last
//! look, and not before the owners' own starts of them could have run out of time (a given
//! patience per stub left). While the owners are at work, their records can reach this node
//! seconds late (at a million, each survivor's Registry is busy with its own share), so the
//! patience, not the progress seen, is what keeps the duplicates away at scale.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::model::ChildId;

/// The stubs this node left to their owners, how many of them were idle at the last look, and
/// until when the owners get to start them.
#[derive(Debug, Default)]
pub struct LeftToOwners {
    ids: BTreeSet<ChildId>,
    idle: usize,
    until: Option<Instant>,
}

impl LeftToOwners {
    /// Stubs a pass left to their owners at `now`, idle as of now; the owners get `patience`
    /// for each stub left to them (as their own start of them does).
    pub fn leave(
        &mut self,
        ids: impl IntoIterator<Item = ChildId>,
        now: Instant,
        patience: Duration,
    ) {
        let mut until = self.until.unwrap_or(now).max(now);
        for id in ids {
            if self.ids.insert(id) {
                self.idle += 1;
                until += patience;
            }
        }
        self.until = Some(until);
    }

    /// Whether no stub is left to its owner (no look is under way).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `id` is a stub left to its owner.
    pub fn contains(&self, id: &ChildId) -> bool {
        self.ids.contains(id)
    }

    /// A look at the stubs at `now`, `idle` of them still run by no node: whether to send those
    /// now. Fewer idle than at the last look means the owners are at work, and before the
    /// owners' time is up they may be too: the idle wait (and are the stubs looked at next
    /// time). None taken since and the time up, or none left: the look is over.
    pub fn look(&mut self, idle: BTreeSet<ChildId>, now: Instant) -> bool {
        let progress = idle.len() < self.idle;
        let in_time = self.until.is_some_and(|until| now < until);
        if !idle.is_empty() && (progress || in_time) {
            self.idle = idle.len();
            self.ids = idle;
            return false;
        }
        *self = Self::default();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENCE: Duration = Duration::from_millis(1);

    fn ids(range: std::ops::Range<u32>) -> BTreeSet<ChildId> {
        range.map(|i| ChildId::from(format!("c{i}"))).collect()
    }

    fn after(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn stubs_wait_while_their_owners_take_some_at_every_look() {
        let (mut left, t0) = (LeftToOwners::default(), Instant::now());
        left.leave(ids(0..100), t0, PATIENCE);
        assert!(left.contains(&ChildId::from("c7")));
        // Past the owners' time (100 ms for 100 stubs), progress still keeps them waiting.
        assert!(
            !left.look(ids(30..100), after(t0, 500)),
            "the owners took 30"
        );
        assert!(
            !left.contains(&ChildId::from("c7")),
            "taken, no longer looked at"
        );
        assert!(!left.look(ids(90..100), after(t0, 1_000)), "and 60 more");
        assert!(
            left.look(ids(90..100), after(t0, 1_500)),
            "none since: sent"
        );
        assert!(!left.contains(&ChildId::from("c95")), "the look is over");
    }

    #[test]
    fn stubs_no_owner_took_wait_out_the_owners_time_then_go() {
        let (mut left, t0) = (LeftToOwners::default(), Instant::now());
        left.leave(ids(0..1_000), t0, PATIENCE);
        assert!(
            !left.look(ids(0..1_000), after(t0, 999)),
            "the owners' time: 1 s"
        );
        assert!(left.contains(&ChildId::from("c1")));
        assert!(left.look(ids(0..1_000), after(t0, 1_000)));
    }

    #[test]
    fn a_look_with_nothing_idle_is_over() {
        let (mut left, t0) = (LeftToOwners::default(), Instant::now());
        left.leave(ids(0..10), t0, PATIENCE);
        assert!(left.look(BTreeSet::new(), t0));
        assert!(!left.contains(&ChildId::from("c1")));
    }

    #[test]
    fn stubs_left_by_a_later_pass_extend_the_owners_time() {
        let (mut left, t0) = (LeftToOwners::default(), Instant::now());
        left.leave(ids(0..10), t0, PATIENCE);
        assert!(!left.look(ids(0..5), after(t0, 50)));
        left.leave(ids(20..30), after(t0, 50), PATIENCE);
        left.leave(ids(20..22), after(t0, 50), PATIENCE);
        // 10 ms for the first 10, 10 more for the next 10 (the repeated two count once).
        assert!(
            !left.look(ids(0..20), after(t0, 59)),
            "more idle, but in time"
        );
        assert!(
            left.look(ids(0..20), after(t0, 60)),
            "no progress, time up: sent"
        );
    }
}
