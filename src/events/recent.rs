//! The hub's recent events: a bounded ring of the last [`RECENT_EVENTS`] [`HubEvent`]s, and a
//! live feed of them for watchers that may fall behind.
//!
//! Subscribers of the event bus (`Hub::subscribe*`) get every event, unbounded, because an
//! application that reacts to events must not miss one. An operator's view is different: "what
//! happened to this child lately?" and "show me events as they come" must never cost the node
//! memory in proportion to how slow or how many the watchers are. So the bus also records each
//! event here:
//!
//! - the **ring** keeps the last [`RECENT_EVENTS`], each with a sequence number and the time of
//!   day it was published; older ones are dropped, whatever happens;
//! - the **feed** is a broadcast channel of [`LIVE_FEED_CAPACITY`]: a watcher that falls further
//!   behind loses the oldest events it has not read and is told how many it lost, rather than
//!   making the node hold them.
//!
//! Recording never blocks and never waits on a watcher.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::HubEvent;
use crate::model::ChildId;

/// How many recent events a hub keeps.
pub const RECENT_EVENTS: usize = 1_000;

/// How many events a live watcher may fall behind before it loses the oldest.
pub const LIVE_FEED_CAPACITY: usize = 1_024;

/// One event as the hub recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// Its position among the hub's events since the hub started (from 1, no gaps).
    pub seq: u64,
    /// When it was published, in milliseconds since the Unix epoch (the hub's clock).
    pub at_ms: u64,
    /// The event.
    pub event: HubEvent,
}

/// The last events of a hub and the live feed of new ones.
pub struct RecentEvents {
    ring: Mutex<Ring>,
    live: broadcast::Sender<Arc<RecordedEvent>>,
}

impl Default for RecentEvents {
    fn default() -> Self {
        Self::with_capacity(RECENT_EVENTS)
    }
}

impl std::fmt::Debug for RecentEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentEvents").finish_non_exhaustive()
    }
}

/// The bounded ring itself.
struct Ring {
    events: VecDeque<Arc<RecordedEvent>>,
    capacity: usize,
    next_seq: u64,
}

impl RecentEvents {
    /// A ring of at most `capacity` events (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let (live, _) = broadcast::channel(LIVE_FEED_CAPACITY);
        Self {
            ring: Mutex::new(Ring {
                events: VecDeque::with_capacity(capacity.min(64)),
                capacity,
                next_seq: 1,
            }),
            live,
        }
    }

    /// Records `event`, published at `at_ms`: into the ring (dropping the oldest when full)
    /// and onto the live feed. Answers the event as recorded (the bus hands its subscribers
    /// copies of it).
    pub fn record(&self, event: HubEvent, at_ms: u64) -> Arc<RecordedEvent> {
        let recorded = {
            let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
            let recorded = Arc::new(RecordedEvent {
                seq: ring.next_seq,
                at_ms,
                event,
            });
            ring.next_seq += 1;
            if ring.events.len() == ring.capacity {
                ring.events.pop_front();
            }
            ring.events.push_back(recorded.clone());
            recorded
        };
        // No watcher is not an error: the ring keeps it.
        let _ = self.live.send(recorded.clone());
        recorded
    }

    /// The last `limit` events recorded (oldest first).
    pub fn last(&self, limit: usize) -> Vec<Arc<RecordedEvent>> {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let skip = ring.events.len().saturating_sub(limit);
        ring.events.iter().skip(skip).cloned().collect()
    }

    /// The last `limit` recorded events about child `id` (oldest first).
    pub fn last_of(&self, id: &ChildId, limit: usize) -> Vec<Arc<RecordedEvent>> {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let mut found: Vec<Arc<RecordedEvent>> = ring
            .events
            .iter()
            .rev()
            .filter(|e| event_child(&e.event) == Some(id))
            .take(limit)
            .cloned()
            .collect();
        found.reverse();
        found
    }

    /// The most recent event about a node (`NodeUp`, `NodeDown`, `NodeLeft`) still in the
    /// ring, if any.
    pub fn last_about_node(&self, node: &str) -> Option<Arc<RecordedEvent>> {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.events
            .iter()
            .rev()
            .find(|e| event_node_change(&e.event) == Some(node))
            .cloned()
    }

    /// A receiver of the events recorded from now on. When it falls more than
    /// [`LIVE_FEED_CAPACITY`] behind, its next receive reports how many it lost.
    pub fn watch(&self) -> broadcast::Receiver<Arc<RecordedEvent>> {
        self.live.subscribe()
    }
}

