//! `process-hub bench scale --nodes 3 --children 1000,10000,100000,250000 --json`: the same
//! figures at every size, to see whether any rate falls off as the hub grows.
//!
//! Every size runs on fresh `process-hub node` processes on loopback, driven through their admin
//! APIs as [`crate::demo`] and [`crate::bench::recovery`] do, in **two clusters per size**, one
//! after the other, so that neither phase inherits the other's memory or declared list:
//!
//! 1. **Memory cluster** (no persistence): N `counter` children started through node 1
//!    (awaited requests of `--batch`, `--concurrency` in flight): `start_per_s` = N / the time of
//!    those requests; `converge_ms` from the first request until every node's registry summary
//!    lists all N placed; `rss_bytes_per_child` = the nodes' summed RSS 1.5 s after convergence
//!    (`demo::MEMORY_SETTLE`) minus before the first start, over N. Then every child stopped
//!    (batch stops `POST /v1/children/stop` of `--batch` ids, `--stop-callers` in flight,
//!    awaited; `--single-stops`: one `DELETE` each): `stop_per_s` = N / the time of those
//!    requests, and
//!    `stop_converge_ms` until every registry is empty. Then N children started again (untimed
//!    for the rate, `refill_start_per_s` reported: a warm process) and, once converged, the last
//!    node SIGKILLed: `failover_ms` until the survivors' registries place all N on survivors
//!    (`detect_ms` the part until they took the node out of their members), then
//!    `failover_lost` and `failover_duplicated` from every survivor's copy ([`failover_census`]).
//! 2. **Durable cluster** (`--auto-recovery`, grace `--reconcile-grace-ms`): N durable
//!    children declared (`declare_per_s`), every node SIGKILLed and restarted on its data
//!    directory: `recovery_ms` from `first restart + grace` until every node's registry lists
//!    every declared child on exactly one node ([`crate::harness::outage`]); `lost` and
//!    `duplicates` from the final census. Each node's resident memory per declared child,
//!    settled and at its peak, after the declare and after the recovery
//!    ([`crate::bench::durable_memory`]): `durable_rss_bytes_per_child` (summed over the nodes,
//!    as the memory cluster's `rss_bytes_per_child`) and `durable_nodes`.
//! 3. **Bare-actor baseline** ([`crate::baseline::measure_bare`]): N of the same `counter`
//!    actors spawned with `Actor::spawn` over `--nodes` processes, no hub:
//!    `baseline_start_per_s`, `baseline_stop_per_s` and `actor_bytes_per_child`;
//!    `hub_bytes_per_child` = `rss_bytes_per_child − actor_bytes_per_child` (the hub's own cost
//!    per child, summed over the nodes).
//!
//! Each size's `lost` and `duplicated` sum the failover's and the recovery's counts: the goal is
//! 0 and 0 at every size. `--heartbeat-ms` and `--failure-timeout-ms` set both clusters' failure
//! detector (a loaded machine at a million children needs a slower one).
//!
//! The times are also given as rates (`converge_per_s` = N / `converge_ms`, and so on), and for
//! every rate the object carries `<rate>_ratio_largest_to_10000`: its value at the largest size
//! over its value at 10,000 (when both sizes ran). The goal is every ratio at least 0.8.
//!
//! The registry summaries are polled every [`poll_interval`] (longer for larger N: a summary
//! counts every row of the node's copy, and polling it every 2 ms at 250,000 rows would load the
//! nodes it measures); `poll_ms` says the resolution of each size.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use process_hub::admin::RegistrySummary;
use serde_json::{json, Map, Value};

use crate::bench::durable_memory::{self, DurableMemory};
use crate::harness::outage::{counter_specs, start_in_batches, stop_concurrently, stop_in_batches};
use crate::harness::{
    wait_for, whole_cluster_outage, AdminClient, ClusterOptions, HarnessError, LocalCluster,
    OutageSettings,
};

/// Sizes of `--children`: a comma-separated list of positive counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes(pub Vec<usize>);

/// Parses `--children`: `1000,10000,...` (digits, `_` allowed as a separator inside a number);
/// an empty list, an empty item, zero or anything not a number is refused.
pub fn parse_sizes(text: &str) -> Result<Sizes, String> {
    if text.trim().is_empty() {
        return Err("the list of sizes is empty (expected e.g. 1000,10000)".into());
    }
    let mut sizes = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let digits = item.replace('_', "");
        let n: usize = digits
            .parse()
            .map_err(|_| format!("{item:?} is not a number of children"))?;
        if n == 0 {
            return Err("a size of 0 children measures nothing".into());
        }
        sizes.push(n);
    }
    Ok(Sizes(sizes))
}

