//! `process-hub bench cluster --nodes 3 --children N --json`.
//!
//! The hub's half is the demo's measurement ([`crate::demo::run`]): real `process-hub node`
//! processes on loopback, N `counter` children started through one node's admin API (awaited,
//! in batches), then one node killed with SIGKILL.
//!
//! - `start_per_s`: N / time of the awaited start requests;
//! - `converge_ms`: from the first start request until every node's registry lists all N;
//! - `failover_ms`: from the SIGKILL until the survivors' registries place all N on survivors
//!   (with `--replication-factor` 2 or more: until the passive replicas are the survivors'
//!   instances, no restart);
//! - `detect_ms`: from the SIGKILL until every survivor took the killed node out of its members
//!   (the failure detection time), and `failover_over_detect_ms` the difference: what the
//!   failover costs beyond detecting the failure (the goal with replicas: at most 50 ms);
//! - `failover_after_grace_ms`: `failover_ms - detect_ms - nodedown_grace_ms`, the re-placement
//!   once the survivors' grace ran out; beside it, as many fresh children as the killed node
//!   held started through the same node on the survivors: `refill_start_ms` (the awaited
//!   requests), `refill_converge_ms` (until every survivor lists them, timed as the failover
//!   is), and `failover_after_grace_over_refill` = `failover_after_grace_ms / refill_start_ms`
//!   (the goal: at most 1), and `failover_after_grace_over_refill_converge` =
//!   `failover_after_grace_ms / refill_converge_ms`, both sides timed until every survivor
//!   lists every child; `replaced_per_node` and `refill_per_node` split each of the two
//!   among the survivors (each starts its own share: the larger share bounds the time);
//! - `start_ratio`: `start_per_s / bare_start_per_s` (the goal: at least 0.5);
//! - `rss_bytes_per_child`: resident memory added by the N children, summed over the nodes.
//!
//! `--runs N` repeats the whole measurement and gives each ratio's median, min and max.
//!
//! The in-run baseline ([`crate::baseline::measure`]) spreads the same number of actors over the
//! same number of processes with plain ractor + ractor_cluster process groups:
//! `baseline_converge_ms` (until every process sees all N through pg) and
//! `baseline_rss_bytes_per_child`. Ratios are hub / baseline.
//!
//! The bare-actor baseline ([`crate::baseline::measure_bare`]) spawns the same number of the
//! hub's own `counter` actors over the same number of processes, with no hub and no cluster:
//! `actor_bytes_per_child` (resident memory per actor summed over the processes, measured as
//! `rss_bytes_per_child` is) and `hub_bytes_per_child` = `rss_bytes_per_child −
//! actor_bytes_per_child`, the hub's own cost per child summed over the nodes (registry rows on
//! every node, the host's bookkeeping). `bare_start_per_s` and `bare_stop_per_s` are its rates.

use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::demo::{self, DemoArgs};

