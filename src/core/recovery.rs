//! Recovery state and round scheduling (docs/recovery.md, "Rounds").
//!
//! A hub with auto-recovery is `Recovering` until its first reconcile round completes, then
//! `Normal` for good; without auto-recovery it is `Normal` from the start. The first round runs
//! `reconcile_grace_ms` after start, with or without peers, so `Normal` is always reached. Later
//! rounds follow completed synchronisation rounds, at most one per `reconcile_interval_ms`, and
//! never two at once. (The field names mirror the Coordinator's state in docs/architecture.md:
//! `reconcile_last_at`, `reconcile_requested?`, `reconcile_running?`.)
//!
//! Recovery starts are paced by a per-node [`StartPacer`] (admission control, beyond the
//! original): a cold start of 100,000 declared children is spread out instead of stampeding.
//!
//! Time is an input: every decision takes `now_ms` (a monotonic millisecond clock the caller
//! owns), and the actor owns the real timers.

use serde::{Deserialize, Serialize};

use crate::config::{AutoRecoveryConfig, StartBudget};

/// Whether the hub's first reconcile round has completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryState {
    /// The first round has not completed yet.
    Recovering,
    /// The first round has completed (terminal), or auto-recovery is off.
    Normal,
}

/// The `recovering -> normal` transition, reported once (`recovery_state_changed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateTransition {
    /// The state left.
    pub from: RecoveryState,
    /// The state entered.
    pub to: RecoveryState,
}

/// What the scheduler wants done now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundDecision {
    /// Run a round now (the scheduler now counts it as running).
    Start {
        /// This is the hub's first round: run the synchronous `pre_recovery_replay` hook before
        /// it issues any start, and `post_recovery_replay` after it.
        first: bool,
    },
    /// Nothing before this instant; poll again then (or when a sync completes).
    WaitUntil(u64),
    /// Nothing until something happens (a sync completes, the running round ends).
    Idle,
}

/// The scheduler of one hub's rounds on one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundSchedule {
    state: RecoveryState,
    enabled: bool,
    first_round_at: u64,
    interval_ms: u64,
    rounds_started: u64,
    reconcile_last_at: Option<u64>,
    reconcile_requested: bool,
    reconcile_running: bool,
    /// No round before this instant ([`RoundSchedule::rest_after`]).
    rest_until: u64,
}

/// A round that took `t` is followed by at least `ROUND_REST_FACTOR × t` without one: rounds
/// take at most a third of the node's time, whatever the interval.
pub const ROUND_REST_FACTOR: u64 = 2;

impl RoundSchedule {
    /// The schedule of a hub started at `now_ms`: `Recovering` with rounds when `config` is
    /// given, `Normal` with no rounds at all when auto-recovery is off.
    pub fn new(config: Option<&AutoRecoveryConfig>, now_ms: u64) -> Self {
        match config {
            Some(config) => Self {
                state: RecoveryState::Recovering,
                enabled: true,
                first_round_at: now_ms.saturating_add(config.reconcile_grace_ms),
                interval_ms: config.reconcile_interval_ms,
                rounds_started: 0,
                reconcile_last_at: None,
                reconcile_requested: false,
                reconcile_running: false,
                rest_until: 0,
            },
            None => Self {
                state: RecoveryState::Normal,
                enabled: false,
                first_round_at: u64::MAX,
                interval_ms: 0,
                rounds_started: 0,
                reconcile_last_at: None,
                reconcile_requested: false,
                reconcile_running: false,
                rest_until: 0,
            },
        }
    }

    /// The current state (what `recovery_state` answers).
    pub fn state(&self) -> RecoveryState {
        self.state
    }

    /// Whether a round is running.
    pub fn running(&self) -> bool {
        self.reconcile_running
    }

    /// When the last round started, if any.
    pub fn last_round_at(&self) -> Option<u64> {
        self.reconcile_last_at
    }

    /// A synchronisation round completed: a later round is due (subject to the interval).
    pub fn on_sync_completed(&mut self) {
        self.request_round();
    }

    /// Asks for a later round (subject to the interval), if rounds run at all.
    fn request_round(&mut self) {
        if self.enabled {
            self.reconcile_requested = true;
        }
    }

