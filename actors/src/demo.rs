//! `process-hub demo`: the main job. A 3-node cluster of real processes on loopback, 10,000
//! children, one node killed with SIGKILL, and the time until every child runs again.
//!
//! It drives the nodes only through their admin APIs, exactly as an operator would, so what it
//! shows is what a user gets.
//!
//! `--durable` runs the nodes with `--auto-recovery` (grace [`DURABLE_GRACE_MS`]), starts the
//! children with `"durable": true`, and after the single-node failover adds a whole-cluster
//! outage: 10 % of the children are stopped (`DELETE`, which undeclares them) while the killed
//! node is still down, every node is SIGKILLed and restarted on its data directory, and the demo
//! waits until every declared child runs again exactly once (see
//! [`crate::harness::outage`] for what is measured).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use process_hub::admin::{ChildView, RegistrySummary, StartSpec};
use serde::Serialize;

use crate::harness::outage::{start_in_batches, start_in_batches_over, stop_concurrently};
use crate::harness::{
    wait_for, whole_cluster_outage, AdminClient, Census, ClusterOptions, HarnessError,
    LocalCluster, OutageReport, OutageSettings,
};

/// The reconcile grace of the nodes of `demo --durable`, in ms.
pub const DURABLE_GRACE_MS: u64 = 2_000;
/// The reconcile interval of the nodes of `demo --durable`, in ms.
const DURABLE_INTERVAL_MS: u64 = 1_000;

/// `process-hub demo` flags.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Number of nodes (at least 2: one is killed).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Number of children to start.
    #[arg(long, default_value_t = 10_000)]
    pub children: usize,
    /// Children per admin request.
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// Admin requests in flight at once (each from its own client connection).
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Print the figures as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Keep the nodes' data and logs here instead of a temporary directory.
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// The nodes' `RUST_LOG` (their logs are in the work directory): e.g.
    /// `info,process_hub::hub::coordinator=debug` to read what a failover did and when.
    #[arg(long, default_value = "info")]
    pub node_log: String,
    /// Durable children (auto-recovery on), and a whole-cluster SIGKILL and restart after the
    /// failover.
    #[arg(long)]
    pub durable: bool,
    /// Nodes running each child (the nodes' `--replication-factor`): with 2 or more the
    /// failover is a promotion of the passive replicas, not a restart.
    #[arg(long, default_value_t = 1)]
    pub replication_factor: usize,
    /// The nodes' `--migration`; when given, a node joins after the failover and the moves to
    /// it are timed: counters (which hand their state over, so hot under `hot`) beside
    /// tickers (no handover: always a cold swap), in the same join.
    #[arg(long)]
    pub migration: Option<process_hub::Migration>,
    /// The nodes' `--distribution`: `consistent-hash` (default) or `load-balanced` (loads
    /// reported every 500 ms; the start rate then includes placing each child by load).
    #[arg(long, value_parser = crate::cli::node_settings::parse_distribution)]
    pub distribution: Option<process_hub::Distribution>,
    /// The nodes record no metrics (`process-hub node --no-metrics`).
    #[arg(long)]
    pub no_metrics: bool,
    /// The nodes keep what a burst freed (`process-hub node --no-memory-release`).
    #[arg(long)]
    pub no_memory_release: bool,
    /// The nodes' newest wire version (`process-hub node --max-wire-version`): 2 measures the
    /// cluster as it was before compact frames.
    #[arg(long, hide = true)]
    pub max_wire_version: Option<u16>,
    /// While the demo runs, scrape every node's `/metrics` and read its recent events every
    /// second, as a dashboard does (what `bench cluster --telemetry` measures).
    #[arg(long)]
    pub dashboard_load: bool,
    /// Which admin APIs the start requests go to: `one` (the first node's, every request) or
    /// `all` (request `i` to node `i mod nodes`, as callers behind a load balancer do).
    #[arg(long, value_enum, default_value_t = Entry::One)]
    pub entry: Entry,
    /// More flags for every node (`bench cluster`'s `--sync`, failure-detector timing).
    #[arg(skip)]
    pub node_args: Vec<String>,
    /// Count the frames and bytes the start costs on the wire ([`crate::bench::wire`]): an
    /// idle window of [`crate::bench::wire::IDLE_WINDOW`] before the start measures what the
    /// cluster sends while nothing changes.
    #[arg(skip)]
    pub wire: bool,
}

