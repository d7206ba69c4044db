//! The Reconciler actor: runs the reconcile rounds of one node (docs/recovery.md,
//! "Rounds").
//!
//! Spawned by the HubSupervisor only with `auto_recovery`. The schedule is the pure
//! [`RoundSchedule`]: the first round `reconcile_grace_ms` after start, with or without peers;
//! later rounds after completed synchronisation rounds, at most one per `reconcile_interval_ms`,
//! never two at once. A node without peers has nothing to synchronise with, its view is the
//! whole hub at every instant, so each interval counts as a completed sync for it.
//!
//! A round ([`round`]) runs in a task and reports back, so the actor keeps answering: it plans
//! with `core::reconcile::plan_round` from the declared list as persisted here, the registry view
//! and the ring, then
//! - stops this node's own undeclared and duplicate instances (never another node's),
//! - removes the stale durable rows it holds,
//! - submits orphans through the normal start path (`check_existing`, rows marked durable),
//!   paced by the [`StartPacer`] (admission control): what a round does not submit is still an
//!   orphan in the next one,
//! - carries the mid-migration set to the next round (started only if still an orphan then).
//!
//! A parked list (lost here) plans parked rounds: no starts, no stops. The first round runs the
//! synchronous `pre_recovery_replay` hooks before any start, and its completion moves the hub
//! to `normal` (`recovery_state_changed`, `post_recovery_replay`).
//!
//! The state it publishes ([`state_watch`]) is what `recovery_state()` and `await_normal` read.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;
use tokio_util::task::AbortOnDropHandle;

use super::protocol::{ReconcilerMsg, RoundCarry, RoundReport};
use super::HubShared;
use crate::hub::declared::recovery_shared::RecoveryShared;

mod round;
pub(crate) mod state_watch;

use crate::core::recovery::{RecoveryState, RoundDecision, RoundSchedule, StartPacer};
use crate::hooks::{HookEvent, HookKey};
use round::{run_round, InFlight};

pub(crate) struct Reconciler;

pub(crate) struct ReconcilerState {
    hub: Arc<HubShared>,
    recovery: Arc<RecoveryShared>,
    schedule: RoundSchedule,
    /// Out while a round runs (the round's task owns it).
    pacer: Option<StartPacer>,
    /// What the last round hands the next.
    carry: RoundCarry,
    wake: Option<JoinHandle<Result<(), ractor::MessagingErr<ReconcilerMsg>>>>,
    tick: Option<JoinHandle<()>>,
    /// The round in progress, owned: aborted when this state drops, whether the actor stopped
    /// or failed (ractor skips `post_stop` after a failure, but always drops the state), so a
    /// round never outlives its actor and a restarted Reconciler never races its predecessor's.
    round: Option<AbortOnDropHandle<()>>,
    /// The recovery starts submitted and not answered yet ([`InFlight`]).
    in_flight: Arc<InFlight>,
}

pub(crate) struct ReconcilerArgs {
    pub hub: Arc<HubShared>,
    pub recovery: Arc<RecoveryShared>,
}

impl ReconcilerState {
    fn poll(&mut self, myself: &ActorRef<ReconcilerMsg>) {
        let now = self.hub.mono_ms();
        match self.schedule.poll(now) {
            RoundDecision::Start { first } => {
                let first = first && self.recovery.state.current() == RecoveryState::Recovering;
                let Some(pacer) = self.pacer.take() else {
                    // Cannot happen: a round only starts when none runs.
                    self.schedule.on_round_aborted();
                    return;
                };
                let hub = self.hub.clone();
                let recovery = self.recovery.clone();
                let carry = self.carry.clone();
                let in_flight = self.in_flight.clone();
                let me = myself.clone();
                let span = tracing::info_span!(
                    "process_hub.reconcile_round",
                    otel.name = "process_hub.reconcile_round",
                    hub = %hub.config.hub_id,
                    node = %hub.node,
                    first,
                );
                self.round = Some(AbortOnDropHandle::new(tokio::spawn(
                    tracing::Instrument::instrument(
                        async move {
                            let report =
                                run_round(hub, recovery, first, carry, pacer, in_flight).await;
                            let _ = me.cast(ReconcilerMsg::RoundDone(Box::new(report)));
                        },
                        span,
                    ),
                )));
            }
            RoundDecision::WaitUntil(at) => {
                if let Some(w) = self.wake.take() {
                    w.abort();
                }
                let wait = Duration::from_millis(at.saturating_sub(now).max(1));
                self.wake = Some(myself.send_after(wait, || ReconcilerMsg::Poll));
            }
            RoundDecision::Idle => {}
        }
    }

