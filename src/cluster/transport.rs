//! The transport seam: how a hub reaches the hubs of the same hub id on other nodes.
//!
//! The hub sees two traits:
//! - [`Network`]: one per node, shared by all hubs of the node. [`Network::open_hub`] registers
//!   a hub's endpoint and returns its [`Transport`].
//! - [`Transport`]: one per hub per node. It sends [`WireMsg`]s to a peer by node name and
//!   delivers [`TransportEvent`]s — peers of the same hub id coming up and going down, and their
//!   messages — to the [`EventSink`] given at open.
//!
//! Events go to a callback rather than to a fixed actor type so that the hub can hand each event
//! to the actor that owns it (its wire inbox) without this module knowing the hub's actors; a
//! single actor can use [`sink_to_actor`]. The sink is given at open (not subscribed later) so
//! that no event can fall between the two; the transport announces every peer already up right
//! after open. The callback is called from transport tasks, one event at a time per transport,
//! and must not block (a `cast` is fine).
//!
//! Promises, identical for both implementations:
//! - hubs discover each other per hub id: a hub sees `NodeUp` only for nodes where a hub of the
//!   same id is open, with that node's boot token; `NodeUp` for a node already up means its boot
//!   token changed (it restarted faster than it could be seen down);
//! - `NodeDown` follows a crash, a closed connection, a heartbeat timeout, a partition or the
//!   peer closing its endpoint (`Goodbye` is only a hint delivered to the hub); after it no message from that boot is delivered until a new `NodeUp`;
//! - delivery is best effort and FIFO per pair of nodes while the link is healthy; messages can be
//!   lost around a `NodeDown`. The hub's full sync and request timeouts cover losses;
//! - a frame that does not decode, or is for another hub, is logged and dropped.
//!
//! Wiring into one actor (the hub's Coordinator opens its endpoint in `pre_start`, with the
//! hub's inbox as the sink, so a restarted Coordinator re-opens and is told every peer again):
//!
//! ```ignore
//! // MyMsg has a variant `Transport(TransportEvent)`.
//! let transport = network.open_hub(hub_id, sink_to_actor(myself.clone(), MyMsg::Transport))?;
//! // later, in `handle`:
//! transport.send(&peer, &WireMsg::SyncRequest)?;
//! ```

use std::sync::Arc;

use crate::cluster::wire::{self, WireError, WireMsg};
use crate::core::boot_token::BootToken;
use crate::model::NodeName;

/// What a transport tells its hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportEvent {
    /// A hub of the same id is reachable on `node`, in the boot identified by `boot_token`.
    NodeUp {
        /// The peer.
        node: NodeName,
        /// Its boot token; compare with [`crate::core::boot_token::BootTokens`] to tell a restart
        /// from a flap.
        boot_token: BootToken,
    },
    /// The peer's hub is unreachable (crashed, disconnected, timed out, partitioned or left).
    NodeDown {
        /// The peer.
        node: NodeName,
    },
    /// A hub message from a peer that is up.
    Message {
        /// The sending node.
        from: NodeName,
        /// The message (never `Hello` or `Heartbeat`: the transport consumes those).
        msg: WireMsg,
    },
}

/// Where a transport delivers its events. Must not block and must not call back into the
/// transport or the router synchronously (the in-process router calls it under its lock).
pub type EventSink = Arc<dyn Fn(TransportEvent) + Send + Sync>;

/// A sink that casts every event to `actor`, wrapped by `wrap` into the actor's message type.
/// A failed cast (the actor stopped) is ignored: a stopped hub has no use for events.
pub fn sink_to_actor<M>(actor: ractor::ActorRef<M>, wrap: fn(TransportEvent) -> M) -> EventSink
where
    M: ractor::Message,
{
    Arc::new(move |event| {
        let _ = actor.cast(wrap(event));
    })
}

