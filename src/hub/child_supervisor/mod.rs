//! The ChildSupervisor actor: spawns this node's children and implements what ractor leaves to
//! the implementor (Erlang's supervisor semantics).
//!
//! - Restart types: `permanent` always restarts, `transient` only after an abnormal exit,
//!   `temporary` never ([`crate::core::restart_decision`]). A child that ends for good is
//!   unbound, and its row leaves the registry when no node runs it.
//! - Restart intensity: more than `max_restarts` restarts within `max_seconds`
//!   ([`crate::core::RestartIntensity`]) makes this actor fail on purpose: ractor kills its
//!   children, the HubSupervisor restarts it, and the new instance restores the node's children
//!   from the registry (OTP's escalation, with the registry as the child list).
//! - A restart that cannot start the child again (its `pre_start` fails) is retried through the
//!   mailbox and counts against the intensity, so a child that can never start escalates.
//! - Stops honour each child's shutdown: ask it to stop, kill it when its grace runs out.
//!
//! It is the single place on the node that accepts a child id, so two concurrent requests for
//! one id cannot both start it. Starting is sequential, like OTP's `start_child`: a child's
//! `pre_start` holds the supervisor, so it should be quick.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::protocol::{ChildSupMsg, NodeStartReport, RegistryOp, StartBatch, StopBatch, WriteDone};
use super::HubShared;
use crate::core::batch_start::{BatchStart, BatchTerms, Presence};
use crate::core::handover::HANDOVER_METADATA_KEY;
use crate::core::{
    restart_decision, ExitKind, IntensityVerdict, RestartDecision, RestartIntensity,
};
use crate::events::HubEvent;
use crate::hooks::{HookEvent, HookKey};
use crate::hub::simulation::InjectedBug;
use crate::model::{
    ChildArgs, ChildId, ChildSpec, DownReason, FastHashMap, FastHashSet, Metadata, NodeName, Pid,
    Restart, Row, Shutdown,
};
use crate::storage::StorageError;
use crate::telemetry::failure_tally::FailureTally;
use crate::types::ChildStartError;

mod stopping;

use stopping::StopGroup;

/// A running child: its actor, and what restarting or stopping it needs. That is its spec
/// without the id (the map's key) and with the kind's name shared by every child of the kind:
/// a node hosts thousands of children of a handful of kinds.
struct RunningChild {
    cell: ActorCell,
    kind: Arc<str>,
    args: ChildArgs,
    restart: Restart,
    shutdown: Shutdown,
}

impl RunningChild {
    /// The spec it was started from.
    fn into_spec(self, id: ChildId) -> ChildSpec {
        ChildSpec {
            id,
            kind: self.kind.to_string(),
            args: self.args,
            restart: self.restart,
            shutdown: self.shutdown,
        }
    }
}

pub(crate) struct ChildSupervisor;

pub(crate) struct ChildSupArgs {
    pub shared: Arc<HubShared>,
    /// Restart this node's children recorded in the registry (after an escalation).
    pub restore: bool,
}

pub(crate) struct ChildSupState {
    shared: Arc<HubShared>,
    restore: bool,
    children: FastHashMap<ChildId, RunningChild>,
    /// The children by their actors' pids (always local actors).
    by_actor: FastHashMap<u64, ChildId>,
    /// The names of the kinds it has run, shared by their children's entries. Only kinds
    /// registered with the hub start, so it stays as small as the registry of kinds.
    kinds: FastHashSet<Arc<str>>,
    /// Children whose restart failed, waiting for a retry: spec and last pid.
    awaiting_retry: BTreeMap<ChildId, (ChildSpec, Pid)>,
    /// The stop group each stopping child's actor belongs to.
    stopping: FastHashMap<ActorId, u64>,
    stop_groups: BTreeMap<u64, StopGroup>,
    next_group: u64,
    intensity: RestartIntensity,
}

/// The supervisor gave up: its restart intensity was exceeded.
#[derive(Debug, thiserror::Error)]
#[error("restart intensity exceeded ({max_restarts} restarts in {max_seconds} s); escalating")]
struct IntensityExceeded {
    max_restarts: u32,
    max_seconds: u32,
}

