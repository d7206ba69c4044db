//! The synchronization benchmark: pubsub against gossip on in-process clusters of several
//! sizes, in the same run. For each size and strategy it makes changes one at a time (each a
//! child started on its own ring owner, so the only frames are the registry's) and measures the
//! delta frames each change costs, how many of them its origin and the busiest node send, and
//! how long until every registry holds it; then the frames of the periodic sync per interval while nothing changes,
//! and how long a change whose frames to one node were lost takes to reach it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use process_hub::cluster::in_process::{FrameEvent, FrameFate, InProcessCluster};
use process_hub::core::placement::HashRing;
use process_hub::{ChildSpec, Hub, ProcessHub, StartOptions, SyncStrategy};
use serde_json::{json, Value};

use super::latency::Latencies;

/// Flags of `process-hub bench sync`.
#[derive(Args, Debug)]
pub struct SyncBenchArgs {
    /// Cluster sizes to measure (in-process nodes).
    #[arg(long, value_delimiter = ',', default_values_t = [3usize, 10, 30])]
    nodes: Vec<usize>,
    /// Changes per size and strategy, made one at a time.
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// Gossip's recipients.
    #[arg(long, default_value_t = 3)]
    recipients: usize,
    /// The periodic sync's interval for both strategies, in ms.
    #[arg(long, default_value_t = 1_000)]
    interval_ms: u64,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    json: bool,
}

/// The frames of registry synchronization, the ones this bench counts.
const SYNC_KINDS: [&str; 7] = [
    "registry_delta",
    "full_sync",
    "full_sync_part",
    "sync_request",
    "gossip_delta",
    "gossip_sync",
    "gossip_round",
];

/// Frames delivered, by `(kind, sender)`.
type Counts = Arc<Mutex<BTreeMap<(String, String), u64>>>;

fn counted(counts: &Counts) -> BTreeMap<(String, String), u64> {
    counts.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Frames of `kinds` between two snapshots: in all, and by sender.
fn frames_between(
    before: &BTreeMap<(String, String), u64>,
    after: &BTreeMap<(String, String), u64>,
    kinds: &[&str],
) -> (u64, BTreeMap<String, u64>) {
    let mut by_sender: BTreeMap<String, u64> = BTreeMap::new();
    for ((kind, from), n) in after {
        if kinds.contains(&kind.as_str()) {
            let was = before
                .get(&(kind.clone(), from.clone()))
                .copied()
                .unwrap_or(0);
            *by_sender.entry(from.clone()).or_default() += n - was;
        }
    }
    (by_sender.values().sum(), by_sender)
}

/// The frames that carry one change.
const DELTA_KINDS: [&str; 2] = ["registry_delta", "gossip_delta"];

fn strategy_name(sync: &SyncStrategy) -> &'static str {
    match sync {
        SyncStrategy::PubSub => "pubsub",
        SyncStrategy::Gossip { .. } => "gossip",
    }
}

/// Runs the benchmark and prints the result.
pub fn run(args: SyncBenchArgs) -> Result<(), String> {
    if args.nodes.iter().any(|&n| !(2..=64).contains(&n)) || args.nodes.is_empty() {
        return Err("--nodes must list cluster sizes of 2..=64".into());
    }
    if args.changes == 0 || args.changes > 10_000 {
        return Err("--changes must be 1..=10000".into());
    }
    let gossip = SyncStrategy::Gossip {
        interval_ms: args.interval_ms,
        recipients: args.recipients,
        restricted_init: true,
    };
    let probe = ProcessHub::builder("bench-sync")
        .sync(gossip.clone())
        .build_unchecked();
    probe.validate().map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut results = Vec::new();
    let mut comparisons = Vec::new();
    for &n in &args.nodes {
        let mut by_strategy = BTreeMap::new();
        for sync in [SyncStrategy::PubSub, gossip.clone()] {
            eprintln!(
                "sync bench: {n} nodes, {}, {} changes",
                strategy_name(&sync),
                args.changes
            );
            let result = runtime.block_on(measure(n, sync.clone(), &args))?;
            by_strategy.insert(strategy_name(&sync), result.clone());
            results.push(result);
        }
        let ratio = |key: &str| {
            let g = by_strategy["gossip"][key].as_f64().unwrap_or(0.0);
            let p = by_strategy["pubsub"][key].as_f64().unwrap_or(0.0);
            if p > 0.0 {
                json!(g / p)
            } else {
                Value::Null
            }
        };
        comparisons.push(json!({
            "nodes": n,
            "frames_per_change_ratio": ratio("frames_per_change"),
            "origin_frames_per_change_ratio": ratio("origin_frames_per_change"),
            "most_sent_by_one_node_per_change_ratio": ratio("most_sent_by_one_node_per_change"),
            "agree_ms_p50_ratio": ratio("agree_ms_p50"),
            "periodic_frames_per_interval_ratio": ratio("periodic_frames_per_interval"),
            "heal_ms_ratio": ratio("heal_ms"),
        }));
    }
    let report = json!({
        "bench": "sync",
        "changes": args.changes,
        "recipients": args.recipients,
        "interval_ms": args.interval_ms,
        "results": results,
        "gossip_vs_pubsub": comparisons,
    });
    if args.json {
        println!("{report}");
    } else {
        for r in &results {
            println!(
                "{:>3} nodes {:<7} frames/change {:>6.1}  from its origin {:>5.1}  agree p50 {:>6.2} ms p99 {:>6.2} ms  periodic frames/interval {:>6.1}  lost-delta heal {:>7.1} ms",
                r["nodes"], r["sync"].as_str().unwrap_or(""),
                r["frames_per_change"].as_f64().unwrap_or(0.0),
                r["origin_frames_per_change"].as_f64().unwrap_or(0.0),
                r["agree_ms_p50"].as_f64().unwrap_or(0.0),
                r["agree_ms_p99"].as_f64().unwrap_or(0.0),
                r["periodic_frames_per_interval"].as_f64().unwrap_or(0.0),
                r["heal_ms"].as_f64().unwrap_or(0.0),
            );
        }
    }
    Ok(())
}

