//! The tables behind [`super`]: the monitors this node set (`owned`), the watches it keeps on
//! its own children, the count of watches per peer and the last exits. A leaf `HubShared`
//! holds; what fires, sets and cancels monitors is `HubShared`'s methods in [`super`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::model::{ChildId, DownReason, FastHashMap, NodeName};
use crate::types::{DownSink, MonitorId};

/// The most watches one peer may hold on this node's children.
pub(crate) const MAX_WATCHES_PER_PEER: usize = 100_000;

/// How many of this node's last child exits a late watch request may still learn about.
pub(crate) const RECENT_DOWNS: usize = 1024;

/// How long an exit answers a late watch request with its reason (then: `no_child`).
pub(crate) const RECENT_DOWN_WINDOW: Duration = Duration::from_secs(10);

pub(super) struct Owned {
    pub(super) id: ChildId,
    pub(super) sink: DownSink,
    /// The node watching the child for this monitor (`None`: this node).
    pub(super) host: Option<NodeName>,
}

pub(super) struct Watch {
    pub(super) monitor: u64,
    /// Who set the monitor (`None`: this node).
    pub(super) origin: Option<NodeName>,
    pub(super) follow_restarts: bool,
}

#[derive(Default)]
pub(super) struct Tables {
    pub(super) owned: FastHashMap<u64, Owned>,
    pub(super) watches: FastHashMap<ChildId, Vec<Watch>>,
    pub(super) per_peer: FastHashMap<NodeName, usize>,
    /// This node's last exits (not followed by a restart here), oldest first.
    pub(super) recent_downs: VecDeque<(ChildId, DownReason, u64)>,
}

impl Tables {
    pub(super) fn remember_down(&mut self, id: &ChildId, reason: DownReason, now_ms: u64) {
        if self.recent_downs.len() >= RECENT_DOWNS {
            self.recent_downs.pop_front();
        }
        self.recent_downs.push_back((id.clone(), reason, now_ms));
    }

    pub(super) fn recent_down(&self, id: &ChildId, now_ms: u64) -> Option<DownReason> {
        let window = RECENT_DOWN_WINDOW.as_millis() as u64;
        self.recent_downs
            .iter()
            .rev()
            .take_while(|(_, _, at)| now_ms.saturating_sub(*at) < window)
            .find(|(down, _, _)| down == id)
            .map(|(_, reason, _)| reason.clone())
    }
}

/// A node's monitors and watches.
#[derive(Default)]
pub(crate) struct Monitors {
    next: AtomicU64,
    tables: Mutex<Tables>,
}

/// What a watch request found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WatchOutcome {
    /// The child runs here; the watch is set.
    Watching,
    /// The child does not run here.
    NoChild,
    /// The child went down here a moment before the request came.
    Down(DownReason),
    /// The peer holds too many watches here.
    Refused,
}

impl Monitors {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh monitor id for this node.
    pub fn next_id(&self) -> MonitorId {
        MonitorId(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

pub(super) fn release(tables: &mut Tables, peer: &NodeName) {
    if let Some(count) = tables.per_peer.get_mut(peer) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            tables.per_peer.remove(peer);
        }
    }
}

pub(super) fn remove_watch(
    tables: &mut Tables,
    id: &ChildId,
    monitor: u64,
    origin: Option<&NodeName>,
) {
    let mut removed = false;
    if let Some(ws) = tables.watches.get_mut(id) {
        let before = ws.len();
        ws.retain(|w| !(w.monitor == monitor && w.origin.as_ref() == origin));
        removed = ws.len() != before;
        if ws.is_empty() {
            tables.watches.remove(id);
        }
    }
    if removed {
        if let Some(peer) = origin {
            release(tables, peer);
        }
    }
}