/// A send or open failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// No connection to a hub of this id on that node (never up, down, or partitioned away).
    #[error("node {0} is not reachable for this hub")]
    Unreachable(NodeName),
    /// The message could not be encoded.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The transport was closed (its hub stopped, or its node crashed).
    #[error("transport closed")]
    Closed,
    /// The node-level machinery failed (listener, node server).
    #[error("cluster node error: {0}")]
    Node(String),
}

/// One hub's endpoint on one node. Dropping it closes the endpoint: peers see `NodeDown`.
pub trait Transport: Send + Sync {
    /// This node's name (`name@host`).
    fn local_node(&self) -> &NodeName;

    /// The hub this endpoint belongs to.
    fn hub_id(&self) -> &str;

    /// This node's boot token, as announced to peers.
    fn boot_token(&self) -> BootToken;

    /// Peers currently up for this hub, sorted.
    fn peers(&self) -> Vec<NodeName>;

    /// Sends an encoded frame (from [`wire::encode`]) to `to`. `Ok` means handed to the network,
    /// not delivered.
    fn send_frame(&self, to: &NodeName, frame: Vec<u8>) -> Result<(), TransportError>;

    /// Encodes and sends `msg` to `to`.
    fn send(&self, to: &NodeName, msg: &WireMsg) -> Result<(), TransportError> {
        let frame = wire::encode(self.hub_id(), self.local_node(), msg)?;
        self.send_frame(to, frame)
    }

    /// Encodes `msg` once and sends it to every peer up now. Per-peer failures are returned
    /// (a peer that went down in between), encoding failures as `Err`.
    fn broadcast(&self, msg: &WireMsg) -> Result<Vec<(NodeName, TransportError)>, TransportError> {
        let frame = wire::encode(self.hub_id(), self.local_node(), msg)?;
        let mut failures = Vec::new();
        for peer in self.peers() {
            if let Err(error) = self.send_frame(&peer, frame.clone()) {
                failures.push((peer, error));
            }
        }
        Ok(failures)
    }
}

/// A node's connection to the cluster, shared by the hubs it hosts.
pub trait Network: Send + Sync {
    /// This node's name (`name@host`).
    fn local_node(&self) -> &NodeName;

    /// This node's boot token.
    fn boot_token(&self) -> BootToken;

    /// Opens hub `hub_id`'s endpoint, delivering its events to `sink`. Opening a hub id that is
    /// already open replaces the old endpoint (a restarted Coordinator re-opens): the old one
    /// goes inert.
    fn open_hub(&self, hub_id: &str, sink: EventSink)
        -> Result<Arc<dyn Transport>, TransportError>;

    /// Whether hubs on this network run a remote endpoint (`crate::remote`) for clients on
    /// other nodes. Only a network with one node per process can: the endpoint is found
    /// through ractor's process-global pg groups.
    fn serves_remote_clients(&self) -> bool {
        false
    }

    /// The node's connection to the cluster (isolated or not, peers refused for their
    /// cookie), for health and metrics; `None` for a network that has no seeds to miss (the
    /// in-process router).
    fn connection(&self) -> Option<crate::core::isolation::ConnectionReport> {
        None
    }
}

/// What [`crate::HubBuilder::network`] accepts: a network by value (`ClusterNode`,
/// `InProcessNode`), in an `Arc` (kept by the caller to shut the node down later), or already
/// an `Arc<dyn Network>`. The hubs of a node share it, so it ends up behind an `Arc` anyway.
pub trait IntoNetwork {
    /// The shared network.
    fn into_network(self) -> Arc<dyn Network>;
}

impl IntoNetwork for Arc<dyn Network> {
    fn into_network(self) -> Arc<dyn Network> {
        self
    }
}

impl<N: Network + 'static> IntoNetwork for Arc<N> {
    fn into_network(self) -> Arc<dyn Network> {
        self
    }
}

impl<N: Network + 'static> IntoNetwork for N {
    fn into_network(self) -> Arc<dyn Network> {
        Arc::new(self)
    }
}
