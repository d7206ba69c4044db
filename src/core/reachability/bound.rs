//! The longest a child may run on two nodes while the cluster is connected through some path
//! (issue 32 item 3), as a formula of the configuration: the simulator's invariant and the
//! multi-process test print the same number.
//!
//! ```text
//! bound = detection + 2 × gossip + stable_after + grace + pass
//! pass  = membership_max_wait + migration_retry
//! ```
//!
//! - `detection`: how long a link's change takes to be seen by its ends: the failure detector's
//!   timeout (a link that drops silently) or the reconnect backoff's cap (a link that heals),
//!   whichever is longer; a TCP close is seen at once.
//! - `gossip`: the anti-entropy period; a record reaches every member by flooding within a few
//!   frame delays, and within one period more when a frame was lost. Twice: the set-aside
//!   node and the others may each see the last record a period apart.
//! - `stable_after`: a non-clique is resolved only once its shape was stable this long.
//! - `grace`: the others re-place a set-aside node's children only after it; the set-aside node
//!   stops them at once, so this term only matters when its decision lagged.
//! - `pass`: one redistribution pass (the membership batch's cap) and one retry of a move,
//!   which is also what resolves the duplicates a clean split's heal reveals.

use std::time::Duration;

use crate::config::ProcessHub;

/// The anti-entropy period while the table is changing (a digest to one peer in turn), in ms.
pub const GOSSIP_MS: u64 = 1_000;

/// The terms of the bound, for printing it with its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundTerms {
    /// Detection of a link change (heartbeat timeout or reconnect cap), in ms.
    pub detection_ms: u64,
    /// The anti-entropy period, in ms.
    pub gossip_ms: u64,
    /// `stable_after_ms`.
    pub stable_after_ms: u64,
    /// `nodedown_grace_ms`.
    pub grace_ms: u64,
    /// One pass: `membership_max_wait_ms + migration_retry_ms`.
    pub pass_ms: u64,
}

impl BoundTerms {
    /// The terms for a hub's configuration and its network's detection time.
    pub fn new(hub: &ProcessHub, detection: Duration) -> Self {
        Self {
            detection_ms: u64::try_from(detection.as_millis()).unwrap_or(u64::MAX),
            gossip_ms: GOSSIP_MS,
            stable_after_ms: hub.stable_after_ms,
            grace_ms: hub.nodedown_grace_ms,
            pass_ms: hub
                .membership_max_wait_ms
                .saturating_add(hub.migration_retry_ms),
        }
    }

    /// The bound: `detection + 2 × gossip + stable_after + grace + pass`.
    pub fn total(&self) -> Duration {
        Duration::from_millis(
            self.detection_ms
                .saturating_add(self.gossip_ms.saturating_mul(2))
                .saturating_add(self.stable_after_ms)
                .saturating_add(self.grace_ms)
                .saturating_add(self.pass_ms),
        )
    }
}

impl std::fmt::Display for BoundTerms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ms = detection {} + 2 x gossip {} + stable_after {} + grace {} + pass {}",
            self.total().as_millis(),
            self.detection_ms,
            self.gossip_ms,
            self.stable_after_ms,
            self.grace_ms,
            self.pass_ms
        )
    }
}

/// The longest a child may run on two nodes while the cluster is connected through some path,
/// for a hub's configuration and its network's detection time (`max(heartbeat.timeout,
/// reconnect.max)` for a `ClusterNode`).
pub fn double_run_bound(hub: &ProcessHub, detection: Duration) -> Duration {
    BoundTerms::new(hub, detection).total()
}