/// Flags of `bench cluster`.
#[derive(Args, Debug)]
pub struct ClusterBenchArgs {
    /// Node processes (at least 2: one is killed).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Children started.
    #[arg(long, default_value_t = 10_000)]
    pub children: usize,
    /// Children per admin request.
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// Admin requests in flight at once (see `demo --concurrency`).
    #[arg(long, default_value_t = demo::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Nodes running each child (`--replication-factor` of the nodes). With 2 or more,
    /// `failover_ms` is the promotion of passive replicas, to be read against `detect_ms`.
    #[arg(long, default_value_t = 1)]
    pub replication_factor: usize,
    /// The nodes' migration strategy; when given, a node joins after the failover and the
    /// moves to it are timed: `handover_ms` (counters, hot under `hot`) beside `cold_swap_ms`
    /// (tickers, always cold), in the same join.
    #[arg(long)]
    pub migration: Option<process_hub::Migration>,
    /// The nodes' `--distribution` (`consistent-hash` or `load-balanced`).
    #[arg(long, value_parser = crate::cli::node_settings::parse_distribution)]
    pub distribution: Option<process_hub::Distribution>,
    /// The nodes keep what a burst freed (`process-hub node --no-memory-release`): the
    /// resident figures then include what the allocator holds after the burst.
    #[arg(long)]
    pub no_memory_release: bool,
    /// The nodes' newest wire version (`process-hub node --max-wire-version`): 2 measures the
    /// cluster as it was before compact frames.
    #[arg(long, hide = true)]
    pub max_wire_version: Option<u16>,
    /// Skip the plain-ractor and bare-actor baselines (their fields are then null).
    #[arg(long)]
    pub no_baseline: bool,
    /// `on` (the nodes record and serve metrics, and a dashboard's load scrapes them and reads
    /// their events every second), `off` (`--no-metrics`, no load), or `compare`: the hub's run
    /// both ways, and `telemetry_start_throughput_change` between them.
    #[arg(long, default_value = "on", value_parser = ["off", "on", "compare"])]
    pub telemetry: String,
    /// Whole runs (hub and baselines each time). With more than one, the JSON gives, for each
    /// ratio to its in-run baseline (`start_ratio`, `converge_ratio`,
    /// `failover_after_grace_over_refill`, `rss_ratio`), its median, min and max over the
    /// runs, and every run's own object in `results`.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// `one` (default): every start request through the first node's admin API. `all`: that
    /// run, then the hub's run again with the requests spread over every node's admin API (as
    /// callers behind a load balancer send them), reported beside it as `entry_all_start_per_s`,
    /// `entry_all_start_ratio`, `entry_all_converge_ms` and `entry_all_converge_ratio`; the
    /// figures without the prefix are always the one-entry run's.
    #[arg(long, value_enum, default_value_t = demo::Entry::One)]
    pub entry: demo::Entry,
    /// Print the result as JSON (the only format; kept for the documented command line).
    #[arg(long)]
    pub json: bool,
    /// The nodes' `--sync`: `pubsub` or `gossip[:INTERVAL_MS[:RECIPIENTS[:all]]]` (default:
    /// the node's, pubsub). The JSON's `wire` says what each registry change cost per node.
    #[arg(long, value_name = "STRATEGY", value_parser = parse_bench_sync)]
    pub sync: Option<String>,
    /// The nodes' `--heartbeat-ms` (default: the node's): many node processes on few cores
    /// answer heartbeats late, so a large cluster may need a slower detector.
    #[arg(long, value_name = "MS")]
    pub heartbeat_ms: Option<u64>,
    /// The nodes' `--failure-timeout-ms` (default: the node's), as `--heartbeat-ms`.
    #[arg(long, value_name = "MS")]
    pub failure_timeout_ms: Option<u64>,
}

/// `--sync`: checked as the node's flag, kept as written (it is passed on to the nodes).
fn parse_bench_sync(value: &str) -> Result<String, String> {
    crate::cli::sync::parse_sync(value)?;
    Ok(value.to_owned())
}

/// The node flags of `--sync`, `--heartbeat-ms` and `--failure-timeout-ms`.
fn node_args(args: &ClusterBenchArgs) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(sync) = &args.sync {
        out.extend(["--sync".to_owned(), sync.clone()]);
    }
    if let Some(ms) = args.heartbeat_ms {
        out.extend(["--heartbeat-ms".to_owned(), ms.to_string()]);
    }
    if let Some(ms) = args.failure_timeout_ms {
        out.extend(["--failure-timeout-ms".to_owned(), ms.to_string()]);
    }
    out
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// The children each survivor took over in the failover (its count after less its count
/// before), for the survivors only.
fn replaced_per_node(
    before: &std::collections::BTreeMap<String, usize>,
    after: &std::collections::BTreeMap<String, usize>,
) -> std::collections::BTreeMap<String, usize> {
    after
        .iter()
        .map(|(node, n)| {
            (
                node.clone(),
                n.saturating_sub(before.get(node).copied().unwrap_or(0)),
            )
        })
        .collect()
}

