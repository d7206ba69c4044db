//! The membership actor of a cluster node: reconnection to the seeds and to every peer ever
//! connected, session events from the node server, and what they say about the node's
//! connection to the cluster ([`crate::core::isolation`]).
//!
//! Logging follows what an operator can act on. A session closed before authenticating is
//! judged before it is logged: the loser of a simultaneous dial (another session to the same
//! peer authenticates) is a `debug` line; a peer refused for its cookie is a `WARN` the first
//! time for that peer and `debug` after, and is counted (health's `peer_auth_failures`,
//! `process_hub_peer_auth_failures_total`). A failed connection to a seed is `debug`: when no
//! seed answers for long, the node reports itself isolated (health, and one `WARN`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{ClientConnectErr, NodeEventSubscription, NodeServerMessage, RactorMessage};
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::config::TlsConfig;
use crate::core::backoff::{Backoff, BackoffConfig};
use crate::core::discovery::{DiscoveryPlan, DiscoveryView};
use crate::core::isolation::{
    AuthRefusals, CloseVerdict, ClosesBeforeAuth, ConnectionReport, Connectivity, SeedFailure,
    SeedWatch, CLOSE_VERDICT_GRACE,
};
use crate::model::NodeName;

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
    /// Of those, the ones judged refusals of the peer's cookie.
    pub auth_refusals: u64,
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
    /// An attempt to `target` finished: `None` when TCP (and TLS) connected, else why not.
    Attempted {
        /// The target.
        target: String,
        /// Why the connection could not be opened.
        failure: Option<(SeedFailure, String)>,
    },
    /// A TLS session opened to `target` ended with a TLS error before the peer sent anything:
    /// the peer refused this node's certificate (TLS 1.3 tells the client after its side of the
    /// handshake completed).
    TlsRefused {
        /// The target.
        target: String,
        /// The TLS error (the alert received).
        detail: String,
    },
    /// Adds a target to connect to (and keep reconnecting to).
    Join(String),
    /// One DNS answer of the discovery task: every address the name lists now.
    Discovered(Vec<SocketAddr>),
    /// Current counters.
    Stats(RpcReplyPort<MembershipStats>),
}

/// Forwards the node server's synchronous session callbacks to the membership actor.
pub(super) struct Forwarder(pub(super) ActorRef<MembershipMsg>);

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

/// What the membership actor learns about the node's connection to the cluster, shared with
/// the [`super::ClusterNode`] that reports it.
#[derive(Debug)]
pub(super) struct Connection {
    seeds: SeedWatch,
    refusals: AuthRefusals,
}

impl Connection {
    pub(super) fn new(seeds: SeedWatch) -> Arc<Mutex<Self>> {
        Arc::new(Mutex::new(Self {
            seeds,
            refusals: AuthRefusals::default(),
        }))
    }

    pub(super) fn report(&self, now: Instant) -> ConnectionReport {
        ConnectionReport {
            connectivity: self.seeds.verdict(now),
            auth_refusals: self.refusals.clone(),
        }
    }
}

/// Whether `target` names this node: its advertised `host:port`, or an address that resolves
/// to one of `own_addrs` (a seed list shared by every node names the node itself too).
pub(super) fn is_self(target: &str, own_advertised: &str, own_addrs: &[SocketAddr]) -> bool {
    target == own_advertised
        || target
            .to_socket_addrs()
            .map(|mut addrs| addrs.any(|a| own_addrs.contains(&a)))
            .unwrap_or(false)
}

struct Target {
    backoff: Backoff,
    next_attempt: Instant,
    in_flight: bool,
}

pub(super) struct MembershipArgs {
    pub(super) server: ActorRef<NodeServerMessage>,
    pub(super) seeds: Vec<String>,
    pub(super) backoff: BackoffConfig,
    pub(super) tick: Duration,
    pub(super) tls: Option<TlsConfig>,
    /// This node's own addresses: a seed list shared by every node names the node itself too.
    pub(super) own_addrs: Vec<SocketAddr>,
    pub(super) own_advertised: String,
    pub(super) connection: Arc<Mutex<Connection>>,
}