/// Parses `--nodes`: at least 2 (one is killed).
fn parse_nodes(text: &str) -> Result<usize, String> {
    let n: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of nodes"))?;
    if n < 2 {
        return Err("at least 2 nodes (one is killed)".into());
    }
    Ok(n)
}

/// Parses a count that must be positive (`--batch`, `--concurrency`, `--stop-callers`).
fn parse_positive(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a positive number")),
    }
}

/// Flags of `bench scale`.
#[derive(Args, Debug)]
pub struct ScaleBenchArgs {
    /// Node processes (at least 2: one is killed).
    #[arg(long, default_value = "3", value_parser = parse_nodes)]
    pub nodes: usize,
    /// Sizes to run, comma-separated, each a number of children.
    #[arg(long, default_value = "1000,10000,100000,250000", value_parser = parse_sizes)]
    pub children: Sizes,
    /// Children per admin start request, and ids per batch stop request.
    #[arg(long, default_value = "1000", value_parser = parse_positive)]
    pub batch: usize,
    /// Start requests in flight at once.
    #[arg(long, default_value = "8", value_parser = parse_positive)]
    pub concurrency: usize,
    /// Stop requests in flight at once in the stop phase (batch stops of `--batch` ids, or
    /// single `DELETE`s with `--single-stops`).
    #[arg(long, default_value = "8", value_parser = parse_positive)]
    pub stop_callers: usize,
    /// Stop with one `DELETE /v1/children/{id}` per child instead of batch stops
    /// (`POST /v1/children/stop`), to compare the two.
    #[arg(long)]
    pub single_stops: bool,
    /// The durable cluster's `--reconcile-grace-ms`.
    #[arg(long, default_value_t = 2_000)]
    pub reconcile_grace_ms: u64,
    /// The durable cluster's `--reconcile-interval-ms`.
    #[arg(long, default_value_t = 1_000)]
    pub reconcile_interval_ms: u64,
    /// The durable cluster's `--recovery-starts-per-second` (default: the node's, 100,000). Each
    /// node paces its recovery starts at this rate after a burst of one second's worth, so a
    /// size whose share fits in the burst is not paced and a larger one is: raise it to see
    /// the hub's own recovery rate rather than the budget's.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub recovery_starts_per_second: Option<u32>,
    /// How long any one wait (convergence, empty registries, failover, recovery) may take
    /// before that phase is reported as failed; default 120 s plus 1 s per 1,000 children.
    #[arg(long)]
    pub wait_limit_s: Option<u64>,
    /// Skip the durable cluster (`declare_per_s`, `recovery_ms` are then null).
    #[arg(long)]
    pub no_recovery: bool,
    /// Skip the memory cluster (its rates and `rss_bytes_per_child` are then null).
    #[arg(long)]
    pub no_memory: bool,
    /// Run the clusters in `DIR/<size>-memory` and `DIR/<size>-durable` and keep them: each
    /// node's data directory and log stay there for a look afterwards. Default: a temporary
    /// directory, removed after each cluster.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// The nodes' `RUST_LOG` (their logs go to `<workdir>/<node>.log`).
    #[arg(long, default_value = "warn", value_name = "FILTER")]
    pub node_log: String,
    /// Skip the bare-actor baseline (its fields are then null).
    #[arg(long)]
    pub no_baseline: bool,
    /// Print the result as JSON (the only format; kept for the documented command line).
    #[arg(long)]
    pub json: bool,
    /// Both clusters' `--heartbeat-ms` (default: the node's). At a million children a node
    /// busy with its periodic full sync answers heartbeats late on a loaded machine: a slower
    /// detector keeps the cluster from flapping, and the JSON says which ran.
    #[arg(long, value_name = "MS")]
    pub heartbeat_ms: Option<u64>,
    /// Both clusters' `--failure-timeout-ms` (default: the node's), as `--heartbeat-ms`.
    #[arg(long, value_name = "MS")]
    pub failure_timeout_ms: Option<u64>,
}

/// The node flags of `--heartbeat-ms` and `--failure-timeout-ms`, for both clusters.
fn detector_args(args: &ScaleBenchArgs) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(ms) = args.heartbeat_ms {
        out.extend(["--heartbeat-ms".to_owned(), ms.to_string()]);
    }
    if let Some(ms) = args.failure_timeout_ms {
        out.extend(["--failure-timeout-ms".to_owned(), ms.to_string()]);
    }
    out
}

fn progress(msg: &str) {
    eprintln!("[bench scale] {msg}");
}

