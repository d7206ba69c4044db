//! Monitors of children, the Erlang way: `Hub::monitor(id, target, options)` delivers exactly
//! one [`ChildDown`] per monitor, from whichever node noticed, and `Hub::demonitor` cancels it.
//!
//! A monitor lives on the node that set it. The node running the child keeps only a watch keyed
//! by the monitor (to report the exit reason, which no other node sees), bounded per peer and
//! dropped when the monitoring node goes down; a node going down is noticed by the monitoring
//! node itself, so a SIGKILLed host still fires every monitor on it.

use std::fmt;

use ractor::ActorRef;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::model::{ChildId, DownReason};

/// Names one monitor on the node that set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MonitorId(pub u64);

/// How a monitor watches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonitorOptions {
    /// Keep watching when the child's supervisor restarts it on the same node (a crash that
    /// its restart type restarts); fire only when it ends for good, is stopped or moved, or its
    /// node goes down. Off by default: like an Erlang monitor, the first exit fires it.
    pub follow_restarts: bool,
}

impl MonitorOptions {
    /// Fires on the first exit (the default).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`MonitorOptions::follow_restarts`].
    pub fn follow_restarts(mut self, follow: bool) -> Self {
        self.follow_restarts = follow;
        self
    }
}

/// A monitored child is down: the one message a monitor delivers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildDown {
    /// The monitor that fired.
    pub monitor: MonitorId,
    /// The child.
    pub id: ChildId,
    /// Why.
    pub reason: DownReason,
}

impl ractor::Message for ChildDown {}

/// Where a monitor delivers its [`ChildDown`].
pub struct DownSink(Box<dyn Fn(ChildDown) + Send + Sync>);

impl fmt::Debug for DownSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DownSink")
    }
}

impl DownSink {
    /// To an actor whose message type is `ChildDown`.
    pub fn actor(actor: ActorRef<ChildDown>) -> Self {
        Self(Box::new(move |d| {
            let _ = actor.send_message(d);
        }))
    }

    /// To an actor of any message type, converted by `map` (e.g. `MyMsg::Down`).
    pub fn actor_mapped<M: ractor::Message>(
        actor: ActorRef<M>,
        map: impl Fn(ChildDown) -> M + Send + Sync + 'static,
    ) -> Self {
        Self(Box::new(move |d| {
            let _ = actor.send_message(map(d));
        }))
    }

    /// To an unbounded tokio channel.
    pub fn channel(tx: mpsc::UnboundedSender<ChildDown>) -> Self {
        Self(Box::new(move |d| {
            let _ = tx.send(d);
        }))
    }

    /// To a function (called once, from the hub's task that noticed; must not block).
    pub fn function(f: impl Fn(ChildDown) + Send + Sync + 'static) -> Self {
        Self(Box::new(f))
    }

    pub(crate) fn deliver(&self, down: ChildDown) {
        (self.0)(down)
    }
}
