//! Why a monitored child is down: the one answer a monitor gives.

use serde::{Deserialize, Serialize};

use super::row::NodeName;

/// Why a monitor fired. Exactly one per monitor, whichever node noticed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DownReason {
    /// The child's actor returned from its work on its own (`myself.stop(..)` or the end of its
    /// life), on `node`.
    Normal {
        /// The node it ran on.
        node: NodeName,
    },
    /// The child failed (an error or a panic) or was killed, on `node`; `detail` is what
    /// ractor reported.
    Abnormal {
        /// The node it ran on.
        node: NodeName,
        /// The failure as ractor reported it ("killed", the error's text).
        detail: String,
    },
    /// The child was stopped through the hub (`stop_child`).
    Stopped {
        /// The node it ran on.
        node: NodeName,
    },
    /// The child was moved to another node (a cold swap when nodes joined, or a leaving
    /// node's handover): the instance monitored is gone; the id lives on elsewhere.
    Moved {
        /// The node it ran on.
        node: NodeName,
    },
    /// The node running the child went down (crashed, killed, disconnected, left).
    NodeDown {
        /// The node that went down.
        node: NodeName,
    },
    /// No node ran the child when the monitor was set (Erlang's `noproc`).
    NoChild,
    /// The monitoring hub stopped before the child went down.
    HubStopped,
    /// The node running the child refused to watch it (the monitoring node holds too many
    /// watches there); the child may still run.
    MonitorRefused {
        /// The node that refused.
        node: NodeName,
    },
}
