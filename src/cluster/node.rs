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
//!   target that has no authenticated session, waiting a [`Backoff`] delay between attempts;
//! - **session events as messages**: `NodeEventSubscription` callbacks are synchronous inside
//!   the node server, so they only forward to the membership actor;
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

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::node::{NodeConnectionMode, NodeServerSessionInformation};
use ractor_cluster::{
    IncomingEncryptionMode, NodeEventSubscription, NodeServer, NodeServerMessage, RactorMessage,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::cluster::gateway::{EndpointArgs, FrameCounts, FrameStats, RactorTransport, WirePolicy};
use crate::cluster::transport::{EventSink, Network, Transport, TransportError};
use crate::core::backoff::{Backoff, BackoffConfig};
use crate::core::boot_token::BootToken;
use crate::core::failure_detector::DetectorConfig;
use crate::model::NodeName;

mod config;
use config::advertises_beyond_loopback;
pub use config::{ClusterConfig, ClusterError, TlsConfig};

/// Counters of the membership actor, for diagnostics and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MembershipStats {
    /// Peers with an authenticated session now: `name -> advertised host:port`.
    pub connected: BTreeMap<NodeName, String>,
    /// Outgoing connection attempts made.
    pub attempts: u64,
    /// Sessions that closed without ever authenticating (a wrong cookie, a bad handshake, or a
    /// duplicate connection that lost ractor_cluster's election).
    pub unauthenticated_closes: u64,
}

/// The membership actor's messages.
#[derive(RactorMessage)]
pub enum MembershipMsg {
    /// A session was opened (forwarded from the node server).
    SessionOpened(NodeServerSessionInformation),
    /// A session authenticated.
    SessionAuthenticated(NodeServerSessionInformation),
    /// A session finished its state exchange.
    SessionReady(NodeServerSessionInformation),
    /// A session closed (may be a duplicate that lost the election: checked against the sessions).
    SessionClosed(NodeServerSessionInformation),
    /// Reconnect timer: connect to every target without a session whose backoff has elapsed.
    Reconnect,
    /// An attempt to `target` finished (`ok`: the TCP connection opened).
    Attempted {
        /// The target.
        target: String,
        /// Whether TCP connected.
        ok: bool,
    },
    /// Adds a target to connect to (and keep reconnecting to).
    Join(String),
    /// Current counters.
    Stats(RpcReplyPort<MembershipStats>),
}

struct Forwarder(ActorRef<MembershipMsg>);

impl NodeEventSubscription for Forwarder {
    fn node_session_opened(&self, ses: NodeServerSessionInformation) {
        let _ = self.0.cast(MembershipMsg::SessionOpened(ses));
    }
    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        let _ = self.0.cast(MembershipMsg::SessionClosed(ses));
    }
    fn node_session_authenticated(&self, ses: NodeServerSessionInformation) {
        let _ = self.0.cast(MembershipMsg::SessionAuthenticated(ses));
    }
    fn node_session_ready(&self, ses: NodeServerSessionInformation) {
        let _ = self.0.cast(MembershipMsg::SessionReady(ses));
    }
}

struct Target {
    backoff: Backoff,
    next_attempt: Instant,
    in_flight: bool,
}

struct MembershipArgs {
    server: ActorRef<NodeServerMessage>,
    seeds: Vec<String>,
    backoff: BackoffConfig,
    tick: Duration,
    tls: Option<TlsConfig>,
    /// This node's own addresses: a seed list shared by every node names the node itself too.
    own_addrs: Vec<SocketAddr>,
    own_advertised: String,
}

struct MembershipState {
    args: MembershipArgs,
    targets: BTreeMap<String, Target>,
    /// Session actor ids that authenticated.
    authenticated: std::collections::HashSet<ractor::ActorId>,
    stats: MembershipStats,
    rng: StdRng,
    timer: Option<tokio::task::JoinHandle<()>>,
}

/// The most addresses the membership actor reconnects to (the seeds and every peer ever
/// connected): peers announce their own addresses, so without a bound a peer could make the
/// node remember, and dial, addresses without end.
const MAX_TARGETS: usize = 1024;

impl MembershipState {
    fn is_self(&self, target: &str) -> bool {
        target == self.args.own_advertised
            || target
                .to_socket_addrs()
                .map(|mut addrs| addrs.any(|a| self.args.own_addrs.contains(&a)))
                .unwrap_or(false)
    }

    fn add_target(&mut self, target: String) {
        if self.is_self(&target) {
            return;
        }
        if !self.targets.contains_key(&target) && self.targets.len() >= MAX_TARGETS {
            tracing::warn!(%target, limit = MAX_TARGETS, "peer address not remembered: too many known");
            return;
        }
        let backoff = self.args.backoff;
        self.targets.entry(target).or_insert_with(|| Target {
            backoff: Backoff::new(backoff),
            next_attempt: Instant::now(),
            in_flight: false,
        });
    }

    /// Whether some authenticated session reaches `target` (by advertised or socket address).
    fn is_connected(
        target: &str,
        sessions: &std::collections::HashMap<u64, NodeServerSessionInformation>,
    ) -> bool {
        let resolved: Vec<SocketAddr> = target
            .to_socket_addrs()
            .map(|a| a.collect())
            .unwrap_or_default();
        sessions.values().any(|s| {
            s.peer_name
                .as_ref()
                .is_some_and(|n| n.connection_string == target)
                || s.peer_addr == target
                || s.peer_addr
                    .parse::<SocketAddr>()
                    .is_ok_and(|a| resolved.contains(&a))
        })
    }

