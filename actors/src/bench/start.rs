//! `process-hub bench start --nodes 1 --children N --json`.
//!
//! Starts N `counter` children through a hub (one awaited `start_children`, registry writes
//! included, memory backend) and stops them (one awaited `stop_children`), and as the baseline
//! spawns and stops the same N actors with plain ractor. Rounds alternate hub and baseline; the
//! median of each phase is reported. `overhead_ratio` = hub (start + stop) / plain (spawn + stop).
//!
//! `--telemetry compare` also measures what operating the hub costs: the Prometheus exporter is
//! installed, and every round runs the hub twice, with its metrics recorded while a dashboard's
//! load runs beside it (a scrape of `/metrics` every second, a watcher draining the live events)
//! and with recording off, in alternating order. `telemetry_throughput_change` is the change of
//! the hub's start + stop rate with telemetry on (negative: slower).

use std::time::{Duration, Instant};

use clap::Args;
use process_hub::{ChildId, ChildSpec, Hub, ProcessHub, StartOptions, StopOptions};
use ractor::Actor;
use serde_json::json;

use super::latency::Latencies;

use crate::counter::{self, Counter};

/// Flags of `bench start`.
#[derive(Args, Debug)]
pub struct StartBenchArgs {
    /// Nodes in the hub (only 1 until the cluster exists).
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Children started and stopped per round.
    #[arg(long, default_value_t = 10_000)]
    pub children: usize,
    /// Measured rounds (after one warm-up round).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Print the result as JSON (the only format; kept for the documented command line).
    #[arg(long)]
    pub json: bool,
    /// `off` (metrics not recorded), `on` (recorded, exported, scraped and watched as a
    /// dashboard does) or `compare` (both, alternating, and their throughput change).
    #[arg(long, default_value = "off", value_parser = ["off", "on", "compare"])]
    pub telemetry: String,
    /// Profiling aid: run only the hub's rounds or only the plain ractor rounds, so an
    /// instruction profile (callgrind) of the run is one side's alone. The JSON then gives
    /// the other side's figures and `overhead_ratio` as null.
    #[arg(long, hide = true, value_parser = ["hub", "plain"])]
    pub only: Option<String>,
}

/// A dashboard's load on a hub while telemetry is on: `/metrics` rendered every second and
/// the live events drained, until dropped.
struct DashboardLoad {
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl DashboardLoad {
    fn start(hub: &Hub) -> Self {
        let (stop, done) = tokio::sync::watch::channel(false);
        let scraper = {
            let hub = hub.clone();
            let mut done = done.clone();
            tokio::spawn(async move {
                let handle = process_hub::telemetry::prometheus().cloned();
                loop {
                    if let Some(handle) = &handle {
                        hub.refresh_metrics();
                        std::hint::black_box(handle.render());
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = done.changed() => return,
                    }
                }
            })
        };
        let watcher = {
            let (id, mut events) = hub.subscribe_channel();
            let hub = hub.clone();
            let mut done = done;
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        event = events.recv() => match event {
                            Some(event) => { std::hint::black_box(serde_json::to_string(&event).ok()); }
                            None => break,
                        },
                        _ = done.changed() => break,
                    }
                }
                hub.unsubscribe(id);
            })
        };
        Self {
            stop,
            tasks: vec![scraper, watcher],
        }
    }

    async fn end(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// One hub round with telemetry on (recorded, scraped, watched) or off.
async fn hub_round_with(hub: &Hub, n: usize, round: usize, on: bool) -> Result<Phase, String> {
    process_hub::telemetry::metrics::set_enabled(on);
    let load = on.then(|| DashboardLoad::start(hub));
    let phase = hub_round(hub, n, round).await;
    if let Some(load) = load {
        load.end().await;
    }
    phase
}

struct Phase {
    start: Duration,
    stop: Duration,
}

/// Marks the start of a phase for an instruction profile: with
/// `valgrind --tool=callgrind --dump-before='*phase_mark*'` every phase of the run is its own
/// dump (numbered in the order the phases are printed with `PROCESS_HUB_BENCH_PHASES=1`).
/// Costs a call.
#[inline(never)]
fn phase_mark(phase: &'static str) {
    if std::env::var_os("PROCESS_HUB_BENCH_PHASES").is_some() {
        eprintln!("phase {phase}");
    }
    std::hint::black_box(phase);
}

async fn plain_round(n: usize) -> Result<Phase, String> {
    phase_mark("plain_spawn");
    let t0 = Instant::now();
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        let (actor, join) = Actor::spawn(None, Counter, None)
            .await
            .map_err(|e| e.to_string())?;
        actors.push((actor, join));
    }
    let t1 = Instant::now();
    phase_mark("plain_stop");
    for (actor, _) in &actors {
        actor.stop(None);
    }
    for (_, join) in actors {
        join.await.map_err(|e| e.to_string())?;
    }
    let t2 = Instant::now();
    phase_mark("other");
    Ok(Phase {
        start: t1 - t0,
        stop: t2 - t1,
    })
}

