//! The hub's events as metrics: one subscriber per hub turns each event into counters
//! (the series are telemetry's, [`crate::telemetry::metrics`]; events push into them).

use metrics::{counter, gauge};

use super::bus::EventCounter;
use super::{HandoverOutcome, HubEvent, MoveReason};
use crate::telemetry::metrics::{
    enabled, failure_code, HubLabels, ACTOR_RESTARTS, DECLARED_VERSION, EXITS, HANDOVERS,
    MEMBERSHIP, MOVED, RECONCILE_CHILDREN, RECONCILE_ROUNDS, REPLACED, RESTARTS, STARTS,
    START_FAILURES, STOPS,
};

fn exit_code(reason: &str) -> &'static str {
    match reason {
        "normal" => "normal",
        "killed" => "killed",
        _ => "failed",
    }
}

fn why(reason: MoveReason) -> &'static str {
    match reason {
        MoveReason::NodeJoined => "node_joined",
        MoveReason::NodeDown => "node_down",
        MoveReason::NodeLeft => "node_left",
        MoveReason::Rebalance => "rebalance",
        MoveReason::LoadImbalance => "load_imbalance",
    }
}

/// The counters of one hub's most frequent events, registered once: incrementing one is an
/// atomic add, with no label set built per event.
struct Frequent {
    starts: metrics::Counter,
    stops: metrics::Counter,
    restarts: metrics::Counter,
}

/// What turns one hub's events into counters, reading each event as the bus records it. The
/// counters of frequent events are taken from the recorder installed when the hub spawns
/// (install it before).
pub(crate) fn event_counter(labels: HubLabels) -> EventCounter {
    let base = labels.base();
    let frequent = Frequent {
        starts: counter!(STARTS, &base),
        stops: counter!(STOPS, &base),
        restarts: counter!(RESTARTS, &base),
    };
    Box::new(move |event| record(&labels, &frequent, event))
}

fn record(labels: &HubLabels, frequent: &Frequent, event: &HubEvent) {
    if !enabled() {
        return;
    }
    match event {
        HubEvent::ChildStarted { .. } => frequent.starts.increment(1),
        HubEvent::ChildStartFailed { reason, .. } => labels.count(
            START_FAILURES,
            Some(("reason", failure_code(reason).to_owned())),
        ),
        HubEvent::ChildExited { reason, .. } => {
            labels.count(EXITS, Some(("reason", exit_code(reason).to_owned())))
        }
        HubEvent::ChildRestarted { .. } => frequent.restarts.increment(1),
        HubEvent::ChildStopped { .. } => frequent.stops.increment(1),
        HubEvent::ChildMoved { why: w, .. } => labels.count(MOVED, Some(("why", why(*w).into()))),
        HubEvent::ChildReplaced { why: w, .. } => {
            labels.count(REPLACED, Some(("why", why(*w).into())))
        }
        HubEvent::ChildHandover { outcome, .. } => {
            let outcome = match outcome {
                HandoverOutcome::Imported { .. } => "imported",
                _ => "fell_back_cold",
            };
            labels.count(HANDOVERS, Some(("outcome", outcome.into())))
        }
        HubEvent::NodeUp { .. } => labels.count(MEMBERSHIP, Some(("change", "up".into()))),
        HubEvent::NodeDown { .. } => labels.count(MEMBERSHIP, Some(("change", "down".into()))),
        HubEvent::NodeLeft { .. } => labels.count(MEMBERSHIP, Some(("change", "left".into()))),
        HubEvent::ReconcileRoundCompleted { stats, parked, .. } => {
            labels.count(RECONCILE_ROUNDS, Some(("parked", parked.to_string())));
            for (action, n) in [
                ("started", stats.started),
                ("skipped_pending", stats.skipped_pending),
                ("deferred_to_owner", stats.deferred_to_owner),
                ("duplicates", stats.duplicates),
                ("under_replicated", stats.under_replicated),
                ("stopped_undeclared", stats.stopped_undeclared),
                ("removed_stale", stats.removed_stale),
            ] {
                if n > 0 {
                    counter!(RECONCILE_CHILDREN, &labels.with("action", action))
                        .increment(n as u64);
                }
            }
        }
        HubEvent::HubActorRestarted { actor } => {
            let actor = match actor.as_str() {
                "registry" | "coordinator" | "child_supervisor" | "janitor" | "reconciler"
                | "declared_leader" => actor.clone(),
                _ => "other".to_owned(),
            };
            labels.count(ACTOR_RESTARTS, Some(("actor", actor)))
        }
        HubEvent::DeclaredVersionChanged { version, .. } => {
            gauge!(DECLARED_VERSION, &labels.base()).set(*version as f64)
        }
        _ => {}
    }
}