    async fn reconnect(&mut self, myself: &ActorRef<MembershipMsg>) {
        let sessions =
            match ractor::call_t!(self.args.server, NodeServerMessage::GetSessions, 2_000) {
                Ok(sessions) => sessions,
                Err(error) => {
                    tracing::warn!(%error, "cannot list node sessions");
                    return;
                }
            };
        self.stats.connected = sessions
            .values()
            .filter_map(|s| {
                s.peer_name
                    .as_ref()
                    .map(|n| (n.name.clone(), n.connection_string.clone()))
            })
            .collect();
        let now = Instant::now();
        for (name, target) in &mut self.targets {
            if Self::is_connected(name, &sessions) {
                target.backoff.reset();
                target.next_attempt = now;
                continue;
            }
            if target.in_flight || target.next_attempt > now {
                continue;
            }
            target.in_flight = true;
            target.next_attempt = now + target.backoff.next_delay(&mut self.rng);
            self.stats.attempts += 1;
            let server = self.args.server.clone();
            let tls = self.args.tls.clone();
            let me = myself.clone();
            let addr = name.clone();
            tracing::debug!(target = %addr, attempt = target.backoff.attempt(), "connecting");
            tokio::spawn(async move {
                let result = match tls {
                    None => ractor_cluster::client_connect(&server, addr.as_str()).await,
                    Some(tls) => {
                        ractor_cluster::client_connect_enc(
                            &server,
                            addr.as_str(),
                            tls.connector,
                            tls.server_name,
                        )
                        .await
                    }
                };
                if let Err(error) = &result {
                    tracing::debug!(target = %addr, %error, "connection attempt failed");
                }
                let _ = me.cast(MembershipMsg::Attempted {
                    target: addr,
                    ok: result.is_ok(),
                });
            });
        }
    }
}

struct Membership;

impl Actor for Membership {
    type Msg = MembershipMsg;
    type State = MembershipState;
    type Arguments = MembershipArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: MembershipArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let timer = myself.send_interval(args.tick, || MembershipMsg::Reconnect);
        let mut state = MembershipState {
            targets: BTreeMap::new(),
            authenticated: Default::default(),
            stats: MembershipStats::default(),
            rng: StdRng::from_entropy(),
            timer: Some(timer),
            args,
        };
        for seed in state.args.seeds.clone() {
            state.add_target(seed);
        }
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.reconnect(&myself).await;
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: MembershipMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            MembershipMsg::SessionOpened(_) => {}
            MembershipMsg::SessionAuthenticated(ses) => {
                state.authenticated.insert(ses.actor.get_id());
            }
            MembershipMsg::SessionReady(ses) => {
                if let Some(name) = ses.peer_name.as_ref() {
                    tracing::info!(peer = %name.name, addr = %name.connection_string, "node session ready");
                    // Remember every peer, so that we reconnect to it too (not only to seeds).
                    if !name.connection_string.is_empty() {
                        state.add_target(name.connection_string.clone());
                    }
                }
                state.reconnect(&myself).await;
            }
            MembershipMsg::SessionClosed(ses) => {
                if !state.authenticated.remove(&ses.actor.get_id()) {
                    state.stats.unauthenticated_closes += 1;
                    tracing::warn!(peer_addr = %ses.peer_addr, "node session closed before authenticating (wrong cookie?)");
                } else {
                    tracing::info!(peer_addr = %ses.peer_addr, "node session closed");
                }
                // Level-triggered: the reconnect pass checks the live sessions, so a duplicate
                // session that lost its election (the peer is still connected) changes nothing.
                state.reconnect(&myself).await;
            }
            MembershipMsg::Reconnect => state.reconnect(&myself).await,
            MembershipMsg::Attempted { target, ok } => {
                if let Some(t) = state.targets.get_mut(&target) {
                    t.in_flight = false;
                    if !ok {
                        tracing::debug!(%target, next_in = ?t.next_attempt.saturating_duration_since(Instant::now()), "will retry");
                    }
                }
            }
            MembershipMsg::Join(target) => {
                state.add_target(target);
                state.reconnect(&myself).await;
            }
            MembershipMsg::Stats(reply) => {
                let _ = reply.send(state.stats.clone());
            }
        }
        Ok(())
    }
}

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
    heartbeat: DetectorConfig,
    wire: WirePolicy,
    frames: Arc<FrameStats>,
    /// Open hub endpoints, so that re-opening a hub id closes the previous endpoint.
    hubs: Mutex<HashMap<String, Weak<RactorTransport>>>,
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
        let (membership, _) = Actor::spawn(
            None,
            Membership,
            MembershipArgs {
                server: server.clone(),
                seeds: config.seeds.clone(),
                backoff: config.reconnect,
                tick: config.heartbeat.interval,
                tls: config.tls.clone(),
                own_addrs: own_addrs(&config.host, port),
                own_advertised: format!("{}:{}", config.host, port),
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
        Ok(Self {
            name: format!("{}@{}", config.name, config.host),
            port,
            boot_token: BootToken::random(),
            server,
            membership,
            heartbeat: config.heartbeat,
            wire: config.wire,
            frames: Arc::new(FrameStats::default()),
            hubs: Mutex::new(HashMap::new()),
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

    /// The frames this node's hub endpoints refused: forged (a seal that does not verify, an
    /// open frame in a sealing node's name), unconfirmed key offers, undecodable.
    pub fn frame_counts(&self) -> FrameCounts {
        self.frames.counts()
    }

    /// Stops the node server and the membership actor: every session closes and peers see this
    /// node's hubs go down. Hubs should be closed first (drop their transports).
    pub fn shutdown(&self) {
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
