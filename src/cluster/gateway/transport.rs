//! The [`Transport`] handle of a hub endpoint over ractor_cluster: sends go straight to the
//! peer's gateway proxy (sealed for a sealing peer), without an actor hop.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use ractor::{Actor, ActorRef};
use ractor_cluster::NodeServerMessage;

use super::link::{Link, LinkArgs};
use super::{FrameStats, GatewayFrame, LinkMsg, WirePolicy};
use crate::cluster::transport::{EventSink, Transport, TransportError};
use crate::cluster::wire::seal::{self, SealKey};
use crate::cluster::wire::{self, WireMsg};
use crate::core::boot_token::BootToken;
use crate::core::failure_detector::DetectorConfig;
use crate::model::NodeName;

/// A peer that is up: its gateway proxy, the key its frames are sealed with (`None`: the peer
/// speaks only open frames), and whether it reads compact frames (wire version 3).
#[derive(Clone)]
pub(super) struct UpPeer {
    pub proxy: ActorRef<GatewayFrame>,
    pub seal: Option<SealKey>,
    pub compact: bool,
}

impl UpPeer {
    /// The frame that carries `message` to this peer: compact and sealed if it reads version 3,
    /// else sealed or open as it speaks.
    pub fn frame(&self, message: &mut Outgoing<'_>) -> Result<Vec<u8>, TransportError> {
        if let (Some(key), true) = (&self.seal, self.reads_compact()) {
            if let Some(body) = message.compact() {
                return Ok(seal::seal_compact(body, key));
            }
        }
        let open = message.open()?;
        Ok(match &self.seal {
            Some(key) => seal::seal(open, key)?,
            None => open.to_vec(),
        })
    }

    /// Whether frames to it go compact (it seals and reads version 3).
    pub fn reads_compact(&self) -> bool {
        self.compact && self.seal.is_some()
    }

    /// Hands a finished frame to the peer's gateway.
    pub fn cast(&self, frame: Vec<u8>) -> Result<(), TransportError> {
        self.proxy
            .cast(GatewayFrame(frame))
            .map_err(|_| TransportError::Closed)
    }
}

/// A message on its way to one or more peers, each of its encodings made once, when a peer
/// first needs it.
pub(super) struct Outgoing<'a> {
    hub_id: &'a str,
    from: &'a str,
    msg: &'a WireMsg,
    open: Option<Vec<u8>>,
    /// `Some(None)`: the compact encoding failed (above the frame limit), so open it is.
    compact: Option<Option<Vec<u8>>>,
}

impl<'a> Outgoing<'a> {
    pub fn new(hub_id: &'a str, from: &'a str, msg: &'a WireMsg) -> Self {
        Self {
            hub_id,
            from,
            msg,
            open: None,
            compact: None,
        }
    }

    fn open(&mut self) -> Result<&[u8], TransportError> {
        if self.open.is_none() {
            self.open = Some(wire::encode(self.hub_id, self.from, self.msg)?);
        }
        Ok(self.open.as_deref().unwrap_or_default())
    }

    fn compact(&mut self) -> Option<&[u8]> {
        self.compact
            .get_or_insert_with(|| {
                wire::encode_compact_body(self.hub_id, self.from, self.msg)
                    .map_err(|error| {
                        tracing::debug!(%error, kind = self.msg.kind(), "no compact frame; sending a version-2 frame");
                    })
                    .ok()
            })
            .as_deref()
    }
}

/// State shared between the link actor and the [`RactorTransport`] handle.
#[derive(Default)]
pub(super) struct Shared {
    /// Peers that are up.
    pub up: RwLock<BTreeMap<NodeName, UpPeer>>,
    pub closed: AtomicBool,
}

/// A hub's [`Transport`] over ractor_cluster. Dropping it stops the link and the gateway, so
/// peers see the hub go down.
pub struct RactorTransport {
    hub_id: String,
    node: NodeName,
    boot_token: BootToken,
    shared: Arc<Shared>,
    link: Arc<Mutex<Option<ActorRef<LinkMsg>>>>,
    /// The `hub` and `node` labels of this endpoint's frame metrics, built once.
    labels: crate::telemetry::metrics::HubLabels,
}

