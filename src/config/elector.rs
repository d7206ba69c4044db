//! The leader elector: who serializes the declared list's mutations (docs/recovery.md,
//! "The leader"): elected by the user's elector, validated against the hub's own cluster, with
//! the lexicographically lowest member as the deterministic fallback.
//!
//! Without one the leader is the lowest member. A team that wants the leader somewhere else (a
//! node with a faster disk, the node that already leads their own election) plugs one in with
//! [`crate::HubBuilder::elector`]. Its answer is validated: a node that is not a member of the
//! hub, or no answer, falls back to the lowest member.

use std::collections::BTreeSet;

use crate::model::NodeName;

/// Chooses the declared-list leader among the hub's members.
///
/// Every node asks its own elector, so the answer must be a **deterministic function of the
/// member set**, the same on every node (the same code and configuration everywhere). Two nodes
/// that disagree each take their own choice for the leader, which is the same situation as a
/// partition: both may mutate, and the higher version wins on heal.
pub trait LeaderElector: Send + Sync + 'static {
    /// The leader for `members` (this node included, sorted), or `None` for the fallback.
    fn elect(&self, members: &BTreeSet<NodeName>) -> Option<NodeName>;
}

impl<F> LeaderElector for F
where
    F: Fn(&BTreeSet<NodeName>) -> Option<NodeName> + Send + Sync + 'static,
{
    fn elect(&self, members: &BTreeSet<NodeName>) -> Option<NodeName> {
        self(members)
    }
}
