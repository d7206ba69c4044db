//! `process-hub bench recovery --nodes 3 --children N --json`: durable children on a cluster of
//! real node processes, a whole-cluster SIGKILL, and the recovery.
//!
//! 1. `--nodes` nodes with `--auto-recovery` (grace `--reconcile-grace-ms`, default 2,000 ms).
//!    Warm-up (`--warmup`, default N): N plain children started and stopped through node 1,
//!    so the measured declare runs in node processes that have hosted children before, as a
//!    running cluster's have (a fresh process pays the first touch of every page, which on a
//!    virtual machine can outweigh the hub's own work and varies from run to run).
//! 2. N `counter` children started with `"durable": true` through node 1's admin API (node 1
//!    has the lowest name, so it is the declared list's leader), in awaited requests of
//!    `--batch`: `declare_per_s` = N / the time of those requests.
//! 3. S of them (`--stop`, default 10 % of N, every tenth id) stopped with `DELETE`, which
//!    undeclares them (`stop_per_s`, 8 concurrent callers); the bench waits until every node's
//!    registry and declared list agree. A stopped child some registry lists in that wait as a
//!    **new instance** (a pid not seen before the stops: started again) is counted in
//!    `stopped_seen_running_before_outage` (a later round stopped it again, or the wait would
//!    not end); one still listed as the instance that was stopped (a registry copy not yet
//!    updated) in `stopped_seen_listed_stale_before_outage`.
//! 4. Every node SIGKILLed, every node restarted on its data directory; `recovery_ms` is
//!    measured from `first restarted process spawned + reconcile_grace_ms` (no later than the
//!    end of any node's grace, see [`crate::harness::outage`]) until every node's registry copy
//!    lists each of the N − S declared children on exactly one node. After every node is
//!    `normal`, the bench watches two more reconcile intervals, then counts over every node's
//!    registry copy: `lost` (declared, not stopped, running nowhere), `resurrected` (stopped,
//!    running somewhere), `duplicates` (running on more than one node).
//! 5. The in-run baseline: a fresh cluster of the same shape whose declared store commits with
//!    **one fsync per mutation** (`--declared-fsync-per-mutation`, i.e.
//!    `DeclaredCommit::PerMutation` / `CommitMode::PerOperation`), the same awaited durable
//!    starts in the same batches, after the same kind of warm-up (as many children as it
//!    declares): `baseline_declare_per_s`. At one fsync per child a full N takes minutes, so
//!    it declares `baseline_children` (default min(N, 2,000)); both rates are
//!    per second, so `declare_ratio` = `declare_per_s / baseline_declare_per_s` compares like
//!    with like. `disk_fsync_per_s` (write + fsync of a small file in the nodes' work
//!    directory, measured in the same run) says what pace the disk allowed the baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;

use crate::cli::node_settings::BackendChoice;
use crate::harness::outage::{counter_specs, start_in_batches, stop_concurrently};
use crate::harness::{
    wait_for, whole_cluster_outage, AdminClient, Census, ClusterOptions, LocalCluster,
    OutageSettings,
};

/// Flags of `bench recovery`.
#[derive(Args, Debug)]
pub struct RecoveryBenchArgs {
    /// Node processes.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Durable children declared.
    #[arg(long, default_value_t = 10_000)]
    pub children: usize,
    /// Children stopped (undeclared) before the outage; default 10 % of --children.
    #[arg(long)]
    pub stop: Option<usize>,
    /// Children per admin request.
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// The nodes' `--reconcile-grace-ms`.
    #[arg(long, default_value_t = 2_000)]
    pub reconcile_grace_ms: u64,
    /// The nodes' `--reconcile-interval-ms`.
    #[arg(long, default_value_t = 1_000)]
    pub reconcile_interval_ms: u64,
    /// Children of the one-fsync-per-mutation baseline; default min(--children, 2000).
    #[arg(long)]
    pub baseline_children: Option<usize>,
    /// Children started (plain, not durable) and stopped on each cluster just before its
    /// measured declare; default: as many as that cluster then declares; 0 for none. A node
    /// process that has never hosted children pays the first touch of every page its children
    /// use, which on a virtual machine can cost more than the hub's own work (2.6-11 us per
    /// 4 KiB page measured here); a running node reuses freed memory. Both the measured cluster
    /// and the baseline warm up alike.
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Skip the baseline (its fields are then null).
    #[arg(long)]
    pub no_baseline: bool,
    /// The nodes' registry backend.
    #[arg(long, value_enum, default_value = "memory")]
    pub backend: BackendChoice,
    /// Keep the nodes' data and logs here instead of a temporary directory.
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Print the result as JSON (the only format; kept for the documented command line).
    #[arg(long)]
    pub json: bool,
}