impl std::fmt::Debug for RactorTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RactorTransport")
            .field("hub_id", &self.hub_id)
            .field("node", &self.node)
            .finish()
    }
}

/// What an endpoint needs besides its hub and node.
pub(crate) struct EndpointArgs {
    pub boot_token: BootToken,
    pub server: ActorRef<NodeServerMessage>,
    pub detector: DetectorConfig,
    pub policy: WirePolicy,
    pub stats: Arc<FrameStats>,
}

impl RactorTransport {
    /// Opens the endpoint: spawns the link (which spawns the gateway and the Confirmer) in the
    /// background, since [`crate::cluster::transport::Network::open_hub`] is synchronous. Needs
    /// a tokio runtime.
    pub(crate) fn open(
        hub_id: &str,
        node: NodeName,
        endpoint: EndpointArgs,
        sink: EventSink,
    ) -> Result<Self, TransportError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| TransportError::Node("open_hub needs a tokio runtime".to_owned()))?;
        let shared = Arc::new(Shared::default());
        let link = Arc::new(Mutex::new(None));
        let boot_token = endpoint.boot_token;
        let args = LinkArgs {
            hub_id: hub_id.to_owned(),
            node: node.clone(),
            endpoint,
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
            labels: crate::telemetry::metrics::HubLabels::new(hub_id, &node),
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
        let peer = self.up_peer(to)?;
        let frame = match &peer.seal {
            Some(key) => seal::seal(&frame, key)?,
            None => frame,
        };
        self.deliver(to, &peer, frame)
    }

    fn send(&self, to: &NodeName, msg: &WireMsg) -> Result<(), TransportError> {
        let peer = self.up_peer(to)?;
        let frame = peer.frame(&mut Outgoing::new(&self.hub_id, &self.node, msg))?;
        self.deliver(to, &peer, frame)
    }

    fn broadcast(&self, msg: &WireMsg) -> Result<Vec<(NodeName, TransportError)>, TransportError> {
        let peers: Vec<(NodeName, UpPeer)> = {
            let up = self.shared.up.read().unwrap_or_else(|p| p.into_inner());
            up.iter().map(|(n, p)| (n.clone(), p.clone())).collect()
        };
        if self.shared.closed.load(Ordering::SeqCst) {
            return Ok(peers
                .into_iter()
                .map(|(n, _)| (n, TransportError::Closed))
                .collect());
        }
        let mut message = Outgoing::new(&self.hub_id, &self.node, msg);
        // The encodings some peer will need, made before anything is sent: a message that does
        // not encode fails whole rather than reaching some peers only. A peer gets the open
        // encoding (sealed or not) unless it reads compact frames and the message has one.
        if peers
            .iter()
            .any(|(_, p)| !p.reads_compact() || message.compact().is_none())
        {
            message.open()?;
        }
        let mut failures = Vec::new();
        for (to, peer) in peers {
            let frame = match peer.frame(&mut message) {
                Ok(frame) => frame,
                Err(error) => {
                    failures.push((to, error));
                    continue;
                }
            };
            if let Err(error) = self.deliver(&to, &peer, frame) {
                failures.push((to, error));
            }
        }
        Ok(failures)
    }
}

impl RactorTransport {
    /// The peer `to` if it is up and this endpoint is open.
    fn up_peer(&self, to: &NodeName) -> Result<UpPeer, TransportError> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(TransportError::Closed);
        }
        self.shared
            .up
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(to)
            .cloned()
            .ok_or_else(|| TransportError::Unreachable(to.clone()))
    }

    /// Hands a finished frame to `to`'s gateway, counting it.
    fn deliver(&self, to: &NodeName, peer: &UpPeer, frame: Vec<u8>) -> Result<(), TransportError> {
        let labels = &self.labels;
        let size = frame.len();
        match peer.cast(frame) {
            Ok(()) => {
                labels.frame(to, "out", size);
                Ok(())
            }
            Err(e) => {
                labels.frame_dropped(to);
                Err(match e {
                    TransportError::Closed => TransportError::Unreachable(to.clone()),
                    other => other,
                })
            }
        }
    }
}

impl Drop for RactorTransport {
    fn drop(&mut self) {
        self.close();
    }
}
