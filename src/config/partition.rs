//! The partition tolerance strategy (`[partition_tolerance]`): what a node does when a split
//! leaves its side of the cluster without quorum. The strategies are decided in
//! [`crate::core::quorum`]; here they are checked as configuration.

use super::ConfigError;
pub use crate::core::quorum::PartitionTolerance;

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
