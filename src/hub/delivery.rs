//! Delivery: how a batch of starts or stops reaches the node that must carry it out, and how
//! that node's answer comes back.
//!
//! The answer travels in a boxed closure ([`StartReply`] / [`StopReply`]) carried with the
//! batch, so the node that executes it does not need to know who asked: on one node the closure
//! casts to the local Coordinator; across nodes, the receiving gateway wraps a closure that
//! ships the report back over the wire. [`deliver_start`] / [`deliver_stop`] are the routing
//! point: this node's batches go to its ChildSupervisor; the cluster adds the remote branch.
//! Every path answers exactly once, with per-child `node_unavailable` errors when the batch
//! cannot be delivered.

use std::collections::BTreeSet;

use super::child_supervisor::ChildSupMsg;
use super::HubShared;
use crate::api::errors::{ChildStartError, ChildStopError};
use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Pid};

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

fn start_unavailable(node: &NodeName, batch: StartBatch, reason: &str) {
    let errors = batch
        .children
        .into_iter()
        .map(|(spec, _)| {
            (
                spec.id,
                ChildStartError::NodeUnavailable {
                    reason: reason.to_owned(),
                },
            )
        })
        .collect();
    (batch.reply)(NodeStartReport {
        node: node.clone(),
        started: Vec::new(),
        errors,
    });
}

fn stop_unavailable(node: &NodeName, batch: StopBatch, reason: &str) {
    let errors = batch
        .ids
        .into_iter()
        .map(|id| {
            (
                id,
                ChildStopError::NodeUnavailable {
                    reason: reason.to_owned(),
                },
            )
        })
        .collect();
    (batch.reply)(NodeStopReport {
        node: node.clone(),
        stopped: Vec::new(),
        errors,
    });
}

/// Delivers a start batch to `node`; its reply runs exactly once.
pub(crate) fn deliver_start(hub: &HubShared, node: &NodeName, batch: StartBatch) {
    if node != &hub.node {
        return start_unavailable(node, batch, "not a member of this hub");
    }
    let Some(supervisor) = hub.child_supervisor() else {
        return start_unavailable(node, batch, "child supervisor is restarting");
    };
    if let Err(ractor::MessagingErr::SendErr(ChildSupMsg::Start(batch))) =
        supervisor.cast(ChildSupMsg::Start(batch))
    {
        start_unavailable(node, batch, "child supervisor is restarting");
    }
}

/// Delivers a stop batch to `node`; its reply runs exactly once.
pub(crate) fn deliver_stop(hub: &HubShared, node: &NodeName, batch: StopBatch) {
    if node != &hub.node {
        return stop_unavailable(node, batch, "not a member of this hub");
    }
    let Some(supervisor) = hub.child_supervisor() else {
        return stop_unavailable(node, batch, "child supervisor is restarting");
    };
    if let Err(ractor::MessagingErr::SendErr(ChildSupMsg::Stop(batch))) =
        supervisor.cast(ChildSupMsg::Stop(batch))
    {
        stop_unavailable(node, batch, "child supervisor is restarting");
    }
}
