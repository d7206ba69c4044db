//! A cluster node over ractor_cluster: the node server, the membership actor, and the
//! [`Network`] the hubs of this node open their endpoints on.
//!
//! One [`ClusterNode`] per OS process: ractor's pg groups and registries are process-global.
//!
//! What ractor_cluster gives: a `NodeServer` listening on TCP with cookie authentication
//! (SHA-256 challenge) and optional TLS, `client_connect` to open a session, and advertisement
//! of remotable actors and pg groups over each session. What it lacks, and this module adds:
//! - **reconnection**: the membership actor keeps a set of targets (the seeds, plus every peer
//!   that was ever connected) and, on a timer and on every session event, reconnects to each
//!   target that has no authenticated session, waiting a [`Backoff`](crate::core::backoff::Backoff) delay between attempts;
//! - **session events as messages**: `NodeEventSubscription` callbacks are synchronous inside
//!   the node server, so they only forward to the membership actor;
//! - **DNS discovery**: with [`ClusterConfig::discovery`], a task resolves the name every
//!   interval and hands the answer to the membership actor, which dials new addresses and
//!   stops dialling the ones DNS dropped ([`crate::cluster::discovery`]);
//! - **failure detection and per-hub discovery**: per hub, in [`crate::cluster::gateway`].
//!
//! # Security
//! The cookie authenticates peers but does not encrypt; set [`ClusterConfig::tls`] on networks
//! you do not trust ([`TlsConfig::mutual`]: both ends present certificates their CA signed). With TLS, connections are made only to seeds and known peers
//! (ractor_cluster's transitive mode opens plain TCP connections, which a TLS listener refuses),
//! so every node must list at least one reachable seed.
//!
//! A node listens on loopback unless [`ClusterConfig::bind`] says otherwise: a library node is
//! not reachable from other machines by accident, and reaching it from them is one explicit
//! line.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{IncomingEncryptionMode, NodeServer, NodeServerMessage};

use crate::cluster::discovery::{self, DnsSeeds};
use crate::cluster::gateway::{EndpointArgs, FrameCounts, FrameStats, RactorTransport, WirePolicy};
use crate::cluster::transport::{EventSink, Network, Transport, TransportError};
use crate::core::boot_token::BootToken;
use crate::core::failure_detector::DetectorConfig;
use crate::core::isolation::{ConnectionReport, SeedWatch};
use crate::model::NodeName;

mod config;
mod membership;
#[cfg(test)]
mod tests;
use config::advertises_beyond_loopback;
pub use config::{ClusterConfig, ClusterError, TlsConfig};
use membership::{Connection, Forwarder, Membership, MembershipArgs};
pub use membership::{MembershipMsg, MembershipStats};

/// A running cluster node: a [`Network`] for the hubs of this process.
///
/// One per OS process (ractor's registries are process-global). Start it, hand it to every
/// hub of the process with [`crate::HubBuilder::network`], and keep it (an `Arc`) to shut it
/// down after the hubs. Peers are found through the seeds and then through each other;
/// sessions that drop are reconnected for as long as the node runs.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use process_hub::{ClusterConfig, ClusterNode, Hub, ProcessHub};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// // Identity "a@127.0.0.1": hubs name this node so, peers dial 127.0.0.1:4000.
/// // (`ClusterConfig::new("a", "127.0.0.1", 4000, cookie)` is the same in two parts.)
/// let cookie = std::fs::read_to_string("/etc/orders/cookie")?; // the same on every node
/// let config = ClusterConfig::for_node("a@127.0.0.1", 4000, cookie.trim())?
///     // Nodes to join, `host:port`; one reachable seed is enough, the node's own address is
///     // skipped, so every node can be given the same list.
///     .with_seeds(["127.0.0.1:4001", "127.0.0.1:4002"]);
/// // It listens on loopback. Across machines, name the host peers reach and listen on it:
/// //   ClusterConfig::for_node("a@10.0.0.1", 4000, cookie)?.with_bind("0.0.0.0".parse()?)
/// // On networks you do not trust, add mutual TLS (every node then lists a seed):
/// //   .with_tls(TlsConfig::mutual(cert, key, ca, "orders.internal".into())?)
/// let node = Arc::new(ClusterNode::start(config).await?);
///
/// let (hub, join) = Hub::builder(ProcessHub::new("orders"), process_hub_actors::default_kinds())
///     .network(node.clone()) // also takes a `ClusterNode` by value
///     .spawn()
///     .await?;
/// if !hub.wait_cluster_settled(Duration::from_secs(10)).await {
///     tracing::warn!(members = ?hub.nodes(true), "not every peer delivered its registry yet");
/// }
/// // ... use the hub ...
/// hub.leave().await?; // hand this node's children to the others, then shut the hub down
/// drop(hub);
/// join.await?;
/// node.shutdown();
/// # Ok(()) }
/// ```
pub struct ClusterNode {
    name: NodeName,
    port: u16,
    boot_token: BootToken,
    server: ActorRef<NodeServerMessage>,
    membership: ActorRef<MembershipMsg>,
    connection: Arc<Mutex<Connection>>,
    heartbeat: DetectorConfig,
    wire: WirePolicy,
    frames: Arc<FrameStats>,
    /// Open hub endpoints, so that re-opening a hub id closes the previous endpoint.
    hubs: Mutex<HashMap<String, Weak<RactorTransport>>>,
    /// The DNS discovery task, when [`ClusterConfig::discovery`] is set.
    discovery: Option<tokio_util::task::AbortOnDropHandle<()>>,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("name", &self.name)
            .field("port", &self.port)
            .field("boot_token", &self.boot_token)
            .finish()
    }
}