/// The ratios `--runs` summarizes: each figure of one run against its baseline in that run.
const RATIOS: [&str; 7] = [
    "start_ratio",
    "converge_ratio",
    "failover_after_grace_over_refill",
    "failover_after_grace_over_refill_converge",
    "rss_ratio",
    "entry_all_start_ratio",
    "entry_all_converge_ratio",
];

/// The median, least and greatest of `values`, `null` when no run gave the figure.
fn spread(mut values: Vec<f64>) -> serde_json::Value {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return serde_json::Value::Null;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    json!({ "median": median, "min": values[0], "max": values[n - 1], "runs": n })
}

/// Runs the benchmark (`--runs` times) and prints its JSON line.
pub fn run(args: ClusterBenchArgs) -> Result<(), String> {
    if args.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if args.runs == 1 {
        println!("{}", run_once(&args)?);
        return Ok(());
    }
    let mut runs = Vec::with_capacity(args.runs);
    for i in 1..=args.runs {
        eprintln!("bench cluster: run {i} of {}", args.runs);
        let one = run_once(&args)?;
        eprintln!(
            "bench cluster: run {i}: start_ratio {} converge_ratio {} failover_after_grace_over_refill {}",
            one["start_ratio"], one["converge_ratio"], one["failover_after_grace_over_refill"]
        );
        runs.push(one);
        // Let the last run's processes and ports go before the next one.
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut out = json!({
        "bench": "cluster",
        "nodes": args.nodes,
        "children": args.children,
        "runs": args.runs,
    });
    for ratio in RATIOS {
        let values: Vec<f64> = runs.iter().filter_map(|run| run[ratio].as_f64()).collect();
        out[ratio] = spread(values);
    }
    out["results"] = json!(runs);
    println!("{out}");
    Ok(())
}

/// One run: the hub, then its baselines; its JSON object.
fn run_once(args: &ClusterBenchArgs) -> Result<serde_json::Value, String> {
    let binary = std::env::current_exe().map_err(|e| e.to_string())?;
    eprintln!(
        "bench cluster: {} nodes, {} children (hub first, then the plain-ractor baseline)",
        args.nodes, args.children
    );
    let demo_args = |telemetry: bool, entry: demo::Entry| DemoArgs {
        nodes: args.nodes,
        children: args.children,
        batch: args.batch,
        concurrency: args.concurrency,
        json: true,
        workdir: None,
        node_log: "info".into(),
        durable: false,
        replication_factor: args.replication_factor,
        migration: args.migration,
        distribution: args.distribution,
        no_metrics: !telemetry,
        no_memory_release: args.no_memory_release,
        max_wire_version: args.max_wire_version,
        dashboard_load: telemetry,
        entry,
        node_args: node_args(args),
        // The wire counters are the metrics: none with telemetry off.
        wire: telemetry,
    };
    let off = if args.telemetry == "compare" {
        eprintln!("bench cluster: the hub with telemetry off first");
        let off = demo::run(&demo_args(false, demo::Entry::One)).map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_millis(500));
        Some(off)
    } else {
        None
    };
    let report = demo::run(&demo_args(args.telemetry != "off", demo::Entry::One))
        .map_err(|e| e.to_string())?;
    let entry_all = if args.entry == demo::Entry::All {
        std::thread::sleep(Duration::from_millis(500));
        eprintln!("bench cluster: the hub again, start requests spread over every node");
        let all = demo::run(&demo_args(args.telemetry != "off", demo::Entry::All))
            .map_err(|e| e.to_string())?;
        eprintln!(
            "hub, every node an entry: start {:.0}/s, converge {} ms",
            all.start_per_s, all.converge_ms
        );
        Some(all)
    } else {
        None
    };
    eprintln!(
        "hub: start {:.0}/s, converge {} ms, failover {} ms ({} ms after the grace; fresh starts of as many: {:?} ms), {:.0} B/child",
        report.start_per_s,
        report.converge_ms,
        report.failover_ms,
        report.failover_after_grace_ms,
        report.refill.as_ref().map(|r| r.start_ms),
        report.rss_bytes_per_child
    );
    let baseline = if args.no_baseline {
        None
    } else {
        // Let the killed and terminated nodes' ports and memory go before the baseline runs.
        std::thread::sleep(Duration::from_millis(500));
        let b = crate::baseline::measure(&binary, args.nodes, args.children)
            .map_err(|e| e.to_string())?;
        eprintln!(
            "baseline: converge {} ms, {:.0} B/child",
            b.converge_ms, b.rss_bytes_per_child
        );
        std::thread::sleep(Duration::from_millis(200));
        let bare = crate::baseline::measure_bare(&binary, args.nodes, args.children)
            .map_err(|e| e.to_string())?;
        eprintln!(
            "bare actors: start {:.0}/s, stop {:.0}/s, {:.0} B/actor",
            bare.start_per_s, bare.stop_per_s, bare.actor_bytes_per_child
        );
        Some((b, bare))
    };
    let bare = baseline.as_ref().map(|(_, bare)| bare.clone());
    let baseline = baseline.map(|(b, _)| b);
    let out = json!({
        "bench": "cluster",
        "nodes": args.nodes,
        "children": args.children,
        "backend": "memory",
        "batch": args.batch,
        "concurrency": args.concurrency,
        "start_per_s": report.start_per_s,
        "start_ms": report.start_ms,
        "converge_ms": report.converge_ms,
        "failover_ms": report.failover_ms,
        "detect_ms": report.detect_ms,
        "failover_over_detect_ms": report.failover_ms.saturating_sub(report.detect_ms),
        "failover_after_grace_ms": report.failover_after_grace_ms,
        "refill_children": report.refill.as_ref().map(|r| r.children),
        "refill_start_ms": report.refill.as_ref().map(|r| r.start_ms),
        "refill_converge_ms": report.refill.as_ref().map(|r| r.converge_ms),
        "refill_per_node": report.refill.as_ref().map(|r| &r.per_node),
        "replaced_per_node": replaced_per_node(&report.before, &report.after),
        "failover_after_grace_over_refill": report.refill.as_ref().and_then(|r| {
            ratio(report.failover_after_grace_ms as f64, r.start_ms as f64)
        }),
        "replication_factor": report.replication_factor,
        "distribution": args.distribution.unwrap_or_default().name(),
        "migration": args.migration.map(|m| if m == process_hub::Migration::Hot { "hot" } else { "cold" }),
        "join": report.join,
        "handover_ms": report.join.as_ref().map(|j| j.handover_ms),
        "handover_ms_per_child": report.join.as_ref().map(|j| j.handover_ms_per_child),
        "cold_swap_ms": report.join.as_ref().map(|j| j.cold_swap_ms),
        "cold_swap_ms_per_child": report.join.as_ref().map(|j| j.cold_swap_ms_per_child),
        "rss_bytes_per_child": report.rss_bytes_per_child,
        "rss_bytes_per_child_by_node": report.rss_bytes_per_child_by_node,
        "children_per_node_before": report.before,
        "children_per_node_after": report.after,
        "killed": report.killed,
        "baseline_converge_ms": baseline.as_ref().map(|b| b.converge_ms),
        "baseline_rss_bytes_per_child": baseline.as_ref().map(|b| b.rss_bytes_per_child),
        "converge_ratio": baseline
            .as_ref()
            .and_then(|b| ratio(report.converge_ms as f64, b.converge_ms as f64)),
        "actor_bytes_per_child": bare.as_ref().map(|b| b.actor_bytes_per_child),
        "hub_bytes_per_child": bare
            .as_ref()
            .map(|b| report.rss_bytes_per_child - b.actor_bytes_per_child),
        "bare_start_per_s": bare.as_ref().map(|b| b.start_per_s),
        "start_ratio": bare
            .as_ref()
            .and_then(|b| ratio(report.start_per_s, b.start_per_s)),
        "bare_stop_per_s": bare.as_ref().map(|b| b.stop_per_s),
        "rss_ratio": baseline
            .as_ref()
            .and_then(|b| ratio(report.rss_bytes_per_child, b.rss_bytes_per_child)),
    });
    let mut out = out;
    // Both sides timed until every survivor lists every child.
    out["failover_after_grace_over_refill_converge"] = json!(report
        .refill
        .as_ref()
        .and_then(|r| ratio(report.failover_after_grace_ms as f64, r.converge_ms as f64)));
    out["telemetry"] = json!(args.telemetry);
    large_cluster_fields(&mut out, args, &report);
    out["entry"] = json!(if entry_all.is_some() { "all" } else { "one" });
    if let Some(all) = entry_all {
        out["entry_all_start_per_s"] = json!(all.start_per_s);
        out["entry_all_converge_ms"] = json!(all.converge_ms);
        out["entry_all_start_ratio"] = json!(bare
            .as_ref()
            .and_then(|b| ratio(all.start_per_s, b.start_per_s)));
        out["entry_all_converge_ratio"] = json!(baseline
            .as_ref()
            .and_then(|b| ratio(all.converge_ms as f64, b.converge_ms as f64)));
    }
    if let Some(off) = off {
        out["telemetry_off_start_per_s"] = json!(off.start_per_s);
        out["telemetry_start_throughput_change"] =
            json!(report.start_per_s / off.start_per_s.max(1e-9) - 1.0);
        out["telemetry_off_converge_ms"] = json!(off.converge_ms);
    }
    Ok(out)
}

