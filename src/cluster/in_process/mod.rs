//! An in-process cluster for tests: many nodes in one process, joined by a router that can
//! partition, heal, drop, delay, crash and restart.
//!
//! ractor's pg groups and name registry are process-global, so a test cannot run several
//! ractor_cluster nodes in one process. This router implements the same [`Network`] /
//! [`Transport`] seam without them: every hub endpoint registers with the router, and the router
//! decides — from its link table, node liveness and a seeded RNG — whether and when each frame
//! arrives. Membership events are derived from reachability: when two endpoints of one hub id
//! become reachable both see `NodeUp` (with the other's boot token), when they stop being
//! reachable both see `NodeDown`. Frames still go through [`crate::cluster::wire::encode`]/[`crate::cluster::wire::decode`], so the
//! wire format is exercised and undecodable frames are dropped exactly as in production.
//!
//! A crash closes every endpoint of the node and stops its frames; its data directory is the
//! caller's business (it re-opens its storage on the same path after [`InProcessCluster::restart`],
//! which hands out a new boot token).
//!
//! Delays need a tokio runtime (delayed frames ride a per-link task, which keeps them in order);
//! without delay, frames are delivered synchronously in the sender's thread.
//!
//! Sinks are called with the router's lock held, so every event of the cluster is totally
//! ordered: a `NodeDown` can never overtake a message of the boot it ends, and a `NodeUp` never
//! arrives before the `NodeDown` it follows. Hence a sink must not call the router or a transport
//! synchronously (it would deadlock); casting into an actor's mailbox is the intended use.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::cluster::transport::{EventSink, Network, Transport, TransportError, TransportEvent};
use crate::core::boot_token::BootToken;
use crate::model::NodeName;

mod frames;
mod hold;
mod links;
mod state;

pub use hold::HoldFilter;
pub use links::{FrameEvent, FrameFate, FrameObserver, LinkFaults};
use state::{emit, ordered, Endpoint, NodeState, RouterState};

/// The router was asked for something impossible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    /// A node of that name is already part of the cluster.
    #[error("node {0} already exists")]
    NodeExists(NodeName),
    /// No node of that name.
    #[error("unknown node {0}")]
    UnknownNode(NodeName),
    /// Restart of a node that is running.
    #[error("node {0} is running; crash it first")]
    NodeRunning(NodeName),
}

/// Counters of what the router did with frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Frames handed to a hub.
    pub delivered: u64,
    /// Frames lost to the drop probability, or to a link cut one way.
    pub dropped_random: u64,
    /// Frames lost because the link or the receiver went away while they were in flight.
    pub dropped_in_flight: u64,
    /// Frames that did not decode (or were for another hub, or claimed another sender).
    pub undecodable: u64,
    /// Frames lost to [`InProcessCluster::drop_kind`].
    pub dropped_by_kind: u64,
}

/// The router and its nodes. Cheap to clone (a shared handle).
#[derive(Clone)]
pub struct InProcessCluster {
    state: Arc<Mutex<RouterState>>,
}

impl std::fmt::Debug for InProcessCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("InProcessCluster")
            .field("nodes", &state.nodes.keys().collect::<Vec<_>>())
            .field("cuts", &state.cuts)
            .finish()
    }
}

