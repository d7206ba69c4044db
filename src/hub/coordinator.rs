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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, MessagingErr, RpcReplyPort};
use tokio::task::JoinHandle;

use super::delivery::{
    self, NodeStartReport, NodeStopReport, StartBatch, StartReply, StopBatch, StopReply,
};
use super::HubShared;
use crate::api::errors::{ChildStartError, ChildStopError, StartError, StopError};
use crate::api::options::{OnFailure, StartOptions, StopOptions};
use crate::api::results::{
    ChildFailure, StartResult, StartedChild, StopFailure, StopResult, StoppedChild,
};
use crate::core::{plan_start, Rejection};
use crate::model::{ChildId, ChildSpec, Metadata, NodeName};

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
}

impl ractor::Message for CoordinatorMsg {}

type Timer = JoinHandle<Result<(), MessagingErr<CoordinatorMsg>>>;

struct PendingStart {
    reply: StartReplyPort,
    /// Nodes that have not answered, with the children delivered to each.
    awaiting: HashMap<NodeName, Vec<ChildId>>,
    result: StartResult,
    on_failure: OnFailure,
    timeout: Duration,
    timer: Option<Timer>,
}

enum StopPurpose {
    Request(StopReplyPort),
    /// Stopping what a failed start request started; answer the start request when done.
    Rollback {
        result: StartResult,
        reply: StartReplyPort,
    },
}

struct PendingStop {
    purpose: StopPurpose,
    awaiting: HashMap<NodeName, Vec<ChildId>>,
    stopped: BTreeMap<ChildId, Vec<NodeName>>,
    errors: Vec<StopFailure>,
    timer: Option<Timer>,
}

enum PendingOperation {
    Start(PendingStart),
    Stop(PendingStop),
}

pub(crate) struct Coordinator;

pub(crate) struct CoordinatorState {
    hub: Arc<HubShared>,
    pending_operations: HashMap<u64, PendingOperation>,
    next_request_id: u64,
}

impl CoordinatorState {
    /// The node that must run `id`. One node: this one. (The cluster consults its ring here.)
    fn owner_of(&self, _id: &ChildId) -> NodeName {
        self.hub.node.clone()
    }

    fn next_id(&mut self) -> u64 {
        self.next_request_id += 1;
        self.next_request_id
    }

    /// Sends a start batch to `node`; when awaited its answer comes back as `NodeStarted`.
    #[allow(clippy::too_many_arguments)]
    fn deliver_start(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        node: &NodeName,
        request_id: u64,
        children: Vec<(ChildSpec, Metadata)>,
        existing_ok: bool,
        durable: bool,
        awaited: bool,
    ) {
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
        delivery::deliver_start(
            &self.hub,
            node,
            StartBatch {
                children,
                existing_ok,
                durable,
                reply,
            },
        );
    }

    /// Sends a stop batch to `node`; when awaited its answer comes back as `NodeStopped`.
    fn deliver_stop(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        node: &NodeName,
        request_id: u64,
        ids: Vec<ChildId>,
        awaited: bool,
    ) {
        let coordinator = myself.clone();
        let reply: StopReply = if awaited {
            Box::new(move |report| {
                let _ = coordinator.cast(CoordinatorMsg::NodeStopped { request_id, report });
            })
        } else {
            Box::new(|_| {})
        };
        delivery::deliver_stop(&self.hub, node, StopBatch { ids, reply });
    }

