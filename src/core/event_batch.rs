//! Membership event batching: a debounce window with a cap on the total wait.
//!
//! A rolling restart or a network blip produces a storm of joins and leaves. Redistributing after
//! each one would move children back and forth, so the Coordinator collects events of one kind
//! (joins, leaves, node-downs, grace expiries — one [`EventBatch`] each, as
//! `event_batches`) and handles them as one batch once the storm is quiet for `debounce`. A
//! sustained stream would never be quiet, so the window also closes `max_wait` after it opened
//! (`started_at`): no event waits longer than that.
//!
//! Pure: time is an input. The actor arms a timer for the returned deadline and calls
//! [`EventBatch::take_due`] when it fires (a stale timer finds nothing due, which is harmless).

use std::time::{Duration, Instant};

use crate::model::NodeName;

/// Debounce and cap for one kind of membership event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchConfig {
    /// Quiet time after the last event before the batch is handled. Default 200 ms.
    pub debounce: Duration,
    /// Longest time the first event of a batch may wait. Default 2 s; never less than `debounce`
    /// in effect (the deadline is the earlier of the two).
    pub max_wait: Duration,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(200),
            max_wait: Duration::from_secs(2),
        }
    }
}

/// Pending events of one kind (`batch_state`).
#[derive(Debug, Clone)]
pub struct EventBatch {
    config: BatchConfig,
    /// Pending nodes in arrival order, without duplicates.
    nodes: Vec<NodeName>,
    /// When the current window opened (the first pending event).
    window_start: Option<Instant>,
    /// When the batch becomes due.
    deadline: Option<Instant>,
}

impl EventBatch {
    /// An empty batch.
    pub fn new(config: BatchConfig) -> Self {
        Self {
            config,
            nodes: Vec::new(),
            window_start: None,
            deadline: None,
        }
    }

    /// Records an event for `node` at `now` and returns the instant the batch is due: `now +
    /// debounce`, but never later than `max_wait` after the window opened. The caller re-arms its
    /// timer to the returned instant.
    pub fn on_event(&mut self, node: impl Into<NodeName>, now: Instant) -> Instant {
        let node = node.into();
        if !self.nodes.contains(&node) {
            self.nodes.push(node);
        }
        let start = *self.window_start.get_or_insert(now);
        let deadline = (now + self.config.debounce).min(start + self.config.max_wait);
        self.deadline = Some(deadline);
        deadline
    }

    /// Records an event for `node` at `now` that the caller knows closes the storm: no other
    /// event of this kind is on its way (for instance the last running grace period expired),
    /// so waiting `debounce` for more would only delay the batch. The batch, with whatever else
    /// was pending, is due at `now`.
    pub fn on_closing_event(&mut self, node: impl Into<NodeName>, now: Instant) -> Instant {
        self.on_event(node, now);
        self.deadline = Some(now);
        now
    }

    /// When the pending batch is due, `None` when nothing is pending.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Nodes waiting, in arrival order.
    pub fn pending(&self) -> &[NodeName] {
        &self.nodes
    }

    /// Whether events are waiting.
    pub fn is_pending(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// Removes a node from the pending batch (e.g. a leave cancelled by a quick re-join). The
    /// window and deadline stay; an emptied batch resets.
    pub fn cancel(&mut self, node: &str) {
        self.nodes.retain(|n| n != node);
        if self.nodes.is_empty() {
            self.reset();
        }
    }

    /// If the batch is due at `now`, takes its nodes (arrival order) and resets the window.
    pub fn take_due(&mut self, now: Instant) -> Option<Vec<NodeName>> {
        match self.deadline {
            Some(deadline) if now >= deadline && !self.nodes.is_empty() => {
                let nodes = std::mem::take(&mut self.nodes);
                self.reset();
                Some(nodes)
            }
            _ => None,
        }
    }

    fn reset(&mut self) {
        self.nodes.clear();
        self.window_start = None;
        self.deadline = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BatchConfig {
        BatchConfig {
            debounce: Duration::from_millis(100),
            max_wait: Duration::from_millis(1_000),
        }
    }

    #[test]
    fn a_storm_of_joins_yields_one_batch() {
        let t0 = Instant::now();
        let mut batch = EventBatch::new(config());
        let mut deadline = t0;
        for i in 0..20u64 {
            let now = t0 + Duration::from_millis(i * 10);
            deadline = batch.on_event(format!("n{}", i % 7), now);
            // The batch is never due in the middle of the storm.
            assert_eq!(batch.take_due(now), None);
        }
        assert_eq!(deadline, t0 + Duration::from_millis(190 + 100));
        assert_eq!(batch.take_due(deadline - Duration::from_millis(1)), None);
        let nodes = batch.take_due(deadline).expect("due after the quiet time");
        assert_eq!(nodes.len(), 7, "duplicates collapse: {nodes:?}");
        assert_eq!(nodes[0], "n0");
        assert!(!batch.is_pending());
        assert_eq!(batch.deadline(), None);
        assert_eq!(batch.take_due(deadline + Duration::from_secs(5)), None);
    }

    #[test]
    fn a_sustained_stream_is_flushed_at_the_cap() {
        let t0 = Instant::now();
        let mut batch = EventBatch::new(config());
        let mut flushes = Vec::new();
        // An event every 50 ms for 3 s: never 100 ms of quiet.
        for i in 0..60u64 {
            let now = t0 + Duration::from_millis(i * 50);
            if let Some(nodes) = batch.take_due(now) {
                flushes.push((now - t0, nodes.len()));
            }
            let deadline = batch.on_event(format!("n{i}"), now);
            assert!(deadline <= now + config().debounce);
        }
        assert!(flushes.len() >= 2, "flushes: {flushes:?}");
        // Each flush happens when the window hits max_wait, never later.
        assert_eq!(flushes[0].0, Duration::from_millis(1_000));
        assert_eq!(flushes[0].1, 20);
    }

    #[test]
    fn a_closing_event_makes_the_batch_due_at_once_with_what_was_pending() {
        let t0 = Instant::now();
        let mut batch = EventBatch::new(config());
        batch.on_event("a", t0);
        let later = t0 + Duration::from_millis(30);
        assert_eq!(batch.take_due(later), None, "still in its quiet time");
        assert_eq!(batch.on_closing_event("b", later), later);
        assert_eq!(batch.deadline(), Some(later));
        assert_eq!(
            batch.take_due(later),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert!(!batch.is_pending());
        // The next event opens a window with the usual quiet time again.
        let next = later + Duration::from_millis(5);
        assert_eq!(batch.on_event("c", next), next + config().debounce);
    }

    #[test]
    fn cancel_empties_and_resets() {
        let t0 = Instant::now();
        let mut batch = EventBatch::new(config());
        batch.on_event("a", t0);
        batch.on_event("b", t0);
        batch.cancel("a");
        assert_eq!(batch.pending(), ["b".to_owned()]);
        batch.cancel("b");
        assert_eq!(batch.deadline(), None);
        assert_eq!(batch.take_due(t0 + Duration::from_secs(9)), None);
    }
}