    fn round_done(&mut self, myself: &ActorRef<ReconcilerMsg>, report: RoundReport) {
        self.round = None;
        self.pacer = Some(report.pacer);
        self.carry = report.carry;
        let hub = &self.hub;
        let transition = self.schedule.on_round_completed();
        if report.parked {
            // It did nothing (and skipped its scan, unless the side lost quorum): no rest.
            self.schedule.on_round_parked();
        } else {
            self.schedule.rest_after(report.work_ms, hub.mono_ms());
        }
        if let Some(transition) = transition.filter(|_| report.first) {
            self.recovery.state.publish(transition.to);
            tracing::info!(hub = %hub.config.hub_id, ?transition.to, "recovery state changed");
            hub.hooks.fire(HookKey::RecoveryStateChanged, || {
                HookEvent::RecoveryStateChanged {
                    node: hub.node.clone(),
                    from: transition.from,
                    to: transition.to,
                }
            });
            if transition.to == crate::core::recovery::RecoveryState::Normal {
                hub.events
                    .publish(|| crate::events::HubEvent::RecoveryNormal {
                        node: hub.node.clone(),
                    });
            }
        }
        if report.first {
            hub.hooks.fire(HookKey::PostRecoveryReplay, || {
                HookEvent::PostRecoveryReplay {
                    node: hub.node.clone(),
                    stats: report.stats,
                }
            });
        }
        self.poll(myself);
    }
}

impl Actor for Reconciler {
    type Msg = ReconcilerMsg;
    type State = ReconcilerState;
    type Arguments = ReconcilerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ReconcilerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let ReconcilerArgs { hub, recovery } = args;
        let now = hub.mono_ms();
        // A restarted Reconciler starts a fresh schedule; if the hub already reached `normal`
        // its next "first" round is an ordinary one (no replay hooks, no transition).
        let schedule = RoundSchedule::new(Some(&recovery.config), now);
        let owner_first = recovery.state.current() == RecoveryState::Recovering;
        Ok(ReconcilerState {
            pacer: Some(StartPacer::new(&recovery.config.start_budget, now)),
            hub,
            recovery,
            schedule,
            // After a boot, owners submit their orphans first (`core::reconcile`).
            carry: RoundCarry {
                owner_first,
                ..RoundCarry::default()
            },
            wake: None,
            tick: None,
            round: None,
            in_flight: Arc::default(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let every = Duration::from_millis(state.recovery.config.reconcile_interval_ms);
        state.tick = Some(myself.send_interval(every, || ReconcilerMsg::Tick));
        state.poll(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.tick.take() {
            t.abort();
        }
        if let Some(w) = state.wake.take() {
            w.abort();
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
            ReconcilerMsg::Poll => state.poll(&myself),
            ReconcilerMsg::SyncCompleted => {
                state.schedule.on_sync_completed();
                state.poll(&myself);
            }
            ReconcilerMsg::Tick => {
                if state.hub.alone() {
                    state.schedule.on_sync_completed();
                    state.poll(&myself);
                }
            }
            ReconcilerMsg::RoundDone(report) => state.round_done(&myself, *report),
        }
        Ok(())
    }
}
