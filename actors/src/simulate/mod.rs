//! `process-hub simulate`: runs the deterministic simulator (`process_hub::sim`) over many seeds,
//! or one seed with its trace.
//!
//! A sweep splits its seeds over `--jobs` processes of this binary (ractor's pid counter is
//! process-wide, so seeds within one process run one after another), prints progress on stderr
//! and, last on stdout, one JSON line:
//! `{"seeds", "failed": [seed, ...], "steps", "invariant_checks", "virtual_ms", "wall_ms"}`.
//! Each failing seed is reported on stderr with the command that replays it. The exit status is
//! 1 when a seed failed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;
use process_hub::config::{Distribution, Migration, ReplicationModel, MAX_REPLICATION_FACTOR};
use process_hub::sim::{run_seed, InjectedBug, SeedReport, SimOptions, SweepReport};
use serde::{Deserialize, Serialize};

mod families;

pub use families::{Family, FAMILIES};

/// Flags of `process-hub simulate`.
#[derive(Args, Debug, Clone)]
pub struct SimulateArgs {
    /// How many seeds to run (a sweep).
    #[arg(long, default_value_t = 100, conflicts_with = "seed")]
    pub seeds: u64,
    /// The first seed of the sweep.
    #[arg(long, default_value_t = 1)]
    pub from: u64,
    /// Run this one seed instead of a sweep.
    #[arg(long)]
    pub seed: Option<u64>,
    /// With `--seed`: print the run's trace, then `trace_hash=<hex>`.
    #[arg(long, requires = "seed")]
    pub trace: bool,
    /// Print the sweep's result as one JSON line (always the last line of a sweep).
    #[arg(long)]
    pub json: bool,
    /// Steps of workload and faults per seed.
    #[arg(long, default_value_t = 60)]
    pub steps: usize,
    /// Processes the sweep runs in (default: the machine's cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Put this bug into every hub (to see the invariant that catches it); repeatable.
    #[arg(long = "inject-bug", value_name = "BUG")]
    pub bugs: Vec<InjectedBug>,
    /// How children move: `hot` or `cold` for every seed (default: one seed in three hot, as
    /// the seed says), to replay a seed the other way.
    #[arg(long, value_name = "hot|cold")]
    pub migration: Option<Migration>,
    /// How children are placed: `consistent-hash` or `load-balanced` for every seed (default:
    /// one run in five load-balanced, as the seed says), to replay a seed the other way.
    #[arg(long, value_name = "consistent-hash|load-balanced", value_parser = parse_sim_distribution)]
    pub distribution: Option<Distribution>,
    /// What a side of a split without quorum does, for every seed: `divergence` or a quorum
    /// strategy as `process-hub node --partition-tolerance` takes it (default: one run in
    /// seven `majority-quorum`, as the seed says), to replay a seed the other way.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_sim_partition_tolerance)]
    pub partition_tolerance: Option<String>,
    /// How registry changes travel, for every seed: `pubsub` or `gossip[:MS[:N[:all]]]` as
    /// `process-hub node --sync` takes it (default: one run in eight gossips, as the seed
    /// says), to replay a seed the other way.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_sim_sync)]
    pub sync: Option<String>,
    /// Nodes running each child, for every seed (default: one run in four on 2 nodes, as the
    /// seed says), to replay a seed the other way.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=MAX_REPLICATION_FACTOR as u64))]
    pub replication_factor: Option<u64>,
    /// Whether every replica is active, for every seed: `active-active` or `active-passive`
    /// (default: half the replicated runs active-active, as the seed says). Tells runs apart
    /// only where a child has more than one replica.
    #[arg(long, value_name = "active-active|active-passive", value_parser = parse_sim_replication_model)]
    pub replication_model: Option<ReplicationModel>,
    /// Nodes every seed's cluster boots with (default: 3 or 4, as the seed draws them), to
    /// run large clusters through the same workload and faults; the run may grow by one
    /// join, and its quorum runs keep a majority of that size.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_SIM_NODES))]
    pub nodes: Option<u64>,
    /// Force one strategy family per seed, rotating over the families (`FAMILIES`, seed `s`
    /// forces family `(s / 7) % 8`), so a sweep of any size runs every family forced.
    #[arg(long, conflicts_with_all = ["migration", "distribution", "partition_tolerance", "sync", "replication_factor", "replication_model", "partial_partitions", "every_family"])]
    pub rotate_forced: bool,
    /// Every seed draws partial faults (partial cuts, one-way drops, lossy and flapping links;
    /// default: one run in three, as the seed says).
    #[arg(long)]
    pub partial_partitions: bool,
    /// No seed draws partial faults (to judge a run by the invariants of the other faults
    /// alone, as the tests of injected bugs do).
    #[arg(long, conflicts_with_all = ["partial_partitions", "rotate_forced", "every_family"])]
    pub no_partial_partitions: bool,
    /// Each job of the sweep stops at its first failing seed (to show that a bug is caught
    /// without running the seeds after it); the JSON's `seeds` counts the seeds that ran.
    #[arg(long)]
    pub fail_fast: bool,
    /// Run the sweep once per strategy family, each forced on every seed (`FAMILIES`), one
    /// after another; the JSON line adds each family's result under `families`.
    #[arg(long, conflicts_with_all = ["seed", "migration", "distribution", "partition_tolerance", "sync", "replication_factor", "replication_model", "partial_partitions"])]
    pub every_family: bool,
    /// Run only the seeds `from + k` with `k % N == I` (`I/N`); what each job of a sweep runs.
    #[arg(long, hide = true)]
    pub shard: Option<String>,
}

