//! `process-hub bench call --json`: a typed remote call through the hub (`ChildRef::call`)
//! against the same call to a plain ractor_cluster remote actor, between the same two processes.
//!
//! The bench process is node `client`; it spawns one `process-hub bench-call-host` process,
//! node `host`, on loopback. The host runs the hub with a `bench_echo` child and, beside it, a
//! plain remotable actor of the same behaviour in a ractor_cluster process group (the baseline).
//! Both are reached over the one ractor_cluster session between the two processes:
//! - `call_p50_us` / `call_p99_us`: sequential `ChildRef::call` round trips to the child;
//! - `baseline_p50_us` / `baseline_p99_us`: sequential `ActorRef::call` to the pg actor's proxy;
//! - `casts_per_sec`: N `ChildRef::cast`s then one call that answers how many arrived, against
//!   `baseline_casts_per_sec`, the same through the proxy;
//! - `proxies_for_hub_children`: remote proxies this node holds for the host's hub children
//!   (0: a `ChildMessage` child is not advertised), beside `proxies_for_baseline` (1).
//!
//! Ratios are hub / baseline (latency) and baseline / hub (throughput): above 1 is slower.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use process_hub::cluster::node::{ClusterConfig, ClusterNode};
use process_hub::{ChildKinds, ChildMessage, ChildSpec, Hub, ProcessHub, StartOptions};
use ractor::{pg, Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorClusterMessage;
use serde_json::json;

use super::latency::Latencies;

const HUB: &str = "bench_call";
const SCOPE: &str = "process_hub_bench_call";
const GROUP: &str = "echo";
const TIMEOUT: Duration = Duration::from_secs(10);

/// Flags of `bench call`.
#[derive(Args, Debug)]
pub struct CallBenchArgs {
    /// Sequential calls measured (after as many warm-up calls, a tenth of them).
    #[arg(long, default_value_t = 5_000)]
    pub calls: usize,
    /// Casts measured.
    #[arg(long, default_value_t = 50_000)]
    pub casts: usize,
    /// Print the result as JSON (the only format; kept for the documented command line).
    #[arg(long)]
    pub json: bool,
}

/// Hidden `process-hub bench-call-host` flags.
#[derive(Args, Debug, Clone)]
pub struct CallHostArgs {
    /// Port to listen on (loopback).
    #[arg(long)]
    pub port: u16,
    /// The cluster cookie.
    #[arg(long)]
    pub cookie: String,
}

/// The hub child's messages: `ChildMessage`, so the child is not advertised to the client.
#[derive(Debug, ChildMessage)]
pub enum EchoMsg {
    /// Counts one cast.
    Ping(u64),
    /// Answers its argument.
    #[rpc]
    Echo(u64, RpcReplyPort<u64>),
    /// Answers how many pings arrived, and resets the count.
    #[rpc]
    Pings(RpcReplyPort<u64>),
}

/// The baseline's messages: the same, as a plain remotable ractor_cluster type.
#[derive(RactorClusterMessage)]
pub enum BaselineEchoMsg {
    /// Counts one cast.
    Ping(u64),
    /// Answers its argument.
    #[rpc]
    Echo(u64, RpcReplyPort<u64>),
    /// Answers how many pings arrived, and resets the count.
    #[rpc]
    Pings(RpcReplyPort<u64>),
}

/// The echo child of the hub.
#[derive(Clone, Copy, Debug, Default)]
pub struct Echo;

impl Actor for Echo {
    type Msg = EchoMsg;
    type State = u64;
    type Arguments = Option<()>;

    async fn pre_start(
        &self,
        _: ActorRef<EchoMsg>,
        _: Option<()>,
    ) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _: ActorRef<EchoMsg>,
        msg: EchoMsg,
        pings: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            EchoMsg::Ping(_) => *pings += 1,
            EchoMsg::Echo(n, reply) => {
                let _ = reply.send(n);
            }
            EchoMsg::Pings(reply) => {
                let _ = reply.send(std::mem::take(pings));
            }
        }
        Ok(())
    }
}

struct BaselineEcho;