async fn hub_round(hub: &Hub, n: usize, round: usize) -> Result<Phase, String> {
    let specs: Vec<ChildSpec> = (0..n)
        .map(|i| ChildSpec::new(format!("r{round}-c{i}"), counter::KIND))
        .collect();
    let ids: Vec<ChildId> = specs.iter().map(|s| s.id.clone()).collect();
    let opts = StartOptions::new().timeout(Duration::from_secs(600));
    phase_mark("hub_start");
    let t0 = Instant::now();
    let started = hub
        .start_children(specs, opts)
        .await
        .map_err(|e| e.to_string())?;
    let t1 = Instant::now();
    phase_mark("hub_stop");
    if !started.is_ok() || started.started.len() != n {
        return Err(format!("hub start failed: {} errors", started.errors.len()));
    }
    let stopped = hub
        .stop_children(ids, StopOptions::new().timeout(Duration::from_secs(600)))
        .await
        .map_err(|e| e.to_string())?;
    let t2 = Instant::now();
    phase_mark("other");
    if !stopped.is_ok() || stopped.stopped.len() != n {
        return Err(format!("hub stop failed: {} errors", stopped.errors.len()));
    }
    if !hub.registry_dump().is_empty() {
        return Err("registry not empty after stop".into());
    }
    Ok(Phase {
        start: t1 - t0,
        stop: t2 - t1,
    })
}

fn median(phases: impl IntoIterator<Item = Duration>) -> Duration {
    phases.into_iter().collect::<Latencies>().median()
}