pub(super) struct MembershipState {
    args: MembershipArgs,
    /// The seeds DNS discovery found (and still lists).
    discovered: BTreeSet<SocketAddr>,
    /// Addresses DNS dropped while a session reached them: known peers until it is gone.
    lingering: BTreeSet<SocketAddr>,
    /// The static seeds that are socket addresses: never forgotten because of DNS.
    static_seeds: BTreeSet<SocketAddr>,
    targets: BTreeMap<String, Target>,
    /// Session actor ids that authenticated.
    authenticated: HashSet<ractor::ActorId>,
    closes: ClosesBeforeAuth,
    /// Whether the last pass found the node isolated (to log the change once).
    isolated: bool,
    stats: MembershipStats,
    rng: StdRng,
    timer: Option<tokio::task::JoinHandle<()>>,
}

/// The most addresses the membership actor reconnects to (the seeds and every peer ever
/// connected): peers announce their own addresses, so without a bound a peer could make the
/// node remember, and dial, addresses without end.
const MAX_TARGETS: usize = 1024;

type Sessions = HashMap<u64, NodeServerSessionInformation>;

/// Why a connection attempt failed, as a seed's reason.
fn attempt_failure(error: &ClientConnectErr) -> (SeedFailure, String) {
    match error {
        ClientConnectErr::Socket(e) => (SeedFailure::NoRoute, e.to_string()),
        ClientConnectErr::Encryption(e) => (SeedFailure::Tls, e.to_string()),
        ClientConnectErr::Messaging(e) => (
            SeedFailure::Unanswered,
            format!("the node server did not take the connection: {e}"),
        ),
    }
}

