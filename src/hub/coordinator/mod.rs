//! The Coordinator actor: the start/stop pipeline and the table of pending operations.
//!
//! A start request goes validate -> plan (dedupe, `check_existing` against the registry view,
//! owner per child: [`crate::core::plan_start`]) -> group by node -> deliver one batch per node
//! -> collect the nodes' answers in `pending_operations`, keyed by request id, with a timeout.
//! Stops find the hosting nodes in the registry view and go the same way. Results arrive as
//! messages, so the coordinator never waits on a node and keeps serving other requests.
//!
//! On one node the owner is always this node and delivery is a message to the local child
//! supervisor. Routing is isolated in [`CoordinatorState::owner_of`] (placement) and
//! [`super::delivery`] (how a batch reaches a node and its answer comes back): the cluster adds
//! placement over its members and a remote branch there, and the rest of the pipeline (pending
//! table, timeouts, rollback) stays as it is.
//!
//! The state is the seed's `Coordinator.State` cut to what one node needs: the hub's fixed parts
//! (`hub`), `pending_operations`, and the request id counter.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort};
use tokio::task::JoinHandle;

use super::cluster::{ClusterMsg, ClusterState};
use super::delivery::{
    self, NodeStartReport, NodeStopReport, StartBatch, StartReply, StopBatch, StopReply,
};
use super::HubShared;
use crate::api::errors::{ChildStartError, ChildStopError, StartError, StopError};
use crate::api::options::{OnFailure, StartOptions, StopOptions};
use crate::api::results::{ChildFailure, StartResult, StopFailure, StopResult};
use crate::cluster::transport::{sink_to_actor, TransportEvent};
use crate::core::{plan_start, Rejection};
use crate::model::{ChildId, ChildSpec, Metadata, NodeName};

mod answers;

pub(crate) type StartReplyPort = RpcReplyPort<Result<StartResult, StartError>>;
pub(crate) type StopReplyPort = RpcReplyPort<Result<StopResult, StopError>>;

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

pub(crate) type Timer = JoinHandle<Result<(), MessagingErr<CoordinatorMsg>>>;

/// Who waits for a start.
pub(crate) enum StartPurpose {
    /// A caller of the API.
    Request(StartReplyPort),
    /// The cluster's own re-placement (migration, failover, handover); failures are retried.
    Internal(super::cluster::Internal),
}

pub(crate) struct PendingStart {
    pub(crate) purpose: StartPurpose,
    /// Children not answered yet, with the node each was delivered to. Keyed by child, not by
    /// node: a node that does not own a child forwards it and the owner answers directly.
    pub(crate) awaiting: HashMap<ChildId, NodeName>,
    pub(crate) result: StartResult,
    on_failure: OnFailure,
    timeout: Duration,
    timer: Option<Timer>,
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
        rows: Vec<crate::model::Row>,
    },
}