/// How a child's exit is reported: the reason its `ChildExited` event gives, and why it is
/// down.
fn exit_reason(exit: &ExitKind, node: &NodeName) -> (String, DownReason) {
    match exit {
        ExitKind::Normal => (
            "normal".to_owned(),
            DownReason::Normal { node: node.clone() },
        ),
        ExitKind::Killed => (
            "killed".to_owned(),
            DownReason::Abnormal {
                node: node.clone(),
                detail: "killed".into(),
            },
        ),
        ExitKind::Failed(m) => (
            m.clone(),
            DownReason::Abnormal {
                node: node.clone(),
                detail: m.clone(),
            },
        ),
    }
}

/// What every turn of one start batch shares.
struct Turn<'a> {
    /// A `child_data_alter` handler is registered (asked once per batch).
    alter: bool,
    now_ms: u64,
    /// The children of the batch that are declared.
    durable: &'a BTreeSet<ChildId>,
}

/// The answer of a start batch, as the node sends it.
fn node_report(node: NodeName, answer: BatchStart) -> NodeStartReport {
    NodeStartReport {
        node,
        started: answer.started,
        errors: answer.errors,
    }
}

/// The hooks that follow a start batch, before its write.
fn fire_post_start(shared: &HubShared, node: &NodeName, answer: &BatchStart) {
    shared
        .hooks
        .fire(HookKey::ProcessStartups, || HookEvent::ProcessStartups {
            node: node.clone(),
            processes: answer.started.clone(),
        });
    shared.hooks.fire(HookKey::PostChildrenStart, || {
        HookEvent::PostChildrenStart {
            node: node.clone(),
            started: answer.started.clone(),
            failed: answer
                .errors
                .iter()
                .map(|(id, e)| (id.clone(), e.to_string()))
                .collect(),
        }
    });
}

impl ChildSupState {
    fn node(&self) -> &NodeName {
        &self.shared.node
    }

    fn write(&self, ops: Vec<RegistryOp>, done: Option<WriteDone>) {
        self.shared.write_registry(ops, done);
    }

    fn track(&mut self, spec: ChildSpec, cell: ActorCell) -> Pid {
        let pid = cell.get_id().pid();
        let ChildSpec {
            id,
            kind,
            args,
            restart,
            shutdown,
        } = spec;
        let kind = match self.kinds.get(kind.as_str()) {
            Some(shared) => shared.clone(),
            None => {
                let shared: Arc<str> = kind.into();
                self.kinds.insert(shared.clone());
                shared
            }
        };
        self.by_actor.insert(pid, id.clone());
        self.shared.local_children.insert(id.clone(), cell.clone());
        let running = RunningChild {
            cell,
            kind,
            args,
            restart,
            shutdown,
        };
        self.children.insert(id, running);
        pid
    }

    /// Starts a batch's children one by one ([`BatchStart`] decides each turn), records the
    /// started ones in one registry write, and answers once it is committed.
    async fn start_batch(&mut self, myself: &ActorRef<ChildSupMsg>, batch: StartBatch) {
        let shared = self.shared.clone();
        let node = self.node().clone();
        if shared.partition.partitioned() {
            let ids = batch.children.into_iter().map(|(spec, _)| spec.id);
            let answer = BatchStart::refuse_all(ids, ChildStartError::Partitioned);
            (batch.reply)(node_report(node, answer));
            return;
        }
        shared
            .hooks
            .fire(HookKey::PreChildrenStart, || HookEvent::PreChildrenStart {
                node: node.clone(),
                specs: batch.children.iter().map(|(s, _)| s.clone()).collect(),
            });
        let turn = Turn {
            alter: shared.hooks.has(HookKey::ChildDataAlter),
            now_ms: shared.clock.now_ms(),
            durable: &batch.durable,
        };
        let mut answer = BatchStart::new(BatchTerms {
            existing_ok: batch.existing_ok,
            confirm_handover: shared.config.hot_swap.confirm_handover,
        });
        let mut ops = Vec::with_capacity(batch.children.len());
        for (spec, metadata) in batch.children {
            if let Some(row) = self
                .start_one(myself, &turn, &mut answer, spec, metadata)
                .await
            {
                ops.push(RegistryOp::Insert(row));
            }
        }
        fire_post_start(&shared, &node, &answer);
        let (reply, sup) = (batch.reply, myself.clone());
        self.write(
            ops,
            Some(Box::new(move |outcome: Result<(), StorageError>| {
                if let Err(e) = outcome {
                    let ids = answer.not_recorded(&ChildStartError::of_storage(&e));
                    let _ = sup.cast(ChildSupMsg::Discard { ids });
                }
                reply(node_report(node, answer));
            })),
        );
    }

