//! `Hub::wait_for_members`: waiting until the cluster has formed.
//!
//! A node that was just spawned is a cluster of one: its peers are found and connected over
//! the next moments. Code that must not act on a one-node view (start children meant to
//! spread, or check a replication factor) waits here for the members it expects. The wait is
//! woken by the Coordinator's membership changes (a watch of the member count published with
//! the membership), never by polling.

use std::time::Duration;

use super::handle::Hub;
use crate::types::WaitForMembersTimeout;

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
        self.shared().wait_for_members(n, timeout).await
    }
}