impl InProcessCluster {
    /// An empty cluster whose boot tokens, drops and delays are drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(RouterState {
                rng: StdRng::seed_from_u64(seed),
                nodes: BTreeMap::new(),
                endpoints: BTreeMap::new(),
                cuts: BTreeSet::new(),
                one_way: BTreeSet::new(),
                drop_probability: 0.0,
                delay: None,
                dropped_kinds: BTreeSet::new(),
                hold: None,
                held: Vec::new(),
                lanes: HashMap::new(),
                links: BTreeMap::new(),
                observer: None,
                next_id: 1,
                stats: RouterStats::default(),
            })),
        }
    }

    fn lock(&self) -> RouterGuard<'_> {
        lock_router(&self.state)
    }

    /// Adds a running node and returns its [`Network`].
    pub fn add_node(&self, name: impl Into<NodeName>) -> Result<InProcessNode, RouterError> {
        let name = name.into();
        let mut state = self.lock();
        if state.nodes.contains_key(&name) {
            return Err(RouterError::NodeExists(name));
        }
        let boot_token = BootToken::from_rng(&mut state.rng);
        state.nodes.insert(
            name.clone(),
            NodeState {
                alive: true,
                boot_token,
                generation: 0,
            },
        );
        Ok(InProcessNode {
            cluster: self.clone(),
            name,
            generation: 0,
            boot_token,
        })
    }

    /// Node names, sorted.
    pub fn nodes(&self) -> Vec<NodeName> {
        self.lock().nodes.keys().cloned().collect()
    }

    /// Whether `a` and `b` are both running and the link between them is up.
    pub fn reachable(&self, a: &str, b: &str) -> bool {
        self.lock().reachable(a, b)
    }

    /// Whether `node` is running.
    pub fn is_alive(&self, node: &str) -> bool {
        self.lock().nodes.get(node).is_some_and(|n| n.alive)
    }

    /// Crashes `node`: its endpoints close without notice to themselves, its frames in flight are
    /// lost, its peers see `NodeDown`. Its old [`InProcessNode`] and transports go inert.
    pub fn crash(&self, node: &str) -> Result<(), RouterError> {
        {
            let mut state = self.lock();
            let Some(n) = state.nodes.get_mut(node) else {
                return Err(RouterError::UnknownNode(node.to_owned()));
            };
            if !n.alive {
                return Ok(());
            }
            let before = state.reachable_pairs();
            state.nodes.get_mut(node).expect("checked above").alive = false;
            state.endpoints.retain(|(_, n), _| n != node);
            emit(state.diff_events(&before));
        }
        Ok(())
    }

    /// Restarts a crashed node with a new boot token and returns its new [`Network`]; the caller
    /// re-opens its hubs (on the same data directory, if it wants its disk back).
    pub fn restart(&self, node: &str) -> Result<InProcessNode, RouterError> {
        let mut state = self.lock();
        let boot_token = BootToken::from_rng(&mut state.rng);
        let Some(n) = state.nodes.get_mut(node) else {
            return Err(RouterError::UnknownNode(node.to_owned()));
        };
        if n.alive {
            return Err(RouterError::NodeRunning(node.to_owned()));
        }
        n.alive = true;
        n.generation += 1;
        n.boot_token = boot_token;
        let generation = n.generation;
        Ok(InProcessNode {
            cluster: self.clone(),
            name: node.to_owned(),
            generation,
            boot_token,
        })
    }

    fn change_links(&self, change: impl FnOnce(&mut BTreeSet<(NodeName, NodeName)>)) {
        self.change_state(|state| change(&mut state.cuts));
    }

    /// Changes the link table and tells every endpoint whose view of a peer changed.
    fn change_state(&self, change: impl FnOnce(&mut RouterState)) {
        let mut state = self.lock();
        let before = state.reachable_pairs();
        change(&mut state);
        emit(state.diff_events(&before));
    }

    /// Splits the cluster: every link between two different groups is cut (links inside a group
    /// are untouched; nodes in no group keep their links).
    pub fn partition(&self, groups: &[Vec<NodeName>]) {
        self.change_links(|cuts| {
            for (i, left) in groups.iter().enumerate() {
                for right in &groups[i + 1..] {
                    for a in left {
                        for b in right {
                            if a != b {
                                cuts.insert(ordered(a, b));
                            }
                        }
                    }
                }
            }
        });
    }

    /// Cuts the link between `a` and `b`.
    pub fn cut(&self, a: &str, b: &str) {
        self.change_links(|cuts| {
            cuts.insert(ordered(a, b));
        });
    }

    /// Cuts the link from `from` to `to` one way: every frame `from` sends `to` is lost, and
    /// `to` sees `from` go down (as its failure detector would once `from`'s heartbeats stop
    /// arriving), while `from` still hears `to` and takes it for up.
    pub fn cut_one_way(&self, from: &str, to: &str) {
        self.change_state(|state| {
            state.one_way.insert((from.to_owned(), to.to_owned()));
        });
    }

    /// Restores the direction from `from` to `to` of a link cut one way.
    pub fn heal_one_way(&self, from: &str, to: &str) {
        self.change_state(|state| {
            state.one_way.remove(&(from.to_owned(), to.to_owned()));
        });
    }

    /// Whether `me` hears `peer` (both run, the link is up and not cut one way from `peer` to
    /// `me`): what `me`'s membership says of `peer`.
    pub fn hears(&self, me: &str, peer: &str) -> bool {
        self.lock().hears(me, peer)
    }

    /// Restores every cut link, both ways and one way; reachable peers see `NodeUp` with
    /// unchanged boot tokens.
    pub fn heal(&self) {
        self.change_state(|state| {
            state.cuts.clear();
            state.one_way.clear();
        });
    }

    /// Restores the link between `a` and `b`.
    pub fn heal_link(&self, a: &str, b: &str) {
        self.change_links(|cuts| {
            cuts.remove(&ordered(a, b));
        });
    }

    /// Loses each frame with probability `p` (clamped to `[0, 1]`), drawn from the seeded RNG.
    pub fn set_drop_probability(&self, p: f64) {
        self.lock().drop_probability = if p.is_finite() {
            p.clamp(0.0, 1.0)
        } else {
            0.0
        };
    }

    /// Delays each frame by a uniform duration in `[min, max]` (`None`: no delay). Frames of one
    /// link stay in order. Frames delayed before the delay is switched off may be overtaken.
    pub fn set_delay(&self, delay: Option<(Duration, Duration)>) {
        self.lock().delay = delay.map(|(a, b)| if a <= b { (a, b) } else { (b, a) });
    }

    /// Loses every frame of message kind `kind` ([`crate::cluster::wire::WireMsg::kind`]) sent to `to`, until
    /// [`InProcessCluster::deliver_kind`]: a test can take one kind of message away (say, the
    /// declared list's deltas to one node) and check what heals without it.
    pub fn drop_kind(&self, kind: &str, to: &str) {
        self.lock()
            .dropped_kinds
            .insert((kind.to_owned(), to.to_owned()));
    }

    /// Delivers `kind` to `to` again (undoes [`InProcessCluster::drop_kind`]).
    pub fn deliver_kind(&self, kind: &str, to: &str) {
        self.lock()
            .dropped_kinds
            .remove(&(kind.to_owned(), to.to_owned()));
    }

    /// What the router did so far.
    pub fn stats(&self) -> RouterStats {
        self.lock().stats
    }

    /// Hands raw bytes to `to`'s endpoint of `hub_id` as if `from` had sent them (tests of
    /// undecodable frames). Bypasses drops and delays; requires the link to be up.
    pub fn inject_frame(
        &self,
        hub_id: &str,
        from: &str,
        to: &str,
        bytes: Vec<u8>,
    ) -> Result<(), TransportError> {
        let mut state = self.lock();
        if !state.reachable(from, to) {
            return Err(TransportError::Unreachable(to.to_owned()));
        }
        let sink = state
            .sink(hub_id, to)
            .ok_or_else(|| TransportError::Unreachable(to.to_owned()))?;
        Self::deliver(&mut state, hub_id, from, to, &sink, &bytes);
        Ok(())
    }

    fn open(
        &self,
        node: &InProcessNode,
        hub_id: &str,
        sink: EventSink,
    ) -> Result<InProcessTransport, TransportError> {
        let id = {
            let mut state = self.lock();
            match state.nodes.get(&node.name) {
                Some(n) if n.alive && n.generation == node.generation => {}
                _ => return Err(TransportError::Closed),
            }
            let id = state.next_id;
            state.next_id += 1;
            let key = (hub_id.to_owned(), node.name.clone());
            let replaced = state.endpoints.insert(
                key,
                Endpoint {
                    id,
                    sink: sink.clone(),
                },
            );
            // Announce every reachable peer of this hub to the new endpoint; a replaced endpoint's
            // peers already know this node, a fresh one is announced to them.
            let mut events = Vec::new();
            let peers: Vec<NodeName> = state
                .endpoints
                .keys()
                .filter(|(h, n)| h == hub_id && n != &node.name)
                .map(|(_, n)| n.clone())
                .collect();
            for peer in peers {
                if state.hears(&node.name, &peer) {
                    events.push((
                        sink.clone(),
                        TransportEvent::NodeUp {
                            node: peer.clone(),
                            boot_token: state.token(&peer),
                        },
                    ));
                }
                if replaced.is_none() && state.hears(&peer, &node.name) {
                    if let Some(peer_sink) = state.sink(hub_id, &peer) {
                        events.push((
                            peer_sink,
                            TransportEvent::NodeUp {
                                node: node.name.clone(),
                                boot_token: node.boot_token,
                            },
                        ));
                    }
                }
            }
            emit(events);
            id
        };
        Ok(InProcessTransport {
            cluster: self.clone(),
            hub_id: hub_id.to_owned(),
            node: node.name.clone(),
            boot_token: node.boot_token,
            endpoint: id,
        })
    }

    fn close(&self, hub_id: &str, node: &NodeName, endpoint: u64) {
        if HELD.get() == Arc::as_ptr(&self.state) as usize {
            // A sink let go of a hub's last handle while this thread delivers under the lock:
            // closed (and its peers told) as soon as the lock is released, on this thread.
            DEFERRED.with(|d| {
                d.borrow_mut()
                    .push((self.clone(), hub_id.to_owned(), node.clone(), endpoint))
            });
            return;
        }
        let mut state = self.lock();
        let key = (hub_id.to_owned(), node.clone());
        if state.endpoints.get(&key).map(|e| e.id) != Some(endpoint) {
            return;
        }
        let before = state.reachable_pairs();
        state.endpoints.remove(&key);
        emit(state.diff_events(&before));
    }

    fn peers_of(&self, hub_id: &str, node: &str, endpoint: u64) -> Vec<NodeName> {
        let state = self.lock();
        if state
            .endpoints
            .get(&(hub_id.to_owned(), node.to_owned()))
            .map(|e| e.id)
            != Some(endpoint)
        {
            return Vec::new();
        }
        state
            .endpoints
            .keys()
            .filter(|(h, n)| h == hub_id && n != node && state.hears(node, n))
            .map(|(_, n)| n.clone())
            .collect()
    }
}

