//! What the manifest shipper ships next: coalescing and backoff, as pure decisions
//! (docs/recovery.md, "The remote manifest").
//!
//! The leader offers every version it commits. At most one ship is in flight; versions offered
//! meanwhile replace one another, so only the newest waiting version is shipped next (a burst of
//! a thousand durable starts costs a handful of uploads). A version is never shipped after a
//! newer one: an offer that does not beat both the newest offered and the last shipped copy is
//! dropped. A failed ship is retried after an exponentially growing delay (reset by a success),
//! with the newest version waiting at that time.
//!
//! The task that runs this against a `RemoteManifest` is `crate::manifest::shipper`.

use std::cmp::Ordering;

use crate::core::declared::list::{precedence, DeclaredList};

/// Retry delays of the shipper: `initial_ms × 2^n`, capped at `max_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShipBackoff {
    /// Delay after the first failure. Default 200 ms.
    pub initial_ms: u64,
    /// Largest delay. Default 30 s.
    pub max_ms: u64,
}

impl Default for ShipBackoff {
    fn default() -> Self {
        Self {
            initial_ms: 200,
            max_ms: 30_000,
        }
    }
}

impl ShipBackoff {
    /// The delay after `failures` consecutive failures (1 for the first).
    pub fn delay_ms(&self, failures: u32) -> u64 {
        let shift = failures.saturating_sub(1).min(40);
        self.initial_ms
            .max(1)
            .saturating_mul(1u64 << shift)
            .min(self.max_ms.max(self.initial_ms.max(1)))
    }
}

/// What became of an offered version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// It is the version that ships next.
    Queued,
    /// It replaced a waiting version that will now never be shipped.
    Coalesced {
        /// The version dropped.
        superseded: u64,
    },
    /// It is not newer than what is already waiting, in flight or shipped: dropped.
    Stale,
}

/// The shipper's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShipStep {
    /// Ship this copy now (it is now in flight).
    Ship(DeclaredList),
    /// A copy waits, but the backoff holds it until then.
    WaitUntil(u64),
    /// Nothing to do until an offer or the in-flight ship's result.
    Idle,
}

/// The coalescing queue of one shipper.
#[derive(Clone, Debug, Default)]
pub struct ShipQueue {
    backoff: ShipBackoff,
    waiting: Option<DeclaredList>,
    /// The newest copy handed out (in flight or shipped); offers must beat it.
    newest_handed_out: Option<DeclaredList>,
    in_flight: bool,
    last_shipped: Option<u64>,
    failures: u32,
    retry_at_ms: Option<u64>,
}

impl ShipQueue {
    /// An empty queue.
    pub fn new(backoff: ShipBackoff) -> Self {
        Self {
            backoff,
            ..Self::default()
        }
    }

    /// The version last confirmed shipped.
    pub fn last_shipped(&self) -> Option<u64> {
        self.last_shipped
    }

    /// Consecutive failures so far (0 after a success).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Offers a committed version.
    pub fn offer(&mut self, list: DeclaredList) -> Offer {
        let beats = |other: &Option<DeclaredList>| {
            other
                .as_ref()
                .is_none_or(|o| precedence(&list, o) == Ordering::Greater)
        };
        if !beats(&self.waiting) || !beats(&self.newest_handed_out) {
            return Offer::Stale;
        }
        match self.waiting.replace(list) {
            Some(old) => Offer::Coalesced {
                superseded: old.version(),
            },
            None => Offer::Queued,
        }
    }

    /// Decides the next step at `now_ms`.
    pub fn next(&mut self, now_ms: u64) -> ShipStep {
        if self.in_flight || self.waiting.is_none() {
            return ShipStep::Idle;
        }
        if let Some(at) = self.retry_at_ms {
            if now_ms < at {
                return ShipStep::WaitUntil(at);
            }
        }
        let Some(list) = self.waiting.take() else {
            return ShipStep::Idle;
        };
        self.in_flight = true;
        self.newest_handed_out = Some(list.clone());
        ShipStep::Ship(list)
    }

    /// The in-flight ship of `version` succeeded.
    pub fn on_shipped(&mut self, version: u64) {
        self.in_flight = false;
        self.failures = 0;
        self.retry_at_ms = None;
        self.last_shipped = Some(self.last_shipped.map_or(version, |v| v.max(version)));
    }

