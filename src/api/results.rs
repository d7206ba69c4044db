//! Results of the public API: typed versions of the original's tuples.

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

/// The answer to a start request.
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
}

impl StartResult {
    /// No child failed.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
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

/// The answer to a stop request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopResult {
    /// `false` for a non-awaitable request (then `stopped` is empty).
    pub awaited: bool,
    /// Children stopped.
    pub stopped: Vec<StoppedChild>,
    /// Children not stopped.
    pub errors: Vec<StopFailure>,
}

impl StopResult {
    /// No child failed to stop.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
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
