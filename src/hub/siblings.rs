//! Handing work to a sibling actor (`impl HubShared`: every actor and handle calls these methods;
//! nobody imports the file).
//!
//! A sibling may be away for a moment (its supervisor is restarting it), and a request must
//! never be left without an answer: each helper here answers the request itself (`node_unavailable`
//! for a batch, `hub_unavailable` for a request, `StorageError::Closed` for a write) when the
//! sibling cannot take it.

use std::time::Duration;

use ractor::RpcReplyPort;

use crate::cluster::wire::{RequestId, WireMsg};
use crate::hub::protocol::{
    ChildCallReplyPort, ChildSupMsg, ClusterMsg, CoordinatorMsg, DeclaredMsg, NodeStartReport,
    NodeStopReport, RegistryMsg, RegistryOp, StartBatch, StartReplyPort, StopBatch, StopReplyPort,
    WriteDone,
};
use crate::hub::shared::HubShared;
use crate::model::{ChildId, ChildSpec, NodeName};
use crate::storage::StorageError;
use crate::types::{
    ChildMessageError, ChildStartError, ChildStopError, RecoveryError, StartError, StopError,
};
use crate::types::{StartOptions, StopOptions};

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

impl HubShared {
    /// Delivers a start batch to `node`; its reply runs exactly once.
    pub fn deliver_start(&self, node: &NodeName, batch: StartBatch) {
        if node != &self.node {
            return start_unavailable(node, batch, "not a member of this hub");
        }
        let Some(supervisor) = self.child_supervisor() else {
            return start_unavailable(node, batch, "child supervisor is restarting");
        };
        if let Err(ractor::MessagingErr::SendErr(ChildSupMsg::Start(batch))) =
            supervisor.cast(ChildSupMsg::Start(batch))
        {
            start_unavailable(node, batch, "child supervisor is restarting");
        }
    }

    /// Delivers a stop batch to `node`; its reply runs exactly once.
    pub fn deliver_stop(&self, node: &NodeName, batch: StopBatch) {
        if node != &self.node {
            return stop_unavailable(node, batch, "not a member of this hub");
        }
        let Some(supervisor) = self.child_supervisor() else {
            return stop_unavailable(node, batch, "child supervisor is restarting");
        };
        if let Err(ractor::MessagingErr::SendErr(ChildSupMsg::Stop(batch))) =
            supervisor.cast(ChildSupMsg::Stop(batch))
        {
            stop_unavailable(node, batch, "child supervisor is restarting");
        }
    }

    /// Hands a start request to the Coordinator (answers `HubUnavailable` if it is restarting).
    pub fn start_through_coordinator(
        &self,
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    ) {
        let unavailable = || StartError::HubUnavailable("coordinator is restarting".into());
        let Some(coordinator) = self.coordinator() else {
            let _ = reply.send(Err(unavailable()));
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(CoordinatorMsg::Start { reply, .. })) =
            coordinator.cast(CoordinatorMsg::Start { specs, opts, reply })
        {
            let _ = reply.send(Err(unavailable()));
        }
    }

    /// Hands a stop request to the Coordinator (answers `HubUnavailable` if it is restarting).
    pub fn stop_through_coordinator(
        &self,
        ids: Vec<ChildId>,
        opts: StopOptions,
        reply: StopReplyPort,
    ) {
        let unavailable = || StopError::HubUnavailable("coordinator is restarting".into());
        let Some(coordinator) = self.coordinator() else {
            let _ = reply.send(Err(unavailable()));
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(CoordinatorMsg::Stop { reply, .. })) =
            coordinator.cast(CoordinatorMsg::Stop { ids, opts, reply })
        {
            let _ = reply.send(Err(unavailable()));
        }
    }

    /// Hands a cast to a child to the Coordinator, which routes it to the child's node; dropped
    /// (and logged) if the Coordinator is restarting, as a cast gets no answer.
    pub fn cast_child_through_coordinator(&self, id: ChildId, payload: Vec<u8>) {
        let msg = CoordinatorMsg::Cluster(ClusterMsg::ChildCast { id, payload });
        if self.coordinator().is_none_or(|c| c.cast(msg).is_err()) {
            tracing::debug!("child cast dropped: the coordinator is restarting");
        }
    }