thread_local! {
    /// The router whose lock this thread holds (its address; 0 for none).
    static HELD: Cell<usize> = const { Cell::new(0) };
    /// Endpoints closed on this thread while it held their router's lock (a sink dropping a
    /// hub's last handle): closed once the lock is released.
    static DEFERRED: RefCell<Vec<(InProcessCluster, String, NodeName, u64)>> =
        const { RefCell::new(Vec::new()) };
}

/// The router's lock, held. Sinks are called under it (so what one peer sends arrives in
/// order), and a sink may drop the last handle of a hub, whose endpoint then closes: that close
/// is deferred until this guard goes, instead of taking the lock again on the same thread.
struct RouterGuard<'a> {
    guard: Option<MutexGuard<'a, RouterState>>,
    previous: usize,
}

/// Locks a router. A panicking sink in a test must not wedge every other node: the state stays
/// usable.
fn lock_router(state: &Arc<Mutex<RouterState>>) -> RouterGuard<'_> {
    let guard = state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let previous = HELD.replace(Arc::as_ptr(state) as usize);
    RouterGuard {
        guard: Some(guard),
        previous,
    }
}

impl Deref for RouterGuard<'_> {
    type Target = RouterState;

    fn deref(&self) -> &RouterState {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl DerefMut for RouterGuard<'_> {
    fn deref_mut(&mut self) -> &mut RouterState {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for RouterGuard<'_> {
    fn drop(&mut self) {
        HELD.set(self.previous);
        drop(self.guard.take());
        if self.previous != 0 {
            return;
        }
        loop {
            let pending = DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()));
            if pending.is_empty() {
                return;
            }
            for (cluster, hub_id, node, endpoint) in pending {
                cluster.close(&hub_id, &node, endpoint);
            }
        }
    }
}

