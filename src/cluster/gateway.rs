//! One hub's endpoint over ractor_cluster: a remotable gateway actor plus the link actor that
//! owns the hub's view of its peers.
//!
//! Per hub per node there are two actors:
//! - the **gateway** ([`GatewayFrame`] messages: bytes in a `BytesConvertable` newtype) is the
//!   only remotable actor of the hub. It joins the pg group `gateways` in the scope
//!   `process_hub/<hub_id>`, so ractor_cluster advertises it to every connected node, where it
//!   appears as a proxy. It forwards every frame it receives to its link and keeps no state;
//! - the **link** monitors that pg scope, maps each remote gateway proxy to its node name (through
//!   the node server's `GetSessions`: a proxy's `ActorId::Remote::node_id` is the local session
//!   counter, not an identity), exchanges `Hello`s carrying boot tokens, sends heartbeats, runs
//!   the [`FailureDetector`], and tells the hub `NodeUp`/`NodeDown`/`Message`.
//!
//! A node is up for the hub once its `Hello` is received; down when its last gateway proxy leaves
//! the pg scope (ractor_cluster kills the proxies of a closed session, so "no proxy left" is the
//! disconnect confirmed against the live sessions — a duplicate session losing its election has
//! no proxies and changes nothing), or when its heartbeats time out (half-open connections).
//! Proxies are only ever sent to: never stopped, killed or linked (TRAPS in
//! the ractor notes: that would tear down the whole session).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::{BytesConvertable, NodeServerMessage, RactorMessage};

use crate::cluster::transport::{EventSink, Transport, TransportError, TransportEvent};
use crate::cluster::wire::{self, WireMsg};
use crate::core::boot_token::BootToken;
use crate::core::failure_detector::{DetectorConfig, FailureDetector, PeerHealth};
use crate::model::NodeName;

/// The pg group every hub gateway joins, inside its hub's scope.
pub const GATEWAY_GROUP: &str = "gateways";

/// The most `Hello`s kept from nodes whose gateway proxy is not mapped yet (a proxy maps within
/// a tick): beyond it a new name's `Hello` is dropped, and its sender greets again.
const MAX_PENDING_HELLO: usize = 1024;

/// The pg scope of a hub's gateways: hubs discover each other per hub id through it.
pub fn gateway_scope(hub_id: &str) -> String {
    format!("process_hub/{hub_id}")
}

/// An encoded [`wire`] frame: the gateway's (remotable) message type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayFrame(pub Vec<u8>);

impl BytesConvertable for GatewayFrame {
    fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn from_bytes(bytes: Vec<u8>) -> Self {
        // Identity: nothing can fail here. Validation happens in `wire::decode`, where a bad
        // frame becomes a typed error instead of a panic inside ractor.
        Self(bytes)
    }
}

/// State shared between the link actor and the [`RactorTransport`] handle, so that sends do
/// not take an actor hop.
#[derive(Default)]
struct Shared {
    /// Peers that are up, with the proxy to send to.
    up: RwLock<BTreeMap<NodeName, ActorRef<GatewayFrame>>>,
    closed: AtomicBool,
}

/// The link's messages.
#[derive(RactorMessage)]
pub(crate) enum LinkMsg {
    /// A frame received by the gateway.
    Frame(Vec<u8>),
    /// Heartbeat timer: send heartbeats, run the failure detector, re-greet unconfirmed peers.
    Tick,
}

struct Gateway;

impl Actor for Gateway {
    type Msg = GatewayFrame;
    type State = ActorRef<LinkMsg>;
    type Arguments = ActorRef<LinkMsg>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        link: ActorRef<LinkMsg>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(link)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        frame: GatewayFrame,
        link: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = link.cast(LinkMsg::Frame(frame.0));
        Ok(())
    }
}

/// What a link needs to start.
pub(crate) struct LinkArgs {
    pub hub_id: String,
    pub node: NodeName,
    pub boot_token: BootToken,
    pub server: ActorRef<NodeServerMessage>,
    pub detector: DetectorConfig,
    pub sink: EventSink,
    shared: Arc<Shared>,
}

pub(crate) struct LinkState {
    args: LinkArgs,
    scope: String,
    /// Remote gateway proxies seen in the scope, by actor id, with their node.
    proxies: HashMap<ActorId, (NodeName, ActorRef<GatewayFrame>)>,
    /// Boot tokens of the peers that are up.
    tokens: BTreeMap<NodeName, BootToken>,
    /// Hellos from nodes whose proxy is not mapped yet.
    pending_hello: BTreeMap<NodeName, BootToken>,
    detector: FailureDetector,
    timer: Option<tokio::task::JoinHandle<()>>,
}

