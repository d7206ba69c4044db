//! How the Coordinator's pending operations complete: nodes' reports and timeouts finishing a
//! pending start or stop, rollback of a failed start, and the hand-off of internal (cluster)
//! operations.

use std::collections::BTreeMap;

use ractor::ActorRef;

use super::{CoordinatorState, PendingOperation, PendingStart, StartPurpose, StopPurpose};
use crate::hub::protocol::{CoordinatorMsg, NodeStartReport, NodeStopReport};
use crate::model::{ChildId, NodeName};
use crate::types::OnFailure;
use crate::types::{ChildFailure, StartedChild, StopFailure, StopResult, StoppedChild};
use crate::types::{ChildStartError, ChildStopError};

impl PendingStart {
    /// Settles child `id` if it is still awaited: started as `pid`, or failed. `node` names
    /// where, from the name the child was awaited under.
    fn settle(
        &mut self,
        id: ChildId,
        node: impl FnOnce(NodeName) -> NodeName,
        outcome: Result<crate::model::Pid, ChildStartError>,
    ) {
        let Some(awaited) = self.awaiting.remove(&id) else {
            return;
        };
        let node = node(awaited);
        match outcome {
            Ok(pid) => self.result.started.push(StartedChild {
                id,
                nodes: vec![(node, pid)],
            }),
            Err(reason) => self.result.errors.push(ChildFailure { id, node, reason }),
        }
    }
}

impl CoordinatorState {
    /// A node's answer to its start batch: each child it names is settled as started or failed
    /// there.
    pub(crate) fn on_node_started(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        report: NodeStartReport,
    ) {
        let Some(PendingOperation::Start(op)) = self.pending_operations.get_mut(&request_id) else {
            return; // timed out already
        };
        let NodeStartReport {
            node,
            started,
            errors,
        } = report;
        // A child is awaited under the name of the node it was sent to, which is the reporting
        // node's but for a forwarded child: that name is kept rather than copied again.
        let named = |awaited: NodeName| {
            if awaited == node {
                awaited
            } else {
                node.clone()
            }
        };
        op.result.started.reserve(started.len());
        for (id, pid) in started {
            op.settle(id, named, Ok(pid));
        }
        for (id, reason) in errors {
            op.settle(id, named, Err(reason));
        }
        if op.awaiting.is_empty() {
            self.finish_start(myself, request_id);
        }
    }

    /// Records the answers for some children of a start (from any node: forwarded children
    /// are answered by their owner).
    pub(crate) fn on_start_outcome(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        started: Vec<(ChildId, NodeName, crate::model::Pid)>,
        errors: Vec<(ChildId, NodeName, ChildStartError)>,
    ) {
        let Some(PendingOperation::Start(op)) = self.pending_operations.get_mut(&request_id) else {
            return; // timed out already
        };
        for (id, node, pid) in started {
            op.settle(id, |_| node, Ok(pid));
        }
        for (id, node, reason) in errors {
            op.settle(id, |_| node, Err(reason));
        }
        if op.awaiting.is_empty() {
            self.finish_start(myself, request_id);
        }
    }

    pub(crate) fn on_node_stopped(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        report: NodeStopReport,
    ) {
        let Some(PendingOperation::Stop(op)) = self.pending_operations.get_mut(&request_id) else {
            return;
        };
        // A node answers a stop batch cut into several frames with one report per frame:
        // each report settles the children it names, and the node is done when none is left.
        let Some(waiting) = op.awaiting.get_mut(&report.node) else {
            return;
        };
        let stopped: Vec<ChildId> = report
            .stopped
            .into_iter()
            .filter(|id| waiting.remove(id))
            .collect();
        let errors: Vec<(ChildId, ChildStopError)> = report
            .errors
            .into_iter()
            .filter(|(id, _)| waiting.remove(id))
            .collect();
        if waiting.is_empty() {
            op.awaiting.remove(&report.node);
        }
        for id in stopped {
            op.stopped
                .entry(id)
                .or_insert_with(|| Vec::with_capacity(1))
                .push(report.node.clone());
        }
        for (id, reason) in errors {
            op.errors.push(StopFailure {
                id,
                node: Some(report.node.clone()),
                reason,
            });
        }
        if op.awaiting.is_empty() {
            self.finish_stop(myself, request_id);
        }
    }