/// The most nodes `--nodes` boots: every node is an in-process hub of the one simulated
/// runtime, and a run's cost grows with the square of its nodes (each pair heartbeats).
pub const MAX_SIM_NODES: u64 = 100;

/// One shard's result, as a job prints it for the sweep that started it.
#[derive(Serialize, Deserialize, Default)]
struct ShardLine {
    seeds: u64,
    failed: Vec<u64>,
    steps: u64,
    invariant_checks: u64,
    virtual_ms: u64,
    wall_ms: u64,
    /// The longest a child ran on more nodes than its replicas within connected nodes
    /// (`double_run_bounded`), over every seed, in virtual milliseconds.
    #[serde(default)]
    worst_double_ms: u64,
    /// The seed that ran it (absent while no child ran twice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    worst_double_seed: Option<u64>,
    /// With `--every-family`: each family's sweep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    families: Vec<FamilyLine>,
}

/// One family's sweep of an `--every-family` run.
#[derive(Serialize, Deserialize, Clone)]
struct FamilyLine {
    /// The flags that forced it, as a replay takes them.
    family: String,
    seeds: u64,
    failed: Vec<u64>,
    wall_ms: u64,
}

impl From<&SweepReport> for ShardLine {
    fn from(r: &SweepReport) -> Self {
        Self {
            seeds: r.seeds,
            failed: r.failed.clone(),
            steps: r.steps,
            invariant_checks: r.invariant_checks,
            virtual_ms: r.virtual_ms,
            wall_ms: r.wall_ms,
            worst_double_ms: r.worst_double_ms,
            worst_double_seed: r.worst_double_seed,
            families: Vec::new(),
        }
    }
}

impl ShardLine {
    fn report(&self) -> SweepReport {
        SweepReport {
            seeds: self.seeds,
            failed: self.failed.clone(),
            steps: self.steps,
            invariant_checks: self.invariant_checks,
            virtual_ms: self.virtual_ms,
            wall_ms: self.wall_ms,
            worst_double_ms: self.worst_double_ms,
            worst_double_seed: self.worst_double_seed,
        }
    }
}

/// The command that replays `seed`.
pub fn replay_command(seed: u64) -> String {
    format!("bash scripts/simulate.sh --seed {seed} --trace")
}

