//! The time of day as a hub reads it.
//!
//! A hub reads two kinds of time. Durations and deadlines (timeouts, grace periods, debounce
//! windows, round intervals) come from tokio's monotonic clock, which a test runtime can pause
//! and advance. The time of day (TTL expiry of registry rows, the `changed_at` of a row) comes
//! from a [`Clock`], so that it too can be driven: the deterministic simulator gives each node a
//! virtual clock that follows tokio's paused time and can be skewed, forward or back, at any
//! moment, as a real node's wall clock can.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a hub and its storage read the time of day, in milliseconds since the Unix epoch.
/// Cheap to clone; every clone reads the same clock.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system clock.
    simulated: Option<Arc<SimulatedClock>>,
}

#[derive(Debug)]
struct SimulatedClock {
    /// tokio's instant when the clock read `epoch_ms`.
    origin: tokio::time::Instant,
    epoch_ms: u64,
    skew_ms: AtomicI64,
}

impl Clock {
    /// The system clock (the default).
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that reads `epoch_ms` now and then advances with tokio's clock (so a paused
    /// runtime's virtual time drives it), plus a skew that [`Clock::set_skew`] changes.
    pub fn following_tokio(epoch_ms: u64) -> Self {
        Self {
            simulated: Some(Arc::new(SimulatedClock {
                origin: tokio::time::Instant::now(),
                epoch_ms,
                skew_ms: AtomicI64::new(0),
            })),
        }
    }

    /// Moves a clock made by [`Clock::following_tokio`] `skew_ms` away from tokio's time
    /// (a jump, like a wall clock set by hand or by NTP). No effect on the system clock.
    pub fn set_skew(&self, skew_ms: i64) {
        if let Some(clock) = &self.simulated {
            clock.skew_ms.store(skew_ms, Ordering::Relaxed);
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        match &self.simulated {
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            Some(clock) => {
                let elapsed = clock.origin.elapsed().as_millis() as i64;
                let skew = clock.skew_ms.load(Ordering::Relaxed);
                (clock.epoch_ms as i64 + elapsed + skew).max(0) as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_following_clock_moves_with_paused_time_and_jumps_with_its_skew() {
        let clock = Clock::following_tokio(1_000_000);
        assert_eq!(clock.now_ms(), 1_000_000);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(clock.now_ms(), 1_001_500);
        clock.set_skew(-2_000);
        assert_eq!(clock.now_ms(), 999_500);
        let copy = clock.clone();
        copy.set_skew(60_000);
        assert_eq!(clock.now_ms(), 1_061_500, "clones read one clock");
    }

    #[test]
    fn the_system_clock_reads_the_time_of_day() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let now = Clock::system().now_ms();
        assert!(now >= before && now < before + 60_000);
        Clock::system().set_skew(1_000); // no effect, no panic
    }
}