fn per_s(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// Runs the benchmark and prints its JSON line.
pub fn run(args: StartBenchArgs) -> Result<(), String> {
    if args.nodes != 1 {
        return Err("bench start supports --nodes 1 until the cluster exists".into());
    }
    if args.children == 0 || args.rounds == 0 {
        return Err("--children and --rounds must be at least 1".into());
    }
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    if args.telemetry != "off" {
        process_hub::telemetry::install_prometheus().map_err(|e| e.to_string())?;
    }
    rt.block_on(async move {
        let n = args.children;
        let telemetry_on = args.telemetry == "on";
        let compare = args.telemetry == "compare";
        let mut off_phases = Vec::new();
        let (hub, _join) = Hub::spawn(ProcessHub::new("bench-start"), crate::default_kinds())
            .await
            .map_err(|e| e.to_string())?;
        eprintln!(
            "bench start: {n} children, 1 warm-up + {} rounds",
            args.rounds
        );
        let (mut hub_phases, mut plain_phases) = (Vec::new(), Vec::new());
        let (run_hub, run_plain) = match args.only.as_deref() {
            Some("hub") => (true, false),
            Some("plain") => (false, true),
            _ => (true, true),
        };
        let skipped = || Phase {
            start: Duration::ZERO,
            stop: Duration::ZERO,
        };
        for round in 0..=args.rounds {
            let on = telemetry_on || compare;
            let (h, p) = if round % 2 == 0 {
                let h = if run_hub {
                    hub_round_with(&hub, n, round, on).await?
                } else {
                    skipped()
                };
                let p = if run_plain {
                    plain_round(n).await?
                } else {
                    skipped()
                };
                (h, p)
            } else {
                let p = if run_plain {
                    plain_round(n).await?
                } else {
                    skipped()
                };
                let h = if run_hub {
                    hub_round_with(&hub, n, round, on).await?
                } else {
                    skipped()
                };
                (h, p)
            };
            if compare {
                // The same hub with telemetry off, in the same round (the two orders alternate
                // with the rounds, as hub and baseline do).
                let off = hub_round_with(&hub, n, round + 1_000, false).await?;
                if round > 0 {
                    off_phases.push(off);
                }
            }
            eprintln!(
                "round {round}{}: hub start {:?} stop {:?} | ractor spawn {:?} stop {:?}",
                if round == 0 { " (warm-up)" } else { "" },
                h.start,
                h.stop,
                p.start,
                p.stop
            );
            if round > 0 {
                hub_phases.push(h);
                plain_phases.push(p);
            }
        }
        hub.shutdown().await.map_err(|e| e.to_string())?;
        let hub_start = median(hub_phases.iter().map(|p| p.start));
        let hub_stop = median(hub_phases.iter().map(|p| p.stop));
        let hub_total = median(hub_phases.iter().map(|p| p.start + p.stop));
        let plain_start = median(plain_phases.iter().map(|p| p.start));
        let plain_stop = median(plain_phases.iter().map(|p| p.stop));
        let plain_total = median(plain_phases.iter().map(|p| p.start + p.stop));
        let off_total =
            (!off_phases.is_empty()).then(|| median(off_phases.iter().map(|p| p.start + p.stop)));
        let mut out = json!({
            "bench": "start",
            "nodes": 1,
            "children": n,
            "rounds": args.rounds,
            "backend": "memory",
            "start_per_s": per_s(n, hub_start),
            "stop_per_s": per_s(n, hub_stop),
            "hub_start_ms": hub_start.as_secs_f64() * 1e3,
            "hub_stop_ms": hub_stop.as_secs_f64() * 1e3,
            "ractor_spawn_per_s": per_s(n, plain_start),
            "ractor_stop_per_s": per_s(n, plain_stop),
            "ractor_spawn_ms": plain_start.as_secs_f64() * 1e3,
            "ractor_stop_ms": plain_stop.as_secs_f64() * 1e3,
            "overhead_ratio": hub_total.as_secs_f64() / plain_total.as_secs_f64().max(1e-9),
        });
        out["telemetry"] = json!(args.telemetry);
        if let Some(only) = &args.only {
            out["only"] = json!(only);
            out["overhead_ratio"] = serde_json::Value::Null;
            // The side that did not run has no figures.
            let skipped = if run_hub {
                [
                    "ractor_spawn_per_s",
                    "ractor_stop_per_s",
                    "ractor_spawn_ms",
                    "ractor_stop_ms",
                ]
            } else {
                ["start_per_s", "stop_per_s", "hub_start_ms", "hub_stop_ms"]
            };
            for key in skipped {
                out[key] = serde_json::Value::Null;
            }
        }
        if let Some(off_total) = off_total {
            let on_rate = 1.0 / hub_total.as_secs_f64().max(1e-9);
            let off_rate = 1.0 / off_total.as_secs_f64().max(1e-9);
            out["telemetry_off_start_stop_ms"] = json!(off_total.as_secs_f64() * 1e3);
            out["telemetry_on_start_stop_ms"] = json!(hub_total.as_secs_f64() * 1e3);
            out["telemetry_throughput_change"] = json!(on_rate / off_rate - 1.0);
        }
        println!("{out}");
        Ok(())
    })
}