/// The command that replays `seed` as the sweep ran it (with its `--migration` and
/// `--distribution`, if forced).
fn replay_as_run(seed: u64, args: &SimulateArgs) -> String {
    let mut command = replay_command(seed);
    if let Some(m) = args.migration {
        command.push_str(&format!(" --migration {}", migration_name(m)));
    }
    if let Some(d) = args.distribution {
        command.push_str(&format!(" --distribution {}", distribution_name(d)));
    }
    if let Some(p) = &args.partition_tolerance {
        command.push_str(&format!(" --partition-tolerance {p}"));
    }
    if let Some(s) = &args.sync {
        command.push_str(&format!(" --sync {s}"));
    }
    if let Some(k) = args.replication_factor {
        command.push_str(&format!(" --replication-factor {k}"));
    }
    if let Some(m) = args.replication_model {
        command.push_str(&format!(
            " --replication-model {}",
            replication_model_name(m)
        ));
    }
    if let Some(n) = args.nodes {
        command.push_str(&format!(" --nodes {n}"));
    }
    if args.partial_partitions {
        command.push_str(" --partial-partitions");
    }
    if args.no_partial_partitions {
        command.push_str(" --no-partial-partitions");
    }
    command
}

/// `--replication-model`: `active-active` or `active-passive` (the underscored names too).
fn parse_sim_replication_model(value: &str) -> Result<ReplicationModel, String> {
    value.parse()
}

fn replication_model_name(model: ReplicationModel) -> &'static str {
    match model {
        ReplicationModel::ActiveActive => "active-active",
        ReplicationModel::ActivePassive => "active-passive",
    }
}

/// `--sync`: checked as the node's flag, kept as written (as `--partition-tolerance`).
fn parse_sim_sync(value: &str) -> Result<String, String> {
    crate::cli::sync::parse_sync(value)?;
    Ok(value.to_owned())
}

/// `--partition-tolerance`: checked as the node's flag, kept as written (it is passed on to
/// the sweep's jobs and into replay commands).
fn parse_sim_partition_tolerance(value: &str) -> Result<String, String> {
    crate::cli::partition_tolerance::parse_partition_tolerance(value)?;
    Ok(value.to_owned())
}

fn distribution_name(distribution: Distribution) -> &'static str {
    match distribution {
        Distribution::LoadBalanced => "load-balanced",
        _ => "consistent-hash",
    }
}

fn parse_sim_distribution(value: &str) -> Result<Distribution, String> {
    match crate::cli::node_settings::parse_distribution(value)? {
        Distribution::Guided => Err("the simulator runs consistent-hash or load-balanced".into()),
        other => Ok(other),
    }
}

fn migration_name(migration: Migration) -> &'static str {
    match migration {
        Migration::Hot => "hot",
        Migration::Cold => "cold",
    }
}

fn options(args: &SimulateArgs, keep_trace: bool) -> SimOptions {
    SimOptions {
        steps: args.steps,
        keep_trace,
        bugs: args.bugs.iter().copied().collect(),
        migration: args.migration,
        distribution: args.distribution,
        partition_tolerance: args.partition_tolerance.as_deref().map(|p| {
            crate::cli::partition_tolerance::parse_partition_tolerance(p)
                .expect("checked when parsed")
        }),
        sync: args
            .sync
            .as_deref()
            .map(|s| crate::cli::sync::parse_sync(s).expect("checked when parsed")),
        replicas: args.replication_factor.map(|k| k as usize),
        nodes: args.nodes.map(|n| n as usize),
        replication_model: args.replication_model,
        partial_faults: if args.partial_partitions {
            Some(true)
        } else if args.no_partial_partitions {
            Some(false)
        } else {
            None
        },
        ..SimOptions::default()
    }
}

fn describe_failure(report: &SeedReport, args: &SimulateArgs) -> Option<String> {
    let failure = report.failure.as_ref()?;
    Some(format!(
        "seed {} FAILED after step {} at {} ms: {} (replay: {})",
        report.seed,
        failure.step,
        failure.at_ms,
        failure.violation,
        replay_as_run(report.seed, args)
    ))
}