    /// One child's turn in a start batch: observes what the node holds of it, and carries out
    /// what `answer` decides. Returns the row to record when the child started.
    async fn start_one(
        &mut self,
        myself: &ActorRef<ChildSupMsg>,
        turn: &Turn<'_>,
        answer: &mut BatchStart,
        mut spec: ChildSpec,
        mut metadata: Metadata,
    ) -> Option<Row> {
        let shared = self.shared.clone();
        // A hot move's start names the children whose state was sent ahead.
        let state_sent = metadata.remove(HANDOVER_METADATA_KEY);
        let presence = Presence {
            running: self.children.get(&spec.id).map(|r| r.cell.get_id().pid()),
            awaiting_retry: self.awaiting_retry.contains_key(&spec.id),
            partitioned: shared.partition.partitioned(),
        };
        let child = answer.admit(spec.id.clone(), presence, state_sent, || {
            shared.move_met_running(&spec.id)
        })?;
        if turn.alter {
            shared.hooks.alter(&mut spec, &metadata);
        }
        let state = child
            .digest()
            .and_then(|digest| shared.take_import(&spec.id, digest));
        let child = answer.state_taken(child, state.is_some())?;
        // A declared child keeps its mark when it is moved or restarted from its row.
        let durable = turn.durable.contains(&spec.id) || shared.storage.is_durable(&spec.id);
        let node = self.node().clone();
        let (child, mut row) =
            answer.author(child, &spec, metadata, &node, turn.now_ms, durable)?;
        match shared.kinds.start(&spec, myself.get_cell()).await {
            Ok(cell) => {
                let id = spec.id.clone();
                self.import_state(&spec, &cell, state);
                let pid = self.track(spec, cell);
                row.node_pids.insert(node.clone(), pid);
                shared
                    .events
                    .publish(|| HubEvent::ChildStarted { id, node, pid });
                answer.started(child, pid);
                Some(row)
            }
            Err(e) => {
                tracing::warn!(child = %spec.id, error = %e, "child failed to start");
                shared.events.publish(|| HubEvent::ChildStartFailed {
                    id: spec.id.clone(),
                    node,
                    reason: e.to_string(),
                });
                answer.failed(child, e.into());
                None
            }
        }
    }

    /// A hot move's state: the child's first message, sent before the child is routable here
    /// (tracked), so nothing else can reach it first. Only the cluster's own starts (moves:
    /// `existing_ok`) take one, never a caller's.
    fn import_state(&self, spec: &ChildSpec, cell: &ActorCell, state: Option<Vec<u8>>) {
        let shared = &self.shared;
        let state = state.filter(|_| !shared.has_bug(InjectedBug::DropHandoverImport));
        let Some(state) = state else {
            return;
        };
        let (id, bytes) = (&spec.id, state.len());
        match shared.kinds.import(&spec.kind, cell, state) {
            Some(Ok(())) => tracing::debug!(child = %id, bytes, "handover state imported"),
            Some(Err(e)) => {
                tracing::warn!(child = %id, error = %e, "handover state not imported")
            }
            None => {
                tracing::warn!(child = %id, kind = %spec.kind, "handover state for a kind that does not hand over; dropped")
            }
        }
    }

