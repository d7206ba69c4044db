//! Calls and casts to children made on one node, counted by outcome with a latency histogram
//! for calls: what an operator watches to see that messages reach their children, and how fast.
//!
//! Counted where a sender learns the outcome: `ChildRef` (typed, from this node), the
//! endpoint's typed calls and casts of client nodes, and `Hub::call_child` / `cast_child` (the
//! admin API's command messages). The series are registered once per hub, so a count is one
//! atomic add with no label set built per message.

use std::time::Duration;

use metrics::{counter, histogram, Counter, Histogram};

use super::metrics::{enabled, HubLabels, CALLS, CALL_SECONDS, CASTS};

/// The `outcome` values: `ok`, the codes of `ChildRefError` and `ChildMessageError`, then
/// `other` for a code neither names.
pub(crate) const OUTCOMES: [&str; 15] = [
    "ok",
    "not_found",
    "between_nodes",
    "timeout",
    "unreachable",
    "decode",
    "not_remotable",
    "too_large",
    "no_reply",
    "overloaded",
    "hub_unavailable",
    "no_command_handler",
    "command_failed",
    "forward_limit",
    "other",
];

/// The index of `outcome` in [`OUTCOMES`] (`other` for a code it does not name).
fn index(outcome: &str) -> usize {
    OUTCOMES
        .iter()
        .position(|o| *o == outcome)
        .unwrap_or(OUTCOMES.len() - 1)
}

/// One hub's call and cast series, registered with the recorder installed when the hub spawns
/// (every outcome at zero from the start).
pub(crate) struct MessageMetrics {
    calls: Vec<Counter>,
    casts: Vec<Counter>,
    call_seconds: Histogram,
}

impl MessageMetrics {
    pub(crate) fn new(labels: &HubLabels) -> Self {
        let by_outcome = |name: &'static str| -> Vec<Counter> {
            OUTCOMES
                .iter()
                .map(|o| {
                    let c = counter!(name, &labels.with("outcome", *o));
                    c.increment(0);
                    c
                })
                .collect()
        };
        Self {
            calls: by_outcome(CALLS),
            casts: by_outcome(CASTS),
            call_seconds: histogram!(CALL_SECONDS, &labels.base()),
        }
    }

    /// A call that ended with `outcome` (`ok` or an error's code) after `took`.
    pub(crate) fn call(&self, outcome: &str, took: Duration) {
        if !enabled() {
            return;
        }
        self.calls[index(outcome)].increment(1);
        self.call_seconds.record(took.as_secs_f64());
    }

    /// A cast that ended with `outcome`.
    pub(crate) fn cast(&self, outcome: &str) {
        if enabled() {
            self.casts[index(outcome)].increment(1);
        }
    }

    /// A call's result, counted; the result passes through.
    pub(crate) fn called<T, E>(
        &self,
        result: Result<T, E>,
        code: impl Fn(&E) -> &str,
        began: std::time::Instant,
    ) -> Result<T, E> {
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => code(e),
        };
        self.call(outcome, began.elapsed());
        result
    }

    /// A cast's result, counted; the result passes through.
    pub(crate) fn casted<T, E>(
        &self,
        result: Result<T, E>,
        code: impl Fn(&E) -> &str,
    ) -> Result<T, E> {
        self.cast(match &result {
            Ok(_) => "ok",
            Err(e) => code(e),
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_codes_count_as_other() {
        assert_eq!(OUTCOMES[index("ok")], "ok");
        assert_eq!(OUTCOMES[index("timeout")], "timeout");
        assert_eq!(OUTCOMES[index("something_new")], "other");
    }
}
