//! One log line per reason for a batch of per-child failures, instead of one per child.
//!
//! A start or stop batch that times out fails every child in it for the same reason. At 100,000
//! children a node that logged each of them wrote hundreds of thousands of lines per reconcile
//! round or redistribution pass, on the threads that were already too busy to answer in time,
//! which made the next round fail too. A tally counts the children per reason and names the
//! first [`NAMED`] of each, so the log stays readable and its cost per batch is bounded.

use std::collections::BTreeMap;
use std::fmt::Display;

/// How many children a tally names per reason (the count is always complete).
pub const NAMED: usize = 5;

/// Failures of one batch, grouped by reason (its text).
#[derive(Debug, Default)]
pub struct FailureTally {
    reasons: BTreeMap<String, (usize, Vec<String>)>,
}

impl FailureTally {
    /// An empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts `child`, failed for `reason`.
    pub fn add(&mut self, child: impl Display, reason: impl Display) {
        let (count, named) = self.reasons.entry(reason.to_string()).or_default();
        *count += 1;
        if named.len() < NAMED {
            named.push(child.to_string());
        }
    }

    /// Every reason with its count and the first children named, most frequent first.
    pub fn summary(&self) -> Vec<(&str, usize, &[String])> {
        let mut out: Vec<_> = self
            .reasons
            .iter()
            .map(|(reason, (count, named))| (reason.as_str(), *count, named.as_slice()))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        out
    }

    /// Logs one warning per reason: `what`, the count, the reason and the first children.
    pub fn warn(&self, what: &str) {
        for (reason, children, first) in self.summary() {
            tracing::warn!(children, error = %reason, first = ?first, "{what}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_out_batch_is_one_line_with_its_count() {
        let mut tally = FailureTally::new();
        assert!(tally.summary().is_empty());
        for i in 0..100_000 {
            tally.add(format!("child-{i:06}"), "node did not answer in time");
        }
        tally.add("child-x", "unknown kind");
        let summary = tally.summary();
        assert_eq!(summary.len(), 2, "one entry per reason");
        assert_eq!(summary[0].0, "node did not answer in time");
        assert_eq!(summary[0].1, 100_000, "every child counted");
        assert_eq!(summary[0].2.len(), NAMED, "only the first few named");
        assert_eq!(summary[0].2[0], "child-000000");
        assert_eq!(summary[1], ("unknown kind", 1, &["child-x".to_owned()][..]));
    }
}
