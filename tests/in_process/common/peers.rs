//! The multi-process tests' nodes: real ractor_cluster nodes in separate OS processes on
//! loopback ([`Peer`]), and the test process's own node ([`Local`]).
//!
//! One scenario per process: ractor's registries are process-global and the ids of remote
//! proxies are per-node-server counters, so two `ClusterNode`s in one process would collide.
//! Each test that starts a [`Local`] runs alone in a process of its own ([`super::alone`]).
//!
//! ractor's pg groups are process-global, so a second node must be a second process: the test
//! binary re-executes itself, running only the ignored `peer_node_entry` test with the peer's
//! configuration in environment variables. The peer prints its events on stdout, answers every
//! `ChildCast` with a `ChildCast` back to the sender, and exits when its stdin closes (so a
//! failed test leaves no process behind).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use process_hub::cluster::gateway::WirePolicy;
use process_hub::cluster::node::{ClusterConfig, ClusterNode, TlsConfig};
use process_hub::cluster::transport::{Network, Transport, TransportEvent};
use process_hub::cluster::wire::WireMsg;
use process_hub::core::backoff::BackoffConfig;
use process_hub::core::failure_detector::DetectorConfig;
use tokio::sync::mpsc;

use super::DEADLINE;

pub fn fast_heartbeat() -> DetectorConfig {
    DetectorConfig {
        interval: Duration::from_millis(100),
        suspect_after: Duration::from_millis(300),
        timeout: Duration::from_millis(1_500),
    }
}

pub fn fast_reconnect() -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(500),
        ..BackoffConfig::default()
    }
}

