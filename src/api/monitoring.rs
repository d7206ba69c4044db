//! `Hub::monitor` / `Hub::demonitor`: where a monitor is set up (see [`super::monitor`] for
//! what it promises).

use tokio::sync::mpsc;

use super::handle::Hub;
use super::monitor::{ChildDown, DownSink, MonitorId, MonitorOptions};
use crate::cluster::wire::WireMsg;
use crate::core::child_route::{Asking, ChildRoute};
use crate::hub::shared::monitors::WatchOutcome;
use crate::model::{ChildId, DownReason};

impl Hub {
    /// Monitors child `id`: `target` gets exactly one [`ChildDown`] when the child exits
    /// (normally or not; with [`MonitorOptions::follow_restarts`], only when it ends for good),
    /// is stopped or moved, its node goes down, or at once if no node runs it now. Works from
    /// any node for a child on any node.
    pub fn monitor(
        &self,
        id: impl Into<ChildId>,
        target: DownSink,
        options: MonitorOptions,
    ) -> MonitorId {
        let id = id.into();
        let shared = self.shared();
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

    /// [`Hub::monitor`] into a new channel.
    pub fn monitor_channel(
        &self,
        id: impl Into<ChildId>,
        options: MonitorOptions,
    ) -> (MonitorId, mpsc::UnboundedReceiver<ChildDown>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (self.monitor(id, DownSink::channel(tx), options), rx)
    }

    /// Cancels a monitor set on this node: it will not fire. `false` if it already fired or
    /// was cancelled.
    pub fn demonitor(&self, monitor: MonitorId) -> bool {
        self.shared().demonitor(monitor)
    }
}