impl LinkState {
    fn proxy_of(&self, node: &str) -> Option<ActorRef<GatewayFrame>> {
        // Prefer the newest session's proxy (highest session counter) when several exist.
        self.proxies
            .iter()
            .filter(|(_, (n, _))| n == node)
            .max_by_key(|(id, _)| (id.node(), id.pid()))
            .map(|(_, (_, proxy))| proxy.clone())
    }

    fn send(&self, proxy: &ActorRef<GatewayFrame>, msg: &WireMsg) {
        match wire::encode(&self.args.hub_id, &self.args.node, msg) {
            Ok(bytes) => {
                let _ = proxy.cast(GatewayFrame(bytes));
            }
            Err(error) => tracing::error!(%error, kind = msg.kind(), "cannot encode frame"),
        }
    }

    fn hello(&self, reply: bool) -> WireMsg {
        let mut members: Vec<NodeName> = self.tokens.keys().cloned().collect();
        members.push(self.args.node.clone());
        members.sort();
        WireMsg::Hello {
            boot_token: self.args.boot_token,
            members,
            reply,
        }
    }

    fn emit(&self, event: TransportEvent) {
        (self.args.sink)(event);
    }

    /// Marks `node` up in boot `token` (or re-announces it when the token changed).
    fn confirm_up(&mut self, node: &NodeName, token: BootToken, proxy: ActorRef<GatewayFrame>) {
        self.detector.heard(node, Instant::now());
        let changed = self.tokens.insert(node.clone(), token) != Some(token);
        self.args
            .shared
            .up
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.clone(), proxy);
        if changed {
            tracing::info!(hub_id = %self.args.hub_id, %node, boot_token = %token, "peer hub up");
            self.emit(TransportEvent::NodeUp {
                node: node.clone(),
                boot_token: token,
            });
        }
    }

    fn mark_down(&mut self, node: &str, why: &str) {
        self.detector.forget(node);
        self.args
            .shared
            .up
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(node);
        if self.tokens.remove(node).is_some() {
            tracing::info!(hub_id = %self.args.hub_id, %node, why, "peer hub down");
            self.emit(TransportEvent::NodeDown {
                node: node.to_owned(),
            });
        }
    }

    /// Re-reads the scope's members: maps new remote proxies to nodes (greeting them), forgets
    /// proxies that left, and declares down the nodes left without any proxy.
    async fn resolve(&mut self) {
        let members = ractor::pg::get_scoped_members(&self.scope, &GATEWAY_GROUP.to_owned());
        let remote: Vec<ActorCell> = members
            .into_iter()
            .filter(|cell| !cell.get_id().is_local())
            .collect();
        let live: BTreeSet<ActorId> = remote.iter().map(|c| c.get_id()).collect();
        let gone: Vec<ActorId> = self
            .proxies
            .keys()
            .filter(|id| !live.contains(id))
            .copied()
            .collect();
        let mut affected = BTreeSet::new();
        for id in gone {
            if let Some((node, _)) = self.proxies.remove(&id) {
                affected.insert(node);
            }
        }
        let unknown: Vec<ActorCell> = remote
            .into_iter()
            .filter(|c| !self.proxies.contains_key(&c.get_id()))
            .collect();
        if !unknown.is_empty() {
            let sessions = match ractor::call_t!(
                self.args.server,
                NodeServerMessage::GetSessions,
                2_000
            ) {
                Ok(sessions) => sessions,
                Err(error) => {
                    tracing::warn!(%error, "cannot list node sessions; will retry on the next tick");
                    Default::default()
                }
            };
            for cell in unknown {
                let Some(name) = sessions
                    .get(&cell.get_id().node())
                    .and_then(|s| s.peer_name.as_ref())
                    .map(|n| n.name.clone())
                else {
                    continue;
                };
                let proxy: ActorRef<GatewayFrame> = ActorRef::from(cell.clone());
                self.proxies
                    .insert(cell.get_id(), (name.clone(), proxy.clone()));
                affected.remove(&name);
                match self.pending_hello.remove(&name) {
                    Some(token) => {
                        self.confirm_up(&name, token, proxy.clone());
                        self.send(&proxy, &self.hello(true));
                    }
                    None => self.send(&proxy, &self.hello(false)),
                }
            }
        }
        for node in affected {
            match self.proxy_of(&node) {
                Some(proxy) if self.tokens.contains_key(&node) => {
                    // Another session to the same node survives: keep it up through that one.
                    self.args
                        .shared
                        .up
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(node, proxy);
                }
                Some(_) => {}
                None => self.mark_down(&node, "connection closed"),
            }
        }
    }

    async fn on_frame(&mut self, bytes: Vec<u8>) {
        let frame = match wire::decode_for(&self.args.hub_id, &bytes) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::warn!(hub_id = %self.args.hub_id, %error, "undecodable frame dropped");
                return;
            }
        };
        let from = frame.from;
        match frame.payload {
            WireMsg::Hello {
                boot_token, reply, ..
            } => {
                if self.proxy_of(&from).is_none() {
                    self.resolve().await;
                }
                match self.proxy_of(&from) {
                    Some(proxy) => {
                        self.confirm_up(&from, boot_token, proxy.clone());
                        if !reply {
                            self.send(&proxy, &self.hello(true));
                        }
                    }
                    None if self.pending_hello.len() < MAX_PENDING_HELLO
                        || self.pending_hello.contains_key(&from) =>
                    {
                        self.pending_hello.insert(from, boot_token);
                    }
                    None => {
                        tracing::warn!(hub_id = %self.args.hub_id, %from, limit = MAX_PENDING_HELLO, "hello from an unmapped node dropped: too many pending");
                    }
                }
            }
            WireMsg::Heartbeat { boot_token } => match self.tokens.get(&from) {
                Some(known) if *known == boot_token => {
                    self.detector.heard(&from, Instant::now());
                }
                _ => {
                    // Not up (declared down after a silence, or a new boot): greet it, the
                    // answer brings it (back) up with its current token.
                    if let Some(proxy) = self.proxy_of(&from) {
                        self.send(&proxy, &self.hello(false));
                    }
                }
            },
            msg => {
                if self.tokens.contains_key(&from) {
                    self.detector.heard(&from, Instant::now());
                    self.emit(TransportEvent::Message { from, msg });
                } else {
                    tracing::debug!(%from, kind = msg.kind(), "frame from a peer that is not up; dropped");
                }
            }
        }
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        let beat = WireMsg::Heartbeat {
            boot_token: self.args.boot_token,
        };
        for node in self.tokens.keys() {
            if let Some(proxy) = self.proxy_of(node) {
                self.send(&proxy, &beat);
            }
        }
        for change in self.detector.tick(now) {
            match change.to {
                PeerHealth::Down => self.mark_down(&change.node, "heartbeat timeout"),
                PeerHealth::Suspect => {
                    tracing::debug!(node = %change.node, "peer hub suspect (missed heartbeats)")
                }
                PeerHealth::Alive => {}
            }
        }
        // Greet mapped peers that have not answered yet (a lost Hello, a peer that was down).
        let unconfirmed: BTreeSet<NodeName> = self
            .proxies
            .values()
            .map(|(n, _)| n.clone())
            .filter(|n| !self.tokens.contains_key(n))
            .collect();
        for node in unconfirmed {
            if let Some(proxy) = self.proxy_of(&node) {
                self.send(&proxy, &self.hello(false));
            }
        }
    }
}

