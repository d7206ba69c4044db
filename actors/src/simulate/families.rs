//! The strategy families a sweep forces on its seeds: `--rotate-forced` forces one per seed,
//! `--every-family` runs the whole sweep once per family.
//!
//! By default a seed draws each strategy from the seed (one run in eight gossips, one in seven
//! keeps a quorum, ...), so a strategy runs on a fraction of the seeds only, and mostly beside
//! the defaults of the others. Forcing a family runs every seed of the sweep that way, with the
//! other strategies still drawn from the seed: the same workloads and faults, under the
//! strategy.

use std::time::Instant;

use process_hub::config::{Distribution, Migration, ReplicationModel};

use super::{sweep, FamilyLine, ShardLine, SimulateArgs};

/// A strategy forced on every seed of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `--sync gossip:1000:2`.
    Gossip,
    /// `--partition-tolerance majority-quorum:5`.
    MajorityQuorum,
    /// `--migration hot`.
    Hot,
    /// `--migration cold`.
    Cold,
    /// `--distribution load-balanced`.
    LoadBalanced,
    /// `--replication-factor 2 --replication-model active-active`.
    ActiveActive,
    /// `--replication-factor 2 --replication-model active-passive`.
    ActivePassive,
    /// `--partial-partitions`.
    PartialPartitions,
}

/// Every family, in the order `--rotate-forced` rotates over them.
pub const FAMILIES: [Family; 8] = [
    Family::Gossip,
    Family::MajorityQuorum,
    Family::Hot,
    Family::Cold,
    Family::LoadBalanced,
    Family::ActiveActive,
    Family::ActivePassive,
    Family::PartialPartitions,
];

impl Family {
    /// The flags of `process-hub simulate` that force it.
    pub fn flags(self) -> &'static str {
        match self {
            Family::Gossip => "--sync gossip:1000:2",
            Family::MajorityQuorum => "--partition-tolerance majority-quorum:5",
            Family::Hot => "--migration hot",
            Family::Cold => "--migration cold",
            Family::LoadBalanced => "--distribution load-balanced",
            Family::ActiveActive => "--replication-factor 2 --replication-model active-active",
            Family::ActivePassive => "--replication-factor 2 --replication-model active-passive",
            Family::PartialPartitions => "--partial-partitions",
        }
    }

    /// Sets its flags in `args` (as [`Family::flags`] would on the command line).
    pub fn force(self, args: &mut SimulateArgs) {
        match self {
            Family::Gossip => args.sync = Some("gossip:1000:2".to_owned()),
            Family::MajorityQuorum => {
                args.partition_tolerance = Some("majority-quorum:5".to_owned())
            }
            Family::Hot => args.migration = Some(Migration::Hot),
            Family::Cold => args.migration = Some(Migration::Cold),
            Family::LoadBalanced => args.distribution = Some(Distribution::LoadBalanced),
            Family::ActiveActive => {
                args.replication_factor = Some(2);
                args.replication_model = Some(ReplicationModel::ActiveActive);
            }
            Family::ActivePassive => {
                args.replication_factor = Some(2);
                args.replication_model = Some(ReplicationModel::ActivePassive);
            }
            Family::PartialPartitions => args.partial_partitions = true,
        }
    }
}

/// The family `--rotate-forced` forces on seed `seed`: `FAMILIES[(seed / 7) % 8]`. Seven
/// seeds in a row share a family; dividing first keeps the rotation apart from the seed's own
/// draws (a quorum run is `seed % 7 == 5`: rotating on `seed % 7` would force the same family
/// on every one of them).
pub fn rotated(seed: u64) -> Family {
    FAMILIES[(seed / 7 % FAMILIES.len() as u64) as usize]
}

/// `--every-family`: the sweep once per family, one after another, each family's result on
/// stderr as it ends; the total (with each family's under `families`) printed last.
pub fn run_every_family(args: &SimulateArgs) -> Result<bool, String> {
    let began = Instant::now();
    let mut total = ShardLine::default();
    let mut failed = std::collections::BTreeSet::new();
    for family in FAMILIES {
        let mut forced = args.clone();
        forced.every_family = false;
        family.force(&mut forced);
        eprintln!("==> {}", family.flags());
        let line = sweep(&forced)?;
        eprintln!(
            "{}: {} seeds, {} failed {:?}, {} ms wall",
            family.flags(),
            line.seeds,
            line.failed.len(),
            line.failed,
            line.wall_ms
        );
        total.seeds += line.seeds;
        failed.extend(line.failed.iter().copied());
        total.steps += line.steps;
        total.invariant_checks += line.invariant_checks;
        total.virtual_ms += line.virtual_ms;
        if let Some(seed) = line.worst_double_seed {
            if total.worst_double_seed.is_none() || line.worst_double_ms > total.worst_double_ms {
                total.worst_double_ms = line.worst_double_ms;
                total.worst_double_seed = Some(seed);
            }
        }
        total.families.push(FamilyLine {
            family: family.flags().to_owned(),
            seeds: line.seeds,
            failed: line.failed,
            wall_ms: line.wall_ms,
        });
    }
    total.failed = failed.into_iter().collect();
    total.wall_ms = began.elapsed().as_millis() as u64;
    super::print_sweep(args, &total)?;
    Ok(total.failed.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SimulateArgs,
    }

    fn parse(flags: &str) -> SimulateArgs {
        let argv = std::iter::once("simulate").chain(flags.split_whitespace());
        Cli::try_parse_from(argv)
            .unwrap_or_else(|e| panic!("{flags}: {e}"))
            .args
    }

    #[test]
    fn forcing_a_family_sets_what_its_flags_set() {
        for family in FAMILIES {
            let mut forced = parse("");
            family.force(&mut forced);
            let parsed = parse(family.flags());
            assert_eq!(
                format!("{:?}", super::super::options(&forced, false)),
                format!("{:?}", super::super::options(&parsed, false)),
                "{family:?}"
            );
            // A replay of a forced seed names every forced flag.
            assert!(
                super::super::replay_as_run(7, &forced).ends_with(family.flags()),
                "{family:?}: {}",
                super::super::replay_as_run(7, &forced)
            );
        }
    }

    #[test]
    fn rotation_forces_every_family_within_fifty_seeds() {
        let seen: std::collections::BTreeSet<usize> = (1..50)
            .map(|s| FAMILIES.iter().position(|f| *f == rotated(s)).unwrap_or(99))
            .collect();
        assert_eq!(seen, (0..FAMILIES.len()).collect());
        // And not in step with the quorum runs' draw (`seed % 7 == 5`).
        let on_quorum_runs: std::collections::BTreeSet<_> = (0..100)
            .filter(|s| s % 7 == 5)
            .map(|s| format!("{:?}", rotated(s)))
            .collect();
        assert_eq!(on_quorum_runs.len(), FAMILIES.len());
    }

    #[test]
    fn forced_flags_conflict_with_rotation() {
        let argv = ["simulate", "--rotate-forced", "--migration", "hot"];
        assert!(Cli::try_parse_from(argv).is_err());
        let argv = ["simulate", "--every-family", "--sync", "pubsub"];
        assert!(Cli::try_parse_from(argv).is_err());
    }
}
