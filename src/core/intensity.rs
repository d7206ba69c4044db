//! Restart intensity: at most `max_restarts` restarts within any window of `max_seconds`.
//!
//! The OTP rule. When a restart would exceed it, the supervisor stops restarting and escalates:
//! a child that crashes in a loop must not burn the node's CPU forever.

use std::collections::VecDeque;

/// Whether one more restart is allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntensityVerdict {
    /// The restart fits in the budget (and has been recorded).
    Allowed,
    /// The restart would exceed the budget: escalate.
    Exceeded,
}

/// A sliding window of recent restart times.
#[derive(Clone, Debug)]
pub struct RestartIntensity {
    max_restarts: u32,
    window_ms: u64,
    recent: VecDeque<u64>,
}

impl RestartIntensity {
    /// `max_restarts` restarts within `max_seconds` seconds.
    pub fn new(max_restarts: u32, max_seconds: u32) -> Self {
        Self {
            max_restarts,
            window_ms: u64::from(max_seconds) * 1000,
            recent: VecDeque::new(),
        }
    }

    /// Records a restart at `now_ms` if the budget allows it.
    ///
    /// Times must not go backwards by more than the window (a monotonic clock guarantees it).
    pub fn record(&mut self, now_ms: u64) -> IntensityVerdict {
        while let Some(&oldest) = self.recent.front() {
            if now_ms.saturating_sub(oldest) >= self.window_ms {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        if self.recent.len() as u64 >= u64::from(self.max_restarts) {
            return IntensityVerdict::Exceeded;
        }
        self.recent.push_back(now_ms);
        IntensityVerdict::Allowed
    }

    /// Restarts counted in the current window.
    pub fn recent_restarts(&self) -> usize {
        self.recent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn budget_is_per_window() {
        let mut i = RestartIntensity::new(2, 1);
        assert_eq!(i.record(0), IntensityVerdict::Allowed);
        assert_eq!(i.record(10), IntensityVerdict::Allowed);
        assert_eq!(i.record(20), IntensityVerdict::Exceeded);
        // The first restart leaves the window at 1000 ms.
        assert_eq!(i.record(1000), IntensityVerdict::Allowed);
        assert_eq!(i.record(1005), IntensityVerdict::Exceeded);
    }

    #[test]
    fn zero_budget_never_restarts() {
        let mut i = RestartIntensity::new(0, 5);
        assert_eq!(i.record(0), IntensityVerdict::Exceeded);
    }

    proptest! {
        /// Within any window the number of allowed restarts never exceeds the budget.
        #[test]
        fn never_more_than_max_in_a_window(
            max in 0u32..6,
            secs in 1u32..3,
            gaps in proptest::collection::vec(0u64..800, 1..60),
        ) {
            let mut i = RestartIntensity::new(max, secs);
            let mut now = 0;
            let mut allowed = Vec::new();
            for g in gaps {
                now += g;
                if i.record(now) == IntensityVerdict::Allowed {
                    allowed.push(now);
                }
            }
            let window = u64::from(secs) * 1000;
            for (k, &t) in allowed.iter().enumerate() {
                let in_window = allowed[k..].iter().filter(|&&u| u - t < window).count();
                prop_assert!(in_window as u32 <= max);
            }
        }
    }
}