pub(crate) struct PendingStop {
    pub(crate) purpose: StopPurpose,
    pub(crate) awaiting: HashMap<NodeName, Vec<ChildId>>,
    stopped: BTreeMap<ChildId, Vec<NodeName>>,
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
    pub(crate) pending_operations: HashMap<u64, PendingOperation>,
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

    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_request_id += 1;
        self.next_request_id
    }

    /// Sends a start batch to `node`; when awaited its answer comes back as `NodeStarted`
    /// (from this node) or as a `StartReply` over the wire (from a peer).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn deliver_start(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        node: &NodeName,
        request_id: u64,
        children: Vec<(ChildSpec, Metadata)>,
        existing_ok: bool,
        durable: &BTreeSet<ChildId>,
        awaited: bool,
    ) {
        let durable: BTreeSet<ChildId> = children
            .iter()
            .filter(|(spec, _)| durable.contains(&spec.id))
            .map(|(spec, _)| spec.id.clone())
            .collect();
        let coordinator = myself.clone();
        let reply: StartReply = if awaited {
            Box::new(move |report| {
                let _ = coordinator.cast(CoordinatorMsg::NodeStarted { request_id, report });
            })
        } else {
            Box::new(|report: NodeStartReport| {
                for (id, e) in report.errors {
                    tracing::warn!(child = %id, node = %report.node, error = %e, "child did not start");
                }
            })
        };
        let batch = StartBatch {
            children,
            existing_ok,
            durable,
            reply,
        };
        match &self.cluster {
            Some(cluster) if node != &self.hub.node => {
                cluster.send_start(&self.hub.node, node, request_id, batch)
            }
            _ => delivery::deliver_start(&self.hub, node, batch),
        }
    }

    /// Sends a stop batch to `node`; when awaited its answer comes back as `NodeStopped`.
    pub(crate) fn deliver_stop(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        node: &NodeName,
        request_id: u64,
        ids: Vec<ChildId>,
        awaited: bool,
        release: bool,
    ) {
        let coordinator = myself.clone();
        let reply: StopReply = if awaited {
            Box::new(move |report| {
                let _ = coordinator.cast(CoordinatorMsg::NodeStopped { request_id, report });
            })
        } else {
            Box::new(|_| {})
        };
        let batch = StopBatch {
            ids,
            reply,
            release,
        };
        match &self.cluster {
            Some(cluster) if node != &self.hub.node => {
                cluster.send_stop(&self.hub.node, node, request_id, batch)
            }
            _ => delivery::deliver_stop(&self.hub, node, batch),
        }
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

    fn start(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    ) {
        let timeout = match opts.validate(specs.len(), self.hub.config.default_timeout()) {
            Ok(timeout) => timeout,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let storage = self.hub.storage.clone();
        let plan = plan_start(
            specs,
            opts.check_existing,
            |id| storage.contains(id),
            |id| self.owner_of(id),
        );
        let node = self.hub.node.clone();
        let mut result = StartResult {
            awaited: opts.awaitable,
            ..StartResult::default()
        };
        for (id, rejection) in plan.rejected {
            let reason = match rejection {
                Rejection::AlreadyStarted => ChildStartError::AlreadyStarted,
                Rejection::InvalidId(reason) => ChildStartError::InvalidId { reason },
            };
            result.errors.push(ChildFailure {
                id,
                node: node.clone(),
                reason,
            });
        }
        if plan.by_node.is_empty() {
            let _ = reply.send(Ok(result));
            return;
        }
        let request_id = self.next_id();
        let existing_ok = !opts.check_existing;
        let durable: BTreeSet<ChildId> = if opts.durable {
            plan.by_node
                .values()
                .flatten()
                .map(|c| c.spec.id.clone())
                .collect()
        } else {
            BTreeSet::new()
        };
        if !opts.awaitable {
            for (node, children) in plan.by_node {
                let children = children
                    .into_iter()
                    .map(|c| (c.spec, opts.metadata.clone()))
                    .collect();
                self.deliver_start(
                    myself,
                    &node,
                    request_id,
                    children,
                    existing_ok,
                    &durable,
                    false,
                );
            }
            let _ = reply.send(Ok(result));
            return;
        }
        let by_node = plan
            .by_node
            .into_iter()
            .map(|(node, children)| {
                let children = children
                    .into_iter()
                    .map(|c| (c.spec, opts.metadata.clone()))
                    .collect();
                (node, children)
            })
            .collect();
        self.begin_start(
            myself,
            request_id,
            by_node,
            existing_ok,
            durable,
            result,
            StartPurpose::Request(reply),
            opts.on_failure,
            timeout,
        );
    }

    /// Delivers planned batches and waits for them in `pending_operations[request_id]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn begin_start(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        by_node: BTreeMap<NodeName, Vec<(ChildSpec, Metadata)>>,
        existing_ok: bool,
        durable: BTreeSet<ChildId>,
        result: StartResult,
        purpose: StartPurpose,
        on_failure: OnFailure,
        timeout: Duration,
    ) {
        let awaiting = by_node
            .iter()
            .flat_map(|(node, children)| {
                children
                    .iter()
                    .map(move |(spec, _)| (spec.id.clone(), node.clone()))
            })
            .collect();
        self.pending_operations.insert(
            request_id,
            PendingOperation::Start(PendingStart {
                purpose,
                awaiting,
                result,
                on_failure,
                timeout,
                timer: self.arm_timer(myself, request_id, timeout),
            }),
        );
        for (node, children) in by_node {
            self.deliver_start(
                myself,
                &node,
                request_id,
                children,
                existing_ok,
                &durable,
                true,
            );
        }
        if timeout.is_zero() {
            self.on_timeout(myself, request_id);
        }
    }

    fn stop(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        ids: Vec<ChildId>,
        opts: StopOptions,
        reply: StopReplyPort,
    ) {
        let timeout = match opts.validate(ids.len(), self.hub.config.default_timeout()) {
            Ok(timeout) => timeout,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let mut errors = Vec::new();
        let mut by_node: BTreeMap<NodeName, Vec<ChildId>> = BTreeMap::new();
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            if !seen.insert(id.clone()) {
                continue;
            }
            match self.hub.storage.get(&id) {
                // Unknown here, but a peer may have just started it (its row is on the way):
                // starts go to the ring owner, so the owner is asked.
                None if self.owner_of(&id) != self.hub.node => {
                    by_node.entry(self.owner_of(&id)).or_default().push(id);
                }
                None => errors.push(StopFailure {
                    id,
                    node: None,
                    reason: ChildStopError::NotFound,
                }),
                Some(row) if row.node_pids.is_empty() => {
                    // A row nothing runs (left by a previous run): its owner forgets it.
                    by_node.entry(self.owner_of(&id)).or_default().push(id);
                }
                Some(row) => {
                    for node in row.node_pids.keys() {
                        by_node.entry(node.clone()).or_default().push(id.clone());
                    }
                }
            }
        }
        let request_id = self.next_id();
        if !opts.awaitable || by_node.is_empty() {
            for (node, ids) in by_node {
                self.deliver_stop(myself, &node, request_id, ids, false, false);
            }
            let _ = reply.send(Ok(StopResult {
                awaited: opts.awaitable,
                stopped: Vec::new(),
                errors,
            }));
            return;
        }
        self.begin_stop(
            myself,
            request_id,
            by_node,
            errors,
            StopPurpose::Request(reply),
            timeout,
        );
    }

    pub(crate) fn begin_stop(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        by_node: BTreeMap<NodeName, Vec<ChildId>>,
        errors: Vec<StopFailure>,
        purpose: StopPurpose,
        timeout: Duration,
    ) {
        let release = matches!(purpose, StopPurpose::Migration { .. });
        self.pending_operations.insert(
            request_id,
            PendingOperation::Stop(PendingStop {
                purpose,
                awaiting: by_node
                    .iter()
                    .map(|(n, ids)| (n.clone(), ids.clone()))
                    .collect(),
                stopped: BTreeMap::new(),
                errors,
                timer: self.arm_timer(myself, request_id, timeout),
            }),
        );
        for (node, ids) in by_node {
            self.deliver_stop(myself, &node, request_id, ids, true, release);
        }
        if timeout.is_zero() {
            self.on_timeout(myself, request_id);
        }
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
        // Clustered: open the hub's endpoint here, so a restarted Coordinator re-opens it and
        // is told every peer again.
        let cluster = match &hub.network {
            Some(network) => Some(ClusterState::open(
                &hub,
                network.as_ref(),
                sink_to_actor(myself.clone(), CoordinatorMsg::Transport),
            )?),
            None => None,
        };
        Ok(CoordinatorState {
            hub,
            pending_operations: HashMap::new(),
            next_request_id: 0,
            cluster,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.arm_sync_timer(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.close_cluster();
        for (_, op) in state.pending_operations.drain() {
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
        Ok(())
    }
}
