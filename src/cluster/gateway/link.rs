//! The link actor of a hub endpoint: peers' gateways mapped to node names, the seal-key
//! exchange, `Hello`s and heartbeats, and the frames handed to the hub.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::{NodeServerMessage, RactorMessage};

use super::keys::{self, ConfirmMsg, Confirmer, InboundKeys, CONFIRMER_GROUP};
use super::transport::{EndpointArgs, Outgoing, Shared, UpPeer};
use super::{gateway_scope, FrameStats, Gateway, GatewayFrame, GATEWAY_GROUP};
use crate::cluster::transport::{EventSink, TransportEvent};
use crate::cluster::wire::seal::{self, Arrived, SealKey, COMPACT_VERSION, SEALED_VERSION};
use crate::cluster::wire::{self, WireMsg};
use crate::core::boot_token::BootToken;
use crate::core::failure_detector::{FailureDetector, PeerHealth};
use crate::model::NodeName;

/// How long a peer's Confirmer has to answer.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

/// Hellos kept from peers whose gateway is not mapped yet (a peer's frames can overtake the
/// advertisement of its gateway); more are dropped (the peer greets again on its next tick).
const MAX_PENDING_HELLOS: usize = 1024;

/// The link's messages.
#[derive(RactorMessage)]
pub(crate) enum LinkMsg {
    /// A frame received by the gateway.
    Frame(Vec<u8>),
    /// Heartbeat timer: send heartbeats, run the failure detector, re-greet unconfirmed peers.
    Tick,
    /// The answer of `node`'s Confirmer about a key offered in its name, through its gateway
    /// named `gateway`.
    Confirmed {
        node: NodeName,
        key: SealKey,
        gateway: String,
        confirmed: bool,
    },
}

/// How a mapped peer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speech {
    /// Sealed frames (its gateway carries a sealing gateway's name), compact (wire version 3)
    /// when both ends speak it.
    Sealed { compact: bool },
    /// Open frames only (a build before sealing).
    Open,
}

/// What a link needs to start.
pub(crate) struct LinkArgs {
    pub hub_id: String,
    pub node: NodeName,
    pub endpoint: EndpointArgs,
    pub sink: EventSink,
    pub(super) shared: Arc<Shared>,
}

pub(crate) struct LinkState {
    args: LinkArgs,
    scope: String,
    /// Remote gateway proxies seen in the scope, by actor id, with their node and speech.
    proxies: HashMap<ActorId, (NodeName, ActorRef<GatewayFrame>, Speech)>,
    /// Boot tokens of the peers that are up.
    tokens: BTreeMap<NodeName, BootToken>,
    /// Open Hellos from nodes whose proxy is not mapped yet: taken only if the node turns out
    /// to speak open frames.
    pending_hello: BTreeMap<NodeName, BootToken>,
    /// Sealed (so genuine) Hellos from peers whose key this node has not confirmed yet.
    pending_sealed_hello: BTreeMap<NodeName, BootToken>,
    /// The key this node chose for each sender (what the Confirmer answers from).
    inbound: InboundKeys,
    /// The keys peers chose for this node's frames, once confirmed by them, with the name of
    /// the gateway they were confirmed through: a key belongs to one endpoint of its peer (one
    /// boot), and a peer's new gateway (a restart, a re-opened endpoint) chose new keys.
    outbound: BTreeMap<NodeName, (SealKey, String)>,
    /// Peers whose key offer is being confirmed.
    confirming: BTreeSet<NodeName>,
    detector: FailureDetector,
    timer: Option<tokio::task::JoinHandle<()>>,
    /// The `hub` and `node` labels of this endpoint's metrics, built once.
    labels: crate::telemetry::metrics::HubLabels,
}

impl LinkState {
    fn stats(&self) -> &FrameStats {
        &self.args.endpoint.stats
    }

    fn seals(&self) -> bool {
        self.args.endpoint.policy.seals()
    }

