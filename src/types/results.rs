//! Results of the public API: typed versions of Elixir's ProcessHub's result tuples.

use serde::{Deserialize, Serialize};

use super::errors::{ChildStartError, ChildStopError};
use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Pid};

/// A child that started, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedChild {
    /// The child.
    pub id: ChildId,
    /// The nodes running it and the pid on each.
    pub nodes: Vec<(NodeName, Pid)>,
}

/// A child that did not start, where, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildFailure {
    /// The child.
    pub id: ChildId,
    /// The node that refused it (the local node for refusals made before delivery).
    pub node: NodeName,
    /// Why.
    pub reason: ChildStartError,
}

/// A durable child whose declaration is committed but whose start was not confirmed (its
/// owner could not be reached, did not answer in time, or has no quorum): the declared list
/// holds it, so the reconcile starts it once its owner can run it. Not a failure: a retried
/// start answers `already_started` once it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingStart {
    /// The child.
    pub id: ChildId,
    /// The node its start was sent to.
    pub node: NodeName,
    /// Why the start is not confirmed.
    pub reason: ChildStartError,
}

/// The answer to a start request.
///
/// Each child of the request is in exactly one of `started` (it runs), `pending` (a durable
/// child: declared for good, its start not confirmed) and `errors` (it does not run and, but for
/// the timeouts [`ChildStartError::may_have_started`] names, nothing changed for it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartResult {
    /// `false` for a non-awaitable request: the children were delivered and start in the
    /// background, `started` is empty and `errors` holds only refusals made before delivery.
    pub awaited: bool,
    /// Children running now, in request order.
    pub started: Vec<StartedChild>,
    /// Children that did not start.
    pub errors: Vec<ChildFailure>,
    /// Whether the request was rolled back (`on_failure: Rollback` and some child failed);
    /// then `started` is empty and `rolled_back` lists the children that were stopped again.
    pub rollback: bool,
    /// Children stopped by the rollback.
    pub rolled_back: Vec<ChildId>,
    /// Durable children declared for good whose start is not confirmed yet (see
    /// [`PendingStart`]).
    #[serde(default)]
    pub pending: Vec<PendingStart>,
}

impl StartResult {
    /// No child failed (some may be `pending`: declared, their start not confirmed).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// Every child took effect and was confirmed: none failed, none is pending.
    pub fn is_complete(&self) -> bool {
        self.errors.is_empty() && self.pending.is_empty()
    }

    /// The ids that started.
    pub fn started_ids(&self) -> Vec<ChildId> {
        self.started.iter().map(|s| s.id.clone()).collect()
    }

    /// The pid of a started child on its first node.
    pub fn pid_of(&self, id: &ChildId) -> Option<Pid> {
        self.started
            .iter()
            .find(|s| &s.id == id)
            .and_then(|s| s.nodes.first().map(|(_, p)| *p))
    }
}

/// A child that was stopped, and on which nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedChild {
    /// The child.
    pub id: ChildId,
    /// The nodes that stopped it (for a row no process backed, the node that dropped the row).
    pub nodes: Vec<NodeName>,
}

/// A child that was not stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopFailure {
    /// The child.
    pub id: ChildId,
    /// The node concerned, `None` when the registry has no such child.
    pub node: Option<NodeName>,
    /// Why.
    pub reason: ChildStopError,
}

/// A declared child whose removal from the declared list is committed but whose instances
/// were not confirmed stopped (their host cannot be reached or did not answer in time). The
/// stop is decided: no node restarts the child, and the node running it stops it once it sees
/// the list (the reconcile's "a stop that crashed halfway is finished by the node running it"),
/// or it is gone with its node. Retrying the stop is safe and answers `stopped` once it can.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingStop {
    /// The child.
    pub id: ChildId,
    /// The nodes whose instance is not confirmed stopped (empty when no node is known to run
    /// it).
    pub nodes: Vec<NodeName>,
    /// Why the stop is not confirmed there.
    pub reason: ChildStopError,
}

/// The answer to a stop request.
///
/// Each child of the request is in exactly one of `stopped` (it runs nowhere the hub knows),
/// `pending` (undeclared for good, instances not confirmed stopped) and `errors` (nothing
/// changed for it, but for [`ChildStopError::is_outcome_unknown`]). [`StopResult::outcome`]
/// reads one child's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopResult {
    /// `false` for a non-awaitable request (then `stopped` is empty).
    pub awaited: bool,
    /// Children stopped.
    pub stopped: Vec<StoppedChild>,
    /// Children not stopped.
    pub errors: Vec<StopFailure>,
    /// Declared children removed from the list for good whose instances are not confirmed
    /// stopped yet (see [`PendingStop`]).
    #[serde(default)]
    pub pending: Vec<PendingStop>,
}

/// What a stop did to one child ([`StopResult::outcome`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopOutcome<'a> {
    /// Stopped on these nodes.
    Stopped {
        /// Where it was stopped.
        nodes: &'a [NodeName],
    },
    /// Undeclared for good; not confirmed stopped on these nodes.
    Pending {
        /// Where it may still run until the stop reaches it.
        nodes: &'a [NodeName],
        /// Why it is not confirmed.
        reason: &'a ChildStopError,
    },
    /// Not stopped: nothing changed (unless [`ChildStopError::is_outcome_unknown`]).
    Failed(&'a ChildStopError),
}

impl StopResult {
    /// No child failed to stop (some may be `pending`: undeclared, not confirmed stopped).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// Every child took effect and was confirmed: none failed, none is pending.
    pub fn is_complete(&self) -> bool {
        self.errors.is_empty() && self.pending.is_empty()
    }

    /// What the stop did to child `id`; `None` if the request did not name it (or did not wait).
    pub fn outcome(&self, id: &ChildId) -> Option<StopOutcome<'_>> {
        if let Some(s) = self.stopped.iter().find(|s| &s.id == id) {
            return Some(StopOutcome::Stopped { nodes: &s.nodes });
        }
        if let Some(p) = self.pending.iter().find(|p| &p.id == id) {
            return Some(StopOutcome::Pending {
                nodes: &p.nodes,
                reason: &p.reason,
            });
        }
        self.errors
            .iter()
            .find(|e| &e.id == id)
            .map(|e| StopOutcome::Failed(&e.reason))
    }
}

/// One child as `child_lookup` returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildInfo {
    /// Its spec.
    pub spec: ChildSpec,
    /// Where it runs.
    pub nodes: Vec<(NodeName, Pid)>,
    /// Its metadata, when asked for.
    pub metadata: Option<Metadata>,
}

/// Which children `process_list` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessScope {
    /// Every child of the hub, with every node's pid.
    Global,
    /// Only the children running on this node, with this node's pid.
    Local,
}

/// One entry of `process_list` / `tag_query`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEntry {
    /// The child.
    pub id: ChildId,
    /// Where it runs.
    pub nodes: Vec<(NodeName, Pid)>,
}
