//! The partition tolerance strategy (`[partition_tolerance]`): what a node does when a split
//! leaves its side of the cluster without quorum. The strategies are decided in
//! [`crate::core::quorum`]; here they are defined and checked as configuration.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// A hub's partition tolerance strategy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", deny_unknown_fields)]
pub enum PartitionTolerance {
    /// Both sides of a split keep running; duplicates are resolved on heal.
    #[default]
    Divergence,
    /// Quorum is `quorum_size` members; with `startup_confirm` a node that starts without them
    /// starts partitioned.
    StaticQuorum {
        /// Members needed, this node included.
        quorum_size: usize,
        /// Check quorum when the hub starts.
        #[serde(default)]
        startup_confirm: bool,
    },
    /// Quorum is `quorum_size_percent` of the members plus the nodes lost within
    /// `threshold_time_ms`.
    DynamicQuorum {
        /// Share of the recent membership needed, in percent (1..=100).
        quorum_size_percent: u8,
        /// How long a lost node counts against quorum, in ms.
        threshold_time_ms: u64,
    },
    /// Quorum is a majority of the largest membership seen.
    MajorityQuorum {
        /// The membership assumed until a larger one is seen.
        initial_cluster_size: usize,
        /// Remember the largest membership seen (else `initial_cluster_size` stays the base).
        track_max_size: bool,
    },
}

/// Checks the strategy's numbers against their ranges.
pub(crate) fn validate(strategy: &PartitionTolerance) -> Result<(), ConfigError> {
    match strategy {
        PartitionTolerance::Divergence => Ok(()),
        PartitionTolerance::StaticQuorum { quorum_size, .. } => super::range(
            "partition_tolerance.quorum_size",
            *quorum_size,
            1,
            10_000,
            "1..=10000",
        ),
        PartitionTolerance::DynamicQuorum {
            quorum_size_percent,
            threshold_time_ms,
        } => {
            super::range(
                "partition_tolerance.quorum_size_percent",
                *quorum_size_percent,
                1,
                100,
                "1..=100",
            )?;
            super::range(
                "partition_tolerance.threshold_time_ms",
                *threshold_time_ms,
                1,
                86_400_000,
                "1..=86400000",
            )
        }
        PartitionTolerance::MajorityQuorum {
            initial_cluster_size,
            ..
        } => super::range(
            "partition_tolerance.initial_cluster_size",
            *initial_cluster_size,
            1,
            10_000,
            "1..=10000",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProcessHub;

    #[test]
    fn each_strategy_loads_from_toml_and_bad_numbers_are_named() {
        let cfg = ProcessHub::from_toml_str(
            "hub_id = \"h\"\n[partition_tolerance]\ntype = \"majority_quorum\"\n\
             initial_cluster_size = 5\ntrack_max_size = true\n",
        )
        .unwrap();
        assert_eq!(
            cfg.partition_tolerance,
            PartitionTolerance::MajorityQuorum {
                initial_cluster_size: 5,
                track_max_size: true
            }
        );
        cfg.validate().unwrap();
        let cfg = ProcessHub::from_toml_str(
            "hub_id = \"h\"\n[partition_tolerance]\ntype = \"static_quorum\"\nquorum_size = 3\n",
        )
        .unwrap();
        assert_eq!(
            cfg.partition_tolerance,
            PartitionTolerance::StaticQuorum {
                quorum_size: 3,
                startup_confirm: false
            }
        );
        let cfg = ProcessHub::from_toml_str(
            "hub_id = \"h\"\n[partition_tolerance]\ntype = \"dynamic_quorum\"\n\
             quorum_size_percent = 0\nthreshold_time_ms = 1000\n",
        )
        .unwrap();
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("partition_tolerance.quorum_size_percent"), "{e}");
        assert!(ProcessHub::from_toml_str(
            "hub_id = \"h\"\n[partition_tolerance]\ntype = \"quorum_of_friends\"\n"
        )
        .is_err());
        assert_eq!(
            ProcessHub::new("h").partition_tolerance,
            PartitionTolerance::Divergence
        );
    }
}