/// Runs the command; `Ok(true)` when every seed passed.
pub fn run(args: &SimulateArgs) -> Result<bool, String> {
    if let Some(seed) = args.seed {
        return Ok(run_one(args, seed));
    }
    if let Some(shard) = &args.shard {
        return run_shard(args, shard);
    }
    if args.every_family {
        return families::run_every_family(args);
    }
    run_sweep(args)
}

/// The flags seed `seed` runs with: `args`, with its family forced under `--rotate-forced`.
fn args_for_seed(args: &SimulateArgs, seed: u64) -> std::borrow::Cow<'_, SimulateArgs> {
    if args.rotate_forced {
        let mut forced = args.clone();
        forced.rotate_forced = false;
        families::rotated(seed).force(&mut forced);
        std::borrow::Cow::Owned(forced)
    } else {
        std::borrow::Cow::Borrowed(args)
    }
}

fn run_one(args: &SimulateArgs, seed: u64) -> bool {
    let args = &*args_for_seed(args, seed);
    let report = run_seed(seed, &options(args, args.trace));
    let mut out = std::io::stdout().lock();
    for line in &report.trace {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "seed {seed}: migration {}{}, {} steps, {} invariant checks, {} ms virtual, {} ms wall, {} requests, {} superseded, {} increments acknowledged, {} states imported, longest double run {} ms",
        migration_name(report.migration),
        if report.partial_faults {
            ", partial faults"
        } else {
            ""
        },
        report.steps,
        report.invariant_checks,
        report.virtual_ms,
        report.wall_ms,
        report.requests,
        report.superseded,
        report.acknowledged_increments,
        report.imports,
        report.worst_double_ms
    );
    if let Some(failure) = describe_failure(&report, args) {
        let _ = writeln!(out, "{failure}");
    }
    let _ = writeln!(out, "trace_hash={:016x}", report.trace_hash);
    report.failure.is_none()
}

fn parse_shard(shard: &str) -> Result<(u64, u64), String> {
    let (i, n) = shard
        .split_once('/')
        .ok_or_else(|| format!("--shard {shard:?}: expected I/N"))?;
    let i: u64 = i.parse().map_err(|_| format!("--shard {shard:?}: bad I"))?;
    let n: u64 = n.parse().map_err(|_| format!("--shard {shard:?}: bad N"))?;
    if n == 0 || i >= n {
        return Err(format!("--shard {shard:?}: need 0 <= I < N"));
    }
    Ok((i, n))
}

/// One job of a sweep: its seeds one after another; a progress line per seed on stderr; its
/// totals as the last line of stdout.
fn run_shard(args: &SimulateArgs, shard: &str) -> Result<bool, String> {
    let (index, count) = parse_shard(shard)?;
    let mut sweep = SweepReport::default();
    for k in (index..args.seeds).step_by(count as usize) {
        let seed = args.from + k;
        let args = &*args_for_seed(args, seed);
        let report = run_seed(seed, &options(args, false));
        sweep.add(&report);
        match describe_failure(&report, args) {
            Some(failure) => {
                eprintln!("{failure}");
                if args.fail_fast {
                    break;
                }
            }
            None => eprintln!("seed {} ok ({} ms)", report.seed, report.wall_ms),
        }
    }
    let line = serde_json::to_string(&ShardLine::from(&sweep)).map_err(|e| e.to_string())?;
    println!("{line}");
    Ok(sweep.failed.is_empty())
}

fn run_sweep(args: &SimulateArgs) -> Result<bool, String> {
    let line = sweep(args)?;
    print_sweep(args, &line)?;
    Ok(line.failed.is_empty())
}

