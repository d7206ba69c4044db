//! The Coordinator actor: the start/stop pipeline, pending operations, and (when the hub spans
//! nodes) membership, the placement ring, redistribution and messages to children by id.
//!
//! - [`pipeline`]: a start request goes validate -> plan (dedupe, `check_existing` against the
//!   registry view, owner per child: [`crate::core::plan_start`]) -> group by node -> deliver one
//!   batch per node -> collect the nodes' answers in `pending_operations`, keyed by request id,
//!   with a timeout. Stops find the hosting nodes in the registry view and go the same way;
//! - [`completion`]: the nodes' reports and timeouts completing the pending operations, rollback;
//! - [`cluster`]: the cluster state (the `Coordinator.State` fields that one node does
//!   not need) and sending batches to peers;
//! - [`membership`]: peers up and down, boot tokens, grace periods, `cluster_settled`, and
//!   publishing the members and the ring every other actor reads;
//! - [`from_peers`]: the hub protocol on the receiving side (peers' starts and stops, their
//!   replies);
//! - [`rebalance`]: carrying out the pure redistribution plan, retries;
//! - [`leave`]: the graceful leave (goodbyes, their answers, the handover);
//! - [`relay`]: requests this node waits on for someone else;
//! - [`messaging`]: messages to a child by id;
//! - [`partition`]: quorum and partition mode (`partition_tolerance`);
//! - [`reach`]: reachability as cluster knowledge: links up and down, the table, the decision
//!   the ring follows, the set-aside state;
//! - [`partition_flags`]: partition mode and the membership lock as published to every actor;
//! - [`handoffs`]: the hot-move tables (children moving away, states arriving), and
//!   [`handoff_routing`]: holding, forwarding and re-routing a moving child's casts over them;
//! - [`loads`]: this node's load sample and every member's load (load-based placement);
//! - [`timers`]: the cluster half's timers and completions, and their dispatch.
//!
//! Results arrive as messages, so the Coordinator never waits on a node and keeps serving other
//! requests. The state is shaped like `Coordinator.State` (docs/architecture.md, "Coordinator"):
//! the hub's fixed parts (`hub`), `pending_operations`, the request id counter and the cluster's
//! bookkeeping.

mod boot_replay;
mod cluster;
mod completion;
mod from_peers;
mod handoff_routing;
pub(crate) mod handoffs;
mod handover;
mod leave;
mod load_balance;
pub(crate) mod loads;
mod membership;
mod messaging;
mod partition;
pub(crate) mod partition_flags;
mod pass_plan;
mod pipeline;
mod reach;
mod rebalance;
mod relay;
mod timers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, MessagingErr};
use tokio::task::JoinHandle;

use super::protocol::{CoordinatorMsg, StartReplyPort, StopReplyPort};
use super::HubShared;
use crate::hooks::{HookEvent, HookKey};
use crate::model::{ChildId, FastHashMap, FastHashSet, Metadata, NodeName};
use crate::types::OnFailure;
use crate::types::{StartError, StopError};
use crate::types::{StartResult, StopFailure};

use cluster::ClusterState;

pub(crate) type Timer = JoinHandle<Result<(), MessagingErr<CoordinatorMsg>>>;

/// Who waits for a start.
pub(crate) enum StartPurpose {
    /// A caller of the API.
    Request(StartReplyPort),
    /// The cluster's own re-placement (migration, failover, handover); failures are retried.
    Internal(cluster::Internal),
}

pub(crate) struct PendingStart {
    pub(crate) purpose: StartPurpose,
    /// Children not answered yet, with the node each was delivered to. Keyed by child, not by
    /// node: a node that does not own a child forwards it and the owner answers directly.
    /// Hashed: each answer removes its children one by one; whoever lists them sorts them.
    pub(crate) awaiting: FastHashMap<ChildId, NodeName>,
    pub(crate) result: StartResult,
    on_failure: OnFailure,
    timeout: Duration,
    timer: Option<Timer>,
    /// With replicas: the other owners' starts, delivered once the first owners answered, for
    /// the children that started (see `CoordinatorState::start_replicas`).
    pub(crate) replicas: Option<ReplicaStarts>,
    /// The request's span (`process_hub.start`): open until it is answered, so its duration is
    /// the request's; the batches it sends carry its `request_id` to the other nodes.
    pub(crate) span: tracing::Span,
}

/// The replica starts a request delivers after its first owners answered.
pub(crate) struct ReplicaStarts {
    pub(crate) by_node: BTreeMap<NodeName, Vec<(crate::model::ChildSpec, crate::model::Metadata)>>,
    pub(crate) durable: std::collections::BTreeSet<ChildId>,
}

pub(crate) enum StopPurpose {
    Request(StopReplyPort),
    /// Stopping what a failed start request started; answer the start request when done.
    Rollback {
        result: StartResult,
        reply: StartReplyPort,
    },
    /// The first half of a cold-swap migration: once stopped here, start on `target`.
    Migration {
        target: NodeName,
        why: crate::events::MoveReason,
        rows: Vec<crate::model::Row>,
    },
}

pub(crate) struct PendingStop {
    pub(crate) purpose: StopPurpose,
    /// The children each node has not answered yet (hashed, as a start's; listed sorted).
    pub(crate) awaiting: BTreeMap<NodeName, FastHashSet<ChildId>>,
    /// Where each child stopped; the answer lists them by id.
    stopped: FastHashMap<ChildId, Vec<NodeName>>,
    pub(crate) errors: Vec<StopFailure>,
    timer: Option<Timer>,
}