/// How often the registry summaries are polled at `n` children: 10 ms up to 20,000 children,
/// then `n` / 2,000 ms (125 ms at 250,000), so that the polling costs the nodes about the same
/// share of their time at every size.
pub fn poll_interval(n: usize) -> Duration {
    Duration::from_millis((n as u64 / 2_000).max(10))
}

/// How long any one wait may take at `n` children: `--wait-limit-s`, or generous (these are
/// shared cores): 120 s plus 1 s per 1,000 children.
fn deadline(n: usize, args: &ScaleBenchArgs) -> Duration {
    Duration::from_secs(args.wait_limit_s.unwrap_or(120 + n as u64 / 1_000))
}

/// Polls every client's summary until `done` holds for all of them in one sweep.
fn poll_until(
    what: &str,
    clients: &[AdminClient],
    interval: Duration,
    limit: Duration,
    done: impl Fn(&RegistrySummary) -> bool,
) -> Result<Duration, HarnessError> {
    let start = Instant::now();
    loop {
        if clients
            .iter()
            .all(|c| c.registry_summary().is_ok_and(|s| done(&s)))
        {
            return Ok(start.elapsed());
        }
        if start.elapsed() > limit {
            return Err(HarnessError::Timeout {
                what: what.to_owned(),
                waited: start.elapsed(),
            });
        }
        std::thread::sleep(interval);
    }
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("child-{i:06}")).collect()
}

fn per_s(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-6)
}

fn start_all(
    client: &AdminClient,
    ids: &[String],
    durable: bool,
    args: &ScaleBenchArgs,
) -> Result<Duration, String> {
    let (elapsed, errors) = start_in_batches(
        client,
        &counter_specs(ids, durable),
        args.batch,
        args.concurrency,
        &|line| {
            // Every fifth batch is one line: enough to see a long run move.
            progress(line.trim_start());
        },
    )
    .map_err(|e| e.to_string())?;
    if let Some(first) = errors.first() {
        return Err(format!("{} starts failed, first: {first:?}", errors.len()));
    }
    Ok(elapsed)
}

/// Where the `kind` cluster of size `n` runs: under `--workdir` if given, else a temporary
/// directory.
fn workdir(args: &ScaleBenchArgs, n: usize, kind: &str) -> Option<PathBuf> {
    args.workdir
        .as_ref()
        .map(|dir| dir.join(format!("{n}-{kind}")))
}

