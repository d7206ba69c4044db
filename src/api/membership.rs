//! `Hub::wait_for_members`: waiting until the cluster has formed.
//!
//! A node that was just spawned is a cluster of one: its peers are found and connected over
//! the next moments. Code that must not act on a one-node view (start children meant to
//! spread, or check a replication factor) waits here for the members it expects. The wait is
//! woken by the Coordinator's membership changes (a watch of the member count published with
//! the membership), never by polling.

use std::time::Duration;

use super::handle::Hub;
use crate::hub::shared::HubShared;

/// [`Hub::wait_for_members`] gave up: the hub's membership did not reach the count in time.
/// Says how many members it had when the wait ended, so the caller can tell "nobody came"
/// (1, this node alone) from "one is missing".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the hub had {seen} of the {wanted} members it waited for (this node included) after {waited_ms} ms"
)]
pub struct WaitForMembersTimeout {
    /// The member count waited for, this node included.
    pub wanted: usize,
    /// The member count when the wait gave up, this node included.
    pub seen: usize,
    /// How long the caller waited.
    pub waited_ms: u64,
}

/// Waits until `hub`'s published membership has at least `wanted` members (this node
/// included), at most `timeout`; answers the count it saw. Shared by the handle and the
/// root actor's `HubMsg::WaitForMembers`.
pub(crate) async fn wait_for_members(
    hub: &HubShared,
    wanted: usize,
    timeout: Duration,
) -> Result<usize, WaitForMembersTimeout> {
    let mut count = hub.member_count.subscribe();
    let reached = tokio::time::timeout(timeout, count.wait_for(|n| *n >= wanted))
        .await
        .ok()
        .and_then(Result::ok)
        .map(|seen| *seen);
    // The sender lives as long as the hub's shared state, which this wait borrows: a closed
    // channel cannot happen, but it would answer as a timeout rather than panic.
    reached.ok_or_else(|| WaitForMembersTimeout {
        wanted,
        seen: *hub.member_count.borrow(),
        waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    })
}

impl Hub {
    /// Waits until the hub's membership (this node included) has at least `n` members, at
    /// most `timeout`; answers how many it has then. Use it where the cluster must have formed
    /// before acting, e.g. before starting children meant to spread over `n` nodes: a freshly
    /// spawned node is a cluster of one until its peers connect. `n` of 0 or 1 answers at
    /// once. On timeout the error says how many members it saw.
    ///
    /// The count is of connected members as this node sees them: a member that goes down
    /// leaves it, so a later call may wait again.
    pub async fn wait_for_members(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<usize, WaitForMembersTimeout> {
        wait_for_members(self.shared(), n, timeout).await
    }
}