pub(crate) enum PendingOperation {
    Start(PendingStart),
    Stop(PendingStop),
}

pub(crate) struct Coordinator;

pub(crate) struct CoordinatorState {
    pub(crate) hub: Arc<HubShared>,
    pub(crate) pending_operations: BTreeMap<u64, PendingOperation>,
    next_request_id: u64,
    /// Membership, ring and replication bookkeeping when the hub spans nodes.
    pub(crate) cluster: Option<ClusterState>,
}

impl CoordinatorState {
    /// The node that must run `id`: the ring's owner when clustered, else this node.
    pub(crate) fn owner_of(&self, id: &ChildId) -> NodeName {
        self.cluster
            .as_ref()
            .and_then(|c| c.ring.owner(id).cloned())
            .unwrap_or_else(|| self.hub.node.clone())
    }

    /// The node that must run `id` given its metadata (a guided child's own node).
    pub(crate) fn placement_of(&self, id: &ChildId, metadata: Option<&Metadata>) -> NodeName {
        match &self.cluster {
            Some(cluster) => self.hub.placement_of(&cluster.ring, id, metadata),
            None => self.hub.node.clone(),
        }
    }

    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_request_id += 1;
        self.next_request_id
    }

    pub(crate) fn arm_timer(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        timeout: Duration,
    ) -> Option<Timer> {
        (!timeout.is_zero())
            .then(|| myself.send_after(timeout, move || CoordinatorMsg::Timeout { request_id }))
    }
}

impl Actor for Coordinator {
    type Msg = CoordinatorMsg;
    type State = CoordinatorState;
    type Arguments = Arc<HubShared>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        hub: Arc<HubShared>,
    ) -> Result<Self::State, ActorProcessingErr> {
        // A predecessor's unfinished hot moves: their children stay here, or stop where their
        // state already went to the new node.
        hub.abandon_all_handoffs();
        // Clustered: open the hub's endpoint here, so a restarted Coordinator re-opens it and
        // is told every peer again.
        let cluster = match &hub.network {
            Some(network) => Some(ClusterState::open(
                &hub,
                network.as_ref(),
                crate::hub::inbox::sink(&hub, myself.clone()),
            )?),
            None => None,
        };
        let mut state = CoordinatorState {
            hub,
            pending_operations: BTreeMap::new(),
            next_request_id: 0,
            cluster,
        };
        if state.cluster.is_some() {
            let (quorum, restarted) = state.new_quorum();
            if let Some(cluster) = &mut state.cluster {
                cluster.quorum = quorum;
                cluster.quorum_recheck = restarted;
            }
        }
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.arm_sync_timer(&myself);
        state.arm_load_timer(&myself);
        state.arm_quorum_recheck(&myself);
        state.arm_boot_hold(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.close_cluster();
        for (_, op) in std::mem::take(&mut state.pending_operations).into_iter() {
            match op {
                PendingOperation::Start(op) => {
                    if let StartPurpose::Request(reply) = op.purpose {
                        let _ = reply.send(Err(StartError::HubUnavailable(
                            "hub is shutting down".into(),
                        )));
                    }
                }
                PendingOperation::Stop(op) => match op.purpose {
                    StopPurpose::Request(reply) => {
                        let _ = reply.send(Err(StopError::HubUnavailable(
                            "hub is shutting down".into(),
                        )));
                    }
                    StopPurpose::Rollback { reply, .. } => {
                        let _ = reply.send(Err(StartError::HubUnavailable(
                            "hub is shutting down".into(),
                        )));
                    }
                    StopPurpose::Migration { .. } => {}
                },
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CoordinatorMsg::Start { specs, opts, reply } => {
                state.start(&myself, specs, opts, reply)
            }
            CoordinatorMsg::Stop { ids, opts, reply } => state.stop(&myself, ids, opts, reply),
            CoordinatorMsg::NodeStarted { request_id, report } => {
                state.on_node_started(&myself, request_id, report)
            }
            CoordinatorMsg::NodeStopped { request_id, report } => {
                state.on_node_stopped(&myself, request_id, report)
            }
            CoordinatorMsg::Timeout { request_id } => state.on_timeout(&myself, request_id),
            CoordinatorMsg::Transport(event) => state.on_transport(&myself, event),
            CoordinatorMsg::Cluster(msg) => state.on_cluster_msg(&myself, msg),
        }
        if let Some(cluster) = &state.cluster {
            let hub = &state.hub;
            hub.partition.set_locked(!cluster.migrating.is_empty());
            // `pending_work_count`: what this node still owes the cluster (a hot
            // move is among `migrating`).
            hub.partition.set_pending_work(
                state.pending_operations.len()
                    + cluster.migrating.len()
                    + cluster.failed.len()
                    + cluster.relay.len()
                    + cluster.calls.len(),
            );
            if let Some(locked) = hub.partition.lock_change() {
                hub.hooks.fire(HookKey::PriorityStateUpdated, || {
                    HookEvent::PriorityStateUpdated {
                        node: hub.node.clone(),
                        locked,
                        partitioned: hub.partition.partitioned(),
                    }
                });
            }
        }
        Ok(())
    }
}