impl MembershipState {
    fn connection(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.args
            .connection
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn add_target(&mut self, target: String) {
        if is_self(&target, &self.args.own_advertised, &self.args.own_addrs) {
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
    fn is_connected(target: &str, sessions: &Sessions) -> bool {
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

    /// The seed a session was with: the address it was dialled to, or the address its peer
    /// advertises.
    fn seed_of(&self, ses: &NodeServerSessionInformation) -> Option<String> {
        let connection = self.connection();
        self.targets
            .keys()
            .filter(|t| connection.seeds.is_seed(t))
            .find(|t| {
                ses.peer_name
                    .as_ref()
                    .is_some_and(|n| &n.connection_string == *t)
                    || (!ses.is_server && {
                        let resolved: Vec<SocketAddr> =
                            t.to_socket_addrs().map(|a| a.collect()).unwrap_or_default();
                        ses.peer_addr
                            .parse::<SocketAddr>()
                            .is_ok_and(|a| resolved.contains(&a))
                    })
            })
            .cloned()
    }

    /// Brings the view of the sessions up to date (connected peers, the isolation clock, the
    /// verdicts on closes before authentication) and dials every target without a session
    /// whose backoff has elapsed. Returns the authenticated sessions, when they could be read.
    async fn reconnect(&mut self, myself: &ActorRef<MembershipMsg>) -> Option<Sessions> {
        let sessions =
            match ractor::call_t!(self.args.server, NodeServerMessage::GetSessions, 2_000) {
                Ok(sessions) => sessions,
                Err(error) => {
                    tracing::warn!(%error, "cannot list node sessions");
                    return None;
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
        self.observe(&sessions, now);
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
                        let (me, target) = (me.clone(), addr.clone());
                        let refused: crate::cluster::tls::TlsRefused = Box::new(move |detail| {
                            let _ = me.cast(MembershipMsg::TlsRefused { target, detail });
                        });
                        crate::cluster::tls::dial(&server, addr.as_str(), &tls, refused).await
                    }
                };
                if let Err(error) = &result {
                    tracing::debug!(target = %addr, %error, "connection attempt failed");
                }
                let _ = me.cast(MembershipMsg::Attempted {
                    target: addr,
                    failure: result.err().as_ref().map(attempt_failure),
                });
            });
        }
        Some(sessions)
    }

    /// What the live sessions say: seeds reached, the isolation clock, and the verdicts on
    /// the closes before authentication that are due.
    fn observe(&mut self, sessions: &Sessions, now: Instant) {
        let reached: Vec<String> = self
            .targets
            .keys()
            .filter(|t| Self::is_connected(t, sessions))
            .cloned()
            .collect();
        let verdicts = self.closes.judge(now, CLOSE_VERDICT_GRACE, |peer| {
            sessions
                .values()
                .any(|s| s.peer_name.as_ref().is_some_and(|n| n.name == peer))
        });
        let connection_state = self.args.connection.clone();
        let mut connection = connection_state.lock().unwrap_or_else(|p| p.into_inner());
        connection.seeds.sessions(sessions.len(), now);
        for target in &reached {
            connection.seeds.reached(target);
        }
        for verdict in verdicts {
            match verdict {
                CloseVerdict::Duplicate { peer } => {
                    tracing::debug!(%peer, "a session closed before authenticating was a duplicate (simultaneous dial)");
                }
                CloseVerdict::Refused { peer, seed } => {
                    self.stats.auth_refusals += 1;
                    if connection.refusals.refused(&peer) {
                        tracing::warn!(%peer, seed = seed.as_deref().unwrap_or("-"),
                            "peer refused: its session closed before authenticating and none authenticated since (a different cookie?); repeats are logged at debug");
                    } else {
                        tracing::debug!(%peer, "peer refused again (a different cookie?)");
                    }
                    if let Some(seed) = seed {
                        connection.seeds.failed(
                            &seed,
                            SeedFailure::CookieRefused,
                            format!("{peer} closed the session before authenticating: the cookies differ"),
                        );
                    }
                }
            }
        }
        let verdict = connection.seeds.verdict(now);
        drop(connection);
        match (&verdict, self.isolated) {
            (
                Connectivity::Isolated {
                    alone_for,
                    unreached,
                },
                false,
            ) => {
                self.isolated = true;
                let seeds: Vec<String> = unreached
                    .iter()
                    .map(|u| format!("{} ({}: {})", u.seed, u.reason.code(), u.detail))
                    .collect();
                tracing::warn!(alone_for = ?alone_for, seeds = ?seeds,
                    "isolated: no peer authenticated; health reports `isolated` until one does");
            }
            (Connectivity::Connected, true) => {
                self.isolated = false;
                tracing::info!("no longer isolated: a peer authenticated");
            }
            _ => {}
        }
    }

    /// Carries out the plan for one DNS answer: new addresses become seeds and are dialled
    /// now; dropped ones leave the seed set, and are no longer dialled unless a session still
    /// reaches them. No session is closed here.
    async fn on_discovered(&mut self, myself: &ActorRef<MembershipMsg>, answer: Vec<SocketAddr>) {
        let sessions = match ractor::call_t!(
            self.args.server,
            NodeServerMessage::GetSessions,
            2_000
        ) {
            Ok(sessions) => sessions,
            Err(error) => {
                tracing::warn!(%error, "cannot list node sessions; the DNS answer waits for the next round");
                return;
            }
        };
        let connected: BTreeSet<SocketAddr> = self
            .discovered
            .iter()
            .chain(&self.lingering)
            .filter(|a| Self::is_connected(&a.to_string(), &sessions))
            .copied()
            .collect();
        let DiscoveryPlan {
            discovered,
            dial,
            forget,
            keep_as_peer,
            lingering,
            truncated,
        } = crate::core::discovery::plan(
            DiscoveryView {
                discovered: &self.discovered,
                static_seeds: &self.static_seeds,
                own: &self.args.own_addrs,
                lingering: &self.lingering,
                connected: &connected,
            },
            &answer,
        );
        if truncated > 0 {
            tracing::warn!(
                truncated,
                limit = crate::core::discovery::MAX_SEEDS_PER_ANSWER,
                "discovery: DNS listed more addresses than are taken; the lowest are kept"
            );
        }
        self.discovered = discovered;
        self.lingering = lingering;
        for addr in &dial {
            tracing::info!(seed = %addr, "discovery: new seed from DNS");
            self.add_target(addr.to_string());
            self.connection()
                .seeds
                .add_seed(addr.to_string(), Instant::now());
        }
        for addr in &forget {
            tracing::info!(seed = %addr, "discovery: seed left DNS and no session reaches it; no longer dialled");
            let target = addr.to_string();
            self.targets.remove(&target);
            self.connection().seeds.forget_seed(&target);
        }
        for addr in &keep_as_peer {
            tracing::info!(seed = %addr, "discovery: seed left DNS; still connected, it stays a peer (only the failure detector downs a member)");
            self.connection().seeds.forget_seed(&addr.to_string());
        }
        if !dial.is_empty() {
            self.reconnect(myself).await;
        }
    }

    async fn on_closed(
        &mut self,
        myself: &ActorRef<MembershipMsg>,
        ses: NodeServerSessionInformation,
    ) {
        let was_authenticated = self.authenticated.remove(&ses.actor.get_id());
        if !was_authenticated {
            self.stats.unauthenticated_closes += 1;
            match &ses.peer_name {
                Some(name) => {
                    tracing::debug!(peer = %name.name, peer_addr = %ses.peer_addr,
                        "node session closed before authenticating; judged once the other sessions settle");
                    let seed = self.seed_of(&ses);
                    self.closes.closed(name.name.clone(), seed, Instant::now());
                }
                None => {
                    // The peer never named itself: a dial that lost the election before the
                    // challenge, a peer that went away mid-handshake, or a port probe.
                    tracing::debug!(peer_addr = %ses.peer_addr, incoming = ses.is_server,
                        "node session closed before its peer named itself");
                }
            }
        }
        // Level-triggered: the reconnect pass checks the live sessions, so a duplicate
        // session that lost its election (the peer is still connected) changes nothing.
        let sessions = self.reconnect(myself).await;
        if was_authenticated {
            let peer = ses.peer_name.as_ref().map(|n| n.name.as_str());
            let twin = peer.is_some_and(|peer| {
                sessions.as_ref().is_some_and(|s| {
                    s.values()
                        .any(|s| s.peer_name.as_ref().is_some_and(|n| n.name == peer))
                })
            });
            if twin {
                tracing::debug!(peer = peer.unwrap_or("-"), peer_addr = %ses.peer_addr,
                    "duplicate node session closed; another session to the peer stays");
            } else {
                tracing::info!(peer = peer.unwrap_or("-"), peer_addr = %ses.peer_addr, "node session closed");
            }
        }
    }
}

pub(super) struct Membership;

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
        let static_seeds = args
            .seeds
            .iter()
            .filter_map(|s| s.parse::<SocketAddr>().ok())
            .collect();
        let mut state = MembershipState {
            discovered: BTreeSet::new(),
            lingering: BTreeSet::new(),
            static_seeds,
            targets: BTreeMap::new(),
            authenticated: Default::default(),
            closes: ClosesBeforeAuth::default(),
            isolated: false,
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
            MembershipMsg::SessionClosed(ses) => state.on_closed(&myself, ses).await,
            MembershipMsg::Reconnect => {
                state.reconnect(&myself).await;
            }
            MembershipMsg::Attempted { target, failure } => {
                if let Some(t) = state.targets.get_mut(&target) {
                    t.in_flight = false;
                    if failure.is_some() {
                        tracing::debug!(%target, next_in = ?t.next_attempt.saturating_duration_since(Instant::now()), "will retry");
                    }
                }
                let (reason, detail) = failure.unwrap_or((
                    SeedFailure::Unanswered,
                    "connected; no session authenticated on it yet".to_owned(),
                ));
                state.connection().seeds.failed(&target, reason, detail);
            }
            MembershipMsg::TlsRefused { target, detail } => {
                tracing::debug!(%target, %detail, "the peer ended the TLS session before answering");
                state.connection().seeds.failed(
                    &target,
                    SeedFailure::Tls,
                    format!("the peer refused the TLS session (does it trust this node's certificate?): {detail}"),
                );
            }
            MembershipMsg::Join(target) => {
                state.add_target(target);
                state.reconnect(&myself).await;
            }
            MembershipMsg::Discovered(answer) => state.on_discovered(&myself, answer).await,
            MembershipMsg::Stats(reply) => {
                let _ = reply.send(state.stats.clone());
            }
        }
        Ok(())
    }
}