/// The figures of a large cluster: the sync strategy and detector timing it ran with, what a
/// registry change cost on the wire per node, and one node's resident memory at rest.
fn large_cluster_fields(
    out: &mut serde_json::Value,
    args: &ClusterBenchArgs,
    report: &demo::DemoReport,
) {
    out["sync"] = json!(args.sync.as_deref().unwrap_or("pubsub"));
    out["heartbeat_ms"] = json!(args.heartbeat_ms);
    out["failure_timeout_ms"] = json!(args.failure_timeout_ms);
    out["frames_per_change_per_node"] =
        json!(report.wire.as_ref().map(|w| w.frames_per_change_per_node));
    out["bytes_per_change_per_node"] =
        json!(report.wire.as_ref().map(|w| w.bytes_per_change_per_node));
    out["wire"] = json!(report.wire);
    out["rss_bytes_per_node_empty"] = json!(report.rss_per_node_empty);
    out["rss_bytes_per_node_at_rest"] = json!(report.rss_per_node_at_rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: ClusterBenchArgs,
    }

    #[test]
    fn the_large_cluster_flags_reach_every_node() {
        let args = Cli::try_parse_from([
            "cluster",
            "--nodes",
            "25",
            "--sync",
            "gossip",
            "--heartbeat-ms",
            "1000",
            "--failure-timeout-ms",
            "20000",
        ])
        .expect("parses")
        .args;
        assert_eq!(
            node_args(&args),
            [
                "--sync",
                "gossip",
                "--heartbeat-ms",
                "1000",
                "--failure-timeout-ms",
                "20000"
            ]
        );
        let plain = Cli::try_parse_from(["cluster"]).expect("parses").args;
        assert!(node_args(&plain).is_empty());
        assert_eq!(plain.entry, demo::Entry::One);
        let spread = Cli::try_parse_from(["cluster", "--entry", "all"]).expect("parses");
        assert_eq!(spread.args.entry, demo::Entry::All);
        assert!(Cli::try_parse_from(["cluster", "--entry", "some"]).is_err());
        let err = Cli::try_parse_from(["cluster", "--sync", "flood"]).unwrap_err();
        assert!(err.to_string().contains("unknown sync strategy"), "{err}");
    }
}
