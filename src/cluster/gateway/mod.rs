//! One hub's endpoint over ractor_cluster: a remotable gateway actor, a remotable Confirmer,
//! and the link actor that owns the hub's view of its peers.
//!
//! Per hub per node there are three actors:
//! - the **gateway** ([`GatewayFrame`] messages: bytes in a `BytesConvertable` newtype) receives
//!   the peers' frames. It joins the pg group `gateways` in the scope `process_hub/<hub_id>`, so
//!   ractor_cluster advertises it to every connected node, where it appears as a proxy. It
//!   forwards every frame it receives to its link and keeps no state;
//! - the **Confirmer** ([`keys`]) answers peers asking whether a seal key offered in this
//!   node's name is really this node's;
//! - the **link** monitors that pg scope, maps each remote gateway proxy to its node name (through
//!   the node server's `GetSessions`: a proxy's `ActorId::Remote::node_id` is the local session
//!   counter, not an identity), exchanges seal keys and `Hello`s carrying boot tokens, sends
//!   heartbeats, runs the [`FailureDetector`](crate::core::failure_detector::FailureDetector),
//!   and tells the hub `NodeUp`/`NodeDown`/`Message`.
//!
//! **A node speaks only for itself.** ractor_cluster hands a frame to the gateway without
//! saying which session it came on, so a frame's `from` proves nothing by itself. Between nodes
//! that speak wire version 2 every frame is sealed with a key the receiver chose for that sender
//! and handed only to it ([`keys`], [`crate::cluster::wire::seal`]); a frame whose seal does not
//! verify, or an open frame claiming the name of a node that seals, is dropped, logged and
//! counted ([`FrameStats`]). A peer that speaks only version 1 (an older build, during a
//! rolling upgrade) is recognised by its gateway's name and spoken to with open frames, whose
//! sender cannot be checked: `refuse_open_peers` turns that off once every node is upgraded.
//!
//! A node is up for the hub once its `Hello` is received (sealed, for a sealing peer, and once
//! this node's key for it is confirmed); down when its last gateway proxy leaves the pg scope
//! (ractor_cluster kills the proxies of a closed session, so "no proxy left" is the disconnect
//! confirmed against the live sessions — a duplicate session losing its election has no proxies
//! and changes nothing), or when its heartbeats time out (half-open connections). Proxies are
//! only ever sent to: never stopped, killed or linked (TRAPS in the ractor notes: that would
//! tear down the whole session).

pub mod keys;
mod link;
mod transport;

use std::sync::atomic::{AtomicU64, Ordering};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use ractor_cluster::BytesConvertable;

pub(crate) use link::LinkMsg;
pub(crate) use transport::EndpointArgs;
pub use transport::RactorTransport;

/// The pg group every hub gateway joins, inside its hub's scope.
pub const GATEWAY_GROUP: &str = "gateways";

/// The pg scope of a hub's gateways: hubs discover each other per hub id through it.
pub fn gateway_scope(hub_id: &str) -> String {
    format!("process_hub/{hub_id}")
}

/// Which frames an endpoint speaks and accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WirePolicy {
    /// The newest wire version this endpoint speaks: 3 (the default) seals frames and sends
    /// them compact to peers that speak 3; 2 seals them with fixed-width integers; 1 behaves as
    /// a build that predates sealing (open frames only). 1 and 2 are for rolling upgrades and
    /// their tests.
    pub max_version: u16,
    /// Refuse peers that speak only version 1, whose frames cannot be checked.
    pub refuse_open_peers: bool,
}

impl Default for WirePolicy {
    fn default() -> Self {
        Self {
            max_version: crate::cluster::wire::seal::COMPACT_VERSION,
            refuse_open_peers: false,
        }
    }
}

impl WirePolicy {
    /// Whether this endpoint seals (speaks version 2).
    pub fn seals(&self) -> bool {
        self.max_version >= crate::cluster::wire::seal::SEALED_VERSION
    }
}

/// Counters of the frames a node's hub endpoints refused (and of those that came compact), for
/// diagnostics and tests.
#[derive(Debug, Default)]
pub struct FrameStats {
    forged: AtomicU64,
    refused_offers: AtomicU64,
    undecodable: AtomicU64,
    open_refused: AtomicU64,
    compact: AtomicU64,
}

/// A snapshot of [`FrameStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// Frames claiming a sealing node's name whose seal did not verify (or had none).
    pub forged: u64,
    /// Key offers their claimed author did not confirm.
    pub refused_offers: u64,
    /// Frames that did not decode, or were for another hub.
    pub undecodable: u64,
    /// Open frames refused because `refuse_open_peers` is set.
    pub open_refused: u64,
    /// Frames accepted in the compact encoding (wire version 3): not a refusal, the sign that
    /// peers speak it.
    pub compact: u64,
}

impl FrameStats {
    /// The counts now.
    pub fn counts(&self) -> FrameCounts {
        FrameCounts {
            forged: self.forged.load(Ordering::Relaxed),
            refused_offers: self.refused_offers.load(Ordering::Relaxed),
            undecodable: self.undecodable.load(Ordering::Relaxed),
            open_refused: self.open_refused.load(Ordering::Relaxed),
            compact: self.compact.load(Ordering::Relaxed),
        }
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// An encoded [`wire`](crate::cluster::wire) frame: the gateway's (remotable) message type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayFrame(pub Vec<u8>);

impl BytesConvertable for GatewayFrame {
    fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn from_bytes(bytes: Vec<u8>) -> Self {
        // Identity: nothing can fail here. Validation happens in `wire::seal::arrived`, where a
        // bad frame becomes a typed error instead of a panic inside ractor.
        Self(bytes)
    }
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