/// The memory cluster's phases at `n` children (see the module docs). Each figure goes into
/// `out` as soon as it is measured, so a later phase that fails keeps the earlier ones.
fn memory_phase(
    binary: &Path,
    n: usize,
    args: &ScaleBenchArgs,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    let options = ClusterOptions {
        hub: "bench-scale".into(),
        log_filter: args.node_log.clone(),
        extra_args: detector_args(args),
        ..ClusterOptions::default()
    };
    let limit = deadline(n, args);
    let poll = poll_interval(n);
    out.insert("poll_ms".into(), json!(poll.as_millis() as u64));
    let mut cluster = LocalCluster::start(binary, args.nodes, &options, workdir(args, n, "memory"))
        .map_err(|e| e.to_string())?;
    let outcome = (|| {
        cluster.wait_formed(limit).map_err(|e| e.to_string())?;
        let clients = cluster.live_clients();
        let entry = clients[0].clone();
        let all: BTreeSet<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
        let ids = ids(n);
        let rss_empty = crate::demo::cluster_rss(&cluster);

        progress(&format!("{n}: starting {n} children"));
        let started_at = Instant::now();
        let start_elapsed = start_all(&entry, &ids, false, args)?;
        out.insert("start_per_s".into(), json!(per_s(n, start_elapsed)));
        out.insert("start_ms".into(), json!(start_elapsed.as_millis() as u64));
        poll_until(
            "every registry to hold every child",
            &clients,
            poll,
            limit,
            |s| s.complete(n) && s.members.len() == all.len(),
        )
        .map_err(|e| e.to_string())?;
        let converge = started_at.elapsed();
        // Once the nodes' memory watchers have returned what the burst freed, as the demo does.
        std::thread::sleep(crate::demo::MEMORY_SETTLE);
        let rss_full = crate::demo::cluster_rss(&cluster);
        let rss_per_child = rss_full.saturating_sub(rss_empty) as f64 / n as f64;
        out.insert("converge_ms".into(), json!(converge.as_millis() as u64));
        out.insert("converge_per_s".into(), json!(per_s(n, converge)));
        out.insert("rss_bytes_per_child".into(), json!(rss_per_child));
        progress(&format!(
            "{n}: start {:.0}/s, converged in {} ms, {rss_per_child:.0} B/child",
            per_s(n, start_elapsed),
            converge.as_millis(),
        ));

        progress(&format!(
            "{n}: stopping every child ({} callers, {})",
            args.stop_callers,
            if args.single_stops {
                "one DELETE each".to_owned()
            } else {
                format!("batch stops of {}", args.batch)
            }
        ));
        let stop_started = Instant::now();
        let failures = if args.single_stops {
            stop_concurrently(&entry, &ids, args.stop_callers)
        } else {
            stop_in_batches(&entry, &ids, args.batch, args.stop_callers)
        };
        let stop_elapsed = stop_started.elapsed();
        out.insert("stop_per_s".into(), json!(per_s(n, stop_elapsed)));
        out.insert("stop_ms".into(), json!(stop_elapsed.as_millis() as u64));
        out.insert("stop_failures".into(), json!(failures.len()));
        if let Some(first) = failures.first() {
            return Err(format!("{} stops failed, first: {first:?}", failures.len()));
        }
        poll_until("every registry to be empty", &clients, poll, limit, |s| {
            s.rows == 0
        })
        .map_err(|e| e.to_string())?;
        let stop_converge = stop_started.elapsed();
        out.insert(
            "stop_converge_ms".into(),
            json!(stop_converge.as_millis() as u64),
        );
        progress(&format!(
            "{n}: stop {:.0}/s, registries empty after {} ms",
            per_s(n, stop_elapsed),
            stop_converge.as_millis()
        ));

        progress(&format!(
            "{n}: starting {n} children again for the failover"
        ));
        let refill_elapsed = start_all(&entry, &ids, false, args)?;
        out.insert("refill_start_per_s".into(), json!(per_s(n, refill_elapsed)));
        poll_until(
            "every registry to hold every child again",
            &clients,
            poll,
            limit,
            |s| s.complete(n) && s.members.len() == all.len(),
        )
        .map_err(|e| e.to_string())?;

        let victim = cluster.nodes.len() - 1;
        let killed = cluster.nodes[victim].node_name.clone();
        progress(&format!("{n}: SIGKILL {killed}"));
        let killed_at = Instant::now();
        cluster.nodes[victim].kill();
        let survivors = cluster.live_clients();
        poll_until(
            "the survivors to see the node down",
            &survivors,
            poll,
            limit,
            |s| !s.members.contains(&killed),
        )
        .map_err(|e| e.to_string())?;
        let detect = killed_at.elapsed();
        out.insert("detect_ms".into(), json!(detect.as_millis() as u64));
        poll_until(
            "the survivors to host every child",
            &survivors,
            poll,
            limit,
            |s| s.complete(n) && !s.members.contains(&killed),
        )
        .map_err(|e| e.to_string())?;
        let failover = killed_at.elapsed();
        out.insert("failover_ms".into(), json!(failover.as_millis() as u64));
        out.insert("failover_per_s".into(), json!(per_s(n, failover)));
        after_failover(&survivors, n, poll, limit, killed_at, out);
        progress(&format!(
            "{n}: failover {} ms (detection {} ms)",
            failover.as_millis(),
            detect.as_millis()
        ));
        Ok(())
    })();
    progress(&format!("{n}: shutting the memory cluster down"));
    cluster.shutdown(Duration::from_secs(10));
    outcome
}

/// Counts, in every survivor's registry copy once the failover is over, the children listed on
/// no live node (`failover_lost`) and the bindings beyond one per child on live nodes
/// (`failover_duplicated`: a child on two nodes counts once per extra node), each the most
/// over the copies.
///
/// The copies are read one after the other while the last deltas of the failover may still be
/// in flight, so a single reading can catch them apart. The census reads them again, every
/// `poll`, until every copy counts the same children per node (`failover_copies_agree` true,
/// `failover_agree_ms` from the kill), or `limit` passes (`failover_copies_agree` false,
/// `failover_agree_ms` null: the copies did not converge, and the counts are those of the last
/// reading). A copy that cannot be read is named in `failover_census_error` and the counts are
/// null.
fn after_failover(
    survivors: &[AdminClient],
    n: usize,
    poll: Duration,
    limit: Duration,
    killed_at: Instant,
    out: &mut Map<String, Value>,
) {
    let waiting_since = Instant::now();
    let (census, agreed) = loop {
        let mut summaries = Vec::new();
        for client in survivors {
            match client.registry_summary() {
                Ok(s) => summaries.push(s),
                Err(e) => {
                    out.insert(
                        "failover_census_error".into(),
                        json!(format!("{}: {e}", client.addr())),
                    );
                    out.insert("failover_lost".into(), Value::Null);
                    out.insert("failover_duplicated".into(), Value::Null);
                    return;
                }
            }
        }
        let census = failover_census(&summaries, n);
        if census.copies_agree {
            break (census, Some(killed_at.elapsed()));
        }
        if waiting_since.elapsed() > limit {
            break (census, None);
        }
        std::thread::sleep(poll);
    };
    out.insert("failover_lost".into(), json!(census.lost));
    out.insert("failover_duplicated".into(), json!(census.duplicated));
    out.insert("failover_copies_agree".into(), json!(census.copies_agree));
    out.insert(
        "failover_agree_ms".into(),
        json!(agreed.map(|d| d.as_millis() as u64)),
    );
    progress(&format!(
        "{n}: after the failover: lost {}, duplicated {}, copies agree: {}{}",
        census.lost,
        census.duplicated,
        census.copies_agree,
        agreed.map_or_else(String::new, |d| format!(
            " ({} ms after the kill)",
            d.as_millis()
        ))
    ));
}