/// Socket addresses that reach this node: its advertised host, loopback and the unspecified
/// address, on its port.
fn own_addrs(host: &str, port: u16) -> Vec<SocketAddr> {
    let mut addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map(|a| a.collect())
        .unwrap_or_default();
    for ip in [
        IpAddr::from([127, 0, 0, 1]),
        IpAddr::from([0, 0, 0, 0]),
        IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]),
    ] {
        addrs.push(SocketAddr::new(ip, port));
    }
    addrs
}

static SUBSCRIPTION_IDS: AtomicU64 = AtomicU64::new(0);

impl ClusterNode {
    /// Starts the node server and the membership actor, and starts joining the seeds (in the
    /// background: hubs see their peers as `NodeUp` when sessions are ready).
    pub async fn start(config: ClusterConfig) -> Result<Self, ClusterError> {
        if config.name.is_empty() || config.host.is_empty() || config.name.contains('@') {
            return Err(ClusterError::Config(format!(
                "node name {:?} / host {:?}: both must be non-empty, the name without '@' \
                 (for `name@host` use ClusterConfig::for_node)",
                config.name, config.host
            )));
        }
        if let Some(discovery) = &config.discovery {
            discovery
                .validate()
                .map_err(|e| ClusterError::Config(format!("discovery {discovery}: {e}")))?;
        }
        let listen = config.listen_ip();
        if config.bind.is_none() && advertises_beyond_loopback(&config.host) {
            tracing::warn!(
                host = %config.host,
                %listen,
                "the node advertises a host other machines may dial but listens on loopback only; \
                 set ClusterConfig::bind to accept them"
            );
        }
        let port = if config.port == 0 {
            // ractor_cluster reports an OS-picked port only inside the node server; reserve one
            // here instead so that it can be advertised and returned.
            std::net::TcpListener::bind((listen, 0))
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| ClusterError::Config(format!("cannot reserve a port: {e}")))?
        } else {
            config.port
        };
        // Before the node server starts: a resolver that cannot be set up (no readable
        // /etc/resolv.conf) fails the start with nothing left running.
        let dns_seeds = config
            .discovery
            .as_ref()
            .map(|discovery| {
                DnsSeeds::new(discovery.clone(), config.dns_server, port).map_err(|e| {
                    ClusterError::Config(format!(
                        "discovery {discovery}: cannot set up the DNS resolver: {e}"
                    ))
                })
            })
            .transpose()?;
        let (encryption, mode) = match &config.tls {
            Some(tls) => (
                IncomingEncryptionMode::Tls(tls.acceptor.clone()),
                NodeConnectionMode::Isolated,
            ),
            None => (IncomingEncryptionMode::Raw, NodeConnectionMode::Transitive),
        };
        let server = NodeServer::new(
            port,
            config.cookie.clone(),
            config.name.clone(),
            config.host.clone(),
            Some(encryption),
            Some(mode),
        )
        .with_listen_addr(listen);
        let (server, _) =
            Actor::spawn(None, server, ())
                .await
                .map_err(|e| ClusterError::Spawn {
                    what: "node server",
                    reason: e.to_string(),
                })?;
        let own_addrs = own_addrs(&config.host, port);
        let own_advertised = format!("{}:{}", config.host, port);
        let seeds: Vec<String> = config
            .seeds
            .iter()
            .filter(|s| !membership::is_self(s, &own_advertised, &own_addrs))
            .cloned()
            .collect();
        let connection =
            Connection::new(SeedWatch::new(seeds, config.isolated_after, Instant::now()));
        let (membership, _) = Actor::spawn(
            None,
            Membership,
            MembershipArgs {
                server: server.clone(),
                seeds: config.seeds.clone(),
                backoff: config.reconnect,
                tick: config.heartbeat.interval,
                tls: config.tls.clone(),
                own_addrs,
                own_advertised,
                connection: connection.clone(),
            },
        )
        .await
        .map_err(|e| ClusterError::Spawn {
            what: "membership",
            reason: e.to_string(),
        })?;
        let id = SUBSCRIPTION_IDS.fetch_add(1, Ordering::Relaxed);
        let _ = server.cast(NodeServerMessage::SubscribeToEvents {
            id: format!("process_hub_membership_{id}"),
            subscription: Box::new(Forwarder(membership.clone())),
        });
        let discovery = dns_seeds.map(|dns_seeds| {
            let membership = membership.clone();
            tokio_util::task::AbortOnDropHandle::new(tokio::spawn(discovery::poll(
                dns_seeds,
                move |answer| membership.cast(MembershipMsg::Discovered(answer)).is_ok(),
            )))
        });
        Ok(Self {
            name: format!("{}@{}", config.name, config.host),
            port,
            boot_token: BootToken::random(),
            server,
            membership,
            connection,
            heartbeat: config.heartbeat,
            wire: config.wire,
            frames: Arc::new(FrameStats::default()),
            hubs: Mutex::new(HashMap::new()),
            discovery,
        })
    }

    /// The TCP port the node listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Adds a node to join (and keep reconnecting to).
    pub fn join(&self, addr: impl Into<String>) {
        let _ = self.membership.cast(MembershipMsg::Join(addr.into()));
    }

    /// Counters of the membership actor.
    pub async fn stats(&self) -> Result<MembershipStats, TransportError> {
        ractor::call_t!(self.membership, MembershipMsg::Stats, 5_000)
            .map_err(|e| TransportError::Node(e.to_string()))
    }

    /// The node's connection to the cluster now: connected, joining, alone by design (no
    /// seeds) or isolated (seeds given, no peer authenticated for longer than
    /// [`ClusterConfig::isolated_after`]), and the peers refused for their cookie.
    pub fn connection(&self) -> ConnectionReport {
        self.connection
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .report(Instant::now())
    }

    /// The frames this node's hub endpoints refused: forged (a seal that does not verify, an
    /// open frame in a sealing node's name), unconfirmed key offers, undecodable.
    pub fn frame_counts(&self) -> FrameCounts {
        self.frames.counts()
    }

    /// Stops the node server and the membership actor: every session closes and peers see this
    /// node's hubs go down. Hubs should be closed first (drop their transports).
    pub fn shutdown(&self) {
        if let Some(discovery) = &self.discovery {
            discovery.abort();
        }
        self.membership.stop(None);
        self.server.stop(None);
    }
}

impl Network for ClusterNode {
    fn local_node(&self) -> &NodeName {
        &self.name
    }

    fn serves_remote_clients(&self) -> bool {
        true
    }

    fn connection(&self) -> Option<ConnectionReport> {
        Some(ClusterNode::connection(self))
    }

    fn boot_token(&self) -> BootToken {
        self.boot_token
    }

    fn open_hub(
        &self,
        hub_id: &str,
        sink: EventSink,
    ) -> Result<Arc<dyn Transport>, TransportError> {
        let mut hubs = self.hubs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(previous) = hubs.remove(hub_id).and_then(|w| w.upgrade()) {
            previous.close();
        }
        let endpoint = EndpointArgs {
            boot_token: self.boot_token,
            server: self.server.clone(),
            detector: self.heartbeat,
            policy: self.wire,
            stats: self.frames.clone(),
        };
        let transport = Arc::new(RactorTransport::open(
            hub_id,
            self.name.clone(),
            endpoint,
            sink,
        )?);
        hubs.insert(hub_id.to_owned(), Arc::downgrade(&transport));
        Ok(transport)
    }
}