/// Generous: 10,000 children on two shared cores.
const DEADLINE: Duration = Duration::from_secs(180);
/// Concurrent `DELETE` callers.
const STOP_THREADS: usize = 8;

fn progress(msg: &str) {
    eprintln!("[bench recovery] {msg}");
}

fn options(args: &RecoveryBenchArgs, per_mutation: bool) -> ClusterOptions {
    let mut extra_args = vec![
        "--auto-recovery".to_owned(),
        "--reconcile-grace-ms".into(),
        args.reconcile_grace_ms.to_string(),
        "--reconcile-interval-ms".into(),
        args.reconcile_interval_ms.to_string(),
    ];
    if per_mutation {
        extra_args.push("--declared-fsync-per-mutation".into());
    }
    ClusterOptions {
        hub: "bench-recovery".into(),
        backend: args.backend,
        extra_args,
        log_filter: "warn".into(),
        ..ClusterOptions::default()
    }
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:06}")).collect()
}

/// A formed cluster whose nodes all finished their first round (`normal`).
fn ready_cluster(
    binary: &Path,
    args: &RecoveryBenchArgs,
    per_mutation: bool,
    workdir: Option<PathBuf>,
) -> Result<LocalCluster, String> {
    let mut cluster =
        LocalCluster::start(binary, args.nodes, &options(args, per_mutation), workdir)
            .map_err(|e| e.to_string())?;
    cluster.wait_formed(DEADLINE).map_err(|e| e.to_string())?;
    let all = cluster.live_clients();
    wait_for("every node to be normal", DEADLINE, || {
        all.iter()
            .all(|c| c.health().is_ok_and(|h| h.recovery_state == "normal"))
            .then_some(())
    })
    .map_err(|e| e.to_string())?;
    Ok(cluster)
}

/// Declares `n` durable children through node 1; returns (children per second, elapsed).
fn declare(
    cluster: &LocalCluster,
    prefix: &str,
    n: usize,
    batch: usize,
) -> Result<(f64, Duration), String> {
    let specs = counter_specs(&ids(prefix, n), true);
    let (elapsed, errors) = start_in_batches(
        &cluster.nodes[0].client(),
        &specs,
        batch,
        crate::demo::DEFAULT_CONCURRENCY,
        &progress,
    )
    .map_err(|e| e.to_string())?;
    if !errors.is_empty() {
        return Err(format!(
            "{} durable starts failed, first: {:?}",
            errors.len(),
            errors.first()
        ));
    }
    Ok((n as f64 / elapsed.as_secs_f64(), elapsed))
}

/// Starts `n` plain children through node 1 and stops them again, so that the measured declare
/// runs in node processes that have hosted children before (see `--warmup`).
fn warm_up(cluster: &LocalCluster, prefix: &str, n: usize, batch: usize) -> Result<(), String> {
    if n == 0 {
        return Ok(());
    }
    progress(&format!("warm-up: {n} plain children started and stopped"));
    let client = cluster.nodes[0].client();
    let warm = ids(prefix, n);
    let (_, errors) = start_in_batches(
        &client,
        &counter_specs(&warm, false),
        batch,
        crate::demo::DEFAULT_CONCURRENCY,
        &|_| {},
    )
    .map_err(|e| e.to_string())?;
    if let Some(first) = errors.first() {
        return Err(format!(
            "{} warm-up starts failed, first: {first:?}",
            errors.len()
        ));
    }
    let failures = stop_concurrently(&client, &warm, STOP_THREADS);
    if let Some(first) = failures.first() {
        return Err(format!(
            "{} warm-up stops failed, first: {first:?}",
            failures.len()
        ));
    }
    Ok(())
}

/// Plain write + fsync rounds per second of a small file in `dir`: the disk's own pace, which
/// bounds the one-fsync-per-mutation baseline (and varies with what else uses the disk).
fn disk_fsync_per_s(dir: &Path) -> Result<f64, String> {
    use std::io::Write;
    const ROUNDS: u32 = 200;
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
    let started = Instant::now();
    for _ in 0..ROUNDS {
        file.write_all(&[0u8; 128]).map_err(|e| e.to_string())?;
        file.sync_data().map_err(|e| e.to_string())?;
    }
    let rate = f64::from(ROUNDS) / started.elapsed().as_secs_f64();
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(rate)
}

/// Every instance (node, pid) of every child, over every node's registry copy.
type Instances = BTreeMap<String, BTreeSet<(String, u64)>>;