/// What the survivors' registry copies say after a failover (see [`after_failover`]).
#[derive(Debug, PartialEq, Eq)]
pub struct FailoverCensus {
    /// The most children any copy lists on no live node (missing rows included).
    pub lost: usize,
    /// The most bindings beyond one per child, on live nodes, of any copy.
    pub duplicated: usize,
    /// Every copy counts the same children per node.
    pub copies_agree: bool,
}

/// [`FailoverCensus`] of the survivors' summaries, `n` children expected.
pub fn failover_census(summaries: &[RegistrySummary], n: usize) -> FailoverCensus {
    let mut lost = 0;
    let mut duplicated = 0;
    for s in summaries {
        let members: BTreeSet<&str> = s.members.iter().map(String::as_str).collect();
        let on_live: usize = s
            .per_node
            .iter()
            .filter(|(node, _)| members.contains(node.as_str()))
            .map(|(_, count)| count)
            .sum();
        lost = lost.max(n.saturating_sub(s.placed.min(s.rows)));
        duplicated = duplicated.max(on_live.saturating_sub(s.placed));
    }
    let copies_agree = summaries.windows(2).all(|w| w[0].per_node == w[1].per_node);
    FailoverCensus {
        lost,
        duplicated,
        copies_agree,
    }
}

/// The durable cluster's declare and whole-cluster outage at `n` children.
fn durable_phase(
    binary: &Path,
    n: usize,
    args: &ScaleBenchArgs,
) -> Result<Map<String, Value>, String> {
    let options = ClusterOptions {
        hub: "bench-scale-durable".into(),
        log_filter: args.node_log.clone(),
        extra_args: vec![
            "--auto-recovery".into(),
            "--reconcile-grace-ms".into(),
            args.reconcile_grace_ms.to_string(),
            "--reconcile-interval-ms".into(),
            args.reconcile_interval_ms.to_string(),
        ]
        .into_iter()
        .chain(
            args.recovery_starts_per_second
                .into_iter()
                .flat_map(|rate| ["--recovery-starts-per-second".to_owned(), rate.to_string()]),
        )
        .chain(detector_args(args))
        .collect(),
        ..ClusterOptions::default()
    };
    let limit = deadline(n, args);
    let poll = poll_interval(n);
    let mut cluster =
        LocalCluster::start(binary, args.nodes, &options, workdir(args, n, "durable"))
            .map_err(|e| e.to_string())?;
    let outcome = (|| {
        cluster.wait_formed(limit).map_err(|e| e.to_string())?;
        let clients = cluster.live_clients();
        wait_for("every node to be normal", limit, || {
            clients
                .iter()
                .all(|c| c.health().is_ok_and(|h| h.recovery_state == "normal"))
                .then_some(())
        })
        .map_err(|e| e.to_string())?;
        let ids = ids(n);
        let mut memory = DurableMemory {
            empty: durable_memory::read(&cluster),
            ..DurableMemory::default()
        };
        progress(&format!("{n}: declaring {n} durable children"));
        let declare_elapsed = start_all(&clients[0], &ids, true, args)?;
        poll_until(
            "every registry to hold every durable child",
            &clients,
            poll,
            limit,
            |s| s.complete(n),
        )
        .map_err(|e| e.to_string())?;
        std::thread::sleep(crate::demo::MEMORY_SETTLE);
        memory.declared = durable_memory::read(&cluster);
        progress(&format!(
            "{n}: declare {:.0}/s; whole-cluster outage",
            per_s(n, declare_elapsed)
        ));
        let declared: BTreeSet<String> = ids.into_iter().collect();
        let report = whole_cluster_outage(
            &mut cluster,
            &declared,
            &BTreeSet::new(),
            &OutageSettings {
                reconcile_grace: Duration::from_millis(args.reconcile_grace_ms),
                deadline: limit,
                settle: Duration::from_millis(2 * args.reconcile_interval_ms),
            },
            &|line| progress(&format!("{n}: {line}")),
        )
        .map_err(|e| e.to_string())?;
        progress(&format!(
            "{n}: recovery {:?} ms, lost {}, duplicates {}",
            report.recovery_ms, report.lost, report.duplicates
        ));
        memory.recovered = durable_memory::read(&cluster);
        let mut out = memory.fields(n);
        out.insert("declare_per_s".into(), json!(per_s(n, declare_elapsed)));
        out.insert("recovery_ms".into(), json!(report.recovery_ms));
        out.insert(
            "recovery_per_s".into(),
            json!(report
                .recovery_ms
                .map(|ms| per_s(n, Duration::from_millis(ms)))),
        );
        out.insert(
            "restart_to_recovered_ms".into(),
            json!(report.restart_to_recovered_ms),
        );
        out.insert("recovery_lost".into(), json!(report.lost));
        out.insert("recovery_duplicates".into(), json!(report.duplicates));
        out.insert(
            "recovery_declared_lists_agree".into(),
            json!(report.declared_lists_agree),
        );
        Ok(out)
    })();
    progress(&format!("{n}: shutting the durable cluster down"));
    cluster.shutdown(Duration::from_secs(10));
    outcome
}