/// Prints a sweep's result: its JSON line with `--json`, else a summary line.
fn print_sweep(args: &SimulateArgs, line: &ShardLine) -> Result<(), String> {
    if args.json {
        println!(
            "{}",
            serde_json::to_string(line).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "{} seeds, {} failed {:?}, {} steps, {} invariant checks, {} s virtual, {} ms wall",
            line.seeds,
            line.failed.len(),
            line.failed,
            line.steps,
            line.invariant_checks,
            line.virtual_ms / 1000,
            line.wall_ms
        );
        if let Some(seed) = line.worst_double_seed {
            println!(
                "longest double run within connected nodes: {} ms (seed {seed})",
                line.worst_double_ms
            );
        }
        for family in &line.families {
            println!(
                "  {}: {} seeds, {} failed {:?}, {} ms wall",
                family.family,
                family.seeds,
                family.failed.len(),
                family.failed,
                family.wall_ms
            );
        }
    }
    Ok(())
}

/// Runs a sweep over `--jobs` processes of this binary and sums their results.
fn sweep(args: &SimulateArgs) -> Result<ShardLine, String> {
    let began = Instant::now();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 64)
        .min(args.seeds.max(1) as usize);
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    eprintln!(
        "simulating seeds {}..{} in {jobs} processes",
        args.from,
        args.from + args.seeds
    );
    let mut children = Vec::new();
    for i in 0..jobs {
        let mut command = Command::new(&exe);
        command.args([
            "simulate",
            "--seeds",
            &args.seeds.to_string(),
            "--from",
            &args.from.to_string(),
            "--steps",
            &args.steps.to_string(),
            "--shard",
            &format!("{i}/{jobs}"),
        ]);
        for bug in &args.bugs {
            command.args(["--inject-bug", bug.name()]);
        }
        if let Some(migration) = args.migration {
            command.args(["--migration", migration_name(migration)]);
        }
        if let Some(distribution) = args.distribution {
            command.args(["--distribution", distribution_name(distribution)]);
        }
        if let Some(strategy) = &args.partition_tolerance {
            command.args(["--partition-tolerance", strategy]);
        }
        if let Some(strategy) = &args.sync {
            command.args(["--sync", strategy]);
        }
        if let Some(k) = args.replication_factor {
            command.args(["--replication-factor", &k.to_string()]);
        }
        if let Some(model) = args.replication_model {
            command.args(["--replication-model", replication_model_name(model)]);
        }
        if let Some(n) = args.nodes {
            command.args(["--nodes", &n.to_string()]);
        }
        if args.partial_partitions {
            command.arg("--partial-partitions");
        }
        if args.no_partial_partitions {
            command.arg("--no-partial-partitions");
        }
        if args.rotate_forced {
            command.arg("--rotate-forced");
        }
        if args.fail_fast {
            command.arg("--fail-fast");
        }
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start a simulation job: {e}"))?;
        children.push(child);
    }
    // Progress: every job's stderr lines, counted as they come.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut readers = Vec::new();
    for child in &mut children {
        if let Some(stderr) = child.stderr.take() {
            let tx = tx.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            }));
        }
    }
    drop(tx);
    let mut done = 0u64;
    let step = (args.seeds / 20).max(1);
    for line in rx {
        if line.starts_with("seed ") {
            done += 1;
            if line.contains("FAILED") {
                eprintln!("{line}");
            } else if done.is_multiple_of(step) || done == args.seeds {
                eprintln!(
                    "  {done}/{} seeds, {} s",
                    args.seeds,
                    began.elapsed().as_secs()
                );
            }
        } else {
            eprintln!("{line}");
        }
    }
    let mut total = SweepReport::default();
    for child in children {
        let output = child
            .wait_with_output()
            .map_err(|e| format!("a simulation job failed: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        let shard: ShardLine = serde_json::from_str(last).map_err(|e| {
            format!(
                "a simulation job ended without its result ({}): {e}",
                output.status
            )
        })?;
        total.merge(&shard.report());
    }
    for reader in readers {
        let _ = reader.join();
    }
    let mut line = ShardLine::from(&total);
    line.wall_ms = began.elapsed().as_millis() as u64;
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_the_seeds() {
        assert_eq!(parse_shard("1/4"), Ok((1, 4)));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("x").is_err());
        assert!(parse_shard("0/0").is_err());
    }
}
