//! The monitors this node set, and the watches it keeps on its own children for monitors set
//! here or on peers.
//!
//! **Exactly once.** A monitor is an entry in `owned` on the node that set it; whatever fires
//! it (the host's report of the exit, the host going down, the child missing at the start)
//! first removes the entry under the lock, and only the remover delivers. A watch on the host
//! is keyed by monitor and removed when it reports, so the host reports at most once too.
//!
//! **Nothing per child elsewhere.** The host keeps a watch only for children someone monitors,
//! at most [`MAX_WATCHES_PER_PEER`] for one peer (a peer asking for more gets `monitor_refused`
//! at once), and drops a peer's watches when the peer goes down: its monitors went with it.
//!
//! **Races with the child's exit.** The ChildSupervisor removes a child from `local_children`
//! before it reports the exit here, and a watch is set only while the child is in `local_children`,
//! under this table's lock: a watch set before the removal is reported by it; one attempted after
//! finds no child and fires `no_child` at once — unless the child went down here moments ago: a
//! peer's watch request travels apart from the stop or the exit that overtook it, so the host
//! remembers the last [`RECENT_DOWNS`](table::RECENT_DOWNS) exits for
//! [`RECENT_DOWN_WINDOW`](table::RECENT_DOWN_WINDOW) and answers such a late watch with the exit's
//! own reason.

pub(crate) mod table;

use crate::cluster::wire::WireMsg;
use crate::core::child_route::{Asking, ChildRoute};
use crate::hub::shared::HubShared;
use crate::hub::simulation::InjectedBug;
use crate::model::{ChildId, DownReason, NodeName};
use crate::types::{ChildDown, DownSink, MonitorId, MonitorOptions};
use table::{release, remove_watch, Owned, Watch, WatchOutcome, MAX_WATCHES_PER_PEER};

impl HubShared {
    /// Records monitor `monitor` of child `id`, set on this node, delivering to `sink`, watched
    /// by `host` (`None`: here; the watch is set by [`HubShared::watch`]).
    pub fn own_monitor(
        &self,
        monitor: MonitorId,
        id: ChildId,
        sink: DownSink,
        host: Option<NodeName>,
    ) {
        self.monitors
            .lock()
            .owned
            .insert(monitor.0, Owned { id, sink, host });
    }

    /// Fires monitor `monitor` (set here) with `reason`, unless it already fired or was
    /// cancelled. Returns whether it fired.
    pub fn fire_monitor(&self, monitor: u64, reason: DownReason) -> bool {
        let owned = self.monitors.lock().owned.remove(&monitor);
        match owned {
            Some(owned) => {
                tracing::debug!(child = %owned.id, monitor, ?reason, "monitor fired");
                if self.has_bug(InjectedBug::DeliverMonitorsTwice) {
                    owned.sink.deliver(ChildDown {
                        monitor: MonitorId(monitor),
                        id: owned.id.clone(),
                        reason: reason.clone(),
                    });
                }
                owned.sink.deliver(ChildDown {
                    monitor: MonitorId(monitor),
                    id: owned.id,
                    reason,
                });
                true
            }
            None => false,
        }
    }

    /// Watches child `id`, which should run here, for `origin`'s monitor `monitor` (`None`:
    /// this node's).
    pub fn watch(
        &self,
        monitor: u64,
        id: &ChildId,
        origin: Option<NodeName>,
        follow_restarts: bool,
    ) -> WatchOutcome {
        let mut tables = self.monitors.lock();
        if !self.local_children.contains_key(id) {
            return match tables.recent_down(id, self.clock.now_ms()) {
                Some(reason) if origin.is_some() => WatchOutcome::Down(reason),
                _ => WatchOutcome::NoChild,
            };
        }
        if let Some(peer) = &origin {
            let count = tables.per_peer.entry(peer.clone()).or_default();
            if *count >= MAX_WATCHES_PER_PEER {
                return WatchOutcome::Refused;
            }
            *count += 1;
        }
        tables.watches.entry(id.clone()).or_default().push(Watch {
            monitor,
            origin,
            follow_restarts,
        });
        WatchOutcome::Watching
    }

    /// Child `id` of this node went down for `reason`; `restarting` says its supervisor
    /// restarts it (watches that follow restarts stay). Fires this node's monitors and reports
    /// to the peers that monitor it.
    pub fn child_down(&self, id: &ChildId, reason: DownReason, restarting: bool) {
        let fired: Vec<Watch> = {
            let mut tables = self.monitors.lock();
            // Most children are watched by nobody: no lookup then, and the reason is kept as
            // given rather than copied.
            let watches = if tables.watches.is_empty() {
                None
            } else {
                tables.watches.remove(id)
            };
            let Some(watches) = watches else {
                if !restarting {
                    tables.remember_down(id, reason, self.clock.now_ms());
                }
                return;
            };
            if !restarting {
                tables.remember_down(id, reason.clone(), self.clock.now_ms());
            }
            let (kept, fired): (Vec<Watch>, Vec<Watch>) = watches
                .into_iter()
                .partition(|w| restarting && w.follow_restarts);
            if !kept.is_empty() {
                tables.watches.insert(id.clone(), kept);
            }
            for w in &fired {
                if let Some(peer) = &w.origin {
                    release(&mut tables, peer);
                }
            }
            fired
        };
        for w in fired {
            match w.origin {
                None => {
                    self.fire_monitor(w.monitor, reason.clone());
                }
                Some(peer) => self.send_down(&peer, w.monitor, id.clone(), reason.clone()),
            }
        }
    }

