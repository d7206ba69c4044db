//! Every family of a hub's series from its start: counters at zero for each value their labels
//! take, histograms registered empty. An alert on `rate(...)` or `increase(...)` of a failure
//! counter then works from the first scrape, not only after the first failure, and an operator
//! sees every family a node exports on a fresh node.

use metrics::{counter, histogram};

use super::metrics::{
    HubLabels, ACTOR_RESTARTS, EXITS, HANDOVERS, MANIFEST_SHIPS, MANIFEST_SHIP_FAILURES,
    MEMBERSHIP, MOVED, PEER_AUTH_FAILURES, RECONCILE_CHILDREN, RECONCILE_ROUNDS, REDISTRIBUTIONS,
    REFUSED, REPLACED, RESTARTS, STARTS, START_FAILURES, START_FAILURE_CODES, START_SECONDS, STOPS,
    STOP_SECONDS,
};
use super::refusals::Refusal;

/// The `reason` values of child exits.
pub(crate) const EXIT_REASONS: [&str; 3] = ["normal", "killed", "failed"];
/// The `why` values of moves and re-placements.
pub(crate) const MOVE_WHY: [&str; 5] = [
    "node_joined",
    "node_down",
    "node_left",
    "rebalance",
    "load_imbalance",
];
/// The `outcome` values of hot moves.
pub(crate) const HANDOVER_OUTCOMES: [&str; 2] = ["imported", "fell_back_cold"];
/// The `change` values of membership changes.
pub(crate) const MEMBERSHIP_CHANGES: [&str; 3] = ["up", "down", "left"];
/// The `action` values of what reconcile rounds did.
pub(crate) const RECONCILE_ACTIONS: [&str; 7] = [
    "started",
    "skipped_pending",
    "deferred_to_owner",
    "duplicates",
    "under_replicated",
    "stopped_undeclared",
    "removed_stale",
];
/// The `actor` values of hub actor restarts.
pub(crate) const HUB_ACTORS: [&str; 7] = [
    "registry",
    "coordinator",
    "child_supervisor",
    "janitor",
    "reconciler",
    "declared_leader",
    "other",
];

/// Registers every counter of the hub `labels` names at zero (each label value it takes) and
/// its request histograms empty. Incrementing by zero changes no count a restart kept.
pub(crate) fn register(labels: &HubLabels) {
    let base = labels.base();
    for name in [
        STARTS,
        STOPS,
        RESTARTS,
        REDISTRIBUTIONS,
        MANIFEST_SHIPS,
        MANIFEST_SHIP_FAILURES,
        PEER_AUTH_FAILURES,
    ] {
        counter!(name, &base).increment(0);
    }
    let each = |name: &'static str, key: &'static str, values: &[&'static str]| {
        for value in values {
            counter!(name, &labels.with(key, *value)).increment(0);
        }
    };
    each(START_FAILURES, "reason", &START_FAILURE_CODES);
    each(EXITS, "reason", &EXIT_REASONS);
    each(MOVED, "why", &MOVE_WHY);
    each(REPLACED, "why", &MOVE_WHY);
    each(HANDOVERS, "outcome", &HANDOVER_OUTCOMES);
    each(MEMBERSHIP, "change", &MEMBERSHIP_CHANGES);
    each(RECONCILE_ROUNDS, "parked", &["false", "true"]);
    each(RECONCILE_CHILDREN, "action", &RECONCILE_ACTIONS);
    each(ACTOR_RESTARTS, "actor", &HUB_ACTORS);
    let refusals: Vec<&'static str> = Refusal::ALL.iter().map(|r| r.name()).collect();
    each(REFUSED, "reason", &refusals);
    let _ = histogram!(START_SECONDS, &base);
    let _ = histogram!(STOP_SECONDS, &base);
}