    /// Decides whether a round starts now.
    pub fn poll(&mut self, now_ms: u64) -> RoundDecision {
        if !self.enabled || self.reconcile_running {
            return RoundDecision::Idle;
        }
        let due_at = match self.reconcile_last_at {
            None => self.first_round_at,
            Some(_) if !self.reconcile_requested => return RoundDecision::Idle,
            Some(last) => last.saturating_add(self.interval_ms).max(self.rest_until),
        };
        if now_ms < due_at {
            return RoundDecision::WaitUntil(due_at);
        }
        let first = self.rounds_started == 0;
        self.rounds_started += 1;
        self.reconcile_running = true;
        self.reconcile_requested = false;
        self.reconcile_last_at = Some(now_ms);
        RoundDecision::Start { first }
    }

    /// The running round completed. Returns the transition to `Normal` the first time.
    pub fn on_round_completed(&mut self) -> Option<StateTransition> {
        self.reconcile_running = false;
        if self.state == RecoveryState::Recovering {
            self.state = RecoveryState::Normal;
            return Some(StateTransition {
                from: RecoveryState::Recovering,
                to: RecoveryState::Normal,
            });
        }
        None
    }

    /// The round that just completed at `now_ms` took `round_ms` of work (its scan and plan,
    /// not its waits): the next waits
    /// [`ROUND_REST_FACTOR`] times as long. At a million children a round's scan and plan take
    /// ten seconds or more; run back to back on every node they left the start pipeline,
    /// replication and the failure detector's heartbeats too little of a small machine, links
    /// were judged down under the load, and every registry fell further behind.
    pub fn rest_after(&mut self, round_ms: u64, now_ms: u64) {
        self.rest_until = now_ms.saturating_add(round_ms.saturating_mul(ROUND_REST_FACTOR));
    }

    /// The round that just completed was parked (its copy of the list was lost, outdated or
    /// not yet weighed against every peer's): it did nothing, so another is due as soon as
    /// the interval allows, without waiting for the next sync. At hundreds of thousands of
    /// declared children the peers' copies take longer than the grace to arrive, and the
    /// next periodic sync (15 s by default) would otherwise hold up the whole recovery.
    pub fn on_round_parked(&mut self) {
        self.request_round();
    }

    /// The running round did not complete (its actor crashed): the next round is due as soon
    /// as the interval allows, and the state does not move.
    pub fn on_round_aborted(&mut self) {
        self.reconcile_running = false;
        self.reconcile_requested = true;
    }
}

/// How many starts the pacer lets through now, and when to ask again for the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Starts that may be submitted now.
    pub now: usize,
    /// When more may be granted, if some of the request was held back and the round's quota is
    /// not exhausted. `None` with `now < wanted` means the round's quota is spent: the rest waits
    /// for the next round (it is still an orphan then).
    pub retry_at_ms: Option<u64>,
}

/// Admission control for recovery starts on one node: a token bucket refilled at
/// `max_starts_per_second` (holding at most one second's worth) and an optional cap per round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartPacer {
    per_second: u64,
    per_round: Option<u64>,
    /// Tokens in thousandths, so refills need no floating point.
    available_milli: u64,
    last_refill_ms: u64,
    granted_this_round: u64,
}

impl StartPacer {
    /// A full bucket at `now_ms`.
    pub fn new(budget: &StartBudget, now_ms: u64) -> Self {
        let per_second = u64::from(budget.max_starts_per_second.max(1));
        Self {
            per_second,
            per_round: budget.max_starts_per_round.map(u64::from),
            available_milli: per_second * 1000,
            last_refill_ms: now_ms,
            granted_this_round: 0,
        }
    }

    /// A new round begins: its quota is fresh (the bucket is not).
    pub fn begin_round(&mut self) {
        self.granted_this_round = 0;
    }

    /// Asks to submit `wanted` starts at `now_ms`.
    pub fn grant(&mut self, wanted: usize, now_ms: u64) -> Grant {
        let elapsed = now_ms.saturating_sub(self.last_refill_ms);
        self.last_refill_ms = self.last_refill_ms.max(now_ms);
        self.available_milli = self
            .available_milli
            .saturating_add(elapsed.saturating_mul(self.per_second))
            .min(self.per_second * 1000);
        let round_left = self
            .per_round
            .map_or(u64::MAX, |cap| cap.saturating_sub(self.granted_this_round));
        let wanted = wanted as u64;
        let granted = wanted.min(self.available_milli / 1000).min(round_left);
        self.available_milli -= granted * 1000;
        self.granted_this_round += granted;
        let retry_at_ms = if granted < wanted && granted < round_left {
            // Time until one whole token is back.
            let missing = 1000 - self.available_milli % 1000;
            Some(now_ms + missing.div_ceil(self.per_second).max(1))
        } else {
            None
        };
        Grant {
            now: granted as usize,
            retry_at_ms,
        }
    }
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