    /// Restarts a child, or escalates when the intensity is exceeded.
    async fn restart(
        &mut self,
        myself: &ActorRef<ChildSupMsg>,
        spec: ChildSpec,
        old_pid: Pid,
    ) -> Result<(), ActorProcessingErr> {
        if self.shared.partition.partitioned() {
            // No quorum: the child is not restarted here; its row stays as a stub, which the
            // pass after quorum returns re-places.
            let node = self.node().clone();
            tracing::info!(child = %spec.id, "not restarted: partition mode");
            self.write(vec![RegistryOp::Release { id: spec.id, node }], None);
            return Ok(());
        }
        let now = self.shared.mono_ms();
        if self.intensity.record(now) == IntensityVerdict::Exceeded {
            let node = self.node().clone();
            tracing::error!(node = %node, "child restart intensity exceeded; escalating to the hub supervisor");
            self.shared
                .events
                .publish(|| HubEvent::RestartIntensityExceeded { node });
            return Err(Box::new(IntensityExceeded {
                max_restarts: self.shared.config.max_restarts,
                max_seconds: self.shared.config.max_seconds,
            }));
        }
        match self.shared.kinds.start(&spec, myself.get_cell()).await {
            Ok(cell) => {
                let id = spec.id.clone();
                let node = self.node().clone();
                let pid = self.track(spec, cell);
                self.write(
                    vec![RegistryOp::SetPid {
                        id: id.clone(),
                        node: node.clone(),
                        pid,
                    }],
                    None,
                );
                self.shared.events.publish(|| HubEvent::ChildRestarted {
                    id,
                    node,
                    old_pid,
                    new_pid: pid,
                });
            }
            Err(e) => {
                tracing::warn!(child = %spec.id, error = %e, "restart failed; retrying");
                let id = spec.id.clone();
                self.awaiting_retry.insert(id.clone(), (spec, old_pid));
                let _ = myself.cast(ChildSupMsg::RetryRestart { id });
            }
        }
        Ok(())
    }

    /// A child of stop group `group_id` ended: it is down, and the group answers once its
    /// last child has.
    fn stopped_in_group(&mut self, group_id: u64, aid: &ActorId) {
        if let Some(group) = self.stop_groups.get_mut(&group_id) {
            if let Some(child) = group.waiting.remove(aid) {
                let node = self.shared.node.clone();
                let down = if group.release {
                    DownReason::Moved { node: node.clone() }
                } else {
                    DownReason::Stopped { node: node.clone() }
                };
                self.shared.child_down(&child.id, down, false);
                // A release is a move (a cold swap): the Coordinator reports `ChildMoved`
                // once the child runs on its new node, so no `ChildStopped` here.
                if !group.release {
                    self.shared.events.publish(|| HubEvent::ChildStopped {
                        id: child.id.clone(),
                        node,
                    });
                }
                group.stopped.push(child.id);
            }
        }
        self.maybe_finish(group_id);
    }

    /// A supervised actor ended.
    async fn on_exit(
        &mut self,
        myself: &ActorRef<ChildSupMsg>,
        cell: ActorCell,
        exit: ExitKind,
    ) -> Result<(), ActorProcessingErr> {
        let aid = cell.get_id();
        if let Some(group_id) = self.stopping.remove(&aid) {
            self.stopped_in_group(group_id, &aid);
            return Ok(());
        }
        if !aid.is_local() {
            return Ok(());
        }
        let Some(id) = self.by_actor.remove(&aid.pid()) else {
            return Ok(());
        };
        let Some(running) = self.children.remove(&id) else {
            return Ok(());
        };
        self.shared.local_children.remove(&id);
        let decision = restart_decision(running.restart, &exit);
        let node = self.node().clone();
        let (reason, down) = exit_reason(&exit, &node);
        let will_restart = decision == RestartDecision::Restart;
        self.shared.child_down(&id, down, will_restart);
        self.shared.events.publish(|| HubEvent::ChildExited {
            id: id.clone(),
            node: node.clone(),
            pid: aid.pid(),
            reason,
            will_restart,
        });
        match decision {
            RestartDecision::Remove => {
                self.write(vec![RegistryOp::Unbind { id, node }], None);
                Ok(())
            }
            RestartDecision::Restart => {
                self.restart(myself, running.into_spec(id), aid.pid()).await
            }
        }
    }

