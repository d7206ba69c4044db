//! The one place the benches turn measured durations into percentiles, medians and means: an
//! HDR histogram (`hdrhistogram`), so every bench reads its quantiles the same way and none keeps
//! a sorted copy of its samples.
//!
//! Samples are recorded in nanoseconds from 1 ns to one hour with three significant digits: a
//! reported quantile is within 0.1% of the sample it stands for. A longer sample counts as one
//! hour (no bench waits that long for one operation).

use std::time::Duration;

use hdrhistogram::Histogram;

/// The longest sample told apart from shorter ones, in nanoseconds (one hour).
const HIGHEST_NS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits kept for every sample.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Durations measured by a bench, for their quantiles.
pub(crate) struct Latencies(Histogram<u64>);

impl Latencies {
    /// An empty record: every quantile of it is zero.
    pub(crate) fn new() -> Self {
        // The bounds are constants that satisfy the crate's conditions (low >= 1, high >= 2 *
        // low, at most 5 digits), so creation cannot fail.
        let histogram = Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .unwrap_or_else(|e| unreachable!("constant histogram bounds are valid: {e}"));
        Self(histogram)
    }

    /// Records one sample; one beyond an hour counts as an hour.
    pub(crate) fn record(&mut self, sample: Duration) {
        let ns = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX);
        self.0.saturating_record(ns);
    }

    /// How many samples were recorded.
    pub(crate) fn count(&self) -> u64 {
        self.0.len()
    }

    /// The sample at quantile `q` (0.5 the median, 0.99 the 99th percentile): the smallest
    /// recorded value that at least `q` of the samples do not exceed. Zero when nothing was
    /// recorded.
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.0.value_at_quantile(q))
    }

    /// The median sample; zero when nothing was recorded.
    pub(crate) fn median(&self) -> Duration {
        self.quantile(0.5)
    }

    /// The mean of the samples; zero when nothing was recorded.
    pub(crate) fn mean(&self) -> Duration {
        Duration::from_secs_f64(self.0.mean() / 1e9)
    }
}

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Extend<Duration> for Latencies {
    fn extend<I: IntoIterator<Item = Duration>>(&mut self, samples: I) {
        for sample in samples {
            self.record(sample);
        }
    }
}

impl FromIterator<Duration> for Latencies {
    fn from_iter<I: IntoIterator<Item = Duration>>(samples: I) -> Self {
        let mut latencies = Self::new();
        latencies.extend(samples);
        latencies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `got` is within the histogram's 0.1% of `want`.
    fn close(got: Duration, want: Duration) -> bool {
        got.as_secs_f64() >= want.as_secs_f64() * 0.999
            && got.as_secs_f64() <= want.as_secs_f64() * 1.001
    }

    #[test]
    fn quantiles_of_one_to_a_hundred_milliseconds() {
        let latencies: Latencies = (1..=100).map(Duration::from_millis).collect();
        assert!(close(latencies.median(), Duration::from_millis(50)));
        assert!(close(latencies.quantile(0.99), Duration::from_millis(99)));
        assert!(close(latencies.quantile(1.0), Duration::from_millis(100)));
        assert!(close(latencies.quantile(0.0), Duration::from_millis(1)));
        assert!(close(latencies.mean(), Duration::from_micros(50_500)));
        assert_eq!(latencies.count(), 100);
    }

    #[test]
    fn small_samples_are_exact() {
        let latencies: Latencies = [3, 1, 2, 5, 4]
            .map(Duration::from_nanos)
            .into_iter()
            .collect();
        assert_eq!(latencies.median(), Duration::from_nanos(3));
        assert_eq!(latencies.quantile(0.99), Duration::from_nanos(5));
    }

    #[test]
    fn an_empty_record_reads_zero() {
        let latencies = Latencies::new();
        assert_eq!(latencies.median(), Duration::ZERO);
        assert_eq!(latencies.quantile(0.99), Duration::ZERO);
        assert_eq!(latencies.mean(), Duration::ZERO);
    }

    #[test]
    fn a_sample_beyond_the_highest_counts_as_the_highest() {
        let latencies: Latencies = [Duration::from_secs(10_000)].into_iter().collect();
        assert!(close(latencies.median(), Duration::from_nanos(HIGHEST_NS)));
    }
}
