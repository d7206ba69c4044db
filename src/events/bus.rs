//! The event bus: one hub's subscribers, and the publishing every hub actor does directly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use super::recent::RecentEvents;
use super::{EventSink, HubEvent, SubscriptionId};
use crate::clock::Clock;
use crate::core::activity::{
    Activity, ActivityHistory, ActivitySeries, ActivityTotals, DepartedNodes,
};

/// The subscribers of one hub. Shared by its actors, which publish directly (no extra hop).
///
/// Every event is also recorded in the hub's [`RecentEvents`] (a bounded ring and a live feed
/// that drops for slow watchers), which the admin API's explain and event stream read, and
/// counted in its activity (the dashboard's last ten minutes, `core::activity`).
#[derive(Default)]
pub struct EventBus {
    subs: RwLock<Vec<(SubscriptionId, EventSink)>>,
    next: AtomicU64,
    recent: RecentEvents,
    activity: Mutex<(ActivityHistory, DepartedNodes)>,
    clock: Clock,
    /// The node the hub runs on: a failover counts on the node the child now runs on, once,
    /// although every node that re-placed it reports it.
    node: Option<crate::model::NodeName>,
    /// The hub's metrics of its events ([`super::metrics`]): it reads each event where it is
    /// recorded, so no copy of the event is made for it (a subscriber gets its own copy, and
    /// every child's start and stop publishes two events each).
    counter: Option<EventCounter>,
}

/// Reads each published event, in the publishing actor's task: quick, never blocking.
pub(crate) type EventCounter = Box<dyn Fn(&HubEvent) + Send + Sync>;

/// What an event on `local` counts as in the activity history, if anything. A re-placed
/// child is a failover of the node it now runs on (several nodes may report re-placing it).
fn activity_of(event: &HubEvent, local: Option<&str>) -> Option<Activity> {
    match event {
        HubEvent::ChildStarted { .. } => Some(Activity::Start),
        HubEvent::ChildStopped { .. } => Some(Activity::Stop),
        HubEvent::ChildRestarted { .. } => Some(Activity::Restart),
        HubEvent::ChildReplaced { node, .. } if local.is_none_or(|l| l == node) => {
            Some(Activity::Failover)
        }
        _ => None,
    }
}

impl EventBus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a subscriber.
    pub fn subscribe(&self, sink: EventSink) -> SubscriptionId {
        let id = SubscriptionId(self.next.fetch_add(1, Ordering::Relaxed));
        self.subs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, sink));
        id
    }

    /// Removes a subscriber; `false` if it was not subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        let mut subs = self.subs.write().unwrap_or_else(|e| e.into_inner());
        let before = subs.len();
        subs.retain(|(s, _)| *s != id);
        subs.len() != before
    }

    /// The number of subscribers.
    pub fn len(&self) -> usize {
        self.subs.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nobody listens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The node the hub runs on (the activity counts a failover on the child's new node).
    pub(crate) fn set_node(&mut self, node: crate::model::NodeName) {
        self.node = Some(node);
    }

    /// Counts every event published from now on with `counter` (the hub's metrics).
    pub(crate) fn set_counter(&mut self, counter: EventCounter) {
        self.counter = Some(counter);
    }

    /// Reads the time of day from `clock` when recording events (the simulator's clock).
    pub(crate) fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The hub's recent events and their live feed.
    pub fn recent(&self) -> &RecentEvents {
        &self.recent
    }

    /// The last ten minutes of starts, stops, restarts and failovers, and the counts since
    /// the hub started.
    pub fn activity(&self) -> (ActivitySeries, ActivityTotals) {
        let now = self.clock.now_ms();
        let guard = self.activity.lock().unwrap_or_else(|e| e.into_inner());
        (guard.0.series(now), guard.0.totals())
    }

    /// The peers this hub saw go down (`NodeDown`, `NodeLeft`) and not come back up, each
    /// with when it went down (ms since the Unix epoch).
    pub fn departed(&self) -> Vec<(crate::model::NodeName, u64)> {
        let guard = self.activity.lock().unwrap_or_else(|e| e.into_inner());
        guard.1.list()
    }

    /// Records an event among the recent ones and in the activity, then delivers it to every
    /// subscriber (so a subscriber that sees it finds it recorded).
    pub fn publish(&self, event: impl FnOnce() -> HubEvent) {
        // Recorded first, so a subscriber that sees it finds it recorded; a copy is made for
        // each subscriber only (every child's start and stop publishes, mostly to nobody).
        let now = self.clock.now_ms();
        let event = event();
        self.count(&event, now);
        if let Some(counter) = &self.counter {
            counter(&event);
        }
        let recorded = self.recent.record(event, now);
        let mut dead = Vec::new();
        {
            let subs = self.subs.read().unwrap_or_else(|e| e.into_inner());
            for (id, sink) in subs.iter() {
                if !(sink.0)(recorded.event.clone()) {
                    dead.push(*id);
                }
            }
        }
        for id in dead {
            self.unsubscribe(id);
        }
    }
}

impl EventBus {
    /// Counts `event` in the activity history and the departed peers.
    fn count(&self, event: &HubEvent, now: u64) {
        let what = activity_of(event, self.node.as_deref());
        let node_change = matches!(
            event,
            HubEvent::NodeUp { .. } | HubEvent::NodeDown { .. } | HubEvent::NodeLeft { .. }
        );
        if what.is_none() && !node_change {
            return;
        }
        let mut guard = self.activity.lock().unwrap_or_else(|e| e.into_inner());
        let (history, departed) = &mut *guard;
        if let Some(what) = what {
            history.note(what, now);
        }
        match event {
            HubEvent::NodeUp { node } => departed.up(node),
            HubEvent::NodeDown { node, .. } | HubEvent::NodeLeft { node } => {
                departed.down(node, now)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    #[test]
    fn channel_subscribers_get_every_event_and_dead_ones_are_dropped() {
        let bus = EventBus::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (tx2, rx2) = mpsc::unbounded_channel();
        bus.subscribe(EventSink::channel(tx));
        bus.subscribe(EventSink::channel(tx2));
        drop(rx2);
        for i in 0..1000 {
            bus.publish(|| HubEvent::RegistryInserted {
                id: format!("c{i}").into(),
            });
        }
        assert_eq!(bus.len(), 1);
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        assert_eq!(n, 1000);
    }

    #[test]
    fn child_events_are_counted_and_departed_peers_remembered() {
        let mut bus = EventBus::new();
        bus.set_node("a@h".into());
        bus.publish(|| HubEvent::ChildStarted {
            id: "c1".into(),
            node: "a@h".into(),
            pid: 1,
        });
        for node in ["a@h", "c@h"] {
            // Both a and c report re-placing c2, which now runs on a.
            bus.publish(|| HubEvent::ChildReplaced {
                id: "c2".into(),
                node: node.into(),
                why: crate::events::MoveReason::NodeDown,
            });
        }
        bus.publish(|| HubEvent::NodeDown {
            node: "b@h".into(),
            graceful: false,
        });
        let (series, totals) = bus.activity();
        assert_eq!((totals.starts, totals.failovers, totals.stops), (1, 1, 0));
        assert_eq!(series.starts.iter().sum::<u32>(), 1);
        assert_eq!(bus.departed().len(), 1);
        assert_eq!(bus.departed()[0].0, "b@h");
        bus.publish(|| HubEvent::NodeUp { node: "b@h".into() });
        assert!(bus.departed().is_empty(), "back up");
    }
}