    fn mapped(&self, node: &str) -> Option<(ActorRef<GatewayFrame>, Speech)> {
        // Prefer the newest session's proxy (highest session counter) when several exist.
        self.proxies
            .iter()
            .filter(|(_, (n, _, _))| n == node)
            .max_by_key(|(id, _)| (id.node(), id.pid()))
            .map(|(_, (_, proxy, speech))| (proxy.clone(), *speech))
    }

    /// The peer as the transport sends to it, if this node can speak to it now.
    fn peer(&self, node: &str) -> Option<UpPeer> {
        let (proxy, speech) = self.mapped(node)?;
        let seal = match speech {
            Speech::Open => None,
            Speech::Sealed { .. } => Some(self.outbound.get(node)?.0),
        };
        let compact = matches!(speech, Speech::Sealed { compact: true });
        Some(UpPeer {
            proxy,
            seal,
            compact,
        })
    }

    fn send(&self, node: &str, msg: &WireMsg) {
        let Some(peer) = self.peer(node) else {
            return;
        };
        match peer.frame(&mut Outgoing::new(&self.args.hub_id, &self.args.node, msg)) {
            Ok(frame) => {
                let _ = peer.cast(frame);
            }
            Err(error) => tracing::error!(%error, kind = msg.kind(), "cannot encode frame"),
        }
    }

    /// Offers `node` the key this node chose for it, over its own session.
    fn offer_key(&self, node: &str, proxy: &ActorRef<GatewayFrame>) {
        let key = self.inbound.for_sender(node);
        match seal::key_offer(&self.args.hub_id, &self.args.node, &key) {
            Ok(frame) => {
                let _ = proxy.cast(GatewayFrame(frame));
            }
            Err(error) => tracing::error!(%error, "cannot encode a key offer"),
        }
    }

    fn hello(&self, reply: bool) -> WireMsg {
        let mut members: Vec<NodeName> = self.tokens.keys().cloned().collect();
        members.push(self.args.node.clone());
        members.sort();
        WireMsg::Hello {
            boot_token: self.args.endpoint.boot_token,
            members,
            reply,
        }
    }

    fn emit(&self, event: TransportEvent) {
        (self.args.sink)(event);
    }

    /// Marks `node` up in boot `token` (or re-announces it when the token changed).
    fn confirm_up(&mut self, node: &NodeName, token: BootToken) {
        let Some(peer) = self.peer(node) else {
            return;
        };
        self.detector.heard(node, Instant::now());
        let changed = self.tokens.insert(node.clone(), token) != Some(token);
        self.args
            .shared
            .up
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.clone(), peer);
        if changed {
            tracing::info!(hub_id = %self.args.hub_id, %node, boot_token = %token, "peer hub up");
            self.labels.peer_up(node);
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
        // Its key is kept: a peer declared down by a silence may still be the same boot (its
        // Hellos must still pass); a new boot offers a new key, which replaces it once
        // confirmed.
        self.pending_sealed_hello.remove(node);
        if self.tokens.remove(node).is_some() {
            tracing::info!(hub_id = %self.args.hub_id, %node, why, "peer hub down");
            self.emit(TransportEvent::NodeDown {
                node: node.to_owned(),
            });
        }
    }

    /// How the gateway proxy `cell` of `node` speaks, from its advertised name; `None` when
    /// the name says it is another node's (a third node cannot make a proxy look like this
    /// peer's: the proxy and its name come over `node`'s own session).
    fn speech_of(&self, cell: &ActorCell, node: &str) -> Option<Speech> {
        match cell.get_name() {
            Some(name) if name.starts_with(&keys::gateway_prefix(&self.args.hub_id, node)) => {
                let theirs =
                    keys::gateway_version(&name, &self.args.hub_id, node).unwrap_or(SEALED_VERSION);
                Some(Speech::Sealed {
                    compact: theirs.min(self.args.endpoint.policy.max_version) >= COMPACT_VERSION,
                })
            }
            Some(name) if name.starts_with("process_hub.gateway.v2|") => None,
            _ => Some(Speech::Open),
        }
    }