/// `lost` and `duplicated` of a size: the failover's and the recovery's summed, null when
/// either phase ran but did not count (it failed, or its copies could not be read), absent when
/// neither ran.
fn losses(size: &mut Map<String, Value>) {
    for (total, parts) in [
        ("lost", ["failover_lost", "recovery_lost"]),
        ("duplicated", ["failover_duplicated", "recovery_duplicates"]),
    ] {
        let ran: Vec<Option<u64>> = parts
            .iter()
            .zip(["memory_error", "durable_error"])
            .filter(|(part, error)| size.contains_key(**part) || size.contains_key(*error))
            .map(|(part, _)| size.get(*part).and_then(Value::as_u64))
            .collect();
        if ran.is_empty() {
            continue;
        }
        let sum: Option<u64> = ran.into_iter().sum();
        size.insert(total.into(), json!(sum));
    }
}

/// The rates whose value at the largest size is compared with their value at 10,000.
pub const RATES: &[&str] = &[
    "start_per_s",
    "converge_per_s",
    "stop_per_s",
    "failover_per_s",
    "declare_per_s",
    "recovery_per_s",
    "baseline_start_per_s",
    "baseline_stop_per_s",
];

/// `<rate>_ratio_largest_to_10000` for every rate of [`RATES`] (and `hub_bytes_per_child`)
/// present at both 10,000 and the largest size, if the largest size is above 10,000.
pub fn ratios(sizes: &[Map<String, Value>]) -> Map<String, Value> {
    let mut out = Map::new();
    let children = |m: &Map<String, Value>| m.get("children").and_then(Value::as_u64);
    let Some(largest) = sizes.iter().max_by_key(|m| children(m)) else {
        return out;
    };
    let Some(ten_k) = sizes.iter().find(|m| children(m) == Some(10_000)) else {
        return out;
    };
    if children(largest) <= Some(10_000) {
        return out;
    }
    for key in RATES.iter().copied().chain(["hub_bytes_per_child"]) {
        let at = |m: &Map<String, Value>| m.get(key).and_then(Value::as_f64);
        if let (Some(big), Some(small)) = (at(largest), at(ten_k)) {
            if small != 0.0 {
                out.insert(format!("{key}_ratio_largest_to_10000"), json!(big / small));
            }
        }
    }
    out
}

