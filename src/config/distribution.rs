//! How a hub chooses the node a new child runs on.

use serde::{Deserialize, Serialize};

/// The hub's distribution strategy (`distribution_strategy` in Elixir's ProcessHub).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    /// Each child runs on its owner on the consistent-hash ring of the members (the default): no
    /// coordination, and a join moves only about 1/N of the children. A start may still name a
    /// child's node (`StartOptions::child_mapping`).
    #[default]
    ConsistentHash,
    /// Every start names each child's node (`StartOptions::child_mapping`); a start that does
    /// not is refused `child_mapping_missing` for that child. For children that must run next
    /// to something only one node has.
    Guided,
    /// Each child goes where there is room: a leader gathers every node's load (children,
    /// scheduler busy time, run queue, memory; `[load_balancer]`) and a start places each child
    /// in proportion to the members' spare capacity (`core::load`), recording the choice like a
    /// guided placement, so joins do not move it. A start may still name a child's node. For
    /// children whose cost differs a lot from node to node, or clusters of unequal machines.
    LoadBalanced,
}

impl Distribution {
    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::ConsistentHash => "consistent_hash",
            Distribution::Guided => "guided",
            Distribution::LoadBalanced => "load_balanced",
        }
    }
}