/// Where the demo's start requests enter the cluster.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Entry {
    /// Every request through the first node's admin API.
    #[default]
    One,
    /// Requests spread over every node's admin API, in turn.
    All,
}

/// Why the demo could not complete.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The arguments do not make a demo.
    #[error("invalid demo arguments: {0}")]
    Invalid(String),
    /// Running the cluster failed.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// A node refused a request.
    #[error(transparent)]
    Admin(#[from] crate::harness::AdminClientError),
    /// The nodes' registries did not agree once converged.
    #[error("registries disagree: {0}")]
    Diverged(String),
    /// The nodes' wire counters could not be read.
    #[error("reading the nodes' wire counters: {0}")]
    Wire(String),
}

/// What the demo measured.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Children started.
    pub children: usize,
    /// Awaited starts per second through the admin API.
    pub start_per_s: f64,
    /// From the first start request until the last one was answered.
    pub start_ms: u64,
    /// From the first start request until every node's registry lists every child.
    pub converge_ms: u64,
    /// From the SIGKILL until the survivors host every child.
    pub failover_ms: u64,
    /// From the SIGKILL until every survivor has taken the killed node out of its members (the
    /// failure detection time, the floor of any failover).
    pub detect_ms: u64,
    /// `failover_ms - detect_ms - nodedown_grace_ms`: how long the survivors took to run the
    /// killed node's children again once their grace ran out (the grace starts when a survivor
    /// takes the node out of its members, which `detect_ms` times for the last of them).
    pub failover_after_grace_ms: u64,
    /// The killed node's count of fresh children started on the survivors after the failover,
    /// the yardstick of `failover_after_grace_ms` (none with `--durable` or `--migration`, whose
    /// later phases count the children).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refill: Option<Refill>,
    /// Nodes running each child.
    pub replication_factor: usize,
    /// Resident memory added per child, summed over all nodes (read [`MEMORY_SETTLE`] after
    /// convergence, before the kill, against the formed but empty cluster).
    pub rss_bytes_per_child: f64,
    /// Each node's share of `rss_bytes_per_child`: the resident memory it added, divided by
    /// every child started (so the entry node's transients show apart from the hosts' rows).
    pub rss_bytes_per_child_by_node: BTreeMap<String, f64>,
    /// The node that was killed.
    pub killed: String,
    /// Children per node before the kill.
    pub before: BTreeMap<String, usize>,
    /// Children per node after failover.
    pub after: BTreeMap<String, usize>,
    /// `--durable`: the whole-cluster outage after the failover.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage: Option<DurableOutage>,
    /// `--migration`: the join after the failover.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join: Option<crate::harness::JoinReport>,
    /// Each node's resident memory on the formed cluster before any child started.
    pub rss_per_node_empty: NodeMemory,
    /// Each node's resident memory at rest with every child placed ([`MEMORY_SETTLE`] after
    /// convergence).
    pub rss_per_node_at_rest: NodeMemory,
    /// With [`DemoArgs::wire`]: what the start cost on the wire, per change and node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire: Option<crate::bench::wire::WireFigures>,
}

/// Resident memory of the node processes, over the nodes: what one node of a large cluster
/// holds (the sum says little when the count of nodes changes).
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeMemory {
    /// The mean over the nodes, in bytes.
    pub mean_bytes: f64,
    /// The least of one node.
    pub min_bytes: u64,
    /// The most of one node.
    pub max_bytes: u64,
}

impl NodeMemory {
    fn of(by_node: &BTreeMap<String, u64>) -> Self {
        let n = by_node.len().max(1) as f64;
        Self {
            mean_bytes: by_node.values().sum::<u64>() as f64 / n,
            min_bytes: by_node.values().copied().min().unwrap_or(0),
            max_bytes: by_node.values().copied().max().unwrap_or(0),
        }
    }
}