    /// The in-flight ship of `failed` failed at `now_ms`: it is put back unless a newer version
    /// is already waiting, and the next attempt waits for the backoff. Returns the delay.
    pub fn on_failed(&mut self, failed: DeclaredList, now_ms: u64) -> u64 {
        self.in_flight = false;
        self.failures = self.failures.saturating_add(1);
        let delay = self.backoff.delay_ms(self.failures);
        self.retry_at_ms = Some(now_ms.saturating_add(delay));
        if self.waiting.is_none() {
            self.waiting = Some(failed);
        }
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};
    use proptest::prelude::*;

    fn version(n: u64) -> DeclaredList {
        let mut l = DeclaredList::new();
        for i in 0..n {
            l.add(
                ChildSpec::new(format!("c{i}").as_str(), "k"),
                Metadata::new(),
                "n1",
            )
            .unwrap();
        }
        l
    }

    #[test]
    fn a_burst_coalesces_to_the_newest() {
        let mut q = ShipQueue::new(ShipBackoff::default());
        assert_eq!(q.offer(version(1)), Offer::Queued);
        assert_eq!(q.next(0), ShipStep::Ship(version(1)));
        assert_eq!(q.offer(version(2)), Offer::Queued);
        assert_eq!(q.offer(version(3)), Offer::Coalesced { superseded: 2 });
        assert_eq!(q.offer(version(2)), Offer::Stale);
        assert_eq!(q.next(0), ShipStep::Idle, "one ship in flight at a time");
        q.on_shipped(1);
        assert_eq!(q.next(0), ShipStep::Ship(version(3)));
        q.on_shipped(3);
        assert_eq!(q.last_shipped(), Some(3));
        assert_eq!(q.offer(version(3)), Offer::Stale);
        assert_eq!(q.next(0), ShipStep::Idle);
    }

    #[test]
    fn a_failure_backs_off_and_retries_the_newest() {
        let mut q = ShipQueue::new(ShipBackoff {
            initial_ms: 100,
            max_ms: 350,
        });
        q.offer(version(1));
        let ShipStep::Ship(v1) = q.next(0) else {
            panic!("ships")
        };
        assert_eq!(q.on_failed(v1, 1_000), 100);
        assert_eq!(q.next(1_050), ShipStep::WaitUntil(1_100));
        assert_eq!(q.next(1_100), ShipStep::Ship(version(1)));
        assert_eq!(q.on_failed(version(1), 2_000), 200);
        q.offer(version(2));
        assert_eq!(
            q.next(2_200),
            ShipStep::Ship(version(2)),
            "the newer one replaces it"
        );
        assert_eq!(q.on_failed(version(2), 3_000), 350, "capped");
        q.offer(version(4));
        assert_eq!(q.next(3_350), ShipStep::Ship(version(4)));
        q.on_shipped(4);
        assert_eq!(q.failures(), 0);
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let b = ShipBackoff {
            initial_ms: 10,
            max_ms: 75,
        };
        let delays: Vec<u64> = (1..=6).map(|n| b.delay_ms(n)).collect();
        assert_eq!(delays, vec![10, 20, 40, 75, 75, 75]);
        assert_eq!(b.delay_ms(u32::MAX), 75);
    }

    proptest! {
        /// Whatever the interleaving of offers, successes and failures, the versions shipped
        /// strictly increase, and the newest offered is eventually shipped.
        #[test]
        fn never_ships_a_superseded_version(
            ops in prop::collection::vec((1u64..20, 0u8..3), 1..40),
        ) {
            let mut q = ShipQueue::new(ShipBackoff { initial_ms: 1, max_ms: 4 });
            let mut now = 0;
            let mut shipped: Vec<u64> = Vec::new();
            let mut newest = 0;
            for (v, action) in ops {
                q.offer(version(v));
                newest = newest.max(v);
                now += 5;
                if let ShipStep::Ship(list) = q.next(now) {
                    if action == 0 {
                        q.on_failed(list, now);
                    } else {
                        shipped.push(list.version());
                        q.on_shipped(list.version());
                    }
                }
            }
            // Drain.
            loop {
                now += 5;
                match q.next(now) {
                    ShipStep::Ship(list) => {
                        shipped.push(list.version());
                        q.on_shipped(list.version());
                    }
                    ShipStep::WaitUntil(_) => continue,
                    ShipStep::Idle => break,
                }
            }
            prop_assert!(shipped.windows(2).all(|w| w[0] < w[1]), "{:?}", shipped);
            prop_assert_eq!(shipped.last().copied(), Some(newest));
        }
    }
}