    /// Tells `peer` that the child its `monitor` watches is down.
    pub fn send_down(&self, peer: &NodeName, monitor: u64, id: ChildId, reason: DownReason) {
        let Some(transport) = self.transport() else {
            return;
        };
        let msg = WireMsg::ChildDown {
            monitor,
            id,
            reason,
        };
        if let Err(e) = transport.send(peer, &msg) {
            // The peer is down: it fires its own monitors on our node's NodeDown... or it
            // already saw this node go down. Either way nobody waits on this report.
            tracing::debug!(%peer, error = %e, "child down report not sent");
        }
    }

    /// `peer` reports the child of monitor `monitor` (set here) down; only the host the
    /// monitor watches may say so.
    pub fn fire_remote_monitor(&self, peer: &NodeName, monitor: u64, reason: DownReason) {
        let from_host = self
            .monitors
            .lock()
            .owned
            .get(&monitor)
            .is_some_and(|o| o.host.as_ref() == Some(peer));
        if from_host {
            self.fire_monitor(monitor, reason);
        } else {
            tracing::debug!(%peer, monitor, "child down report from a node that does not watch it");
        }
    }

    /// `peer` went down: fires this node's monitors watched there (`node_down`) and drops the
    /// watches it held here.
    pub fn monitors_peer_down(&self, peer: &NodeName) {
        let fired: Vec<u64> = {
            let mut tables = self.monitors.lock();
            for watches in tables.watches.values_mut() {
                watches.retain(|w| w.origin.as_ref() != Some(peer));
            }
            tables.watches.retain(|_, w| !w.is_empty());
            tables.per_peer.remove(peer);
            tables
                .owned
                .iter()
                .filter(|(_, o)| o.host.as_ref() == Some(peer))
                .map(|(m, _)| *m)
                .collect()
        };
        for monitor in fired {
            self.fire_monitor(monitor, DownReason::NodeDown { node: peer.clone() });
        }
    }

    /// Cancels monitor `monitor` set here: it will not fire. Returns whether it was active.
    pub fn demonitor(&self, monitor: MonitorId) -> bool {
        let owned = {
            let mut tables = self.monitors.lock();
            let owned = tables.owned.remove(&monitor.0);
            if let Some(o) = &owned {
                if o.host.is_none() {
                    remove_watch(&mut tables, &o.id, monitor.0, None);
                }
            }
            owned
        };
        let Some(owned) = owned else {
            return false;
        };
        if let Some(host) = owned.host {
            if let Some(transport) = self.transport() {
                let _ = transport.send(&host, &WireMsg::Demonitor { monitor: monitor.0 });
            }
        }
        true
    }

    /// `peer` cancelled its monitor `monitor` (or it fired there already).
    pub fn peer_demonitor(&self, peer: &NodeName, monitor: u64) {
        let mut tables = self.monitors.lock();
        let id = tables.watches.iter().find_map(|(id, ws)| {
            ws.iter()
                .any(|w| w.monitor == monitor && w.origin.as_ref() == Some(peer))
                .then(|| id.clone())
        });
        if let Some(id) = id {
            remove_watch(&mut tables, &id, monitor, Some(peer));
        }
    }

    /// The hub stops: every monitor set here that has not fired fires `hub_stopped`.
    pub fn monitors_hub_stopped(&self) {
        let owned: Vec<u64> = self.monitors.lock().owned.keys().copied().collect();
        for monitor in owned {
            self.fire_monitor(monitor, DownReason::HubStopped);
        }
    }
}

impl HubShared {
    /// Sets a monitor on `id` for `target`: what `Hub::monitor` and `HubMsg::Monitor` do.
    pub(crate) fn monitor(
        &self,
        id: ChildId,
        target: DownSink,
        options: MonitorOptions,
    ) -> MonitorId {
        let shared = self;
        let monitor = shared.monitors.next_id();
        // Answering: a child whose host is down fires `node_down` now rather than asking the owner.
        match shared.route_child(&id, Asking::Answering) {
            ChildRoute::Here => {
                shared.own_monitor(monitor, id.clone(), target, None);
                if shared.watch(monitor.0, &id, None, options.follow_restarts)
                    != WatchOutcome::Watching
                {
                    shared.fire_monitor(monitor.0, DownReason::NoChild);
                }
            }
            ChildRoute::Peer(node) => {
                shared.own_monitor(monitor, id.clone(), target, Some(node.clone()));
                let msg = WireMsg::MonitorChild {
                    monitor: monitor.0,
                    id,
                    follow_restarts: options.follow_restarts,
                };
                let sent = shared.transport().map(|t| t.send(&node, &msg));
                if !matches!(sent, Some(Ok(()))) {
                    shared.fire_monitor(monitor.0, DownReason::NodeDown { node });
                }
            }
            ChildRoute::BetweenNodes { host: Some(node) } if node != shared.node => {
                // Its host is down (within the grace): the instance is gone with it.
                shared.own_monitor(monitor, id, target, None);
                shared.fire_monitor(monitor.0, DownReason::NodeDown { node });
            }
            ChildRoute::BetweenNodes { .. } | ChildRoute::NotFound => {
                shared.own_monitor(monitor, id, target, None);
                shared.fire_monitor(monitor.0, DownReason::NoChild);
            }
        }
        monitor
    }
}