    /// Re-reads the scope's members: maps new remote proxies to nodes (offering keys and
    /// greeting), forgets proxies that left, and declares down the nodes left without any proxy.
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
            if let Some((node, _, _)) = self.proxies.remove(&id) {
                affected.insert(node);
            }
        }
        let unknown: Vec<ActorCell> = remote
            .into_iter()
            .filter(|c| !self.proxies.contains_key(&c.get_id()))
            .collect();
        if !unknown.is_empty() {
            let sessions = self.session_names().await;
            for cell in unknown {
                let Some(name) = sessions.get(&cell.get_id().node()).cloned() else {
                    continue;
                };
                let Some(speech) = self.speech_of(&cell, &name) else {
                    tracing::warn!(hub_id = %self.args.hub_id, peer = %name, actor = ?cell.get_name(),
                        "a peer advertises a gateway in another node's name; ignored");
                    FrameStats::bump(&self.stats().forged);
                    continue;
                };
                let speech = if self.seals() { speech } else { Speech::Open };
                let proxy: ActorRef<GatewayFrame> = ActorRef::from(cell.clone());
                self.forget_stale_key(&name, cell.get_name().as_deref());
                self.proxies
                    .insert(cell.get_id(), (name.clone(), proxy.clone(), speech));
                affected.remove(&name);
                self.greet(&name, &proxy, speech);
            }
        }
        for node in affected {
            match self.peer(&node) {
                Some(peer) if self.tokens.contains_key(&node) => {
                    // Another session to the same node survives: keep it up through that one.
                    self.args
                        .shared
                        .up
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(node, peer);
                }
                _ if self.mapped(&node).is_some() => {}
                _ => self.mark_down(&node, "connection closed"),
            }
        }
    }

    /// Forgets the key `node` gave this node when its newly mapped gateway, named `gateway`,
    /// is not the one that key was confirmed through: the peer restarted or re-opened its
    /// endpoint, and frames sealed with its predecessor's key would only be refused (as
    /// forgeries) by it. The peer is unreachable until its new key is confirmed (a round trip).
    fn forget_stale_key(&mut self, node: &str, gateway: Option<&str>) {
        let stale = self
            .outbound
            .get(node)
            .is_some_and(|(_, confirmed_by)| Some(confirmed_by.as_str()) != gateway);
        if stale {
            self.outbound.remove(node);
            self.args
                .shared
                .up
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(node);
            tracing::debug!(hub_id = %self.args.hub_id, peer = %node, "the peer's endpoint is new (a restart): its key is renewed");
        }
    }

    /// First words to a newly mapped gateway of `node`.
    fn greet(&mut self, node: &NodeName, proxy: &ActorRef<GatewayFrame>, speech: Speech) {
        match speech {
            Speech::Sealed { .. } => {
                // An open Hello in its name was not its own.
                self.pending_hello.remove(node);
                self.offer_key(node, proxy);
                if self.outbound.contains_key(node) {
                    self.send(node, &self.hello(false));
                }
            }
            Speech::Open if self.refuses_open() => {
                tracing::warn!(hub_id = %self.args.hub_id, peer = %node,
                    "peer speaks only open frames (wire version 1) and open peers are refused");
            }
            Speech::Open if self.seals() => {
                tracing::warn!(hub_id = %self.args.hub_id, peer = %node,
                    "peer speaks only open frames (wire version 1): its frames cannot be checked for their sender; upgrade it, then set --refuse-open-peers");
                self.greet_open(node);
            }
            Speech::Open => self.greet_open(node),
        }
    }

    /// First words to a gateway that speaks open frames.
    fn greet_open(&mut self, node: &NodeName) {
        match self.pending_hello.remove(node) {
            Some(token) => {
                self.confirm_up(node, token);
                self.send(node, &self.hello(true));
            }
            None => self.send(node, &self.hello(false)),
        }
    }

    fn refuses_open(&self) -> bool {
        self.seals() && self.args.endpoint.policy.refuse_open_peers
    }

    /// `session id -> peer node name` of the node server's sessions.
    async fn session_names(&self) -> BTreeMap<u64, NodeName> {
        match ractor::call_t!(
            self.args.endpoint.server,
            NodeServerMessage::GetSessions,
            2_000
        ) {
            Ok(sessions) => sessions
                .into_iter()
                .filter_map(|(id, s)| s.peer_name.map(|n| (id, n.name)))
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "cannot list node sessions; will retry on the next tick");
                BTreeMap::new()
            }
        }
    }

    async fn on_frame(&mut self, myself: &ActorRef<LinkMsg>, bytes: Vec<u8>) {
        let size = bytes.len();
        let arrived = match seal::arrived(&self.args.hub_id, &bytes) {
            Ok(arrived) if self.seals() || matches!(arrived, Arrived::Open { .. }) => arrived,
            Ok(_) => {
                // A build before sealing cannot read version 2 frames.
                FrameStats::bump(&self.stats().undecodable);
                tracing::debug!(hub_id = %self.args.hub_id, "sealed frame dropped: this node speaks wire version 1 only");
                return;
            }
            Err(error) => {
                FrameStats::bump(&self.stats().undecodable);
                tracing::warn!(hub_id = %self.args.hub_id, %error, "undecodable frame dropped");
                return;
            }
        };
        let from = arrived.from().clone();
        if from == self.args.node {
            FrameStats::bump(&self.stats().forged);
            tracing::warn!(hub_id = %self.args.hub_id, "a frame in this node's own name dropped");
            return;
        }
        let speech = self.mapped(&from).map(|(_, s)| s);
        let sealed = matches!(arrived, Arrived::Sealed { .. });
        let frame = match arrived {
            Arrived::KeyOffer { key, .. } => return self.on_key_offer(myself, from, key).await,
            Arrived::Sealed { version, body, .. } => {
                if version > self.args.endpoint.policy.max_version {
                    // As a build that predates this version would: it cannot read it.
                    FrameStats::bump(&self.stats().undecodable);
                    tracing::debug!(hub_id = %self.args.hub_id, %from, version, "frame of a newer wire version dropped");
                    return;
                }
                let genuine = self
                    .inbound
                    .get(&from)
                    .is_some_and(|key| arrived.verify(&key));
                if !genuine {
                    return self.refuse_forged(&from, "its seal does not verify");
                }
                match wire::decode_body(version, body) {
                    Ok(frame) => {
                        if version == COMPACT_VERSION {
                            FrameStats::bump(&self.stats().compact);
                        }
                        frame
                    }
                    Err(error) => {
                        FrameStats::bump(&self.stats().undecodable);
                        tracing::warn!(hub_id = %self.args.hub_id, %from, %error, "undecodable sealed frame dropped");
                        return;
                    }
                }
            }
            Arrived::Open { frame, .. } => {
                if matches!(speech, Some(Speech::Sealed { .. })) {
                    return self.refuse_forged(&from, "it is open, and that node seals");
                }
                if self.refuses_open() {
                    FrameStats::bump(&self.stats().open_refused);
                    tracing::debug!(hub_id = %self.args.hub_id, %from, "open frame refused");
                    return;
                }
                match wire::decode_for(&self.args.hub_id, frame) {
                    Ok(frame) => frame,
                    Err(error) => {
                        FrameStats::bump(&self.stats().undecodable);
                        tracing::warn!(hub_id = %self.args.hub_id, %error, "undecodable frame dropped");
                        return;
                    }
                }
            }
        };
        self.labels.frame(&from, "in", size);
        self.on_message(from, frame.payload, sealed).await;
    }

    /// Drops and counts a frame that may not come from the node it names. Loud only when that
    /// node is up here: a frame in the name of a node that is not up is dropped whatever its
    /// seal (see `on_message`), and one arrives in every ordinary restart (a peer's frames
    /// sealed for this node's previous boot, in flight while it came back).
    fn refuse_forged(&self, from: &str, why: &str) {
        FrameStats::bump(&self.stats().forged);
        if self.tokens.contains_key(from) {
            tracing::warn!(hub_id = %self.args.hub_id, claimed = %from, why, "frame refused: it may not come from the node it names");
        } else {
            tracing::debug!(hub_id = %self.args.hub_id, claimed = %from, why, "frame refused from a node that is not up here (its seal is for another boot, or forged)");
        }
    }

    /// A message from `from`, checked: `sealed` when its seal verified.
    async fn on_message(&mut self, from: NodeName, payload: WireMsg, sealed: bool) {
        match payload {
            WireMsg::Hello {
                boot_token, reply, ..
            } => {
                if self.mapped(&from).is_none() {
                    self.resolve().await;
                }
                match self.mapped(&from) {
                    Some(_) if self.peer(&from).is_some() => {
                        self.confirm_up(&from, boot_token);
                        if !reply {
                            self.send(&from, &self.hello(true));
                        }
                    }
                    // Sealing, but its key not confirmed yet: up once it is.
                    Some(_) if sealed => {
                        self.pending_sealed_hello.insert(from, boot_token);
                    }
                    Some(_) => {}
                    None if sealed => {}
                    None if self.pending_hello.len() < MAX_PENDING_HELLOS => {
                        self.pending_hello.insert(from, boot_token);
                    }
                    None => {
                        tracing::debug!(%from, "hello from an unmapped peer dropped: too many pending");
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
                    self.send(&from, &self.hello(false));
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

    /// A key offered in `from`'s name: used for frames to `from` once `from`'s Confirmer says
    /// it is its own.
    async fn on_key_offer(&mut self, myself: &ActorRef<LinkMsg>, from: NodeName, key: SealKey) {
        if self.outbound.get(&from).is_some_and(|(k, _)| *k == key)
            || self.confirming.contains(&from)
        {
            return;
        }
        if self.mapped(&from).is_none() {
            self.resolve().await;
        }
        let Some((proxy, Speech::Sealed { .. })) = self.mapped(&from) else {
            FrameStats::bump(&self.stats().refused_offers);
            tracing::debug!(%from, "key offer from a node that is not a mapped sealing peer; dropped");
            return;
        };
        let gateway = proxy.get_cell().get_name().unwrap_or_default();
        let Some(confirmer) = self.confirmer_of(&proxy) else {
            // Its Confirmer's advertisement may trail its gateway's: it offers again.
            tracing::debug!(%from, "no confirmer known yet for a key offer");
            return;
        };
        self.confirming.insert(from.clone());
        let myself = myself.clone();
        let request = keys::confirm_request(&self.args.node, &key.fingerprint());
        tokio::spawn(async move {
            let confirmed = ractor::call_t!(
                confirmer,
                ConfirmMsg::Confirm,
                CONFIRM_TIMEOUT.as_millis() as u64,
                request
            )
            .unwrap_or(false);
            let _ = myself.cast(LinkMsg::Confirmed {
                node: from,
                key,
                gateway,
                confirmed,
            });
        });
    }

    /// The Confirmer that goes with the gateway `proxy`: the one advertised over the same
    /// session (so by the same node) under the matching name.
    fn confirmer_of(&self, proxy: &ActorRef<GatewayFrame>) -> Option<ActorRef<ConfirmMsg>> {
        let expected = keys::confirmer_of(&proxy.get_cell().get_name()?)?;
        let session = proxy.get_id().node();
        let cell = ractor::pg::get_scoped_members(&self.scope, &CONFIRMER_GROUP.to_owned())
            .into_iter()
            .find(|cell| {
                !cell.get_id().is_local()
                    && cell.get_id().node() == session
                    && cell.get_name().as_deref() == Some(expected.as_str())
            })?;
        Some(ActorRef::from(cell))
    }

    fn on_confirmed(&mut self, node: NodeName, key: SealKey, gateway: String, confirmed: bool) {
        self.confirming.remove(&node);
        if !confirmed {
            FrameStats::bump(&self.stats().refused_offers);
            tracing::warn!(hub_id = %self.args.hub_id, peer = %node, "a key offered in a peer's name was not confirmed by it; dropped");
            return;
        }
        let Some((proxy, _)) = self.mapped(&node) else {
            return;
        };
        if proxy.get_cell().get_name().as_deref() != Some(gateway.as_str()) {
            // Confirmed by an endpoint of the peer that has been replaced since: its successor
            // chose other keys and offers them.
            tracing::debug!(hub_id = %self.args.hub_id, peer = %node, "a key confirmed by a replaced endpoint of the peer; dropped");
            return;
        }
        self.outbound.insert(node.clone(), (key, gateway));
        if let Some(peer) = self.peer(&node) {
            if self.tokens.contains_key(&node) {
                // Up already (the peer re-keyed): send with the new key from now on.
                self.args
                    .shared
                    .up
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(node.clone(), peer);
            }
        }
        match self.pending_sealed_hello.remove(&node) {
            Some(token) => {
                self.confirm_up(&node, token);
                self.send(&node, &self.hello(true));
            }
            None => self.send(&node, &self.hello(false)),
        }
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        let beat = WireMsg::Heartbeat {
            boot_token: self.args.endpoint.boot_token,
        };
        for node in self.tokens.keys() {
            self.send(node, &beat);
        }
        for (peer, silent, health) in self.detector.silences(now) {
            self.labels
                .peer_health(peer, silent, health != PeerHealth::Alive);
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
        // Offer keys to and greet mapped peers that are not up yet (a lost offer or Hello, a
        // peer that was down).
        let unconfirmed: BTreeSet<NodeName> = self
            .proxies
            .values()
            .map(|(n, _, _)| n.clone())
            .filter(|n| !self.tokens.contains_key(n))
            .collect();
        for node in unconfirmed {
            if let Some((proxy, speech)) = self.mapped(&node) {
                if matches!(speech, Speech::Sealed { .. }) {
                    self.offer_key(&node, &proxy);
                }
                if !(speech == Speech::Open && self.refuses_open()) {
                    self.send(&node, &self.hello(false));
                }
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
        let inbound = InboundKeys::default();
        let gateway_name = if args.endpoint.policy.seals() {
            // The Confirmer first: a peer that maps the gateway already knows the Confirmer.
            let nonce: u64 = rand::random();
            let (confirmer, _) = Actor::spawn_linked(
                Some(keys::confirmer_name(
                    &args.hub_id,
                    &args.node,
                    nonce,
                    args.endpoint.policy.max_version,
                )),
                Confirmer,
                inbound.clone(),
                myself.get_cell(),
            )
            .await?;
            ractor::pg::join_scoped(
                scope.clone(),
                CONFIRMER_GROUP.to_owned(),
                vec![confirmer.get_cell()],
            );
            Some(keys::gateway_name(
                &args.hub_id,
                &args.node,
                nonce,
                args.endpoint.policy.max_version,
            ))
        } else {
            None
        };
        let (gateway, _) =
            Actor::spawn_linked(gateway_name, Gateway, myself.clone(), myself.get_cell()).await?;
        ractor::pg::monitor_scope(scope.clone(), myself.get_cell());
        ractor::pg::join_scoped(
            scope.clone(),
            GATEWAY_GROUP.to_owned(),
            vec![gateway.get_cell()],
        );
        let timer = myself.send_interval(args.endpoint.detector.interval, || LinkMsg::Tick);
        let mut state = LinkState {
            detector: FailureDetector::new(args.endpoint.detector),
            labels: crate::telemetry::metrics::HubLabels::new(&args.hub_id, &args.node),
            args,
            scope,
            proxies: HashMap::new(),
            tokens: BTreeMap::new(),
            pending_hello: BTreeMap::new(),
            pending_sealed_hello: BTreeMap::new(),
            inbound,
            outbound: BTreeMap::new(),
            confirming: BTreeSet::new(),
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
        myself: ActorRef<Self::Msg>,
        msg: LinkMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            LinkMsg::Frame(bytes) => state.on_frame(&myself, bytes).await,
            LinkMsg::Confirmed {
                node,
                key,
                gateway,
                confirmed,
            } => state.on_confirmed(node, key, gateway, confirmed),
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
                // The gateway and the Confirmer are stateless and never fail by themselves; if
                // one is gone the hub is unreachable, so close the endpoint rather than run
                // half-deaf.
                tracing::error!(hub_id = %state.args.hub_id, "hub gateway stopped; closing the transport");
                state.args.shared.closed.store(true, Ordering::SeqCst);
                myself.stop(Some("gateway stopped".to_owned()));
            }
            _ => {}
        }
        Ok(())
    }
}