    pub(crate) fn on_timeout(&mut self, myself: &ActorRef<CoordinatorMsg>, request_id: u64) {
        match self.pending_operations.get_mut(&request_id) {
            Some(PendingOperation::Start(op)) => {
                let mut late: Vec<(ChildId, NodeName)> =
                    std::mem::take(&mut op.awaiting).into_iter().collect();
                late.sort_unstable();
                for (id, node) in late {
                    op.result.errors.push(ChildFailure {
                        id,
                        node,
                        reason: ChildStartError::NodeReceiveTimeout,
                    });
                }
                self.finish_start(myself, request_id);
            }
            Some(PendingOperation::Stop(op)) => {
                for (node, ids) in std::mem::take(&mut op.awaiting).into_iter() {
                    let mut ids: Vec<ChildId> = ids.into_iter().collect();
                    ids.sort_unstable();
                    for id in ids {
                        op.errors.push(StopFailure {
                            id,
                            node: Some(node.clone()),
                            reason: ChildStopError::NodeReceiveTimeout,
                        });
                    }
                }
                self.finish_stop(myself, request_id);
            }
            None => {}
        }
    }

    pub(crate) fn finish_start(&mut self, myself: &ActorRef<CoordinatorMsg>, request_id: u64) {
        let Some(PendingOperation::Start(op)) = self.pending_operations.remove(&request_id) else {
            return;
        };
        if let Some(t) = &op.timer {
            t.abort();
        }
        op.span.record("started", op.result.started.len());
        op.span.record("failed", op.result.errors.len());
        let reply = match op.purpose {
            StartPurpose::Request(reply) => reply,
            StartPurpose::Internal(internal) => {
                // A reap that waited for this re-placement goes now.
                if let Some(cluster) = &mut self.cluster {
                    let due = cluster.held_reaps.answered(request_id);
                    self.reap(myself, due);
                }
                return self.finish_internal_start(myself, internal, op.result);
            }
        };
        let rollback = op.on_failure == OnFailure::Rollback
            && !op.result.errors.is_empty()
            && !op.result.started.is_empty();
        if !rollback {
            if let Some(replicas) = op.replicas {
                let started: std::collections::BTreeSet<&ChildId> =
                    op.result.started.iter().map(|s| &s.id).collect();
                let by_node = replicas
                    .by_node
                    .into_iter()
                    .map(|(node, children)| {
                        let children = children
                            .into_iter()
                            .filter(|(spec, _)| started.contains(&spec.id))
                            .collect();
                        (node, children)
                    })
                    .collect();
                self.deliver_replicas(myself, by_node, &replicas.durable);
            }
            let _ = reply.send(Ok(op.result));
            return;
        }
        let mut by_node: BTreeMap<NodeName, Vec<ChildId>> = BTreeMap::new();
        for started in &op.result.started {
            for (node, _) in &started.nodes {
                by_node
                    .entry(node.clone())
                    .or_default()
                    .push(started.id.clone());
            }
        }
        tracing::info!(
            request_id,
            children = op.result.started.len(),
            "rolling back a failed start"
        );
        let request_id = self.next_id();
        let timeout = if op.timeout.is_zero() {
            self.hub.config.default_timeout()
        } else {
            op.timeout
        };
        self.begin_stop(
            myself,
            request_id,
            by_node,
            Vec::new(),
            StopPurpose::Rollback {
                result: op.result,
                reply,
            },
            timeout,
        );
    }

    pub(crate) fn finish_stop(&mut self, myself: &ActorRef<CoordinatorMsg>, request_id: u64) {
        let Some(PendingOperation::Stop(op)) = self.pending_operations.remove(&request_id) else {
            return;
        };
        if let Some(t) = &op.timer {
            t.abort();
        }
        match op.purpose {
            StopPurpose::Request(reply) => {
                let mut stopped: Vec<StoppedChild> = op
                    .stopped
                    .into_iter()
                    .map(|(id, nodes)| StoppedChild { id, nodes })
                    .collect();
                stopped.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                let _ = reply.send(Ok(StopResult {
                    awaited: true,
                    stopped,
                    errors: op.errors,
                    pending: Vec::new(),
                }));
            }
            StopPurpose::Rollback { mut result, reply } => {
                for e in &op.errors {
                    tracing::error!(child = %e.id, error = %e.reason, "rollback could not stop a child");
                }
                result.rollback = true;
                result.rolled_back = op.stopped.into_keys().collect();
                result.rolled_back.sort_unstable();
                result.started.clear();
                let _ = reply.send(Ok(result));
            }
            StopPurpose::Migration { target, why, rows } => {
                self.continue_migration(myself, target, why, rows, op.errors)
            }
        }
    }
}