/// The child an event is about, if it is about one.
pub fn event_child(event: &HubEvent) -> Option<&ChildId> {
    match event {
        HubEvent::ChildStarted { id, .. }
        | HubEvent::ChildStartFailed { id, .. }
        | HubEvent::ChildExited { id, .. }
        | HubEvent::ChildRestarted { id, .. }
        | HubEvent::ChildStopped { id, .. }
        | HubEvent::RegistryInserted { id }
        | HubEvent::RegistryRemoved { id }
        | HubEvent::ChildMoved { id, .. }
        | HubEvent::ChildReplaced { id, .. }
        | HubEvent::ChildHandover { id, .. } => Some(id),
        _ => None,
    }
}

/// The peer whose membership an event changes, if it is such an event.
fn event_node_change(event: &HubEvent) -> Option<&str> {
    match event {
        HubEvent::NodeUp { node }
        | HubEvent::NodeDown { node, .. }
        | HubEvent::NodeLeft { node } => Some(node),
        _ => None,
    }
}

/// The event's kind, in snake_case (`child_started`, `node_down`, ...): the `event:` field of
/// the admin API's event stream and the `kind` of its JSON.
pub fn event_kind(event: &HubEvent) -> &'static str {
    match event {
        HubEvent::ChildStarted { .. } => "child_started",
        HubEvent::ChildStartFailed { .. } => "child_start_failed",
        HubEvent::ChildExited { .. } => "child_exited",
        HubEvent::ChildRestarted { .. } => "child_restarted",
        HubEvent::ChildStopped { .. } => "child_stopped",
        HubEvent::RegistryInserted { .. } => "registry_inserted",
        HubEvent::RegistryRemoved { .. } => "registry_removed",
        HubEvent::RestartIntensityExceeded { .. } => "restart_intensity_exceeded",
        HubEvent::HubActorRestarted { .. } => "hub_actor_restarted",
        HubEvent::HubStopping { .. } => "hub_stopping",
        HubEvent::NodeUp { .. } => "node_up",
        HubEvent::NodeDown { .. } => "node_down",
        HubEvent::NodeLeft { .. } => "node_left",
        HubEvent::PartitionModeEntered { .. } => "partition_mode_entered",
        HubEvent::PartitionModeLeft { .. } => "partition_mode_left",
        HubEvent::ClusterSettled { .. } => "cluster_settled",
        HubEvent::ChildMoved { .. } => "child_moved",
        HubEvent::ChildReplaced { .. } => "child_replaced",
        HubEvent::ReconcileRoundCompleted { .. } => "reconcile_round_completed",
        HubEvent::RecoveryNormal { .. } => "recovery_normal",
        HubEvent::DeclaredParked { .. } => "declared_parked",
        HubEvent::DeclaredUnparked { .. } => "declared_unparked",
        HubEvent::DeclaredVersionChanged { .. } => "declared_version_changed",
        HubEvent::ChildHandover { .. } => "child_handover",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inserted(i: usize) -> HubEvent {
        HubEvent::RegistryInserted {
            id: format!("c{i}").into(),
        }
    }

    #[test]
    fn the_ring_keeps_the_last_events_and_numbers_them_without_gaps() {
        let recent = RecentEvents::with_capacity(10);
        for i in 0..25 {
            recent.record(inserted(i), 1_000 + i as u64);
        }
        let last = recent.last(100);
        assert_eq!(last.len(), 10, "never more than the capacity");
        let seqs: Vec<u64> = last.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (16..=25).collect::<Vec<u64>>());
        assert_eq!(last[0].at_ms, 1_015);
        assert_eq!(
            recent.last(3).iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![23, 24, 25]
        );
    }

    #[test]
    fn events_about_one_child_are_found_among_the_others() {
        let recent = RecentEvents::default();
        recent.record(inserted(1), 1);
        recent.record(HubEvent::NodeUp { node: "b@h".into() }, 2);
        recent.record(
            HubEvent::ChildStarted {
                id: "c1".into(),
                node: "a@h".into(),
                pid: 7,
            },
            3,
        );
        recent.record(inserted(2), 4);
        let about: Vec<&str> = recent
            .last_of(&"c1".into(), 10)
            .iter()
            .map(|e| event_kind(&e.event))
            .collect();
        assert_eq!(about, vec!["registry_inserted", "child_started"]);
        assert_eq!(
            recent.last_of(&"c1".into(), 1)[0].seq,
            3,
            "the latest first kept"
        );
        assert_eq!(recent.last_about_node("b@h").map(|e| e.seq), Some(2));
        assert!(recent.last_about_node("c@h").is_none());
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_told_how_many_it_lost() {
        let recent = RecentEvents::with_capacity(4);
        let mut watcher = recent.watch();
        for i in 0..LIVE_FEED_CAPACITY + 5 {
            recent.record(inserted(i), 0);
        }
        match watcher.recv().await {
            Err(broadcast::error::RecvError::Lagged(lost)) => assert_eq!(lost, 5),
            other => panic!("expected a lag report, got {other:?}"),
        }
        let next = watcher.recv().await.expect("the feed goes on");
        assert_eq!(next.seq, 6);
    }
}