/// Waits until `done` holds, polling; gives up after `limit`.
async fn until(limit: Duration, mut done: impl FnMut() -> bool) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        if done() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > limit {
            return Err(format!("not reached within {limit:?}"));
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

async fn measure(n: usize, sync: SyncStrategy, args: &SyncBenchArgs) -> Result<Value, String> {
    let net = InProcessCluster::new(n as u64);
    let counts: Counts = Arc::default();
    let sink = counts.clone();
    net.set_observer(Some(Arc::new(move |event: &FrameEvent<'_>| {
        if event.fate == FrameFate::Delivered {
            *sink
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((event.kind.to_owned(), event.from.to_owned()))
                .or_default() += 1;
        }
    })));
    let hub_id = format!("bench-sync-{n}-{}", strategy_name(&sync));
    let mut hubs: BTreeMap<String, Hub> = BTreeMap::new();
    for i in 0..n {
        let name = format!("n{i}@bench");
        let node = net.add_node(name.clone()).map_err(|e| e.to_string())?;
        let config = ProcessHub::builder(hub_id.clone())
            .node_name(name.clone())
            .cluster_timing(
                Duration::from_millis(args.interval_ms),
                Duration::from_millis(1_000),
                Duration::from_millis(20),
                Duration::from_millis(200),
            )
            .sync(sync.clone())
            .build()
            .map_err(|e| e.to_string())?;
        let (hub, _) = Hub::builder(config, crate::default_kinds())
            .network(Arc::new(node))
            .spawn()
            .await
            .map_err(|e| e.to_string())?;
        hubs.insert(name, hub);
    }
    let names: Vec<String> = hubs.keys().cloned().collect();
    until(Duration::from_secs(120), || {
        hubs.values()
            .all(|h| h.nodes(true).len() == n && h.cluster_settled())
    })
    .await
    .map_err(|e| format!("{n} nodes never formed a cluster: {e}"))?;
    // The syncs a node asks of each new peer for its first seconds are over.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let ring = HashRing::new(names.clone());
    let specs: Vec<ChildSpec> = (0..args.changes + 1)
        .map(|i| ChildSpec::new(format!("change-{i}"), "counter"))
        .collect();
    let mut agree = Latencies::new();
    let (mut frames, mut from_origin, mut most) = (0u64, 0u64, 0u64);
    for spec in &specs[..args.changes] {
        let owner = ring.owner(&spec.id).ok_or("an empty ring")?;
        let before = counted(&counts);
        let started = Instant::now();
        hubs[owner]
            .start_children(vec![spec.clone()], StartOptions::new())
            .await
            .map_err(|e| e.to_string())?;
        let id = spec.id.clone();
        until(Duration::from_secs(60), || {
            hubs.values().all(|h| h.child_lookup(&id).is_some())
        })
        .await?;
        agree.record(started.elapsed());
        let (total, by_sender) = frames_between(&before, &counted(&counts), &DELTA_KINDS);
        frames += total;
        from_origin += by_sender.get(owner).copied().unwrap_or(0);
        most += by_sender.values().copied().max().unwrap_or(0);
    }
    // The periodic sync alone: nothing changes for a few intervals.
    let intervals = 3;
    let quiet_before = counted(&counts);
    tokio::time::sleep(Duration::from_millis(args.interval_ms * intervals)).await;
    let (periodic, _) = frames_between(&quiet_before, &counted(&counts), &SYNC_KINDS);
    // A change whose frames to one node are all lost, until that node has it.
    let last = &specs[args.changes];
    let owner = ring.owner(&last.id).ok_or("an empty ring")?.clone();
    let victim = names
        .iter()
        .find(|n| **n != owner)
        .ok_or("one node")?
        .clone();
    for kind in ["registry_delta", "gossip_delta"] {
        net.drop_kind(kind, &victim);
    }
    let started = Instant::now();
    hubs[&owner]
        .start_children(vec![last.clone()], StartOptions::new())
        .await
        .map_err(|e| e.to_string())?;
    let others_have_it = {
        let id = last.id.clone();
        until(Duration::from_secs(60), || {
            hubs.iter()
                .filter(|(name, _)| **name != victim)
                .all(|(_, h)| h.child_lookup(&id).is_some())
        })
        .await?
    };
    for kind in ["registry_delta", "gossip_delta"] {
        net.deliver_kind(kind, &victim);
    }
    let id = last.id.clone();
    let victim_hub = hubs[&victim].clone();
    until(Duration::from_secs(120), || {
        victim_hub.child_lookup(&id).is_some()
    })
    .await?;
    let heal_ms = started.elapsed().as_secs_f64() * 1_000.0;
    for hub in hubs.values() {
        let _ = hub.shutdown().await;
    }
    let changes = args.changes as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    Ok(json!({
        "nodes": n,
        "sync": strategy_name(&sync),
        "changes": args.changes,
        "frames_per_change": frames as f64 / changes,
        "origin_frames_per_change": from_origin as f64 / changes,
        "most_sent_by_one_node_per_change": most as f64 / changes,
        "agree_ms_p50": ms(agree.median()),
        "agree_ms_p99": ms(agree.quantile(0.99)),
        "agree_ms_mean": ms(agree.mean()),
        "periodic_frames_per_interval": periodic as f64 / intervals as f64,
        "others_agree_ms": others_have_it.as_secs_f64() * 1_000.0,
        "heal_ms": heal_ms,
    }))
}