impl Actor for BaselineEcho {
    type Msg = BaselineEchoMsg;
    type State = u64;
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ActorRef<BaselineEchoMsg>,
        _: (),
    ) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _: ActorRef<BaselineEchoMsg>,
        msg: BaselineEchoMsg,
        pings: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            BaselineEchoMsg::Ping(_) => *pings += 1,
            BaselineEchoMsg::Echo(n, reply) => {
                let _ = reply.send(n);
            }
            BaselineEchoMsg::Pings(reply) => {
                let _ = reply.send(std::mem::take(pings));
            }
        }
        Ok(())
    }
}

fn kinds() -> ChildKinds {
    let mut kinds = ChildKinds::new();
    kinds.register("bench_echo", Echo);
    kinds
}

async fn hub_on(
    name: &str,
    port: u16,
    cookie: &str,
    seeds: Vec<String>,
) -> Result<(Hub, Arc<ClusterNode>), String> {
    let mut config = ClusterConfig::new(name, "127.0.0.1", port, cookie);
    config.bind = Some(std::net::Ipv4Addr::LOCALHOST.into());
    config.seeds = seeds;
    let node = Arc::new(
        ClusterNode::start(config)
            .await
            .map_err(|e| e.to_string())?,
    );
    let hub_config = ProcessHub::builder(HUB)
        .build()
        .map_err(|e| e.to_string())?;
    let (hub, _) = Hub::builder(hub_config, kinds())
        .network(node.clone())
        .spawn()
        .await
        .map_err(|e| e.to_string())?;
    Ok((hub, node))
}

/// Runs the host process until stdin closes.
pub async fn run_host(args: CallHostArgs) -> Result<(), String> {
    let (hub, _node) = hub_on("host", args.port, &args.cookie, Vec::new()).await?;
    let (baseline, _) = Actor::spawn(None, BaselineEcho, ())
        .await
        .map_err(|e| e.to_string())?;
    pg::join_scoped(
        SCOPE.to_owned(),
        GROUP.to_owned(),
        vec![baseline.get_cell()],
    );
    println!("READY");
    let _ = std::io::stdout().flush();
    tokio::task::spawn_blocking(|| for _ in std::io::stdin().lock().lines() {})
        .await
        .map_err(|e| e.to_string())?;
    let _ = hub.shutdown().await;
    Ok(())
}

