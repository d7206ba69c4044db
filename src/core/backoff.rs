//! Reconnection schedule: exponential backoff with a cap and jitter.
//!
//! ractor_cluster never reconnects a lost session, so the membership actor retries its seeds and
//! known peers itself. Retrying at a fixed rate would hammer a node that is restarting; retrying
//! in lockstep from every node would hit it all at once. So delays grow geometrically up to a
//! cap, and each is shortened by a random fraction (jitter) drawn from an RNG the caller injects,
//! which keeps tests and simulations reproducible from a seed.

use std::time::Duration;

use rand::Rng;

/// Backoff parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// First delay. Default 100 ms.
    pub initial: Duration,
    /// Largest delay. Default 5 s.
    pub max: Duration,
    /// Growth factor per attempt, at least 1. Default 2.
    pub multiplier: f64,
    /// Fraction of each delay that may be removed at random, in `[0, 1]`. Default 0.2: a delay
    /// lies in `[0.8 d, d]`.
    pub jitter: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
            multiplier: 2.0,
            jitter: 0.2,
        }
    }
}

/// The retry state of one target (a seed address, a peer).
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    attempt: u32,
}

impl Backoff {
    /// A fresh schedule; out-of-range `multiplier` and `jitter` are clamped.
    pub fn new(mut config: BackoffConfig) -> Self {
        config.multiplier = if config.multiplier.is_finite() {
            config.multiplier.max(1.0)
        } else {
            1.0
        };
        config.jitter = if config.jitter.is_finite() {
            config.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if config.max < config.initial {
            config.max = config.initial;
        }
        Self { config, attempt: 0 }
    }

    /// Attempts made since the last success.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The delay before the next attempt (and counts the attempt): `initial × multiplier^n`
    /// capped at `max`, minus up to `jitter` of it.
    pub fn next_delay<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let exp = self.config.multiplier.powi(self.attempt.min(64) as i32);
        let base = self.config.initial.as_secs_f64() * exp;
        let capped = base.min(self.config.max.as_secs_f64());
        self.attempt = self.attempt.saturating_add(1);
        let cut = if self.config.jitter > 0.0 {
            rng.gen_range(0.0..=self.config.jitter)
        } else {
            0.0
        };
        Duration::from_secs_f64(capped * (1.0 - cut))
    }

    /// The target was reached: start over from `initial`.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn grows_to_the_cap_and_resets() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::default()
        });
        let delays: Vec<u128> = (0..10)
            .map(|_| b.next_delay(&mut rng).as_millis())
            .collect();
        assert_eq!(
            delays,
            [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]
        );
        b.reset();
        assert_eq!(b.next_delay(&mut rng), Duration::from_millis(100));
    }

    #[test]
    fn jitter_stays_in_range_and_is_reproducible() {
        let config = BackoffConfig {
            jitter: 0.5,
            ..BackoffConfig::default()
        };
        let run = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut b = Backoff::new(config);
            (0..20).map(|_| b.next_delay(&mut rng)).collect::<Vec<_>>()
        };
        let a = run(1);
        assert_eq!(a, run(1));
        assert_ne!(a, run(2));
        for d in &a {
            assert!(*d <= config.max && *d >= Duration::from_millis(50), "{d:?}");
        }
    }

    #[test]
    fn bad_config_is_clamped() {
        let mut rng = StdRng::seed_from_u64(0);
        let mut b = Backoff::new(BackoffConfig {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(1),
            multiplier: f64::NAN,
            jitter: 7.0,
        });
        for _ in 0..5 {
            assert!(b.next_delay(&mut rng) <= Duration::from_secs(2));
        }
    }
}