/// TLS from the test fixtures: a node certificate for `node.process-hub.test` signed by a
/// test CA (both valid for a century; never use them outside tests).
pub fn tls_config() -> TlsConfig {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls");
    let read = |f: &str| std::fs::read(format!("{dir}/{f}")).unwrap();
    let chain = vec![CertificateDer::from_pem_slice(&read("node.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(&read("node.key")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&read("ca.pem")).unwrap())
        .unwrap();
    let server = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConfig {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
        connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
        server_name: ServerName::try_from("node.process-hub.test").unwrap(),
    }
}

/// The peer process's side: runs only when re-executed by a test (the binary wraps it
/// in an ignored `peer_node_entry` test).
pub fn peer_node_entry() {
    let Ok(name) = std::env::var("PH_PEER_NAME") else {
        return;
    };
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let port: u16 = env("PH_PEER_PORT").parse().unwrap();
    let seeds: Vec<String> = env("PH_PEER_SEEDS")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    std::thread::spawn(|| {
        // The parent holds our stdin: when it goes away, so do we.
        let mut sink = String::new();
        while std::io::stdin()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {}
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut config = ClusterConfig::new(name, "127.0.0.1", port, env("PH_PEER_COOKIE"));
        config.seeds = seeds;
        config.heartbeat = fast_heartbeat();
        config.reconnect = fast_reconnect();
        if env("PH_PEER_TLS") == "1" {
            config.tls = Some(tls_config());
        }
        if let Ok(version) = env("PH_PEER_WIRE").parse() {
            config.wire.max_version = version;
        }
        let node = ClusterNode::start(config).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let transport = node
            .open_hub(
                &env("PH_PEER_HUB"),
                Arc::new(move |e| {
                    let _ = tx.send(e);
                }),
            )
            .unwrap();
        let out = move |line: String| {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "PH|{line}");
            let _ = stdout.flush();
        };
        out(format!("READY {}", node.boot_token()));
        let forge = env("PH_PEER_FORGE");
        if !forge.is_empty() {
            tokio::spawn(forge_frames(env("PH_PEER_HUB"), forge, out));
        }
        let node = Arc::new(node);
        let stats_node = node.clone();
        tokio::spawn(async move {
            // Lets a test see this node's own view (e.g. "tried 3 times, never connected").
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Ok(stats) = stats_node.stats().await {
                    out(format!(
                        "STATS attempts={} connected={}",
                        stats.attempts,
                        stats.connected.len()
                    ));
                }
            }
        });
        while let Some(event) = rx.recv().await {
            match event {
                TransportEvent::NodeUp { node, boot_token } => {
                    out(format!("UP {node} {boot_token}"))
                }
                TransportEvent::NodeDown { node } => out(format!("DOWN {node}")),
                TransportEvent::Message { from, msg } => {
                    if let WireMsg::ChildCast { id, payload, .. } = msg {
                        let mut echo = b"echo:".to_vec();
                        echo.extend_from_slice(&payload);
                        let _ = transport.send(
                            &from,
                            &WireMsg::ChildCast {
                                id,
                                payload: echo,
                                hops: 0,
                            },
                        );
                        out(format!("MSG {from}"));
                    }
                }
            }
        }
    });
}

/// A hostile peer holding the cookie: every 100 ms it sends every gateway of `hub` it can see
/// frames in `claimed`'s name: an open `ChildCast` and `Goodbye`, the same sealed with a key of
/// its own, and a key offer. None of them may be taken for `claimed`'s.
async fn forge_frames(hub: String, claimed: String, out: impl Fn(String) + Send + 'static) {
    use process_hub::cluster::gateway::{gateway_scope, GatewayFrame, GATEWAY_GROUP};
    use process_hub::cluster::wire::encode;
    use process_hub::cluster::wire::seal::{self, SealKey};

    let forged_cast = WireMsg::ChildCast {
        id: "forged".into(),
        payload: b"forged".to_vec(),
        hops: 0,
    };
    let mut frames = Vec::new();
    for msg in [&forged_cast, &WireMsg::Goodbye] {
        let open = encode(&hub, &claimed, msg).unwrap();
        frames.push(seal::seal(&open, &SealKey::random()).unwrap());
        frames.push(open);
    }
    frames.push(seal::key_offer(&hub, &claimed, &SealKey::random()).unwrap());
    let mut sent = 0u64;
    loop {
        let gateways =
            ractor::pg::get_scoped_members(&gateway_scope(&hub), &GATEWAY_GROUP.to_owned());
        for cell in gateways.into_iter().filter(|c| !c.get_id().is_local()) {
            let gateway: ractor::ActorRef<GatewayFrame> = cell.into();
            for frame in &frames {
                let _ = gateway.cast(GatewayFrame(frame.clone()));
                sent += 1;
            }
        }
        out(format!("FORGED {sent}"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub struct Peer {
    child: Child,
    lines: std_mpsc::Receiver<String>,
    pub boot_token: String,
}

impl Peer {
    pub fn spawn(name: &str, port: u16, cookie: &str, seeds: &[String], hub: &str) -> Peer {
        Self::spawn_with(name, port, cookie, seeds, hub, false)
    }

    pub fn spawn_with(
        name: &str,
        port: u16,
        cookie: &str,
        seeds: &[String],
        hub: &str,
        tls: bool,
    ) -> Peer {
        Self::spawn_env(name, port, cookie, seeds, hub, tls, &[])
    }

    /// A peer with extra settings: `PH_PEER_WIRE` (the newest wire version it speaks),
    /// `PH_PEER_FORGE` (a node name it forges frames in).
    pub fn spawn_env(
        name: &str,
        port: u16,
        cookie: &str,
        seeds: &[String],
        hub: &str,
        tls: bool,
        extra: &[(&str, &str)],
    ) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .envs(extra.iter().copied())
            .args([
                "--exact",
                "peer_node_entry",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PH_PEER_NAME", name)
            .env("PH_PEER_PORT", port.to_string())
            .env("PH_PEER_COOKIE", cookie)
            .env("PH_PEER_SEEDS", seeds.join(","))
            .env("PH_PEER_HUB", hub)
            .env("PH_PEER_TLS", if tls { "1" } else { "0" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std_mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The test harness may print "test peer_node_entry ... " before our first line.
                let Some(at) = line.find("PH|") else { continue };
                if tx.send(line[at + 3..].to_owned()).is_err() {
                    break;
                }
            }
        });
        let mut peer = Peer {
            child,
            lines,
            boot_token: String::new(),
        };
        let ready = peer.wait_line(|l| l.starts_with("READY "));
        peer.boot_token = ready["READY ".len()..].to_owned();
        peer
    }

    /// The next output line `pred` accepts; panics with the last lines seen if none comes
    /// within the deadline.
    pub fn wait_line(&mut self, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + DEADLINE;
        let mut seen: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return line,
                Ok(line) => {
                    if seen.len() == 20 {
                        seen.pop_front();
                    }
                    seen.push_back(line);
                }
                Err(e) => panic!(
                    "peer output ended or timed out ({e}) before the line waited for; its last lines:\n{}",
                    Vec::from(seen).join("\n")
                ),
            }
        }
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Local {
    pub node: ClusterNode,
    pub transport: Arc<dyn Transport>,
    pub events: mpsc::UnboundedReceiver<TransportEvent>,
}

impl Local {
    pub async fn start(cookie: &str, seeds: Vec<String>, hub: &str) -> Local {
        Self::start_with(cookie, seeds, hub, None).await
    }

    pub async fn start_with(
        cookie: &str,
        seeds: Vec<String>,
        hub: &str,
        tls: Option<TlsConfig>,
    ) -> Local {
        Self::start_wire(cookie, seeds, hub, tls, WirePolicy::default()).await
    }

    pub async fn start_wire(
        cookie: &str,
        seeds: Vec<String>,
        hub: &str,
        tls: Option<TlsConfig>,
        wire: WirePolicy,
    ) -> Local {
        let mut config = ClusterConfig::new("local", "127.0.0.1", 0, cookie);
        config.tls = tls;
        config.wire = wire;
        config.seeds = seeds;
        config.heartbeat = fast_heartbeat();
        config.reconnect = fast_reconnect();
        let node = ClusterNode::start(config).await.unwrap();
        let (tx, events) = mpsc::unbounded_channel();
        let transport = node
            .open_hub(
                hub,
                Arc::new(move |e| {
                    let _ = tx.send(e);
                }),
            )
            .unwrap();
        Local {
            node,
            transport,
            events,
        }
    }

    pub async fn wait_event(&mut self, pred: impl Fn(&TransportEvent) -> bool) -> TransportEvent {
        super::wait_event(&mut self.events, "a matching transport event", pred).await
    }

    pub async fn wait_up(&mut self, node: &str) -> String {
        match self
            .wait_event(|e| matches!(e, TransportEvent::NodeUp { node: n, .. } if n == node))
            .await
        {
            TransportEvent::NodeUp { boot_token, .. } => boot_token.to_string(),
            _ => unreachable!(),
        }
    }

    /// Waits until every node of `nodes` came up, in whatever order their `NodeUp`s arrive
    /// (waiting for them one by one would discard a later node's event met first).
    pub async fn wait_all_up(&mut self, nodes: &[&str]) {
        let mut missing: std::collections::BTreeSet<String> =
            nodes.iter().map(|n| (*n).to_owned()).collect();
        while !missing.is_empty() {
            if let TransportEvent::NodeUp { node, .. } = self
                .wait_event(
                    |e| matches!(e, TransportEvent::NodeUp { node, .. } if missing.contains(node)),
                )
                .await
            {
                missing.remove(&node);
            }
        }
    }

    pub async fn wait_down(&mut self, node: &str) {
        self.wait_event(|e| matches!(e, TransportEvent::NodeDown { node: n } if n == node))
            .await;
    }
}