/// One boot of one in-process node: its [`Network`].
#[derive(Clone, Debug)]
pub struct InProcessNode {
    cluster: InProcessCluster,
    name: NodeName,
    generation: u64,
    boot_token: BootToken,
}

impl Network for InProcessNode {
    fn local_node(&self) -> &NodeName {
        &self.name
    }

    fn boot_token(&self) -> BootToken {
        self.boot_token
    }

    fn open_hub(
        &self,
        hub_id: &str,
        sink: EventSink,
    ) -> Result<Arc<dyn Transport>, TransportError> {
        Ok(Arc::new(self.cluster.open(self, hub_id, sink)?))
    }
}

/// One hub's endpoint on one in-process node. Dropping it closes the endpoint.
#[derive(Debug)]
pub struct InProcessTransport {
    cluster: InProcessCluster,
    hub_id: String,
    node: NodeName,
    boot_token: BootToken,
    endpoint: u64,
}

impl Transport for InProcessTransport {
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
        self.cluster
            .peers_of(&self.hub_id, &self.node, self.endpoint)
    }

    fn send_frame(&self, to: &NodeName, frame: Vec<u8>) -> Result<(), TransportError> {
        self.cluster
            .send(&self.hub_id, &self.node, self.endpoint, to, frame)
    }
}

impl Drop for InProcessTransport {
    fn drop(&mut self) {
        self.cluster.close(&self.hub_id, &self.node, self.endpoint);
    }
}

#[cfg(test)]
mod tests;
