//! The event bus: one hub's subscribers, and the publishing every hub actor does directly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use super::recent::RecentEvents;
use super::{EventSink, HubEvent, SubscriptionId};
use crate::clock::Clock;

/// The subscribers of one hub. Shared by its actors, which publish directly (no extra hop).
///
/// Every event is also recorded in the hub's [`RecentEvents`] (a bounded ring and a live feed
/// that drops for slow watchers), which the admin API's explain and event stream read.
#[derive(Default)]
pub struct EventBus {
    subs: RwLock<Vec<(SubscriptionId, EventSink)>>,
    next: AtomicU64,
    recent: RecentEvents,
    clock: Clock,
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

    /// Reads the time of day from `clock` when recording events (the simulator's clock).
    pub(crate) fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The hub's recent events and their live feed.
    pub fn recent(&self) -> &RecentEvents {
        &self.recent
    }

    /// Records an event among the recent ones, then delivers it to every subscriber (so a
    /// subscriber that sees it finds it recorded).
    pub fn publish(&self, event: impl FnOnce() -> HubEvent) {
        // Recorded first, so a subscriber that sees it finds it recorded; a copy is made for
        // each subscriber only (every child's start and stop publishes, mostly to nobody).
        let recorded = self.recent.record(event(), self.clock.now_ms());
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
}
