//! How children move between nodes: `migration = "cold" | "hot"` and the hot swap's timing
//! (`[hot_swap]`), Elixir's ProcessHub's `ColdSwap` / `HotSwap` strategies.
//!
//! - **cold** (the default): a moving child is stopped on its old node, then started on its new
//!   owner; its state is gone and for a moment no node runs it.
//! - **hot**: a child whose kind hands its state over (`ChildKinds::handover`) exports it on
//!   the old node, starts on the new owner with it imported before any other message, and the
//!   old instance stops once the new node confirms. Casts that reach the old node meanwhile are
//!   held and forwarded to the new instance. Kinds that do not hand over move cold.
//!   See `docs/strategies.md`, "Hot swap and state handover".

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The migration strategy of a hub.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Migration {
    /// Stop on the old node, then start on the new one (state is lost).
    #[default]
    Cold,
    /// Start on the new node with the old instance's state, then stop the old one.
    Hot,
}

impl std::str::FromStr for Migration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cold" => Ok(Migration::Cold),
            "hot" => Ok(Migration::Hot),
            other => Err(format!("migration must be `hot` or `cold`, not {other:?}")),
        }
    }
}

/// The hot swap's timing (only read with `migration = "hot"`). Names and defaults follow the
/// original's `HotSwap` options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HotSwapConfig {
    /// After a move, how long the old node keeps forwarding casts that still reach it for the
    /// moved child to its new node (peers whose registry has not caught up yet), in ms; with
    /// `confirm_handover = false`, also how long the old instance is kept before it stops.
    /// Range `0..=600_000`, default 5 000 (`retention` in Elixir's ProcessHub).
    pub retention_ms: u64,
    /// How long the old node waits for the child's exported state (past it the move falls
    /// back to a cold swap, reported by `HubEvent::ChildHandover`), and how long the new node
    /// keeps a received state waiting for its child to start, in ms. Range `1..=600_000`,
    /// default 3 000 (`handover_data_wait` in Elixir's ProcessHub).
    pub handover_data_wait_ms: u64,
    /// How long the old node waits for the new node to confirm that the child started with
    /// its state, in ms; without a confirmation the old instance keeps running (its state
    /// intact, the held casts delivered to it) and the move is retried by the next
    /// redistribution pass. Range `100..=3_600_000`, default 10 000 (Elixir's ProcessHub's
    /// `child_migration_timeout`).
    pub child_migration_timeout_ms: u64,
    /// `true` (the default): the old instance stops when the new node confirms the start.
    /// `false`: it stops `retention_ms` after the state was sent, confirmed or not (a start
    /// that fails then loses the state; the child is re-placed without it).
    pub confirm_handover: bool,
}

impl Default for HotSwapConfig {
    fn default() -> Self {
        Self {
            retention_ms: 5_000,
            handover_data_wait_ms: 3_000,
            child_migration_timeout_ms: 10_000,
            confirm_handover: true,
        }
    }
}

impl HotSwapConfig {
    /// Checks every option against its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        super::range(
            "hot_swap.retention_ms",
            self.retention_ms,
            0,
            600_000,
            "0..=600000",
        )?;
        super::range(
            "hot_swap.handover_data_wait_ms",
            self.handover_data_wait_ms,
            1,
            600_000,
            "1..=600000",
        )?;
        super::range(
            "hot_swap.child_migration_timeout_ms",
            self.child_migration_timeout_ms,
            100,
            3_600_000,
            "100..=3600000",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProcessHub;

    #[test]
    fn cold_is_the_default_and_hot_reads_from_toml_with_its_timing() {
        assert_eq!(ProcessHub::new("h").migration, Migration::Cold);
        let config = ProcessHub::from_toml_str(
            "hub_id = \"h\"\nmigration = \"hot\"\n[hot_swap]\nretention_ms = 10\nconfirm_handover = false\n",
        )
        .unwrap();
        assert_eq!(config.migration, Migration::Hot);
        assert_eq!(config.hot_swap.retention_ms, 10);
        assert!(!config.hot_swap.confirm_handover);
        assert_eq!(config.hot_swap.handover_data_wait_ms, 3_000);
        config.validate().unwrap();
        assert!(ProcessHub::from_toml_str("hub_id = \"h\"\nmigration = \"warm\"\n").is_err());
        assert_eq!("hot".parse::<Migration>(), Ok(Migration::Hot));
        assert!("warm".parse::<Migration>().is_err());
    }

    #[test]
    fn the_timing_is_range_checked() {
        let mut config = ProcessHub::new("h");
        config.hot_swap.handover_data_wait_ms = 0;
        let err = config.validate().unwrap_err();
        assert!(err.to_string().contains("handover_data_wait_ms"), "{err}");
        config.hot_swap.handover_data_wait_ms = 1;
        config.hot_swap.child_migration_timeout_ms = 99;
        let err = config.validate().unwrap_err();
        assert!(
            err.to_string().contains("child_migration_timeout_ms"),
            "{err}"
        );
    }
}