    /// Restarts one child of this node's recorded in `row`: its new pid is recorded, or its
    /// binding goes when it cannot start.
    async fn restore_one(
        &mut self,
        myself: &ActorRef<ChildSupMsg>,
        row: Row,
        node: &NodeName,
    ) -> RegistryOp {
        let old_pid = row.node_pids[node];
        // The previous instance was killed with the failed supervisor.
        let down = DownReason::Abnormal {
            node: node.clone(),
            detail: "killed: its supervisor restarted".into(),
        };
        self.shared.child_down(&row.spec.id, down, true);
        match self.shared.kinds.start(&row.spec, myself.get_cell()).await {
            Ok(cell) => {
                let id = row.spec.id.clone();
                let pid = self.track(row.spec, cell);
                self.shared.events.publish(|| HubEvent::ChildRestarted {
                    id: id.clone(),
                    node: node.clone(),
                    old_pid,
                    new_pid: pid,
                });
                RegistryOp::SetPid {
                    id,
                    node: node.clone(),
                    pid,
                }
            }
            Err(e) => {
                tracing::warn!(child = %row.spec.id, error = %e, "child could not be restored");
                self.shared.events.publish(|| HubEvent::ChildStartFailed {
                    id: row.spec.id.clone(),
                    node: node.clone(),
                    reason: e.to_string(),
                });
                RegistryOp::Unbind {
                    id: row.spec.id,
                    node: node.clone(),
                }
            }
        }
    }

    /// Partition mode: every child of this node is let go (its row stays, as a stub), the ones
    /// waiting for a restart too.
    fn release_all(&mut self, myself: &ActorRef<ChildSupMsg>) {
        let waiting: Vec<ChildId> = self.awaiting_retry.keys().cloned().collect();
        let node = self.node().clone();
        let ops = waiting
            .into_iter()
            .map(|id| {
                self.awaiting_retry.remove(&id);
                RegistryOp::Release {
                    id,
                    node: node.clone(),
                }
            })
            .collect::<Vec<_>>();
        if !ops.is_empty() {
            self.write(ops, None);
        }
        let mut ids: Vec<ChildId> = self.children.keys().cloned().collect();
        ids.sort_unstable();
        if !ids.is_empty() {
            let batch = StopBatch {
                ids,
                release: true,
                reply: Box::new(|report| {
                    for (id, e) in report.errors {
                        tracing::warn!(child = %id, error = %e, "not stopped for partition mode");
                    }
                }),
            };
            self.stop_batch(myself, batch);
        }
    }

    /// Kills children started but not recorded (their batch's write failed).
    fn discard(&mut self, ids: Vec<ChildId>) {
        for id in ids {
            if let Some(running) = self.children.remove(&id) {
                self.by_actor.remove(&running.cell.get_id().pid());
                self.shared.local_children.remove(&id);
                running.cell.kill();
                let down = DownReason::Abnormal {
                    node: self.shared.node.clone(),
                    detail: "started but not recorded".into(),
                };
                self.shared.child_down(&id, down, false);
            }
        }
    }

    /// Restarts this node's children recorded in the registry (after an escalation).
    async fn restore(&mut self, myself: &ActorRef<ChildSupMsg>) {
        let node = self.node().clone();
        let rows: Vec<Row> = self
            .shared
            .storage
            .export_all()
            .into_iter()
            .filter(|r| r.node_pids.contains_key(&node))
            .collect();
        tracing::info!(
            children = rows.len(),
            "restoring this node's children after an escalation"
        );
        let mut ops = Vec::new();
        let partitioned = self.shared.partition.partitioned();
        for row in rows {
            if partitioned {
                // No quorum: released, re-placed by the pass after quorum returns.
                ops.push(RegistryOp::Release {
                    id: row.spec.id,
                    node: node.clone(),
                });
                continue;
            }
            ops.push(self.restore_one(myself, row, &node).await);
        }
        self.write(ops, None);
    }
}