    /// Hands a call to a child to the Coordinator (answers `hub_unavailable` if it is
    /// restarting).
    pub fn call_child_through_coordinator(
        &self,
        id: ChildId,
        payload: Vec<u8>,
        timeout: Duration,
        reply: ChildCallReplyPort,
    ) {
        let refuse = |reply: ChildCallReplyPort, id: ChildId| {
            let _ = reply.send(Err(ChildMessageError {
                id,
                node: self.node.clone(),
                code: "hub_unavailable".into(),
                message: "the coordinator is restarting".into(),
            }));
        };
        let Some(coordinator) = self.coordinator() else {
            return refuse(reply, id);
        };
        let msg = CoordinatorMsg::Cluster(ClusterMsg::ChildCall {
            id,
            payload,
            timeout,
            reply,
        });
        if let Err(ractor::MessagingErr::SendErr(CoordinatorMsg::Cluster(
            ClusterMsg::ChildCall { id, reply, .. },
        ))) = coordinator.cast(msg)
        {
            refuse(reply, id);
        }
    }

    /// Hands a graceful leave to the Coordinator; answers at once when there is none to hand
    /// children over (it is restarting, so this node holds no migration in progress).
    pub fn leave_through_coordinator(&self, reply: RpcReplyPort<()>) {
        let Some(coordinator) = self.coordinator() else {
            let _ = reply.send(());
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(CoordinatorMsg::Cluster(ClusterMsg::Leave {
            reply,
        }))) = coordinator.cast(CoordinatorMsg::Cluster(ClusterMsg::Leave { reply }))
        {
            let _ = reply.send(());
        }
    }

    /// Hands an intentional downsizing to the Coordinator (answers the current partition mode
    /// when it is away).
    pub fn reset_cluster_size_through_coordinator(&self, size: usize, reply: RpcReplyPort<bool>) {
        let Some(coordinator) = self.coordinator() else {
            let _ = reply.send(self.partition.partitioned());
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(CoordinatorMsg::Cluster(
            ClusterMsg::ResetClusterSize { reply, .. },
        ))) = coordinator.cast(CoordinatorMsg::Cluster(ClusterMsg::ResetClusterSize {
            size,
            reply,
        })) {
            let _ = reply.send(self.partition.partitioned());
        }
    }

    /// Hands a clear of the declared list to the DeclaredLeader (answers
    /// `AutoRecoveryDisabled` without recovery, `HubUnavailable` while it restarts).
    pub fn clear_through_declared_leader(&self, reply: RpcReplyPort<Result<u64, RecoveryError>>) {
        let restarting = || RecoveryError::HubUnavailable {
            reason: "declared leader is restarting".into(),
        };
        if self.partition.partitioned() && self.recovery.is_some() {
            // A minority clearing its copy would diverge from the majority's list.
            let _ = reply.send(Err(RecoveryError::HubUnavailable {
                reason: "partitioned: this node's side of the cluster has no quorum".into(),
            }));
            return;
        }
        let Some(leader) = self.declared_leader() else {
            let _ = reply.send(Err(if self.recovery.is_none() {
                RecoveryError::AutoRecoveryDisabled
            } else {
                restarting()
            }));
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(DeclaredMsg::Clear { reply })) =
            leader.cast(DeclaredMsg::Clear { reply })
        {
            let _ = reply.send(Err(restarting()));
        }
    }

    /// Sends `ops` to the Registry; `done` runs after the commit, or with
    /// `StorageError::Closed` when the Registry is away.
    pub fn write_registry(&self, ops: Vec<RegistryOp>, done: Option<WriteDone>) {
        let Some(registry) = self.registry() else {
            if let Some(done) = done {
                done(Err(StorageError::Closed));
            }
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(RegistryMsg::Write {
            done: Some(done), ..
        })) = registry.cast(RegistryMsg::Write { ops, done })
        {
            done(Err(StorageError::Closed));
        }
    }

    /// Answers a declared-list mutation that peer `to` sent to this node as its leader.
    pub fn reply_mutation(
        &self,
        to: &NodeName,
        request_id: RequestId,
        result: Result<u64, RecoveryError>,
    ) {
        let Some(transport) = self.transport() else {
            return;
        };
        let msg = WireMsg::DeclaredMutateReply {
            request_id,
            result: result.map_err(|e| (&e).into()),
        };
        if let Err(e) = transport.send(to, &msg) {
            tracing::debug!(peer = %to, error = %e, "declared mutation reply not sent");
        }
    }

    /// Refuses `msg` with `error` when it is a mutation (its sender waits for an answer);
    /// anything else is dropped.
    pub fn refuse_mutation(&self, msg: &WireMsg, error: RecoveryError) {
        if let WireMsg::DeclaredMutate {
            request_id,
            reply_to,
            ..
        } = msg
        {
            self.reply_mutation(reply_to, *request_id, Err(error));
        }
    }
}
