//! `Hub::monitor` / `Hub::demonitor`: where a monitor is set up (see [`crate::types::monitor`] for
//! what it promises).

use tokio::sync::mpsc;

use super::handle::Hub;
use crate::model::ChildId;
use crate::types::monitor::{ChildDown, DownSink, MonitorId, MonitorOptions};

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
        self.shared().monitor(id.into(), target, options)
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