/// The sample at quantile `q`, in whole microseconds.
fn quantile_us(latencies: &Latencies, q: f64) -> u64 {
    u64::try_from(latencies.quantile(q).as_micros()).unwrap_or(u64::MAX)
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// Remote proxies this process holds (actors of the pid registry that are not local).
fn remote_proxies() -> usize {
    ractor::registry::pid_registry::get_all_pids()
        .iter()
        .filter(|c| !c.get_id().is_local())
        .count()
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> Result<T, String> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > Duration::from_secs(30) {
            return Err(format!("timed out waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the benchmark and prints its JSON line.
pub fn run(args: CallBenchArgs) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(measure(args))
}

async fn measure(args: CallBenchArgs) -> Result<(), String> {
    let binary = std::env::current_exe().map_err(|e| e.to_string())?;
    let host_port = crate::harness::free_port().map_err(|e| e.to_string())?;
    let cookie = crate::cli::secrets::random_secret();
    let mut host = Command::new(binary)
        .args([
            "bench-call-host",
            "--port",
            &host_port.to_string(),
            "--cookie",
            &cookie,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut out = BufReader::new(host.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    out.read_line(&mut line).map_err(|e| e.to_string())?;
    if !line.starts_with("READY") {
        let _ = host.kill();
        return Err(format!("host: expected READY, got {line:?}"));
    }
    let result = against(&args, host_port, &cookie).await;
    drop(host.stdin.take());
    let _ = host.kill();
    let _ = host.wait();
    let out = result?;
    println!("{out}");
    Ok(())
}

async fn against(
    args: &CallBenchArgs,
    host_port: u16,
    cookie: &str,
) -> Result<serde_json::Value, String> {
    let port = crate::harness::free_port().map_err(|e| e.to_string())?;
    let (hub, _node) = hub_on(
        "client",
        port,
        cookie,
        vec![format!("127.0.0.1:{host_port}")],
    )
    .await?;
    let host = "host@127.0.0.1".to_owned();
    wait_for("the host to join", || {
        hub.nodes(false).contains(&host).then_some(())
    })
    .await?;
    let proxies_before = remote_proxies();
    // Children until one runs on the host (placement decides).
    let mut target = None;
    for i in 0..64 {
        let spec = ChildSpec::new(format!("echo-{i}"), "bench_echo");
        let id = spec.id.clone();
        let started = hub
            .start_child(spec, StartOptions::new())
            .await
            .map_err(|e| e.to_string())?;
        if started
            .started
            .iter()
            .any(|s| s.nodes.iter().any(|(n, _)| n == &host))
        {
            target = Some(id);
            break;
        }
    }
    let id = target.ok_or("no child landed on the host")?;
    eprintln!(
        "bench call: child {id} runs on {host}; {} calls, {} casts",
        args.calls, args.casts
    );
    let child = hub.child_ref::<EchoMsg>(id.clone());
    let baseline: ActorRef<BaselineEchoMsg> = wait_for("the baseline actor", || {
        pg::get_scoped_members(&SCOPE.to_owned(), &GROUP.to_owned())
            .into_iter()
            .find(|c| !c.get_id().is_local())
            .map(ActorRef::from)
    })
    .await?;
    let hub_children_proxies = remote_proxies().saturating_sub(proxies_before);

    let warm = (args.calls / 10).max(10);
    let (mut hub_calls, mut base_calls) = (Latencies::new(), Latencies::new());
    for i in 0..(warm + args.calls) as u64 {
        // Alternate, so both see the same machine conditions.
        let t = Instant::now();
        let v = child
            .call(|r| EchoMsg::Echo(i, r), TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let hub_t = t.elapsed();
        let t = Instant::now();
        let b = baseline
            .call(|r| BaselineEchoMsg::Echo(i, r), Some(TIMEOUT))
            .await
            .map_err(|e| e.to_string())?;
        let base_t = t.elapsed();
        if v != i || !matches!(b, ractor::rpc::CallResult::Success(x) if x == i) {
            return Err(format!("call {i}: wrong answer"));
        }
        if i as usize >= warm {
            hub_calls.record(hub_t);
            base_calls.record(base_t);
        }
    }
    let (p50, p99) = (quantile_us(&hub_calls, 0.5), quantile_us(&hub_calls, 0.99));
    let (b50, b99) = (
        quantile_us(&base_calls, 0.5),
        quantile_us(&base_calls, 0.99),
    );
    eprintln!("calls: hub p50 {p50} us p99 {p99} us; baseline p50 {b50} us p99 {b99} us");

    let t = Instant::now();
    for i in 0..args.casts as u64 {
        child.cast(EchoMsg::Ping(i)).map_err(|e| e.to_string())?;
    }
    let got = child
        .call(EchoMsg::Pings, Duration::from_secs(120))
        .await
        .map_err(|e| e.to_string())?;
    let hub_casts = args.casts as f64 / t.elapsed().as_secs_f64();
    if got != args.casts as u64 {
        return Err(format!("hub casts: {got} of {} arrived", args.casts));
    }
    let t = Instant::now();
    for i in 0..args.casts as u64 {
        baseline
            .cast(BaselineEchoMsg::Ping(i))
            .map_err(|e| e.to_string())?;
    }
    let got = baseline
        .call(BaselineEchoMsg::Pings, Some(Duration::from_secs(120)))
        .await
        .map_err(|e| e.to_string())?;
    let base_casts = args.casts as f64 / t.elapsed().as_secs_f64();
    if !matches!(got, ractor::rpc::CallResult::Success(n) if n == args.casts as u64) {
        return Err("baseline casts: not all arrived".into());
    }
    eprintln!("casts: hub {hub_casts:.0}/s, baseline {base_casts:.0}/s");
    let _ = hub.shutdown().await;
    Ok(json!({
        "bench": "call",
        "calls": args.calls,
        "casts": args.casts,
        "call_p50_us": p50,
        "call_p99_us": p99,
        "baseline_p50_us": b50,
        "baseline_p99_us": b99,
        "p50_ratio": ratio(p50 as f64, b50 as f64),
        "p99_ratio": ratio(p99 as f64, b99 as f64),
        "casts_per_sec": hub_casts.round(),
        "baseline_casts_per_sec": base_casts.round(),
        "casts_ratio": ratio(base_casts, hub_casts),
        "proxies_for_hub_children": hub_children_proxies,
        "proxies_for_baseline": 1,
    }))
}