/// Runs the benchmark and prints its JSON line.
pub fn run(args: ScaleBenchArgs) -> Result<(), String> {
    let binary = std::env::current_exe().map_err(|e| e.to_string())?;
    let phases: Vec<&str> = [
        (!args.no_memory).then_some("memory cluster"),
        (!args.no_recovery).then_some("durable cluster"),
        (!args.no_baseline).then_some("bare actors"),
    ]
    .into_iter()
    .flatten()
    .collect();
    progress(&format!(
        "{} nodes, sizes {:?}; per size: {}",
        args.nodes,
        args.children.0,
        phases.join(", ")
    ));
    let mut sizes = Vec::new();
    for &n in &args.children.0 {
        let size_started = Instant::now();
        let mut size = Map::new();
        size.insert("children".into(), json!(n));
        // A phase that fails (a wait past its deadline) is reported in its size's object, and
        // the run goes on: what broke at which size is a finding, not a reason to lose the rest.
        if !args.no_memory {
            if let Err(e) = memory_phase(&binary, n, &args, &mut size) {
                progress(&format!("{n}: the memory cluster failed: {e}"));
                size.insert("memory_error".into(), json!(e));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if !args.no_recovery {
            match durable_phase(&binary, n, &args) {
                Ok(fields) => size.extend(fields),
                Err(e) => {
                    progress(&format!("{n}: the durable cluster failed: {e}"));
                    size.insert("durable_error".into(), json!(e));
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if !args.no_baseline {
            progress(&format!("{n}: bare-actor baseline"));
            let bare =
                crate::baseline::measure_bare(&binary, args.nodes, n).map_err(|e| e.to_string())?;
            progress(&format!(
                "{n}: bare start {:.0}/s, stop {:.0}/s, {:.0} B/actor",
                bare.start_per_s, bare.stop_per_s, bare.actor_bytes_per_child
            ));
            size.insert("baseline_start_per_s".into(), json!(bare.start_per_s));
            size.insert("baseline_stop_per_s".into(), json!(bare.stop_per_s));
            size.insert(
                "actor_bytes_per_child".into(),
                json!(bare.actor_bytes_per_child),
            );
            if let Some(rss) = size.get("rss_bytes_per_child").and_then(Value::as_f64) {
                size.insert(
                    "hub_bytes_per_child".into(),
                    json!(rss - bare.actor_bytes_per_child),
                );
            }
        }
        losses(&mut size);
        size.insert(
            "size_runtime_s".into(),
            json!(size_started.elapsed().as_secs()),
        );
        progress(&format!("{n}: {}", Value::Object(size.clone())));
        sizes.push(size);
    }
    let mut out = Map::new();
    out.insert("bench".into(), json!("scale"));
    out.insert("nodes".into(), json!(args.nodes));
    out.insert("backend".into(), json!("memory"));
    out.insert("batch".into(), json!(args.batch));
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("stop_callers".into(), json!(args.stop_callers));
    out.insert(
        "stop_mode".into(),
        json!(if args.single_stops { "single" } else { "batch" }),
    );
    out.insert("reconcile_grace_ms".into(), json!(args.reconcile_grace_ms));
    out.insert("heartbeat_ms".into(), json!(args.heartbeat_ms));
    out.insert("failure_timeout_ms".into(), json!(args.failure_timeout_ms));
    out.insert(
        "recovery_starts_per_second".into(),
        json!(args.recovery_starts_per_second),
    );
    out.extend(ratios(&sizes));
    out.insert(
        "sizes".into(),
        Value::Array(sizes.into_iter().map(Value::Object).collect()),
    );
    println!("{}", Value::Object(out));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: ScaleBenchArgs,
    }

    fn parse(line: &[&str]) -> Result<ScaleBenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("scale").chain(line.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn the_documented_command_line_parses() {
        let args = parse(&[
            "--nodes",
            "3",
            "--children",
            "1000,10000,100000,250000",
            "--json",
        ])
        .expect("parses");
        assert_eq!(args.nodes, 3);
        assert_eq!(args.children, Sizes(vec![1_000, 10_000, 100_000, 250_000]));
    }

    #[test]
    fn a_kept_workdir_holds_one_directory_per_size_and_cluster() {
        let args = parse(&[
            "--children",
            "10000",
            "--no-memory",
            "--workdir",
            "/tmp/scale-run",
            "--node-log",
            "warn,process_hub::hub::reconciler=info",
        ])
        .expect("parses");
        assert!(args.no_memory && !args.no_recovery);
        assert_eq!(args.node_log, "warn,process_hub::hub::reconciler=info");
        assert_eq!(
            workdir(&args, 10_000, "durable"),
            Some(PathBuf::from("/tmp/scale-run/10000-durable"))
        );
        let default = parse(&[]).expect("parses");
        assert_eq!(default.node_log, "warn");
        assert_eq!(workdir(&default, 10_000, "memory"), None, "a temporary one");
    }

    #[test]
    fn bad_sizes_are_refused_with_the_reason() {
        for (bad, reason) in [
            ("", "empty"),
            ("1000,", "not a number"),
            ("1000,0", "0 children"),
            ("ten", "not a number"),
            ("1000,-5", "not a number"),
        ] {
            let err = parse(&["--children", bad]).expect_err(bad).to_string();
            assert!(err.contains(reason), "{bad:?}: {err}");
        }
        assert_eq!(
            parse_sizes("1_000, 20000").unwrap(),
            Sizes(vec![1_000, 20_000])
        );
    }

    #[test]
    fn the_recovery_start_budget_is_passed_on_within_the_node_range() {
        let args = parse(&["--recovery-starts-per-second", "100000"]).expect("parses");
        assert_eq!(args.recovery_starts_per_second, Some(100_000));
        assert_eq!(parse(&[]).expect("parses").recovery_starts_per_second, None);
        for bad in ["0", "10000001", "-1", "fast"] {
            assert!(
                parse(&["--recovery-starts-per-second", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_detector_flags_reach_both_clusters() {
        let args =
            parse(&["--heartbeat-ms", "1000", "--failure-timeout-ms", "30000"]).expect("parses");
        assert_eq!(
            detector_args(&args),
            ["--heartbeat-ms", "1000", "--failure-timeout-ms", "30000"]
        );
        assert!(detector_args(&parse(&[]).expect("parses")).is_empty());
    }

    #[test]
    fn one_node_or_no_batch_is_refused() {
        assert!(parse(&["--nodes", "1"]).is_err());
        assert!(parse(&["--batch", "0"]).is_err());
        assert!(parse(&["--stop-callers", "x"]).is_err());
    }

    fn size(children: u64, start: f64) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("children".into(), json!(children));
        m.insert("start_per_s".into(), json!(start));
        m
    }

    #[test]
    fn ratios_compare_the_largest_size_with_ten_thousand() {
        let out = ratios(&[size(1_000, 1.0), size(10_000, 200.0), size(250_000, 180.0)]);
        assert_eq!(out["start_per_s_ratio_largest_to_10000"], json!(0.9));
        assert!(!out.contains_key("stop_per_s_ratio_largest_to_10000"));
        assert!(ratios(&[size(1_000, 1.0), size(100_000, 2.0)]).is_empty());
        assert!(ratios(&[size(1_000, 1.0), size(10_000, 2.0)]).is_empty());
    }

    fn summary(
        members: &[&str],
        rows: usize,
        placed: usize,
        per_node: &[(&str, usize)],
    ) -> RegistrySummary {
        let mut s = RegistrySummary::new("a", members.iter().map(|m| m.to_string()).collect());
        s.rows = rows;
        s.placed = placed;
        s.per_node = per_node.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        s
    }

    #[test]
    fn the_failover_census_counts_lost_and_duplicated_children_per_copy() {
        let whole = summary(&["a", "b"], 10, 10, &[("a", 6), ("b", 4)]);
        assert_eq!(
            failover_census(&[whole.clone(), whole.clone()], 10),
            FailoverCensus {
                lost: 0,
                duplicated: 0,
                copies_agree: true
            }
        );
        // One copy still waits for two children (rows without a live binding), the other
        // lists one child on both survivors; bindings on the dead node do not count.
        let waiting = summary(&["a", "b"], 10, 8, &[("a", 5), ("b", 3), ("c", 2)]);
        let doubled = summary(&["a", "b"], 10, 10, &[("a", 6), ("b", 5)]);
        assert_eq!(
            failover_census(&[waiting, doubled], 10),
            FailoverCensus {
                lost: 2,
                duplicated: 1,
                copies_agree: false
            }
        );
        // A copy missing rows loses them too.
        let short = summary(&["a", "b"], 9, 9, &[("a", 5), ("b", 4)]);
        assert_eq!(failover_census(&[short], 10).lost, 1);
    }

    #[test]
    fn lost_and_duplicated_sum_the_phases_that_ran() {
        let mut size = Map::new();
        size.insert("failover_lost".into(), json!(0));
        size.insert("failover_duplicated".into(), json!(2));
        size.insert("recovery_lost".into(), json!(1));
        size.insert("recovery_duplicates".into(), json!(0));
        losses(&mut size);
        assert_eq!(size["lost"], json!(1));
        assert_eq!(size["duplicated"], json!(2));
        // A durable cluster that failed counted nothing: the total is unknown, not 0.
        let mut failed = Map::new();
        failed.insert("failover_lost".into(), json!(0));
        failed.insert("failover_duplicated".into(), json!(0));
        failed.insert("durable_error".into(), json!("timeout"));
        losses(&mut failed);
        assert_eq!(failed["lost"], Value::Null);
        let mut none = Map::new();
        losses(&mut none);
        assert!(!none.contains_key("lost"));
    }

    #[test]
    fn polling_slows_down_with_the_registry() {
        assert_eq!(poll_interval(1_000), Duration::from_millis(10));
        assert_eq!(poll_interval(250_000), Duration::from_millis(125));
    }
}
