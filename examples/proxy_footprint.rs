//! Measures what ractor_cluster's eager remote proxies cost, to weigh them against routing
//! messages to children through the hub (docs/cluster.md, "Messaging a child from any node").
//!
//! `cargo run --release --example proxy_footprint -- 20000` starts a host process with N
//! remotable actors in a pg group, connects to it from this process, waits until all N proxies
//! exist here, and prints the resident memory per proxy; then spawns N plain local actors here
//! for comparison. Linux only (reads /proc/self/statm).

use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use ractor_cluster::{BytesConvertable, NodeServer};

#[derive(Debug)]
struct Ping(Vec<u8>);

impl BytesConvertable for Ping {
    fn into_bytes(self) -> Vec<u8> {
        self.0
    }
    fn from_bytes(bytes: Vec<u8>) -> Self {
        Ping(bytes)
    }
}

struct Child;

impl Actor for Child {
    type Msg = Ping;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<Ping>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn spawn_children(n: usize, group: Option<&str>) -> Vec<ActorRef<Ping>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let (actor, _) = Actor::spawn(None, Child, ()).await.unwrap();
        if let Some(group) = group {
            ractor::pg::join(group.to_owned(), vec![actor.get_cell()]);
        }
        out.push(actor);
    }
    out
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("host") {
        let port: u16 = args[2].parse().unwrap();
        let n: usize = args[3].parse().unwrap();
        let server = NodeServer::new(
            port,
            "c".into(),
            "host".into(),
            "127.0.0.1".into(),
            None,
            None,
        );
        let _ = Actor::spawn(None, server, ()).await.unwrap();
        let _children = spawn_children(n, Some("g")).await;
        println!("ready");
        tokio::time::sleep(Duration::from_secs(600)).await;
        return;
    }
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let port = free_port();
    let mut host = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["host", &port.to_string(), &n.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(host.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();

    let server = NodeServer::new(
        free_port(),
        "c".into(),
        "probe".into(),
        "127.0.0.1".into(),
        None,
        None,
    );
    let (server, _) = Actor::spawn(None, server, ()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_bytes();
    let started = Instant::now();
    ractor_cluster::client_connect(&server, format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    while ractor::pg::get_members(&"g".to_owned()).len() < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "proxies never arrived"
        );
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let proxies = rss_bytes().saturating_sub(before);

    let before = rss_bytes();
    let _local = spawn_children(n, None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let locals = rss_bytes().saturating_sub(before);
    println!(
        "{{\"n\": {n}, \"proxy_bytes_each\": {}, \"proxies_ready_ms\": {}, \"local_actor_bytes_each\": {}}}",
        proxies / n as u64,
        took.as_millis(),
        locals / n as u64
    );
    let _ = host.kill();
    let _ = host.wait();
}