pub(crate) struct Link;

impl Actor for Link {
    type Msg = LinkMsg;
    type State = LinkState;
    type Arguments = LinkArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: LinkArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let scope = gateway_scope(&args.hub_id);
        let (gateway, _) =
            Actor::spawn_linked(None, Gateway, myself.clone(), myself.get_cell()).await?;
        ractor::pg::monitor_scope(scope.clone(), myself.get_cell());
        ractor::pg::join_scoped(
            scope.clone(),
            GATEWAY_GROUP.to_owned(),
            vec![gateway.get_cell()],
        );
        let timer = myself.send_interval(args.detector.interval, || LinkMsg::Tick);
        let mut state = LinkState {
            detector: FailureDetector::new(args.detector),
            args,
            scope,
            proxies: HashMap::new(),
            tokens: BTreeMap::new(),
            pending_hello: BTreeMap::new(),
            timer: Some(timer),
        };
        state.resolve().await;
        Ok(state)
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        ractor::pg::demonitor_scope(state.scope.clone(), myself.get_id());
        state
            .args
            .shared
            .up
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: LinkMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            LinkMsg::Frame(bytes) => state.on_frame(bytes).await,
            LinkMsg::Tick => {
                state.on_tick();
                let remote =
                    ractor::pg::get_scoped_members(&state.scope, &GATEWAY_GROUP.to_owned())
                        .iter()
                        .filter(|c| !c.get_id().is_local())
                        .count();
                if remote != state.proxies.len() || !state.pending_hello.is_empty() {
                    // A proxy we could not map yet (GetSessions failed or raced a session):
                    // retry until every member is known.
                    state.resolve().await;
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ProcessGroupChanged(change) if change.get_scope() == state.scope => {
                state.resolve().await;
            }
            SupervisionEvent::ActorTerminated(..) | SupervisionEvent::ActorFailed(..) => {
                // The gateway is stateless and never fails by itself; if it is gone the hub is
                // unreachable, so close the endpoint rather than run half-deaf.
                tracing::error!(hub_id = %state.args.hub_id, "hub gateway stopped; closing the transport");
                state.args.shared.closed.store(true, Ordering::SeqCst);
                myself.stop(Some("gateway stopped".to_owned()));
            }
            _ => {}
        }
        Ok(())
    }
}

