//! The in-run baseline of `bench cluster`: the same kind of actors spread over the same number
//! of OS processes by hand, with nothing but ractor and ractor_cluster process groups.
//!
//! Each baseline process runs a `NodeServer`, connects to its seeds, and on `GO` (a line on
//! stdin) spawns its share of the actors and joins them to one process group; it prints
//! `CONVERGED <unix_ms>` once it sees every actor of every process in that group. The time
//! from `GO` to the last `CONVERGED` is what a user gets by hand, and what the hub is measured
//! against: the hub does more (placement, supervision, a registry) and should not be slower to
//! converge.
//!
//! The **bare** baseline ([`measure_bare`], `process-hub bare-baseline-node`) is the same
//! number of processes with no cluster at all: each spawns its share of the hub's own `counter`
//! actor ([`crate::counter::Counter`], `Actor::spawn`, unnamed, no pg), then stops them all and
//! waits until each has terminated. It is what the hub's children cost as plain actors: the
//! spawn and stop rates, and the resident memory per actor summed over the processes, measured
//! as the hub's `rss_bytes_per_child` is (RSS from `/proc` after minus before, see
//! [`rss_bytes`]). The difference between the two memory figures is the hub's own cost.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use ractor::{pg, Actor, ActorProcessingErr, ActorRef};
use ractor_cluster::{NodeServer, RactorClusterMessage};

/// The pg scope of the baseline.
const SCOPE: &str = "process_hub_baseline";
/// The group every baseline child joins.
const CHILDREN: &str = "children";
/// The group of one marker per process: full membership means every session is up.
const READY: &str = "ready";

/// Hidden `process-hub baseline-node` flags.
#[derive(Args, Debug, Clone)]
pub struct BaselineArgs {
    /// This node's name.
    #[arg(long)]
    pub name: String,
    /// Where to listen.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Peers to connect to.
    #[arg(long, value_delimiter = ',')]
    pub join: Vec<SocketAddr>,
    /// Cluster cookie (the spawning benchmark draws a random one per run).
    #[arg(long)]
    pub cookie: String,
    /// Number of baseline processes.
    #[arg(long)]
    pub nodes: usize,
    /// Actors this process spawns.
    #[arg(long)]
    pub share: usize,
    /// Actors across all processes.
    #[arg(long)]
    pub total: usize,
}

/// Hidden `process-hub bare-baseline-node` flags.
#[derive(Args, Debug, Clone)]
pub struct BareArgs {
    /// Actors this process spawns.
    #[arg(long)]
    pub share: usize,
}

/// A remotable counter: remotable because only remotable actors are visible in remote pg groups.
#[derive(RactorClusterMessage)]
pub enum BaselineCounterMsg {
    /// Adds to the count.
    Add(u64),
}

/// The baseline child: a counter, as in the hub's benchmark.
pub struct BaselineCounter;

impl Actor for BaselineCounter {
    type Msg = BaselineCounterMsg;
    type State = u64;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Self::Msg>, _: ()) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            BaselineCounterMsg::Add(n) => *state += n,
        }
        Ok(())
    }
}