fn instances(all: &[(String, AdminClient)]) -> Option<Instances> {
    let mut out: Instances = BTreeMap::new();
    for (_, client) in all {
        for child in client.children().ok()? {
            let set = out.entry(child.id).or_default();
            set.extend(child.nodes.into_iter().map(|n| (n.node, n.pid)));
        }
    }
    Some(out)
}

/// Stopped children some registry still lists after every stop was acknowledged, split by
/// whether the listing is a new instance (a pid not seen before the stops: started again) or
/// the instance that was stopped (a registry copy not yet updated).
#[derive(Default)]
struct SeenAfterStop {
    restarted: BTreeSet<String>,
    stale: BTreeSet<String>,
}

/// Waits until every node's registry runs each of `declared` once and none of `stopped`, and
/// every node's declared list is exactly `declared`. Returns the stopped children that some
/// registry listed on a host meanwhile, after their stop was acknowledged (a later round may
/// have stopped them again; the final census after the outage is separate).
fn wait_settled(
    cluster: &LocalCluster,
    declared: &BTreeSet<String>,
    stopped: &BTreeSet<String>,
    before: &Instances,
) -> Result<SeenAfterStop, String> {
    let all = cluster.named_clients();
    let mut seen = SeenAfterStop::default();
    wait_for(
        "every registry and declared list to agree",
        DEADLINE,
        || {
            let census = Census::take(&all).ok()?;
            let running_again = census.resurrected(stopped);
            if !running_again.is_empty() {
                let now = instances(&all)?;
                for id in &running_again {
                    let old = before.get(id);
                    let new = now
                        .get(id)
                        .is_some_and(|set| set.iter().any(|i| !old.is_some_and(|o| o.contains(i))));
                    if new {
                        seen.restarted.insert(id.clone());
                    } else {
                        seen.stale.insert(id.clone());
                    }
                }
            }
            let lists_agree = all.iter().all(|(_, c)| {
                c.declared().is_ok_and(|l| {
                    l.children.len() == declared.len()
                        && l.children.iter().all(|c| declared.contains(&c.id))
                })
            });
            (census.all_run_once(declared) && running_again.is_empty() && lists_agree).then_some(())
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(seen)
}

/// Runs the benchmark and prints its JSON line.
pub fn run(args: RecoveryBenchArgs) -> Result<(), String> {
    if args.nodes == 0 || args.children == 0 || args.batch == 0 {
        return Err("--nodes, --children and --batch must be positive".into());
    }
    let stop = args.stop.unwrap_or(args.children / 10);
    if stop >= args.children {
        return Err("--stop must be below --children".into());
    }
    let binary = std::env::current_exe().map_err(|e| e.to_string())?;
    progress(&format!(
        "{} nodes, {} durable children, {stop} stopped before the outage, grace {} ms",
        args.nodes, args.children, args.reconcile_grace_ms
    ));
    let mut cluster = ready_cluster(&binary, &args, false, args.workdir.clone())?;
    let warmup = args.warmup.unwrap_or(args.children);
    warm_up(&cluster, "warm", warmup, args.batch)?;
    progress("declaring (group commit)");
    let (declare_per_s, declare_elapsed) = declare(&cluster, "child", args.children, args.batch)?;
    progress(&format!("  {declare_per_s:.0} durable starts/s"));

    let every = ids("child", args.children);
    // Every tenth id (or as evenly spread as --stop asks), so every node hosts some.
    let stride = (args.children / stop.max(1)).max(1);
    let stopped: BTreeSet<String> = every.iter().step_by(stride).take(stop).cloned().collect();
    let declared: BTreeSet<String> = every
        .iter()
        .filter(|id| !stopped.contains(*id))
        .cloned()
        .collect();
    progress(&format!("stopping {} children (DELETE)", stopped.len()));
    let stop_list: Vec<String> = stopped.iter().cloned().collect();
    let before_stops = instances(&cluster.named_clients()).ok_or("cannot read the registries")?;
    let stop_started = Instant::now();
    let failures = stop_concurrently(&cluster.nodes[0].client(), &stop_list, STOP_THREADS);
    let stop_elapsed = stop_started.elapsed();
    progress(&format!(
        "  {:.0} stops/s ({STOP_THREADS} concurrent callers)",
        stop_list.len() as f64 / stop_elapsed.as_secs_f64()
    ));
    // A 404 ("no child with that id") after the list removal is reported, not fatal: the
    // wait below checks that the child is undeclared everywhere and runs nowhere.
    let (not_found, failed): (Vec<_>, Vec<_>) =
        failures.into_iter().partition(|f| f.status == Some(404));
    if let Some(first) = failed.first() {
        return Err(format!("{} stops failed, first: {first:?}", failed.len()));
    }
    if !not_found.is_empty() {
        progress(&format!(
            "  {} stops answered 404 (no child with that id): {:?}",
            not_found.len(),
            not_found.iter().map(|f| &f.id).take(20).collect::<Vec<_>>()
        ));
    }
    let seen = wait_settled(&cluster, &declared, &stopped, &before_stops)?;
    let seen_running = &seen.restarted;
    if !seen.stale.is_empty() {
        progress(&format!(
            "  {} stopped children were still listed (same instance) after every stop was \
             acknowledged",
            seen.stale.len()
        ));
    }
    if !seen_running.is_empty() {
        progress(&format!(
            "  {} stopped children were listed running again before the outage (healed \
             before it): {:?}",
            seen_running.len(),
            seen_running.iter().take(20).collect::<Vec<_>>()
        ));
    }

    let outage = whole_cluster_outage(
        &mut cluster,
        &declared,
        &stopped,
        &OutageSettings {
            reconcile_grace: Duration::from_millis(args.reconcile_grace_ms),
            deadline: DEADLINE,
            settle: Duration::from_millis(2 * args.reconcile_interval_ms),
        },
        &progress,
    )
    .map_err(|e| e.to_string())?;
    progress(&format!(
        "recovery {:?} ms after the grace; lost {}, resurrected {}, duplicates {}",
        outage.recovery_ms, outage.lost, outage.resurrected, outage.duplicates
    ));
    let workdir = cluster.workdir().display().to_string();
    let fsync_per_s = disk_fsync_per_s(cluster.workdir())?;
    cluster.shutdown(Duration::from_secs(10));
    drop(cluster);

    let baseline_children = args.baseline_children.unwrap_or(args.children.min(2_000));
    let baseline_warmup = args.warmup.unwrap_or(baseline_children);
    let baseline = if args.no_baseline || baseline_children == 0 {
        None
    } else {
        progress(&format!(
            "baseline: {baseline_children} durable starts, one fsync per mutation"
        ));
        let mut base = ready_cluster(&binary, &args, true, None)?;
        let rate = warm_up(&base, "base-warm", baseline_warmup, args.batch)
            .and_then(|()| declare(&base, "base", baseline_children, args.batch));
        base.shutdown(Duration::from_secs(10));
        let (rate, _) = rate?;
        progress(&format!("  {rate:.0} durable starts/s"));
        Some(rate)
    };
    let out = json!({
        "bench": "recovery",
        "nodes": args.nodes,
        "children": args.children,
        "stopped": stopped.len(),
        "batch": args.batch,
        "backend": format!("{:?}", args.backend).to_lowercase(),
        "declare_per_s": declare_per_s,
        "declare_ms": declare_elapsed.as_millis() as u64,
        "warmup_children": warmup,
        "baseline_children": baseline.map(|_| baseline_children),
        "baseline_warmup_children": baseline.map(|_| baseline_warmup),
        "baseline_declare_per_s": baseline,
        "baseline_commit": "one fsync per mutation (declared store in CommitMode::PerOperation)",
        "stop_per_s": stop_list.len() as f64 / stop_elapsed.as_secs_f64(),
        "stop_not_found": not_found.len(),
        "stop_not_found_ids": not_found.iter().map(|f| &f.id).take(20).collect::<Vec<_>>(),
        "stopped_seen_listed_stale_before_outage": seen.stale.len(),
        "stopped_seen_running_before_outage": seen_running.len(),
        "stopped_seen_running_before_outage_ids":
            seen_running.iter().take(20).collect::<Vec<_>>(),
        "declare_ratio": baseline.filter(|b| *b > 0.0).map(|b| declare_per_s / b),
        "disk_fsync_per_s": fsync_per_s,
        "reconcile_grace_ms": outage.reconcile_grace_ms,
        "reconcile_interval_ms": args.reconcile_interval_ms,
        "recovery_ms": outage.recovery_ms,
        "recovery_ms_from": "first restarted node process spawned + reconcile_grace_ms \
            (no later than the end of any node's grace) until every node's registry lists \
            every declared child on exactly one node",
        "restart_to_recovered_ms": outage.restart_to_recovered_ms,
        "restart_to_all_normal_ms": outage.restart_to_all_normal_ms,
        "lost": outage.lost,
        "resurrected": outage.resurrected,
        "duplicates": outage.duplicates,
        "lost_ids": outage.lost_ids,
        "resurrected_ids": outage.resurrected_ids,
        "duplicate_ids": outage.duplicate_ids,
        "declared_lists_agree": outage.declared_lists_agree,
        "declared_versions": outage.declared_versions,
        "declared_counts": outage.declared_counts,
        "running_per_node": outage.running_per_node,
        "workdir": args.workdir.as_ref().map(|_| workdir),
    });
    println!("{out}");
    Ok(())
}
