//! The ChildSupervisor's messages: batches of starts and stops for this node, and the reports
//! it answers them with.
//!
//! The answer travels in a boxed closure ([`StartReply`] / [`StopReply`]) carried with the
//! batch, so the supervisor that carries it out does not need to know who asked: a local
//! request's closure casts to the Coordinator, a peer's ships the report back over the wire.
//! Every path answers exactly once (`HubShared::deliver_start` answers `node_unavailable` per
//! child when the batch cannot be delivered).

use std::collections::BTreeSet;

use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Pid};
use crate::types::{ChildStartError, ChildStopError};

/// What a node answers to a start batch.
#[derive(Debug, Default)]
pub(crate) struct NodeStartReport {
    pub node: NodeName,
    pub started: Vec<(ChildId, Pid)>,
    pub errors: Vec<(ChildId, ChildStartError)>,
}

/// What a node answers to a stop batch.
#[derive(Debug, Default)]
pub(crate) struct NodeStopReport {
    pub node: NodeName,
    pub stopped: Vec<ChildId>,
    pub errors: Vec<(ChildId, ChildStopError)>,
}

/// Where a node's answer goes; a closure so that the cluster can ship it back over the wire.
pub(crate) type StartReply = Box<dyn FnOnce(NodeStartReport) + Send>;
/// Where a node's stop answer goes.
pub(crate) type StopReply = Box<dyn FnOnce(NodeStopReport) + Send>;

/// Children to start on this node.
pub(crate) struct StartBatch {
    pub children: Vec<(ChildSpec, Metadata)>,
    /// A child already running here counts as started (`check_existing: false`).
    pub existing_ok: bool,
    /// The children of the batch that are declared: their rows are marked durable.
    pub durable: BTreeSet<ChildId>,
    pub reply: StartReply,
}

/// Children to stop on this node.
pub(crate) struct StopBatch {
    pub ids: Vec<ChildId>,
    /// The children move to another node (a migration): their rows stay, as stubs, until the
    /// new owner records them. Otherwise the stop is deliberate and the rows go.
    pub release: bool,
    pub reply: StopReply,
}

/// What the ChildSupervisor is asked to do.
pub(crate) enum ChildSupMsg {
    Start(StartBatch),
    Stop(StopBatch),
    /// Try again to restart a child whose restart failed.
    RetryRestart {
        id: ChildId,
    },
    /// The grace of the children of stop group `group` with grace <= `grace_ms` is over.
    StopDeadline {
        group: u64,
        grace_ms: u64,
    },
    /// Rows of these children could not be written: stop them again.
    Discard {
        ids: Vec<ChildId>,
    },
    /// Partition mode: stop every child this node runs when the message is handled (those a
    /// batch started meanwhile included), as releases, and forget the restarts waiting for a
    /// retry (their rows become stubs).
    ReleaseAll,
}

impl ractor::Message for ChildSupMsg {}
