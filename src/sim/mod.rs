//! The deterministic simulator: whole clusters of hubs on one thread, in virtual time, under
//! faults, checked against the hub's invariants after every step.
//!
//! A run takes a seed and nothing else. Everything it does comes from that seed:
//! - **one thread, virtual time**: the nodes' actors and tasks run on a single-threaded tokio
//!   runtime whose clock is paused and jumps to the next timer whenever every task waits, so a
//!   run of minutes of cluster time takes a fraction of a second and no interleaving depends on
//!   how fast the machine is;
//! - **one seeded generator**: the workload and the fault schedule draw from it; the router
//!   (boot tokens, frame drops and delays) draws from a generator seeded from it; the ring and
//!   the leader election are functions of the members;
//! - **fixed iteration orders**: the hub iterates ordered maps wherever the order reaches a
//!   send, and the registry is walked in id order.
//!
//! So one seed replays the same run, event for event: the trace's hash
//! ([`SeedReport::trace_hash`]) is the same every time.
//!
//! **The world** ([`cluster`]): 3 or 4 nodes to start with, up to 5, joined by the in-process
//! router; each node has a disk that outlives its crashes ([`crate::storage::SimulatedDisk`],
//! where the declared list lives) and a wall clock that can be skewed.
//!
//! **Workload and faults** ([`workload`]): plain and durable starts and stops through any node,
//! typed calls and casts and monitors from any node ([`messaging`]), children failing, nodes
//! crashing (memory gone, disk kept) and restarting (sometimes on a lost disk, while most nodes
//! are up), joining and leaving (alone or two at once), partitions of any split and heals, links
//! that drop, delay and reorder, bursts of dropped frames, slow disks, clock jumps. Requests run
//! as tasks while the faults strike.
//!
//! **Invariants** ([`invariants`]) after every step and, once every fault is healed and every
//! node is back, at quiescence. A failing seed reports the broken invariant and the command
//! that replays it.
//!
//! [`InjectedBug`]s put a known bug into every hub of a run, so each invariant can be shown to
//! catch its bug.

pub mod child;
pub mod cluster;
mod hostile;
pub mod invariants;
pub mod ledger;
pub mod messaging;
pub mod partial;
mod run;
pub mod split;
pub mod state;
pub mod trace;
pub mod workload;

pub use crate::hub::simulation::InjectedBug;
pub use partial::partial_faults_of;
pub use run::{
    distribution_of, migration_of, partition_tolerance_of, replicas_of, replication_model_of,
    run_seed, sync_of, Failure, SeedReport, SimOptions,
};

/// What a sweep of many seeds did.
#[derive(Clone, Debug, Default)]
pub struct SweepReport {
    /// Seeds run.
    pub seeds: u64,
    /// Seeds that broke an invariant.
    pub failed: Vec<u64>,
    /// Steps run, over all seeds.
    pub steps: u64,
    /// Invariant checks made, over all seeds.
    pub invariant_checks: u64,
    /// Virtual time simulated, over all seeds.
    pub virtual_ms: u64,
    /// Wall time the seeds took, summed.
    pub wall_ms: u64,
    /// The longest a child ran on more nodes than its replicas within connected nodes, over
    /// every seed (`double_run_bounded`), in virtual milliseconds.
    pub worst_double_ms: u64,
    /// The seed that ran it (`None` while no child ran twice).
    pub worst_double_seed: Option<u64>,
}

impl SweepReport {
    /// Adds one seed's report.
    pub fn add(&mut self, report: &SeedReport) {
        self.seeds += 1;
        if report.failure.is_some() {
            self.failed.push(report.seed);
        }
        self.steps += report.steps as u64;
        self.invariant_checks += report.invariant_checks;
        self.virtual_ms += report.virtual_ms;
        self.wall_ms += report.wall_ms;
        if !report.worst_double.is_empty() {
            self.note_double(report.worst_double_ms, report.seed);
        }
    }

    /// Keeps `ms` (run by `seed`) if it is the longest double run so far.
    pub fn note_double(&mut self, ms: u64, seed: u64) {
        if self.worst_double_seed.is_none() || ms > self.worst_double_ms {
            self.worst_double_ms = ms;
            self.worst_double_seed = Some(seed);
        }
    }

    /// Adds another sweep's counts (the shards of one sweep).
    pub fn merge(&mut self, other: &SweepReport) {
        self.seeds += other.seeds;
        self.failed.extend(other.failed.iter().copied());
        self.failed.sort_unstable();
        self.steps += other.steps;
        self.invariant_checks += other.invariant_checks;
        self.virtual_ms += other.virtual_ms;
        self.wall_ms += other.wall_ms;
        if let Some(seed) = other.worst_double_seed {
            self.note_double(other.worst_double_ms, seed);
        }
    }
}
