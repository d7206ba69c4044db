//! The Coordinator's messages: requests to start and stop children, the nodes' answers, the
//! transport's events, and the cluster half's timers and completions ([`ClusterMsg`]).

use std::time::Duration;

use ractor::RpcReplyPort;

use super::child_supervisor::{NodeStartReport, NodeStopReport};
use crate::cluster::transport::TransportEvent;
use crate::model::{ChildId, ChildSpec, NodeName};
use crate::types::{ChildMessageError, StartError, StopError};
use crate::types::{StartOptions, StopOptions};
use crate::types::{StartResult, StopResult};

pub(crate) type StartReplyPort = RpcReplyPort<Result<StartResult, StartError>>;
pub(crate) type StopReplyPort = RpcReplyPort<Result<StopResult, StopError>>;

/// Where a child call's answer goes.
pub(crate) type ChildCallReplyPort = RpcReplyPort<Result<Vec<u8>, ChildMessageError>>;

pub(crate) enum CoordinatorMsg {
    Start {
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    },
    Stop {
        ids: Vec<ChildId>,
        opts: StopOptions,
        reply: StopReplyPort,
    },
    NodeStarted {
        request_id: u64,
        report: NodeStartReport,
    },
    NodeStopped {
        request_id: u64,
        report: NodeStopReport,
    },
    Timeout {
        request_id: u64,
    },
    /// Something from the cluster transport (peers up/down, their messages).
    Transport(TransportEvent),
    /// Cluster: a timer or a write completion, see [`ClusterMsg`].
    Cluster(ClusterMsg),
}

impl ractor::Message for CoordinatorMsg {}

/// Timers and completions of the cluster half, cast back into the Coordinator.
pub(crate) enum ClusterMsg {
    /// A membership batch may be due.
    Flush,
    /// `node`'s grace period after a `NodeDown` ran out.
    GraceExpired { node: NodeName },
    /// Half of `node`'s grace went by: read the rows its re-placement will read
    /// (`core::read_ahead`).
    ReadAhead { node: NodeName },
    /// The Registry committed the reaping of these nodes' bindings.
    Reaped { nodes: Vec<NodeName> },
    /// A while after `node` came up: ask for its registry again if it has not arrived.
    NodeUpReconcile { node: NodeName, attempt: u32 },
    /// The Registry merged `from`'s full sync.
    Synced { from: NodeName },
    /// Time to send this node's full sync.
    SyncTick,
    /// Time to check whether the boot hold may end (`core::boot_rows`).
    BootHoldCheck,
    /// Retry failed migrations and re-placements.
    Retry,
    /// Hand this node's children to their next owners (graceful leave).
    Leave { reply: RpcReplyPort<()> },
    /// The peers did not all answer this node's goodbye in time: hand over now.
    GoodbyeAckTimeout,
    /// A start reply for this node that did not come over the wire (forwarded back here).
    StartOutcome {
        request_id: u64,
        report: NodeStartReport,
    },
    /// A message for a child by id (from the handle).
    ChildCast { id: ChildId, payload: Vec<u8> },
    /// A request for a child by id (from the handle).
    ChildCall {
        id: ChildId,
        payload: Vec<u8>,
        timeout: Duration,
        reply: ChildCallReplyPort,
    },
    /// A child call's deadline passed.
    CallTimeout { request_id: u64 },
    /// The states of a batch of hot moves are in (`coordinator::handover`).
    HandoverExported {
        export_id: u64,
        results: Vec<(ChildId, Result<Vec<u8>, crate::kinds::HandoverError>)>,
    },
    /// A hot move's retention period may be over: forget the expired handoffs.
    HandoffsExpire,
    /// Hot moves were abandoned (their children stay here, off their owner): a pass moves
    /// them again.
    RetryAbandonedMoves,
    /// Time to report this node's load (`Distribution::LoadBalanced`).
    LoadTick,
    /// Time to judge a dynamic quorum again (lost nodes age out of its threshold).
    QuorumTick,
    /// A reachability deadline passed (a resolution's stable time, a set-aside node's way
    /// back): decide again.
    ReachCheck,
    /// The reachability anti-entropy timer: send a digest to the next peer.
    ReachDigestTick,
    /// The cluster was made smaller on purpose (`Hub::reset_cluster_size`).
    ResetClusterSize {
        size: usize,
        reply: RpcReplyPort<bool>,
    },
}