/// A hub's [`Transport`] over ractor_cluster. Dropping it stops the link and the gateway, so
/// peers see the hub go down.
pub struct RactorTransport {
    hub_id: String,
    node: NodeName,
    boot_token: BootToken,
    shared: Arc<Shared>,
    link: Arc<Mutex<Option<ActorRef<LinkMsg>>>>,
}

impl std::fmt::Debug for RactorTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RactorTransport")
            .field("hub_id", &self.hub_id)
            .field("node", &self.node)
            .finish()
    }
}

impl RactorTransport {
    /// Opens the endpoint: spawns the link (which spawns the gateway) in the background, since
    /// [`crate::cluster::transport::Network::open_hub`] is synchronous. Needs a tokio runtime.
    pub(crate) fn open(
        hub_id: &str,
        node: NodeName,
        boot_token: BootToken,
        server: ActorRef<NodeServerMessage>,
        detector: DetectorConfig,
        sink: EventSink,
    ) -> Result<Self, TransportError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| TransportError::Node("open_hub needs a tokio runtime".to_owned()))?;
        let shared = Arc::new(Shared::default());
        let link = Arc::new(Mutex::new(None));
        let args = LinkArgs {
            hub_id: hub_id.to_owned(),
            node: node.clone(),
            boot_token,
            server,
            detector,
            sink,
            shared: shared.clone(),
        };
        let slot = link.clone();
        let closed = shared.clone();
        runtime.spawn(async move {
            match Actor::spawn(None, Link, args).await {
                Ok((actor, _)) => {
                    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                    if closed.closed.load(Ordering::SeqCst) {
                        actor.stop(Some("transport closed".to_owned()));
                    } else {
                        *slot = Some(actor);
                    }
                }
                Err(error) => {
                    tracing::error!(%error, "cannot start the hub link");
                    closed.closed.store(true, Ordering::SeqCst);
                }
            }
        });
        Ok(Self {
            hub_id: hub_id.to_owned(),
            node,
            boot_token,
            shared,
            link,
        })
    }

    /// Stops the endpoint now (also done on drop).
    pub fn close(&self) {
        let mut slot = self.link.lock().unwrap_or_else(|p| p.into_inner());
        self.shared.closed.store(true, Ordering::SeqCst);
        if let Some(link) = slot.take() {
            link.stop(Some("transport closed".to_owned()));
        }
    }
}

impl Transport for RactorTransport {
    fn local_node(&self) -> &NodeName {
        &self.node
    }

    fn hub_id(&self) -> &str {
        &self.hub_id
    }

    fn boot_token(&self) -> BootToken {
        self.boot_token
    }

    fn peers(&self) -> Vec<NodeName> {
        self.shared
            .up
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    fn send_frame(&self, to: &NodeName, frame: Vec<u8>) -> Result<(), TransportError> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(TransportError::Closed);
        }
        let proxy = self
            .shared
            .up
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(to)
            .cloned()
            .ok_or_else(|| TransportError::Unreachable(to.clone()))?;
        proxy
            .cast(GatewayFrame(frame))
            .map_err(|_| TransportError::Unreachable(to.clone()))
    }
}

impl Drop for RactorTransport {
    fn drop(&mut self) {
        self.close();
    }
}
