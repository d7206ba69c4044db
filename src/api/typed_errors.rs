//! Why a typed message to a child ([`super::child_ref::ChildRef`]) failed: one enum, so a
//! caller can match on what it can act on (retry later, give up, fix its code).

use serde::{Deserialize, Serialize};

use crate::cluster::wire::ChildFailure;
use crate::model::{ChildId, NodeName};

/// A typed cast or call to a child failed.
///
/// [`ChildRefError::BetweenNodes`] is the one a caller may retry: the child exists and will run
/// again in a moment (its node is down within the grace period, or it is being moved).
/// `ChildRef` already retries it within the call's timeout; it surfaces only when the timeout
/// ran out first (or to a cast, which does not wait).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChildRefError {
    /// No node runs the child, and none is about to.
    #[error("no node runs child {id}")]
    NotFound {
        /// The child.
        id: ChildId,
    },
    /// The child exists but no reachable node runs it right now: `host` (the node the registry
    /// names) is down within its grace period, or the child is being moved. Retryable.
    #[error("child {id} is between nodes (registry host: {host:?})")]
    BetweenNodes {
        /// The child.
        id: ChildId,
        /// The host the registry names, if any.
        host: Option<NodeName>,
    },
    /// No answer within the caller's timeout.
    #[error("child {id} did not answer within {waited_ms} ms")]
    Timeout {
        /// The child.
        id: ChildId,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The node running the child went down or could not be reached while the call waited;
    /// whether the child handled the message is unknown.
    #[error("node {node} running child {id} is unreachable")]
    Unreachable {
        /// The child.
        id: ChildId,
        /// The node.
        node: NodeName,
    },
    /// The message is not of the child's message type (a local child checks the type; a remote
    /// one fails to decode it), or its bytes do not decode.
    #[error("message to child {id} does not decode on {node}: {detail}")]
    Decode {
        /// The child.
        id: ChildId,
        /// The node that refused it.
        node: NodeName,
        /// What went wrong.
        detail: String,
    },
    /// The child runs on another node and the message type has no serialized form (it is
    /// local-only), or a call was built from a variant that is not `#[rpc]`.
    #[error("message to child {id} cannot cross nodes: {detail}")]
    NotRemotable {
        /// The child.
        id: ChildId,
        /// Why.
        detail: String,
    },
    /// The encoded message or answer is larger than one frame may carry.
    #[error("message to child {id} is {bytes} bytes, above the {max}-byte frame budget")]
    TooLarge {
        /// The child.
        id: ChildId,
        /// Its encoded size.
        bytes: u64,
        /// The budget.
        max: u64,
    },
    /// The child dropped the reply port without answering (it stopped or failed meanwhile).
    #[error("child {id} on {node} dropped the call without answering")]
    NoReply {
        /// The child.
        id: ChildId,
        /// Its node.
        node: NodeName,
    },
    /// The host refused: too many typed calls from peers are in flight there.
    #[error("node {node} is overloaded with child messages")]
    Overloaded {
        /// The child.
        id: ChildId,
        /// The node.
        node: NodeName,
    },
    /// This node's hub is not running (or not clustered while the child is elsewhere).
    #[error("the hub is not running")]
    HubUnavailable {
        /// The child.
        id: ChildId,
    },
}

impl ChildRefError {
    /// The snake_case code (as serialized).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "not_found",
            Self::BetweenNodes { .. } => "between_nodes",
            Self::Timeout { .. } => "timeout",
            Self::Unreachable { .. } => "unreachable",
            Self::Decode { .. } => "decode",
            Self::NotRemotable { .. } => "not_remotable",
            Self::TooLarge { .. } => "too_large",
            Self::NoReply { .. } => "no_reply",
            Self::Overloaded { .. } => "overloaded",
            Self::HubUnavailable { .. } => "hub_unavailable",
        }
    }

    /// Whether a retry in a moment may succeed (the child exists and will run again).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::BetweenNodes { .. })
    }

    /// The error a host's failure code stands for.
    pub(crate) fn from_failure(f: ChildFailure) -> Self {
        let ChildFailure {
            id,
            node,
            reason,
            message,
        } = f;
        match reason.as_str() {
            "not_found" => Self::NotFound { id },
            // A host that no longer runs the child (it moved on) is a retry elsewhere.
            "between_nodes" | "moved" => Self::BetweenNodes {
                id,
                host: (!message.is_empty()).then_some(message),
            },
            "decode" => Self::Decode {
                id,
                node,
                detail: message,
            },
            "too_large" => Self::TooLarge {
                id,
                bytes: message.parse().unwrap_or(0),
                max: crate::cluster::wire::budget::FRAME_BUDGET_BYTES,
            },
            "no_reply" => Self::NoReply { id, node },
            "overloaded" => Self::Overloaded { id, node },
            "timeout" => Self::Timeout {
                id,
                waited_ms: message.parse().unwrap_or(0),
            },
            _ => Self::Unreachable { id, node },
        }
    }
}