/// Fresh starts of as many children as a failover re-placed, on the same survivors.
#[derive(Debug, Clone, Serialize)]
pub struct Refill {
    /// Children started: those the killed node held before the kill.
    pub children: usize,
    /// From the first start request until the last one was answered (every child running and
    /// recorded on its host).
    pub start_ms: u64,
    /// From the first start request until every survivor's registry lists them all: timed as
    /// `failover_ms` is.
    pub converge_ms: u64,
    /// How many of them each survivor runs: beside the failover's shares
    /// (`children_per_node_after − children_per_node_before`), the placement's part in the
    /// comparison (each survivor starts its share on its own).
    pub per_node: BTreeMap<String, usize>,
}

/// The nodes' `nodedown_grace_ms`: the demo's nodes keep the default.
fn nodedown_grace() -> Duration {
    Duration::from_millis(process_hub::ProcessHub::default().nodedown_grace_ms)
}

/// Starts `count` fresh children (`refill-NNNNNN`) through `entry`, as the first start did, and
/// times them until answered and until every survivor lists them with the others.
fn refill(
    entry: &AdminClient,
    survivors: &[AdminClient],
    args: &DemoArgs,
    count: usize,
    (live, after): (&BTreeSet<String>, &BTreeMap<String, usize>),
) -> Result<Refill, DemoError> {
    progress(&format!("starting {count} fresh children on the survivors"));
    let specs: Vec<StartSpec> = (0..count)
        .map(|i| StartSpec::new(format!("refill-{i:06}"), "counter"))
        .collect();
    let started_at = Instant::now();
    let (start_elapsed, errors) =
        start_in_batches(entry, &specs, args.batch, args.concurrency, &progress)?;
    if !errors.is_empty() {
        return Err(DemoError::Diverged(format!(
            "{} of {count} fresh starts failed",
            errors.len()
        )));
    }
    let total = args.children + count;
    poll_until(
        "every survivor to hold the fresh children",
        survivors,
        |s| s.complete(total),
    )?;
    let converge_ms = started_at.elapsed().as_millis() as u64;
    let per_node = identical_placement(survivors, total, live)?
        .into_iter()
        .map(|(node, n)| {
            let before = after.get(&node).copied().unwrap_or(0);
            (node, n.saturating_sub(before))
        })
        .collect();
    Ok(Refill {
        children: count,
        start_ms: start_elapsed.as_millis() as u64,
        converge_ms,
        per_node,
    })
}

/// The whole-cluster outage phase of `demo --durable`.
#[derive(Debug, Clone, Serialize)]
pub struct DurableOutage {
    /// Children stopped (undeclared) while the failed-over node was down, before the outage.
    pub stopped: usize,
    /// What the outage showed.
    #[serde(flatten)]
    pub report: OutageReport,
}

fn progress(msg: &str) {
    eprintln!("[demo] {msg}");
}

/// Admin requests in flight at once by default: eight, as a service with several callers drives
/// a node (each request still awaited). More in flight overlap one batch's round trips with the
/// next batch's work, as the plain-ractor baseline's processes spawn at once; on the quiet 2-core
/// development machine this took `converge_ms` from 0.93–1.56 of the baseline (one in flight)
/// to 0.80–1.05 (eight, 7 runs of 8 under 1); under heavy load it made no difference (docs/operations.md).
pub const DEFAULT_CONCURRENCY: usize = 8;

/// How long after convergence the nodes' resident memory is read: long enough for three
/// readings of each node's memory watcher, so a node whose burst just ended has returned what it
/// freed (a node started with `--no-memory-release` keeps it, and shows it).
pub const MEMORY_SETTLE: Duration = Duration::from_millis(1_500);

/// How often the convergence and failover waits look at the nodes: like the plain-ractor
/// baseline's 2 ms, so that both sides are timed at the same resolution.
const POLL_INTERVAL: Duration = Duration::from_millis(2);

