//! The bookkeeping of monitors set from a client node through a hub's remote endpoint: the
//! client's table (which monitor waits for which endpoint) and the endpoint's holds (which
//! client sink holds which hub monitor, bounded).
//!
//! **Exactly once on the client.** A monitor is one entry in [`ClientMonitors`]; whatever fires
//! it (the endpoint forwarding the child's down, or the endpoint leaving before that) first
//! takes the entry out, and only the taker delivers. A report from an endpoint other than the
//! one the monitor was set through takes nothing: only that endpoint speaks for it.
//!
//! **Bounded on the endpoint.** [`EndpointHolds`] counts a client's monitors (by the sink it
//! named) and all monitors held, and refuses past either limit, so one client cannot make an
//! endpoint hold unbounded state. A sink that goes away drops everything it held.

use std::collections::{BTreeSet, HashMap};

use crate::model::{ChildId, NodeName};

/// One monitor a client holds, set through the endpoint of `hub_id` on `endpoint`.
#[derive(Debug)]
pub struct ClientEntry<S> {
    /// The hub.
    pub hub_id: String,
    /// The node whose endpoint set the monitor; the only one that may report it down.
    pub endpoint: NodeName,
    /// The name of that endpoint actor (it names one instance: a restarted endpoint has
    /// another), whose leaving fires the monitor.
    pub via: String,
    /// The child monitored.
    pub id: ChildId,
    /// Where the down goes.
    pub sink: S,
}

/// The monitors a client node holds through remote endpoints, by monitor id.
#[derive(Debug)]
pub struct ClientMonitors<S> {
    entries: HashMap<u64, ClientEntry<S>>,
}

impl<S> Default for ClientMonitors<S> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }
}

impl<S> ClientMonitors<S> {
    /// Records monitor `monitor`; it replaces nothing (monitor ids are fresh).
    pub fn insert(&mut self, monitor: u64, entry: ClientEntry<S>) {
        self.entries.insert(monitor, entry);
    }

    /// `endpoint` reports monitor `monitor` down: its entry, if still held and set through that
    /// endpoint.
    pub fn take_reported(&mut self, endpoint: &str, monitor: u64) -> Option<ClientEntry<S>> {
        if self.entries.get(&monitor)?.endpoint != endpoint {
            return None;
        }
        self.entries.remove(&monitor)
    }

    /// Takes monitor `monitor` out (a demonitor, or a monitor whose setting failed).
    pub fn take(&mut self, monitor: u64) -> Option<ClientEntry<S>> {
        self.entries.remove(&monitor)
    }

    /// The endpoint actor named `via` went away: every monitor set through it.
    pub fn take_via(&mut self, via: &str) -> Vec<(u64, ClientEntry<S>)> {
        let ids: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| e.via == via)
            .map(|(m, _)| *m)
            .collect();
        let mut taken: Vec<(u64, ClientEntry<S>)> = ids
            .into_iter()
            .filter_map(|m| self.entries.remove(&m).map(|e| (m, e)))
            .collect();
        taken.sort_by_key(|(m, _)| *m);
        taken
    }

    /// The endpoint actors monitors are held through, as (hub, endpoint name).
    pub fn vias(&self) -> BTreeSet<(String, String)> {
        self.entries
            .values()
            .map(|e| (e.hub_id.clone(), e.via.clone()))
            .collect()
    }

    /// How many monitors are held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no monitor is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Why an endpoint refused to hold one more monitor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HoldRefused {
    /// The client (its sink) holds `limit` monitors here already.
    #[error("the client holds {limit} monitors on this endpoint already")]
    ClientLimit {
        /// The limit.
        limit: usize,
    },
    /// The endpoint holds `limit` monitors for all clients already.
    #[error("the endpoint holds {limit} monitors already")]
    EndpointLimit {
        /// The limit.
        limit: usize,
    },
    /// The client already holds a monitor with this id here.
    #[error("monitor {monitor} is already held")]
    Duplicate {
        /// The client's monitor id.
        monitor: u64,
    },
}

/// The monitors an endpoint holds for its clients: per client sink, the client's monitor id
/// and the hub monitor set for it (`None` until the hub returned it).
#[derive(Debug)]
pub struct EndpointHolds {
    by_sink: HashMap<String, HashMap<u64, Option<u64>>>,
    total: usize,
    per_client: usize,
    limit: usize,
}

impl EndpointHolds {
    /// Holds with at most `per_client` monitors per sink and `limit` in all.
    pub fn new(per_client: usize, limit: usize) -> Self {
        Self {
            by_sink: HashMap::new(),
            total: 0,
            per_client,
            limit,
        }
    }

    /// Reserves a hold for the client's monitor `monitor` through `sink`, before the hub
    /// monitor is set. Returns whether `sink` is new here (held nothing until now).
    pub fn reserve(&mut self, sink: &str, monitor: u64) -> Result<bool, HoldRefused> {
        let held = self.by_sink.get(sink);
        if held.is_some_and(|h| h.contains_key(&monitor)) {
            return Err(HoldRefused::Duplicate { monitor });
        }
        if held.map_or(0, HashMap::len) >= self.per_client {
            return Err(HoldRefused::ClientLimit {
                limit: self.per_client,
            });
        }
        if self.total >= self.limit {
            return Err(HoldRefused::EndpointLimit { limit: self.limit });
        }
        let fresh = held.is_none();
        self.by_sink
            .entry(sink.to_owned())
            .or_default()
            .insert(monitor, None);
        self.total += 1;
        Ok(fresh)
    }

