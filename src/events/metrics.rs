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
    /// Moves and re-placements by reason, each registered when first counted (a failover
    /// counts thousands in a burst; a series appears only once something moved for it).
    moved: ByReason,
    replaced: ByReason,
}

/// One counter per [`MoveReason`], registered on first use.
#[derive(Default)]
struct ByReason([std::sync::OnceLock<metrics::Counter>; 5]);

impl ByReason {
    fn increment(&self, labels: &HubLabels, name: &'static str, reason: MoveReason) {
        let slot = match reason {
            MoveReason::NodeJoined => 0,
            MoveReason::NodeDown => 1,
            MoveReason::NodeLeft => 2,
            MoveReason::Rebalance => 3,
            MoveReason::LoadImbalance => 4,
        };
        self.0[slot]
            .get_or_init(|| counter!(name, &labels.with("why", why(reason))))
            .increment(1);
    }
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
        moved: ByReason::default(),
        replaced: ByReason::default(),
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
        HubEvent::ChildMoved { why, .. } => frequent.moved.increment(labels, MOVED, *why),
        HubEvent::ChildReplaced { why, .. } => frequent.replaced.increment(labels, REPLACED, *why),
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

#[cfg(all(test, feature = "admin"))]
mod tests {
    use super::*;
    use crate::model::ChildId;

    #[test]
    fn moves_and_re_placements_are_counted_by_reason_once_each_happens() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let count = event_counter(HubLabels::new("h", "n1"));
            let replaced = |why| HubEvent::ChildReplaced {
                id: ChildId::from("c"),
                node: "n1".into(),
                why,
            };
            for _ in 0..3 {
                count(&replaced(MoveReason::NodeDown));
            }
            count(&replaced(MoveReason::NodeLeft));
            count(&HubEvent::ChildMoved {
                id: ChildId::from("c"),
                from: "n1".into(),
                to: "n2".into(),
                why: MoveReason::NodeJoined,
            });
        });
        let text = handle.render();
        let line = |name: &str, why: &str| {
            text.lines()
                .find(|l| l.starts_with(name) && l.contains(&format!("why=\"{why}\"")))
                .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
        };
        assert_eq!(line(REPLACED, "node_down").as_deref(), Some("3"), "{text}");
        assert_eq!(line(REPLACED, "node_left").as_deref(), Some("1"), "{text}");
        assert_eq!(line(MOVED, "node_joined").as_deref(), Some("1"), "{text}");
        // A reason nothing moved for has no series.
        assert_eq!(line(REPLACED, "rebalance"), None, "{text}");
        assert_eq!(line(MOVED, "node_down"), None, "{text}");
    }
}