    fn arm_timer(
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
                    opts.durable,
                    false,
                );
            }
            let _ = reply.send(Ok(result));
            return;
        }
        let awaiting = plan
            .by_node
            .iter()
            .map(|(node, children)| {
                (
                    node.clone(),
                    children.iter().map(|c| c.spec.id.clone()).collect(),
                )
            })
            .collect();
        self.pending_operations.insert(
            request_id,
            PendingOperation::Start(PendingStart {
                reply,
                awaiting,
                result,
                on_failure: opts.on_failure,
                timeout,
                timer: self.arm_timer(myself, request_id, timeout),
            }),
        );
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
                opts.durable,
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
                self.deliver_stop(myself, &node, request_id, ids, false);
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

    fn begin_stop(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        by_node: BTreeMap<NodeName, Vec<ChildId>>,
        errors: Vec<StopFailure>,
        purpose: StopPurpose,
        timeout: Duration,
    ) {
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
            self.deliver_stop(myself, &node, request_id, ids, true);
        }
        if timeout.is_zero() {
            self.on_timeout(myself, request_id);
        }
    }

    fn on_node_started(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        report: NodeStartReport,
    ) {
        let Some(PendingOperation::Start(op)) = self.pending_operations.get_mut(&request_id) else {
            return; // timed out already
        };
        if op.awaiting.remove(&report.node).is_none() {
            return;
        }
        for (id, pid) in report.started {
            op.result.started.push(StartedChild {
                id,
                nodes: vec![(report.node.clone(), pid)],
            });
        }
        for (id, reason) in report.errors {
            op.result.errors.push(ChildFailure {
                id,
                node: report.node.clone(),
                reason,
            });
        }
        if op.awaiting.is_empty() {
            self.finish_start(myself, request_id);
        }
    }

    fn on_node_stopped(&mut self, request_id: u64, report: NodeStopReport) {
        let Some(PendingOperation::Stop(op)) = self.pending_operations.get_mut(&request_id) else {
            return;
        };
        if op.awaiting.remove(&report.node).is_none() {
            return;
        }
        for id in report.stopped {
            op.stopped.entry(id).or_default().push(report.node.clone());
        }
        for (id, reason) in report.errors {
            op.errors.push(StopFailure {
                id,
                node: Some(report.node.clone()),
                reason,
            });
        }
        if op.awaiting.is_empty() {
            self.finish_stop(request_id);
        }
    }

    fn on_timeout(&mut self, myself: &ActorRef<CoordinatorMsg>, request_id: u64) {
        match self.pending_operations.get_mut(&request_id) {
            Some(PendingOperation::Start(op)) => {
                for (node, ids) in op.awaiting.drain() {
                    for id in ids {
                        op.result.errors.push(ChildFailure {
                            id,
                            node: node.clone(),
                            reason: ChildStartError::NodeReceiveTimeout,
                        });
                    }
                }
                self.finish_start(myself, request_id);
            }
            Some(PendingOperation::Stop(op)) => {
                for (node, ids) in op.awaiting.drain() {
                    for id in ids {
                        op.errors.push(StopFailure {
                            id,
                            node: Some(node.clone()),
                            reason: ChildStopError::NodeReceiveTimeout,
                        });
                    }
                }
                self.finish_stop(request_id);
            }
            None => {}
        }
    }

    fn finish_start(&mut self, myself: &ActorRef<CoordinatorMsg>, request_id: u64) {
        let Some(PendingOperation::Start(op)) = self.pending_operations.remove(&request_id) else {
            return;
        };
        if let Some(t) = &op.timer {
            t.abort();
        }
        let rollback = op.on_failure == OnFailure::Rollback
            && !op.result.errors.is_empty()
            && !op.result.started.is_empty();
        if !rollback {
            let _ = op.reply.send(Ok(op.result));
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
                reply: op.reply,
            },
            timeout,
        );
    }

    fn finish_stop(&mut self, request_id: u64) {
        let Some(PendingOperation::Stop(op)) = self.pending_operations.remove(&request_id) else {
            return;
        };
        if let Some(t) = &op.timer {
            t.abort();
        }
        match op.purpose {
            StopPurpose::Request(reply) => {
                let stopped = op
                    .stopped
                    .into_iter()
                    .map(|(id, nodes)| StoppedChild { id, nodes })
                    .collect();
                let _ = reply.send(Ok(StopResult {
                    awaited: true,
                    stopped,
                    errors: op.errors,
                }));
            }
            StopPurpose::Rollback { mut result, reply } => {
                for e in &op.errors {
                    tracing::error!(child = %e.id, error = %e.reason, "rollback could not stop a child");
                }
                result.rollback = true;
                result.rolled_back = op.stopped.into_keys().collect();
                result.started.clear();
                let _ = reply.send(Ok(result));
            }
        }
    }
}

impl Actor for Coordinator {
    type Msg = CoordinatorMsg;
    type State = CoordinatorState;
    type Arguments = Arc<HubShared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        hub: Arc<HubShared>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(CoordinatorState {
            hub,
            pending_operations: HashMap::new(),
            next_request_id: 0,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for (_, op) in state.pending_operations.drain() {
            match op {
                PendingOperation::Start(op) => {
                    let _ = op.reply.send(Err(StartError::HubUnavailable(
                        "hub is shutting down".into(),
                    )));
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
                state.on_node_stopped(request_id, report)
            }
            CoordinatorMsg::Timeout { request_id } => state.on_timeout(&myself, request_id),
        }
        Ok(())
    }
}