fn unix_ms() -> u128 {
    unix_us() / 1_000
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn wait_members(group: &str, expected: usize) {
    loop {
        let seen = pg::get_scoped_members(&SCOPE.to_owned(), &group.to_owned()).len();
        if seen >= expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Runs one baseline process until stdin closes.
pub async fn run(args: BaselineArgs) -> Result<(), ractor::SpawnErr> {
    let server = NodeServer::new(
        args.listen.port(),
        args.cookie.clone(),
        args.name.clone(),
        args.listen.ip().to_string(),
        None,
        Some(ractor_cluster::node::NodeConnectionMode::Transitive),
    );
    let (server, _) = Actor::spawn(None, server, ()).await?;
    for seed in &args.join {
        while let Err(e) = ractor_cluster::client_connect(&server, *seed).await {
            tracing::debug!(%seed, error = %e, "baseline seed not reachable yet");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let (marker, _) = Actor::spawn(None, BaselineCounter, ()).await?;
    pg::join_scoped(SCOPE.to_owned(), READY.to_owned(), vec![marker.get_cell()]);
    wait_members(READY, args.nodes).await;
    say("READY");

    let mut lines = stdin_lines();
    wait_line(&mut lines, "GO").await;
    let mut cells = Vec::with_capacity(args.share);
    for _ in 0..args.share {
        let (actor, _) = Actor::spawn(None, BaselineCounter, ()).await?;
        cells.push(actor.get_cell());
    }
    pg::join_scoped(SCOPE.to_owned(), CHILDREN.to_owned(), cells.clone());
    wait_members(CHILDREN, args.total).await;
    say(&format!("CONVERGED {}", unix_ms()));
    // Stay up (serving our actors to the peers) until the bench closes stdin.
    while lines.recv().await.is_some() {}
    for cell in cells {
        cell.stop(None);
    }
    Ok(())
}

fn unix_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

/// The lines of stdin, read on a thread of their own.
fn stdin_lines() -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (lines_tx, lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

async fn wait_line(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>, word: &str) {
    while let Some(line) = lines.recv().await {
        if line.trim() == word {
            return;
        }
    }
}

/// Runs one bare baseline process: says `READY`; on `GO` spawns its share of counters and says
/// `SPAWNED <unix_us>`; on `STOP` stops them all, waits until each has terminated and says
/// `STOPPED <unix_us>`; then exits.
pub async fn run_bare(args: BareArgs) -> Result<(), ractor::SpawnErr> {
    let mut lines = stdin_lines();
    say("READY");
    wait_line(&mut lines, "GO").await;
    let mut actors = Vec::with_capacity(args.share);
    for _ in 0..args.share {
        actors.push(Actor::spawn(None, crate::counter::Counter, None).await?);
    }
    say(&format!("SPAWNED {}", unix_us()));
    wait_line(&mut lines, "STOP").await;
    for (actor, _) in &actors {
        actor.stop(None);
    }
    for (_, handle) in actors {
        let _ = handle.await;
    }
    say(&format!("STOPPED {}", unix_us()));
    Ok(())
}

/// What the bare baseline measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BareReport {
    /// Actors over all processes.
    pub actors: usize,
    /// Actors / time from `GO` until the last process had spawned its share.
    pub start_per_s: f64,
    /// Actors / time from `STOP` until the last process saw every actor of its share terminate.
    pub stop_per_s: f64,
    /// Resident memory added per actor, summed over the processes.
    pub actor_bytes_per_child: f64,
}

/// What the baseline measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BaselineReport {
    /// From `GO` until every process saw every actor in the group.
    pub converge_ms: u64,
    /// Resident memory added per actor, summed over the processes.
    pub rss_bytes_per_child: f64,
}

/// Why the baseline could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// A process could not be started or talked to.
    #[error("baseline process: {0}")]
    Io(#[from] std::io::Error),
    /// A process exited or said something unexpected.
    #[error("baseline process {name} failed: {message}")]
    Protocol {
        /// The process's name.
        name: String,
        /// What went wrong.
        message: String,
    },
}

/// Resident set size of a process, from `/proc` (0 where unavailable).
pub fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Runs `nodes` baseline processes of `binary` sharing `total` actors and measures them.
pub fn measure(
    binary: &std::path::Path,
    nodes: usize,
    total: usize,
) -> Result<BaselineReport, BaselineError> {
    use std::io::BufReader;
    use std::process::{Command, Stdio};

    let ports = (0..nodes)
        .map(|_| crate::harness::free_port())
        .collect::<Result<Vec<_>, _>>()?;
    let cookie = crate::cli::secrets::random_secret();
    let mut procs = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let share = total / nodes + usize::from(i < total % nodes);
        let join: Vec<String> = ports[..i]
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let mut cmd = Command::new(binary);
        cmd.args([
            "baseline-node",
            "--name",
            &format!("b{}", i + 1),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--nodes",
            &nodes.to_string(),
            "--share",
            &share.to_string(),
            "--total",
            &total.to_string(),
            "--cookie",
            &cookie,
        ]);
        if !join.is_empty() {
            cmd.arg("--join").arg(join.join(","));
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        procs.push((format!("b{}", i + 1), child, stdout));
    }
    let expect = |name: &str, reader: &mut BufReader<std::process::ChildStdout>, word: &str| {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line.starts_with(word) {
            Ok(line)
        } else {
            Err(BaselineError::Protocol {
                name: name.to_owned(),
                message: format!("expected {word}, got {line:?}"),
            })
        }
    };
    for (name, _, out) in &mut procs {
        expect(name, out, "READY")?;
    }
    let rss_before: u64 = procs.iter().map(|(_, c, _)| rss_bytes(c.id())).sum();
    let go = unix_ms();
    for (_, child, _) in &mut procs {
        let stdin = child.stdin.as_mut().expect("piped stdin");
        writeln!(stdin, "GO")?;
        stdin.flush()?;
    }
    let mut last = go;
    for (name, _, out) in &mut procs {
        let line = expect(name, out, "CONVERGED")?;
        let at: u128 = line
            .split_whitespace()
            .nth(1)
            .and_then(|t| t.parse().ok())
            .unwrap_or(go);
        last = last.max(at);
    }
    let rss_after: u64 = procs.iter().map(|(_, c, _)| rss_bytes(c.id())).sum();
    for (_, mut child, _) in procs {
        drop(child.stdin.take());
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(BaselineReport {
        converge_ms: (last - go) as u64,
        rss_bytes_per_child: rss_after.saturating_sub(rss_before) as f64 / total.max(1) as f64,
    })
}

type BareProcess = (
    String,
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
);

/// Reads the next line of a baseline process and checks it starts with `word`.
fn expect_line(
    name: &str,
    reader: &mut std::io::BufReader<std::process::ChildStdout>,
    word: &str,
) -> Result<String, BaselineError> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line.starts_with(word) {
        Ok(line)
    } else {
        Err(BaselineError::Protocol {
            name: name.to_owned(),
            message: format!("expected {word}, got {line:?}"),
        })
    }
}

/// Writes `word` to every process, then answers the latest `<word'> <unix_us>` they reply with.
fn round(procs: &mut [BareProcess], say: &str, reply: &str) -> Result<u128, BaselineError> {
    for (_, child, _) in procs.iter_mut() {
        let stdin = child.stdin.as_mut().expect("piped stdin");
        writeln!(stdin, "{say}")?;
        stdin.flush()?;
    }
    let mut last = 0;
    for (name, _, out) in procs.iter_mut() {
        let line = expect_line(name, out, reply)?;
        let at: u128 = line
            .split_whitespace()
            .nth(1)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| BaselineError::Protocol {
                name: name.clone(),
                message: format!("no time in {line:?}"),
            })?;
        last = last.max(at);
    }
    Ok(last)
}

/// Runs `nodes` bare baseline processes of `binary` sharing `total` counters (see the module
/// docs) and measures them.
pub fn measure_bare(
    binary: &std::path::Path,
    nodes: usize,
    total: usize,
) -> Result<BareReport, BaselineError> {
    use std::process::{Command, Stdio};

    let nodes = nodes.max(1);
    let mut procs: Vec<BareProcess> = Vec::new();
    for i in 0..nodes {
        let share = total / nodes + usize::from(i < total % nodes);
        let mut child = Command::new(binary)
            .args(["bare-baseline-node", "--share", &share.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        procs.push((format!("bare{}", i + 1), child, stdout));
    }
    let outcome = (|| {
        for (name, _, out) in &mut procs {
            expect_line(name, out, "READY")?;
        }
        let rss_before: u64 = procs.iter().map(|(_, c, _)| rss_bytes(c.id())).sum();
        let go = unix_us();
        let spawned = round(&mut procs, "GO", "SPAWNED")?;
        let rss_after: u64 = procs.iter().map(|(_, c, _)| rss_bytes(c.id())).sum();
        let stop = unix_us();
        let stopped = round(&mut procs, "STOP", "STOPPED")?;
        let per_s =
            |from: u128, to: u128| total as f64 / (to.saturating_sub(from).max(1) as f64 / 1e6);
        Ok(BareReport {
            actors: total,
            start_per_s: per_s(go, spawned),
            stop_per_s: per_s(stop, stopped),
            actor_bytes_per_child: rss_after.saturating_sub(rss_before) as f64
                / total.max(1) as f64,
        })
    })();
    for (_, mut child, _) in procs {
        drop(child.stdin.take());
        let _ = child.kill();
        let _ = child.wait();
    }
    outcome
}
