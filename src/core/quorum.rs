//! Partition tolerance: whether this node's side of the cluster may keep running children.
//!
//! Under a network split the default (`Divergence`) keeps both sides running and resolves the
//! duplicates on heal. Children that must never run twice at once need the other choice: a side
//! without quorum stops its children and refuses work until quorum returns. Three ways to count
//! it, as Elixir's ProcessHub's strategies:
//! - `StaticQuorum`: at least `quorum_size` members (this node included), for a cluster whose
//!   size is known;
//! - `DynamicQuorum`: the members must be at least `quorum_size_percent` of the members plus
//!   the nodes lost within the last `threshold_time_ms` — so nodes lost one at a time, slower
//!   than the threshold, never count against it (a cluster that shrinks on purpose), while many
//!   lost at once do;
//! - `MajorityQuorum`: a majority of the largest membership seen (`initial_cluster_size` until
//!   a larger one is seen, when `track_max_size`), so of a 5-node cluster split 3/2 only the
//!   three keep running.
//!
//! Pure: the Coordinator tells a [`QuorumTracker`] of each node that went down or came up, with
//! the time and the member count, and acts on the [`Verdict`].

use std::collections::BTreeMap;

use crate::model::NodeName;

pub use crate::config::PartitionTolerance;

/// How many members quorum counts: the members (this node included) that are not suspects
/// (members whose link dropped and that nobody vouched for since). A suspect that already left
/// the members is not subtracted again: while one decision takes several peers out one after
/// the other, the ones still to go are suspects, and those already gone must not count twice,
/// or a side that keeps quorum would be judged without it and stop its children.
pub fn counted_members(members: &[NodeName], suspect: impl Fn(&NodeName) -> bool) -> usize {
    members.iter().filter(|m| !suspect(m)).count()
}

/// What a membership change did to quorum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Quorum held, or was already lost.
    Unchanged,
    /// Quorum was lost: enter partition mode.
    Lost,
    /// Quorum came back: leave partition mode.
    Regained,
}

/// One node's view of quorum, fed with membership changes.
#[derive(Clone, Debug)]
pub struct QuorumTracker {
    strategy: PartitionTolerance,
    /// The largest membership seen (majority quorum).
    max_seen: usize,
    /// Nodes lost and when, in ms (dynamic quorum).
    lost: BTreeMap<NodeName, u64>,
    partitioned: bool,
}

impl QuorumTracker {
    /// A tracker for a hub starting with `members` members (this node included). A static
    /// quorum with `startup_confirm`, and a majority quorum whose `initial_cluster_size` makes
    /// `members` a minority, start partitioned.
    pub fn new(strategy: PartitionTolerance, members: usize) -> Self {
        let max_seen = match &strategy {
            PartitionTolerance::MajorityQuorum {
                initial_cluster_size,
                ..
            } => (*initial_cluster_size).max(members),
            _ => members,
        };
        let partitioned = match &strategy {
            PartitionTolerance::StaticQuorum {
                quorum_size,
                startup_confirm: true,
            } => members < *quorum_size,
            // A node alone of a cluster configured larger is not a majority of it.
            PartitionTolerance::MajorityQuorum { .. } => members <= max_seen / 2,
            _ => false,
        };
        Self {
            strategy,
            max_seen,
            lost: BTreeMap::new(),
            partitioned,
        }
    }

    /// Starts in partition mode whatever the count (a restarted Coordinator of a node that was
    /// partitioned: only a membership that makes quorum lets it out, as a `Regained`).
    pub fn assume_partitioned(&mut self) {
        self.partitioned = true;
    }

    /// Whether this side is in partition mode.
    pub fn is_partitioned(&self) -> bool {
        self.partitioned
    }

    /// `node` went down at `now_ms`, leaving `members` members.
    pub fn node_down(&mut self, node: &NodeName, now_ms: u64, members: usize) -> Verdict {
        self.prune(now_ms);
        if matches!(self.strategy, PartitionTolerance::DynamicQuorum { .. }) {
            self.lost.insert(node.clone(), now_ms);
        }
        self.judge(members)
    }

    /// `node` came up at `now_ms`, making `members` members.
    pub fn node_up(&mut self, node: &NodeName, now_ms: u64, members: usize) -> Verdict {
        self.prune(now_ms);
        self.lost.remove(node);
        if let PartitionTolerance::MajorityQuorum {
            track_max_size: true,
            ..
        } = self.strategy
        {
            self.max_seen = self.max_seen.max(members);
        }
        self.judge(members)
    }

    /// Time passed: lost nodes older than the threshold stop counting (dynamic quorum).
    pub fn tick(&mut self, now_ms: u64, members: usize) -> Verdict {
        self.prune(now_ms);
        self.judge(members)
    }

    /// Sets the membership a majority is counted of (an intentional downsizing), as the
    /// original's `reset_cluster_size`.
    pub fn reset_cluster_size(&mut self, size: usize, members: usize) -> Verdict {
        self.max_seen = size.max(1);
        self.judge(members)
    }

    /// Whether `members` members are quorum now.
    pub fn has_quorum(&self, members: usize) -> bool {
        match &self.strategy {
            PartitionTolerance::Divergence => true,
            PartitionTolerance::StaticQuorum { quorum_size, .. } => members >= *quorum_size,
            PartitionTolerance::DynamicQuorum {
                quorum_size_percent,
                ..
            } => {
                let counted = members + self.lost.len();
                // members / counted >= percent / 100, in integers.
                counted == 0 || members * 100 >= usize::from(*quorum_size_percent) * counted
            }
            PartitionTolerance::MajorityQuorum { .. } => members > self.max_seen / 2,
        }
    }

    fn prune(&mut self, now_ms: u64) {
        if let PartitionTolerance::DynamicQuorum {
            threshold_time_ms, ..
        } = self.strategy
        {
            self.lost
                .retain(|_, at| now_ms.saturating_sub(*at) < threshold_time_ms);
        }
    }

    fn judge(&mut self, members: usize) -> Verdict {
        let quorum = self.has_quorum(members);
        match (self.partitioned, quorum) {
            (false, false) => {
                self.partitioned = true;
                Verdict::Lost
            }
            (true, true) => {
                self.partitioned = false;
                Verdict::Regained
            }
            _ => Verdict::Unchanged,
        }
    }
}

#[cfg(test)]
#[path = "quorum_tests.rs"]
mod tests;