/// How long the convergence and failover waits may take before the demo gives up.
const WAIT_LIMIT: Duration = Duration::from_secs(120);

/// Polls every client's registry summary until `done` holds for all of them in one sweep.
fn poll_until(
    what: &str,
    clients: &[AdminClient],
    done: impl Fn(&RegistrySummary) -> bool,
) -> Result<(), DemoError> {
    let start = Instant::now();
    loop {
        let all_done = clients
            .iter()
            .all(|c| c.registry_summary().is_ok_and(|s| done(&s)));
        if all_done {
            return Ok(());
        }
        if start.elapsed() > WAIT_LIMIT {
            return Err(HarnessError::Timeout {
                what: what.to_owned(),
                waited: start.elapsed(),
            }
            .into());
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// How long the copies may take to agree once every summary counts every child placed: the
/// listings are read one after the other, and the last deltas may still be in flight.
const AGREE_LIMIT: Duration = Duration::from_secs(30);

/// Checks (untimed) that every client's full registry listing is the same, with `expected`
/// children each on a node of `live`, and answers the children per hosting node. The listings
/// are read one after the other, so they are read again (every 100 ms, for at most
/// [`AGREE_LIMIT`]) while they differ: only copies that never agree are an error.
fn identical_placement(
    clients: &[AdminClient],
    expected: usize,
    live: &BTreeSet<String>,
) -> Result<BTreeMap<String, usize>, DemoError> {
    let since = Instant::now();
    loop {
        match placement_once(clients, expected, live) {
            Err(DemoError::Diverged(why)) if since.elapsed() < AGREE_LIMIT => {
                tracing::debug!(%why, "registry copies not equal yet; reading them again");
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// One reading of every listing (see [`identical_placement`]).
fn placement_once(
    clients: &[AdminClient],
    expected: usize,
    live: &BTreeSet<String>,
) -> Result<BTreeMap<String, usize>, DemoError> {
    let mut first: Option<Vec<ChildView>> = None;
    for client in clients {
        let mut children = client.children()?;
        children.sort_by(|a, b| a.id.cmp(&b.id));
        match &first {
            None => first = Some(children),
            Some(reference) if *reference != children => {
                return Err(DemoError::Diverged(format!(
                    "{} lists {} children, unlike the first node's {}",
                    client.addr(),
                    children.len(),
                    reference.len()
                )));
            }
            Some(_) => {}
        }
    }
    let children = first.unwrap_or_default();
    if children.len() != expected {
        return Err(DemoError::Diverged(format!(
            "{} children listed, {expected} expected",
            children.len()
        )));
    }
    let mut per_node = BTreeMap::new();
    for child in &children {
        let host = child
            .nodes
            .iter()
            .find(|n| live.contains(&n.node))
            .ok_or_else(|| DemoError::Diverged(format!("{} runs on no live node", child.id)))?;
        *per_node.entry(host.node.clone()).or_insert(0) += 1;
    }
    Ok(per_node)
}

/// A dashboard's load on every node until dropped: `GET /metrics` and the last 100 events,
/// every second, from a thread of its own.
struct DashboardLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DashboardLoad {
    fn start(clients: Vec<crate::harness::AdminClient>) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = stop.clone();
        let thread = std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                for client in &clients {
                    let _ = client.get_text("/metrics");
                    let _ = client.get_text("/v1/events/recent?limit=100");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for DashboardLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The summed resident memory of the cluster's node processes.
pub(crate) fn cluster_rss(cluster: &LocalCluster) -> u64 {
    node_rss(cluster).values().sum()
}

/// The resident memory of each live node process, by node name.
fn node_rss(cluster: &LocalCluster) -> BTreeMap<String, u64> {
    cluster
        .nodes
        .iter()
        .filter_map(|n| Some((n.node_name.clone(), crate::baseline::rss_bytes(n.pid()?))))
        .collect()
}

/// Runs the demo and returns its figures.
pub fn run(args: &DemoArgs) -> Result<DemoReport, DemoError> {
    if args.nodes < 2 {
        return Err(DemoError::Invalid("--nodes must be at least 2".into()));
    }
    if args.children == 0 || args.batch == 0 {
        return Err(DemoError::Invalid(
            "--children and --batch must be positive".into(),
        ));
    }
    let binary = std::env::current_exe().map_err(HarnessError::Setup)?;
    progress(&format!("starting {} nodes on loopback", args.nodes));
    if args.replication_factor == 0 || args.replication_factor > args.nodes {
        return Err(DemoError::Invalid(
            "--replication-factor must be between 1 and --nodes".into(),
        ));
    }
    if args.durable && args.replication_factor > 1 {
        return Err(DemoError::Invalid(
            "--durable checks that every declared child runs once after the outage; run it with --replication-factor 1".into(),
        ));
    }
    let mut options = ClusterOptions {
        log_filter: args.node_log.clone(),
        ..ClusterOptions::default()
    };
    if args.durable {
        options.extra_args = vec![
            "--auto-recovery".into(),
            "--reconcile-grace-ms".into(),
            DURABLE_GRACE_MS.to_string(),
            "--reconcile-interval-ms".into(),
            DURABLE_INTERVAL_MS.to_string(),
        ];
    }
    if let Some(migration) = args.migration {
        let name = match migration {
            process_hub::Migration::Hot => "hot",
            process_hub::Migration::Cold => "cold",
        };
        options
            .extra_args
            .extend(["--migration".to_owned(), name.to_owned()]);
    }
    match args.distribution {
        Some(process_hub::Distribution::LoadBalanced) => options.extra_args.extend([
            "--distribution".to_owned(),
            "load-balanced".to_owned(),
            "--load-push-interval-ms".to_owned(),
            "500".to_owned(),
        ]),
        Some(process_hub::Distribution::Guided) => {
            return Err(DemoError::Invalid(
                "--distribution guided needs a node for every child; use consistent-hash or load-balanced".into(),
            ))
        }
        _ => {}
    }
    if args.replication_factor > 1 {
        options.extra_args.extend([
            "--replication-factor".to_owned(),
            args.replication_factor.to_string(),
        ]);
    }
    if args.no_metrics {
        options.extra_args.push("--no-metrics".to_owned());
    }
    if args.no_memory_release {
        options.extra_args.push("--no-memory-release".to_owned());
    }
    if let Some(version) = args.max_wire_version {
        options
            .extra_args
            .extend(["--max-wire-version".to_owned(), version.to_string()]);
    }
    options.extra_args.extend(args.node_args.iter().cloned());
    let mut cluster = LocalCluster::start(&binary, args.nodes, &options, args.workdir.clone())?;
    cluster.wait_formed(Duration::from_secs(60))?;
    let _dashboard = args
        .dashboard_load
        .then(|| DashboardLoad::start(cluster.live_clients()));
    if args.durable {
        let clients = cluster.live_clients();
        wait_for(
            "every node to finish its first reconcile round",
            Duration::from_secs(60),
            || {
                clients
                    .iter()
                    .all(|c| c.health().is_ok_and(|h| h.recovery_state == "normal"))
                    .then_some(())
            },
        )?;
    }
    let wire_idle = if args.wire {
        let clients = cluster.live_clients();
        progress(&format!(
            "counting the idle cluster's frames for {} s",
            crate::bench::wire::IDLE_WINDOW.as_secs()
        ));
        let from = crate::bench::wire::Reading::take(&clients).map_err(DemoError::Wire)?;
        std::thread::sleep(crate::bench::wire::IDLE_WINDOW);
        let to = crate::bench::wire::Reading::take(&clients).map_err(DemoError::Wire)?;
        Some(crate::bench::wire::idle_rate(&from, &to))
    } else {
        None
    };
    let entry = cluster.nodes[0].client();
    let rss_empty = node_rss(&cluster);
    let all: BTreeSet<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();

    progress(&format!("starting {} children", args.children));
    let specs: Vec<StartSpec> = (0..args.children)
        .map(|i| StartSpec {
            id: format!("child-{i:06}"),
            kind: "counter".into(),
            args: None,
            restart: None,
            metadata: None,
            durable: args.durable,
            nodes: None,
            guided_fallback: false,
        })
        .collect();
    let wire_from = match wire_idle {
        Some(_) => Some(
            crate::bench::wire::Reading::take(&cluster.live_clients()).map_err(DemoError::Wire)?,
        ),
        None => None,
    };
    let started_at = Instant::now();
    let entries = match args.entry {
        Entry::One => vec![entry.clone()],
        Entry::All => cluster.live_clients(),
    };
    let (start_elapsed, errors) =
        start_in_batches_over(&entries, &specs, args.batch, args.concurrency, &progress)?;
    let errors = errors.len();
    if errors > 0 {
        progress(&format!("  {errors} start errors reported"));
    }
    let clients = cluster.live_clients();
    // Every child on as many nodes as the replication factor asks (its replicas start once
    // its first owner answered, so the rows can be complete before the replicas are).
    let instances = args.children * args.replication_factor;
    poll_until("every registry to hold every child", &clients, |s| {
        s.complete(args.children)
            && s.members.len() == all.len()
            && s.per_node.values().sum::<usize>() == instances
    })?;
    let converge = started_at.elapsed();
    let wire = match (wire_idle, wire_from) {
        (Some(idle), Some(from)) => {
            let to = crate::bench::wire::Reading::take(&clients).map_err(DemoError::Wire)?;
            Some(crate::bench::wire::figures(
                &from,
                &to,
                idle,
                args.children,
                args.nodes,
            ))
        }
        _ => None,
    };
    // What the nodes keep, not the burst: their memory watchers (`process_hub::memory_release`,
    // one reading each 500 ms) return what the burst freed once two readings show no growth.
    // Before anything else allocates in the nodes (the full listings below do, a lot).
    std::thread::sleep(MEMORY_SETTLE);
    let rss_full = node_rss(&cluster);
    let rss_by_node: BTreeMap<String, f64> = rss_full
        .iter()
        .map(|(node, full)| {
            let empty = rss_empty.get(node).copied().unwrap_or(0);
            (
                node.clone(),
                full.saturating_sub(empty) as f64 / args.children as f64,
            )
        })
        .collect();
    let before = identical_placement(&clients, args.children, &all)?;

    let victim = cluster.nodes.len() - 1;
    let killed = cluster.nodes[victim].node_name.clone();
    progress(&format!("killing {killed} with SIGKILL"));
    let killed_at = Instant::now();
    cluster.nodes[victim].kill();
    let live: BTreeSet<String> = all.iter().filter(|n| **n != killed).cloned().collect();
    let survivors = cluster.live_clients();
    poll_until("the survivors to see the node down", &survivors, |s| {
        !s.members.contains(&killed)
    })?;
    let detect = killed_at.elapsed();
    poll_until("the survivors to host every child", &survivors, |s| {
        s.complete(args.children) && !s.members.contains(&killed)
    })?;
    let failover = killed_at.elapsed();
    progress(&format!(
        "  every survivor lists every child on a live node {} ms after the kill ({} ms to see it down)",
        failover.as_millis(),
        detect.as_millis()
    ));
    let after = identical_placement(&survivors, args.children, &live)?;
    // The failover's yardstick: as many fresh children as the killed node held, started the
    // same way on the same survivors. Only when no later phase counts the children.
    let refill = if args.durable || args.migration.is_some() {
        None
    } else {
        let count = before.get(&killed).copied().unwrap_or(0);
        Some(refill(&entry, &survivors, args, count, (&live, &after))?)
    };
    let ids: Vec<String> = specs.iter().map(|s| s.id.clone()).collect();
    let outage = if args.durable {
        Some(durable_outage(&mut cluster, &entry, &ids)?)
    } else {
        None
    };
    let join = match args.migration {
        Some(_) => Some(timed_join(&mut cluster, &options, &ids, args)?),
        None => None,
    };

    progress("shutting down");
    cluster.shutdown(Duration::from_secs(10));
    Ok(DemoReport {
        nodes: args.nodes,
        children: args.children,
        start_per_s: args.children as f64 / start_elapsed.as_secs_f64(),
        start_ms: start_elapsed.as_millis() as u64,
        converge_ms: converge.as_millis() as u64,
        failover_ms: failover.as_millis() as u64,
        detect_ms: detect.as_millis() as u64,
        failover_after_grace_ms: failover
            .saturating_sub(detect + nodedown_grace())
            .as_millis() as u64,
        refill,
        replication_factor: args.replication_factor,
        rss_bytes_per_child: rss_full
            .values()
            .sum::<u64>()
            .saturating_sub(rss_empty.values().sum()) as f64
            / args.children as f64,
        rss_bytes_per_child_by_node: rss_by_node,
        killed,
        before,
        after,
        outage,
        join,
        rss_per_node_empty: NodeMemory::of(&rss_empty),
        rss_per_node_at_rest: NodeMemory::of(&rss_full),
        wire,
    })
}

/// `--migration`: starts a tenth as many tickers (no handover) as there are counters, then
/// adds a node and times the moves to it per kind.
fn timed_join(
    cluster: &mut LocalCluster,
    options: &ClusterOptions,
    counters: &[String],
    args: &DemoArgs,
) -> Result<crate::harness::JoinReport, DemoError> {
    let tickers: Vec<String> = (0..(counters.len() / 10).max(1))
        .map(|i| format!("ticker-{i:06}"))
        .collect();
    let specs: Vec<StartSpec> = tickers
        .iter()
        .map(|id| StartSpec {
            id: id.clone(),
            kind: "ticker".into(),
            args: Some(serde_json::json!({"interval_ms": 60_000})),
            restart: None,
            metadata: None,
            durable: false,
            nodes: None,
            guided_fallback: false,
        })
        .collect();
    progress(&format!("starting {} tickers (no handover)", tickers.len()));
    let entry = cluster.live_clients().remove(0);
    let (_, errors) = start_in_batches(&entry, &specs, args.batch, args.concurrency, &progress)?;
    if !errors.is_empty() {
        return Err(DemoError::Diverged(format!(
            "{} tickers did not start",
            errors.len()
        )));
    }
    progress("a node joins; timing the moves to it");
    Ok(crate::harness::measure_join(
        cluster,
        options,
        counters,
        &tickers,
        args.replication_factor,
        WAIT_LIMIT,
    )?)
}

/// `--durable`: stops every tenth child while the killed node is down, then SIGKILLs every
/// node, restarts them all on their data directories and waits for the declared children.
fn durable_outage(
    cluster: &mut LocalCluster,
    entry: &AdminClient,
    ids: &[String],
) -> Result<DurableOutage, DemoError> {
    let stopped: BTreeSet<String> = ids.iter().step_by(10).cloned().collect();
    let declared: BTreeSet<String> = ids
        .iter()
        .filter(|id| !stopped.contains(*id))
        .cloned()
        .collect();
    progress(&format!(
        "stopping {} children (DELETE undeclares them) while the killed node is down",
        stopped.len()
    ));
    let stop_list: Vec<String> = stopped.iter().cloned().collect();
    let failures = stop_concurrently(entry, &stop_list, 8);
    if !failures.is_empty() {
        progress(&format!(
            "  {} stops not acknowledged (the wait below checks the outcome), first: {:?}",
            failures.len(),
            failures.first()
        ));
    }
    let survivors: Vec<(String, AdminClient)> = cluster
        .nodes
        .iter_mut()
        .filter_map(|n| n.is_running().then(|| (n.node_name.clone(), n.client())))
        .collect();
    wait_for(
        "the survivors to run the declared children only",
        Duration::from_secs(120),
        || {
            let census = Census::take(&survivors).ok()?;
            (census.all_run_once(&declared) && census.resurrected(&stopped).is_empty())
                .then_some(())
        },
    )?;
    let report = whole_cluster_outage(
        cluster,
        &declared,
        &stopped,
        &OutageSettings {
            reconcile_grace: Duration::from_millis(DURABLE_GRACE_MS),
            deadline: Duration::from_secs(120),
            settle: Duration::from_millis(2 * DURABLE_INTERVAL_MS),
        },
        &progress,
    )?;
    Ok(DurableOutage {
        stopped: stopped.len(),
        report,
    })
}

/// The report as the table the README shows.
pub fn render_table(report: &DemoReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "process-hub demo: {} nodes, {} children\n\n",
        report.nodes, report.children
    ));
    out.push_str(&format!(
        "{:<28}{:>14}\n",
        "start rate (children/s)",
        format!("{:.0}", report.start_per_s)
    ));
    out.push_str(&format!(
        "{:<28}{:>14}\n",
        "convergence (ms)", report.converge_ms
    ));
    out.push_str(&format!(
        "{:<28}{:>14}\n",
        "failover (ms)", report.failover_ms
    ));
    out.push_str(&format!(
        "{:<28}{:>14}\n",
        "  of which detection (ms)", report.detect_ms
    ));
    out.push_str(&format!(
        "{:<28}{:>14}\n",
        "  after the grace (ms)", report.failover_after_grace_ms
    ));
    if let Some(refill) = &report.refill {
        out.push_str(&format!(
            "{:<28}{:>14}\n",
            format!("{} fresh starts (ms)", refill.children),
            refill.converge_ms
        ));
    }
    out.push_str(&format!(
        "{:<28}{:>14}\n",
        "memory per child (bytes)",
        format!("{:.0}", report.rss_bytes_per_child)
    ));
    out.push_str(&format!("\nkilled with SIGKILL: {}\n\n", report.killed));
    out.push_str(&format!("{:<20}{:>10}{:>10}", "node", "before", "after"));
    if report.outage.is_some() {
        out.push_str(&format!("{:>16}", "after restart"));
    }
    out.push('\n');
    let mut nodes: BTreeSet<&String> = report.before.keys().chain(report.after.keys()).collect();
    if let Some(outage) = &report.outage {
        nodes.extend(outage.report.running_per_node.keys());
    }
    for node in nodes {
        out.push_str(&format!(
            "{:<20}{:>10}{:>10}",
            node,
            report.before.get(node).copied().unwrap_or(0),
            report.after.get(node).copied().unwrap_or(0)
        ));
        if let Some(outage) = &report.outage {
            let n = outage.report.running_per_node.get(node).copied();
            out.push_str(&format!("{:>16}", n.unwrap_or(0)));
        }
        out.push('\n');
    }
    if let Some(outage) = &report.outage {
        out.push_str(&render_outage(outage));
    }
    out
}

/// The whole-cluster outage phase of `demo --durable`, as table rows.
fn render_outage(outage: &DurableOutage) -> String {
    let r = &outage.report;
    let ms = |v: Option<u64>| v.map_or_else(|| "not reached".to_owned(), |v| v.to_string());
    let mut out = String::from(
        "\nwhole-cluster outage: every node SIGKILLed, restarted on its data directory\n\n",
    );
    let rows = [
        (
            "stopped before the outage".to_owned(),
            outage.stopped.to_string(),
        ),
        (
            format!("recovery after {} ms grace (ms)", r.reconcile_grace_ms),
            ms(r.recovery_ms),
        ),
        (
            "restart to all running (ms)".to_owned(),
            ms(r.restart_to_recovered_ms),
        ),
        ("lost".to_owned(), r.lost.to_string()),
        ("resurrected".to_owned(), r.resurrected.to_string()),
        ("duplicates".to_owned(), r.duplicates.to_string()),
        (
            "declared lists agree".to_owned(),
            if r.declared_lists_agree { "yes" } else { "no" }.to_owned(),
        ),
    ];
    for (label, value) in rows {
        out.push_str(&format!("{label:<36}{value:>14}\n"));
    }
    for (what, ids) in [
        ("lost", &r.lost_ids),
        ("resurrected", &r.resurrected_ids),
        ("duplicate", &r.duplicate_ids),
    ] {
        for id in ids {
            out.push_str(&format!("  {what}: {id}\n"));
        }
    }
    out
}