impl Actor for ChildSupervisor {
    type Msg = ChildSupMsg;
    type State = ChildSupState;
    type Arguments = ChildSupArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ChildSupArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        if args.restore {
            // The previous instance's children died with it; the restore re-fills the map.
            args.shared.local_children.clear();
        }
        let cfg = &args.shared.config;
        Ok(ChildSupState {
            intensity: RestartIntensity::new(cfg.max_restarts, cfg.max_seconds),
            shared: args.shared,
            restore: args.restore,
            children: FastHashMap::default(),
            by_actor: FastHashMap::default(),
            kinds: FastHashSet::default(),
            awaiting_retry: BTreeMap::new(),
            stopping: FastHashMap::default(),
            stop_groups: BTreeMap::new(),
            next_group: 0,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Children are linked only once this actor runs, so the restore happens here.
        if state.restore {
            state.restore(&myself).await;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // A graceful stop: every child gets its own shutdown grace, all in parallel. Without
        // this, ractor would kill them when this actor exits, skipping their `post_stop`.
        let children: Vec<RunningChild> =
            std::mem::take(&mut state.children).into_values().collect();
        let stopping = std::mem::take(&mut state.stop_groups)
            .into_values()
            .flat_map(|g| g.waiting.into_values().map(|c| (c.cell, c.grace_ms)));
        let all = children
            .into_iter()
            .map(|c| {
                let grace = match c.shutdown {
                    Shutdown::Kill => None,
                    Shutdown::TimeoutMs(ms) => Some(ms),
                };
                (c.cell, grace)
            })
            .chain(stopping.map(|(cell, ms)| (cell, Some(ms))));
        join_all(all.map(|(cell, grace)| async move {
            match grace {
                Some(ms) => {
                    if cell
                        .stop_and_wait(Some("hub shutdown".into()), Some(Duration::from_millis(ms)))
                        .await
                        .is_err()
                    {
                        let _ = cell.kill_and_wait(Some(Duration::from_secs(1))).await;
                    }
                }
                None => {
                    let _ = cell.kill_and_wait(Some(Duration::from_secs(1))).await;
                }
            }
        }))
        .await;
        for id in state.by_actor.values() {
            state.shared.local_children.remove(id);
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
            ChildSupMsg::Start(batch) => state.start_batch(&myself, batch).await,
            ChildSupMsg::Stop(batch) => state.stop_batch(&myself, batch),
            ChildSupMsg::RetryRestart { id } => {
                if let Some((spec, old_pid)) = state.awaiting_retry.remove(&id) {
                    state.restart(&myself, spec, old_pid).await?;
                }
            }
            ChildSupMsg::StopDeadline { group, grace_ms } => {
                if let Some(group) = state.stop_groups.get(&group) {
                    // One line per deadline, not per child: a stop of 100,000 children that
                    // all ignore it would otherwise log 100,000 lines.
                    let mut late = FailureTally::new();
                    let mut overdue: Vec<&stopping::StoppingChild> = group
                        .waiting
                        .values()
                        .filter(|c| c.grace_ms <= grace_ms)
                        .collect();
                    // In id order, whatever the table's: the log and the kills read the same
                    // on every run.
                    overdue.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                    for child in overdue {
                        late.add(&child.id, format_args!("not stopped within {grace_ms} ms"));
                        child.cell.kill();
                    }
                    late.warn("children did not stop within their shutdown timeout; killing them");
                }
            }
            ChildSupMsg::ReleaseAll => state.release_all(&myself),
            ChildSupMsg::Discard { ids } => state.discard(ids),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Never the default (which stops this supervisor when any child ends).
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let exit = if reason.as_deref() == Some("killed") {
                    ExitKind::Killed
                } else {
                    ExitKind::Normal
                };
                state.on_exit(&myself, cell, exit).await
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                state
                    .on_exit(&myself, cell, ExitKind::Failed(err.to_string()))
                    .await
            }
            _ => Ok(()),
        }
    }
}