    /// Records the hub monitor set for a reservation. `false` when the hold is gone already
    /// (the hub monitor fired while it was being set): nothing is recorded.
    pub fn bind(&mut self, sink: &str, monitor: u64, hub_monitor: u64) -> bool {
        match self.by_sink.get_mut(sink).and_then(|h| h.get_mut(&monitor)) {
            Some(slot) => {
                *slot = Some(hub_monitor);
                true
            }
            None => false,
        }
    }

    /// Releases the client's monitor (it fired, or the client cancelled it): the hub monitor
    /// it held, if bound; `None` if it was not held.
    pub fn release(&mut self, sink: &str, monitor: u64) -> Option<Option<u64>> {
        let held = self.by_sink.get_mut(sink)?;
        let hub_monitor = held.remove(&monitor)?;
        if held.is_empty() {
            self.by_sink.remove(sink);
        }
        self.total -= 1;
        Some(hub_monitor)
    }

    /// The sink went away: the hub monitors it held, to cancel.
    pub fn drop_sink(&mut self, sink: &str) -> Vec<u64> {
        let held = self.by_sink.remove(sink).unwrap_or_default();
        self.total -= held.len();
        let mut bound: Vec<u64> = held.into_values().flatten().collect();
        bound.sort_unstable();
        bound
    }

    /// Everything held (the endpoint stops): the hub monitors to cancel.
    pub fn drain(&mut self) -> Vec<u64> {
        let sinks: Vec<String> = self.by_sink.keys().cloned().collect();
        sinks.iter().flat_map(|s| self.drop_sink(s)).collect()
    }

    /// How many monitors `sink` holds here.
    pub fn held_by(&self, sink: &str) -> usize {
        self.by_sink.get(sink).map_or(0, HashMap::len)
    }

    /// Whether `sink` holds anything here.
    pub fn holds(&self, sink: &str) -> bool {
        self.by_sink.contains_key(sink)
    }

    /// How many monitors are held in all.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hub: &str, endpoint: &str, id: &str) -> ClientEntry<&'static str> {
        ClientEntry {
            hub_id: hub.into(),
            endpoint: endpoint.into(),
            via: format!("{hub}|{endpoint}"),
            id: id.into(),
            sink: "sink",
        }
    }

    #[test]
    fn a_client_monitor_fires_once_and_only_for_its_endpoint() {
        let mut t = ClientMonitors::default();
        t.insert(1, entry("h", "a@x", "c1"));
        t.insert(2, entry("h", "b@x", "c2"));
        t.insert(3, entry("other", "a@x", "c3"));
        assert!(t.take_reported("b@x", 1).is_none(), "only its endpoint");
        assert_eq!(t.take_reported("a@x", 1).unwrap().id.as_str(), "c1");
        assert!(t.take_reported("a@x", 1).is_none(), "exactly once");
        let through: Vec<u64> = t.take_via("h|b@x").iter().map(|(m, _)| *m).collect();
        assert_eq!(through, vec![2]);
        assert!(t.take_reported("b@x", 2).is_none(), "fired by the leave");
        assert_eq!(
            t.vias(),
            [("other".to_owned(), "other|a@x".to_owned())].into()
        );
        assert!(t.take(3).is_some());
        assert!(t.take(3).is_none());
        assert!(t.is_empty());
    }

    #[test]
    fn an_endpoint_bounds_what_a_client_holds() {
        let mut h = EndpointHolds::new(2, 3);
        assert_eq!(h.reserve("s1", 1), Ok(true));
        assert_eq!(
            h.reserve("s1", 1),
            Err(HoldRefused::Duplicate { monitor: 1 })
        );
        assert_eq!(h.reserve("s1", 2), Ok(false));
        assert_eq!(
            h.reserve("s1", 3),
            Err(HoldRefused::ClientLimit { limit: 2 })
        );
        assert_eq!(h.reserve("s2", 1), Ok(true));
        assert_eq!(
            h.reserve("s3", 1),
            Err(HoldRefused::EndpointLimit { limit: 3 })
        );
        assert!(h.bind("s1", 1, 10));
        assert!(h.bind("s1", 2, 11));
        // Fired while being set: the bind finds nothing.
        assert_eq!(h.release("s2", 1), Some(None));
        assert!(!h.bind("s2", 1, 12));
        assert!(!h.holds("s2"));
        assert_eq!(h.held_by("s1"), 2);
        assert_eq!(h.release("s1", 1), Some(Some(10)));
        assert_eq!(h.release("s1", 1), None);
        assert_eq!(h.total(), 1);
        assert_eq!(h.drop_sink("s1"), vec![11]);
        assert_eq!(h.total(), 0);
        assert_eq!(h.reserve("s3", 1), Ok(true));
        assert!(h.bind("s3", 1, 13));
        assert_eq!(h.drain(), vec![13]);
        assert_eq!(h.total(), 0);
    }
}
