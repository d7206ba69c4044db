//! What a seed draws for its run when the options do not force it: each family is a function of
//! the seed alone, so the runs of the other families replay as they did before it existed.

use crate::config::{Distribution, Migration, PartitionTolerance, ReplicationModel, SyncStrategy};

/// The most nodes a run with `forced` boot nodes grows to: [`crate::sim::workload::MAX_NODES`], or
/// one join beyond a larger forced count. A quorum run keeps a majority of this size.
pub fn most_nodes(forced: Option<usize>) -> usize {
    forced.map_or(crate::sim::workload::MAX_NODES, |n| {
        (n + 1).max(crate::sim::workload::MAX_NODES)
    })
}

/// How many nodes run each child of seed `seed`'s run when the options do not say: one run in
/// four replicates every child on two nodes (active-passive), decided from the seed alone, so
/// the other runs draw exactly what they drew before replicated runs existed.
pub fn replicas_of(seed: u64) -> usize {
    if seed % 4 == 3 {
        2
    } else {
        1
    }
}

/// Whether every replica of seed `seed`'s run is active when the options do not say: half the
/// replicated runs (`seed % 8 == 7`, of the `seed % 4 == 3` that [`replicas_of`] replicates)
/// run active-active, the others active-passive (a function of the seed alone, as
/// [`replicas_of`]: the seeds replicated before active-active runs existed with `seed % 8 == 3`
/// replay as they did).
pub fn replication_model_of(seed: u64) -> ReplicationModel {
    if seed % 8 == 7 {
        ReplicationModel::ActiveActive
    } else {
        ReplicationModel::ActivePassive
    }
}

/// How the children of seed `seed`'s run are placed when the options do not say: one run in
/// five places them by load, with a rebalance (a function of the seed alone, as
/// [`replicas_of`]).
pub fn distribution_of(seed: u64) -> Distribution {
    if seed % 5 == 2 {
        Distribution::LoadBalanced
    } else {
        Distribution::ConsistentHash
    }
}

/// What a side of a split does in seed `seed`'s run when the options do not say: one run in
/// seven keeps a majority of the largest cluster the run can have (a function of the seed
/// alone, as [`replicas_of`]; only these runs also draw partial partitions). The size is
/// configured, not only tracked: a node restarted during a split counts from the configured
/// size again (the largest membership seen is not kept across restarts).
pub fn partition_tolerance_of(seed: u64) -> PartitionTolerance {
    partition_tolerance_growing_to(seed, crate::sim::workload::MAX_NODES)
}

/// [`partition_tolerance_of`] for a run that grows to `most` nodes ([`most_nodes`]): the
/// quorum runs keep a majority of `most`.
pub fn partition_tolerance_growing_to(seed: u64, most: usize) -> PartitionTolerance {
    if seed % 7 == 5 {
        PartitionTolerance::MajorityQuorum {
            initial_cluster_size: most,
            track_max_size: true,
        }
    } else {
        PartitionTolerance::Divergence
    }
}

/// How registry changes travel in seed `seed`'s run when the options do not say: one run in
/// eight gossips (1 to 3 recipients, rounds from the first node or from all, a function of the
/// seed alone, as [`replicas_of`]); the others broadcast.
pub fn sync_of(seed: u64) -> SyncStrategy {
    if seed % 8 == 6 {
        SyncStrategy::Gossip {
            interval_ms: 1_000,
            recipients: 1 + (seed / 8 % 3) as usize,
            restricted_init: (seed / 8).is_multiple_of(2),
        }
    } else {
        SyncStrategy::PubSub
    }
}

/// How the children of seed `seed`'s run move when the options do not say: one seed in three
/// runs hot (a function of the seed alone, so that the seeds that run cold replay exactly as
/// they did before hot runs existed: the workload's generator is not drawn from).
pub fn migration_of(seed: u64) -> Migration {
    if seed % 3 == 1 {
        Migration::Hot
    } else {
        Migration::Cold
    }
}
