//! The endpoint's side of monitors set from client nodes: a hub monitor per client monitor,
//! whose down is forwarded to the client's down sink (the actor in the pg group the client
//! named).
//!
//! What one client may hold here is bounded ([`MAX_MONITORS_PER_CLIENT`], and
//! [`MAX_ENDPOINT_MONITORS`] for all), a sink that is not in its group is refused
//! `unknown_sink`, and a sink that leaves its group (it stopped, or its node disconnected)
//! has its hub monitors cancelled: nobody would receive their downs.

use std::sync::{Arc, Mutex};

use ractor::ActorRef;

use super::super::HubShared;
use crate::core::remote_monitors::{EndpointHolds, HoldRefused};
use crate::hub::protocol::endpoint::{
    encode, DownSinkMsg, EndpointMsg, EndpointReply, RemoteDown, RemoteFailure,
    MAX_ENDPOINT_MONITORS, MAX_MONITORS_PER_CLIENT,
};
use crate::model::ChildId;
use crate::types::{ChildDown, DownSink, MonitorId, MonitorOptions};

/// The monitors an endpoint holds for clients, shared with the hub monitors' sinks.
#[derive(Clone)]
pub(crate) struct Holds(Arc<Mutex<EndpointHolds>>);

impl Default for Holds {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(EndpointHolds::new(
            MAX_MONITORS_PER_CLIENT,
            MAX_ENDPOINT_MONITORS,
        ))))
    }
}

impl Holds {
    fn lock(&self) -> std::sync::MutexGuard<'_, EndpointHolds> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A client's monitor of child `id`, its down to go to the sink in group `sink`.
    pub(crate) fn monitor(
        &self,
        endpoint: &ActorRef<EndpointMsg>,
        hub: &Arc<HubShared>,
        id: ChildId,
        sink: String,
        monitor: u64,
        follow_restarts: bool,
    ) -> EndpointReply {
        let unknown = || {
            EndpointReply::Failed(RemoteFailure::new(
                "unknown_sink",
                "no down sink in the group named",
            ))
        };
        if one_member(&sink).is_none() {
            return unknown();
        }
        if let Err(refused) = self.lock().reserve(&sink, monitor) {
            let code = match refused {
                HoldRefused::Duplicate { .. } => "bad_request",
                HoldRefused::ClientLimit { .. } | HoldRefused::EndpointLimit { .. } => {
                    "too_many_monitors"
                }
            };
            tracing::warn!(%sink, error = %refused, "remote monitor refused");
            return EndpointReply::Failed(RemoteFailure::new(code, refused.to_string()));
        }
        ractor::pg::monitor(sink.clone(), endpoint.get_cell());
        // Checked again once watched: a sink that left in between would never be noticed.
        let Some(target) = one_member(&sink) else {
            self.release(endpoint, &sink, monitor);
            return unknown();
        };
        let forward = {
            let holds = self.clone();
            let sink = sink.clone();
            let node = hub.node.clone();
            DownSink::function(move |down: ChildDown| {
                if holds.lock().release(&sink, monitor).is_none() {
                    return;
                }
                let report = RemoteDown {
                    endpoint: node.clone(),
                    monitor,
                    id: down.id,
                    reason: down.reason,
                };
                if let Err(e) = target.cast(DownSinkMsg::Down(encode(&report))) {
                    tracing::debug!(%sink, error = %e, "a remote monitor's down not forwarded");
                }
            })
        };
        let options = MonitorOptions::new().follow_restarts(follow_restarts);
        let hub_monitor = hub.monitor(id, forward, options);
        self.lock().bind(&sink, monitor, hub_monitor.0);
        EndpointReply::Monitoring
    }

    /// The client cancels its monitor.
    pub(crate) fn demonitor(
        &self,
        endpoint: &ActorRef<EndpointMsg>,
        hub: &HubShared,
        sink: &str,
        monitor: u64,
    ) -> EndpointReply {
        let held = self.release(endpoint, sink, monitor);
        if let Some(Some(hub_monitor)) = held {
            hub.demonitor(MonitorId(hub_monitor));
        }
        EndpointReply::Demonitored(held.is_some())
    }

    /// How many monitors the sink holds here.
    pub(crate) fn held(&self, sink: &str) -> EndpointReply {
        EndpointReply::Held(self.lock().held_by(sink) as u64)
    }

    /// Releases a hold; stops watching a sink that holds nothing any more.
    fn release(
        &self,
        endpoint: &ActorRef<EndpointMsg>,
        sink: &str,
        monitor: u64,
    ) -> Option<Option<u64>> {
        let mut holds = self.lock();
        let held = holds.release(sink, monitor);
        if !holds.holds(sink) {
            ractor::pg::demonitor(sink.to_owned(), endpoint.get_id());
        }
        held
    }

    /// The sink in group `sink` left it: its hub monitors are cancelled.
    pub(crate) fn sink_left(&self, endpoint: &ActorRef<EndpointMsg>, hub: &HubShared, sink: &str) {
        if one_member(sink).is_some() {
            return;
        }
        let dropped = self.lock().drop_sink(sink);
        ractor::pg::demonitor(sink.to_owned(), endpoint.get_id());
        if !dropped.is_empty() {
            tracing::debug!(%sink, monitors = dropped.len(), "a client's down sink left: its monitors are cancelled");
        }
        for hub_monitor in dropped {
            hub.demonitor(MonitorId(hub_monitor));
        }
    }

    /// The endpoint stops: every hub monitor held for clients is cancelled (their endpoint
    /// leaving its group tells each client).
    pub(crate) fn drain(&self, hub: &HubShared) {
        let drained = self.lock().drain();
        for hub_monitor in drained {
            hub.demonitor(MonitorId(hub_monitor));
        }
    }
}

/// The one actor in group `sink`, as a down sink: none or several is no sink.
fn one_member(sink: &str) -> Option<ActorRef<DownSinkMsg>> {
    match ractor::pg::get_members(&sink.to_owned()).as_slice() {
        // The group's name says it is a down sink, whose message type is `DownSinkMsg`.
        [cell] => Some(ActorRef::from(cell.clone())),
        _ => None,
    }
}
