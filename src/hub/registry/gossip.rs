//! Gossip synchronization (`sync = gossip`), the Registry's side: this node's own stream of
//! deltas, the other nodes' streams applied in order, the relay of deltas and rounds, and the
//! syncs that restart a stream. The decisions are in [`crate::core::gossip`].
//!
//! What a node receives does not depend on its own strategy: a node running `pubsub` applies
//! and relays gossip frames too, so a cluster can change strategy one node at a time.
//!
//! Trust: a relay is a peer holding the cluster's cookie, and a frame's seal proves who sent it,
//! not who authored the changes in it. A relay could pass off false observations in another
//! node's name; they last until that node's own `GossipSync` reaches the receiver (each node
//! sends one to a peer in turn every round, and one to whoever asks).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::RegistryState;
use crate::cluster::wire::budget::{chunk_by_bytes, encoded_len, FRAME_BUDGET_BYTES};
use crate::cluster::wire::{RegistryChange, WireMsg};
use crate::config::SyncStrategy;
use crate::core::gossip::{merge_heads, relay_plan, Head, Offer, Streams, MAX_NODE_LIST};
use crate::core::reassembly::SyncAssembler;
use crate::hub::protocol::{ClusterMsg, CoordinatorMsg, RegistryOp, WriteDone};
use crate::hub::simulation::InjectedBug;
use crate::model::{NodeName, Row};
use crate::telemetry::refusals::Refusal;

/// Tells apart the streams of Registries started at the same millisecond in one process.
static STREAM_STARTS: AtomicU64 = AtomicU64::new(1);

/// Numbers this process's gossip syncs (their parts name it).
static NEXT_GOSSIP_SYNC: AtomicU64 = AtomicU64::new(1);

/// The Registry's gossip state.
pub(super) struct GossipState {
    /// This node's stream: its epoch, and the last delta numbered in it.
    epoch: u64,
    seq: u64,
    /// The other nodes' streams as applied here.
    streams: Streams<Vec<RegistryChange>>,
    /// Picks relays (seeded from the stream, so a simulated run replays).
    rng: StdRng,
    /// Syncs arriving in parts, and the stream position each one carries.
    parts: SyncAssembler,
    marks: BTreeMap<NodeName, (u64, u64, u64)>,
    /// This node's rounds, numbered.
    rounds: u64,
    /// The peer that gets this node's next direct sync.
    next_direct: usize,
}

impl GossipState {
    pub(super) fn new(now_ms: u64, node: &str) -> Self {
        let start = STREAM_STARTS.fetch_add(1, Ordering::Relaxed);
        let epoch = (now_ms << 16) ^ start;
        let salt = node
            .bytes()
            .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b));
        Self {
            epoch,
            seq: 0,
            streams: Streams::default(),
            // From the clock and the node only: a simulated run draws the same relays
            // whatever ran before it in the process.
            rng: StdRng::seed_from_u64(now_ms ^ salt),
            parts: SyncAssembler::new(),
            marks: BTreeMap::new(),
            rounds: 0,
            next_direct: 0,
        }
    }

    /// `node` went down: its stream and unfinished sync go.
    pub(super) fn forget(&mut self, node: &str) {
        self.streams.forget(node);
        self.parts.forget(node);
        self.marks.remove(node);
    }
}

impl RegistryState {
    /// The fan-out when this hub gossips.
    fn gossip_recipients(&self) -> Option<usize> {
        match self.shared.config.sync {
            SyncStrategy::PubSub => None,
            SyncStrategy::Gossip { recipients, .. } => Some(recipients),
        }
    }

    pub(super) fn gossips(&self) -> bool {
        self.gossip_recipients().is_some()
    }

    /// Numbers this turn's delta frames in this node's stream and hands each to the tree.
    pub(super) fn gossip_delta(&mut self, delta: Vec<RegistryChange>) {
        let Some(transport) = self.shared.transport() else {
            return;
        };
        let peers = transport.peers();
        for changes in chunk_by_bytes(delta, FRAME_BUDGET_BYTES) {
            self.gossip.seq += 1;
            let (origin, epoch, seq) =
                (self.shared.node.clone(), self.gossip.epoch, self.gossip.seq);
            self.relay(peers.clone(), |relay_to| WireMsg::GossipDelta {
                origin: origin.clone(),
                epoch,
                seq,
                changes: changes.clone(),
                relay_to,
            });
        }
    }

    /// Sends `make(share)` to each next hop of a plan over `targets`; a next hop that cannot
    /// be reached is replaced by the first of its share.
    fn relay(&mut self, targets: Vec<NodeName>, make: impl Fn(Vec<NodeName>) -> WireMsg) {
        let Some(transport) = self.shared.transport() else {
            return;
        };
        let fanout = self
            .gossip_recipients()
            .unwrap_or(crate::config::sync::DEFAULT_RECIPIENTS);
        for (head, mut share) in relay_plan(targets, fanout, &mut self.gossip.rng) {
            let mut next = Some(head);
            while let Some(to) = next.take() {
                if let Err(error) = transport.send(&to, &make(share.clone())) {
                    tracing::debug!(peer = %to, %error, "gossip relay skipped an unreachable peer");
                    if !share.is_empty() {
                        next = Some(share.remove(0));
                    }
                }
            }
        }
    }

    /// The peers a relayed list may name: known peers, not this node, not `also_not`.
    fn known_peers(&self, list: Vec<NodeName>, also_not: &[&NodeName]) -> Vec<NodeName> {
        let Some(transport) = self.shared.transport() else {
            return Vec::new();
        };
        let peers = transport.peers();
        list.into_iter()
            .take(MAX_NODE_LIST)
            .filter(|n| *n != self.shared.node && !also_not.contains(&n) && peers.contains(n))
            .collect()
    }

    /// A relayed delta: pass it on, then apply what is in order.
    pub(super) fn on_gossip_delta(
        &mut self,
        from: NodeName,
        origin: NodeName,
        epoch: u64,
        seq: u64,
        changes: Vec<RegistryChange>,
        relay_to: Vec<NodeName>,
    ) {
        if origin == self.shared.node || relay_to.len() > MAX_NODE_LIST {
            tracing::warn!(peer = %from, origin = %origin, "gossip delta refused: names this node as its origin or too many relays");
            self.shared.refusals.count(Refusal::InvalidChild);
            return;
        }
        let peers = self
            .shared
            .transport()
            .map(|t| t.peers())
            .unwrap_or_default();
        if !peers.contains(&origin) {
            // Only a member's stream is tracked: a forged origin cannot grow this node's
            // streams (a joining node's deltas wait for its sync, asked on its node-up).
            tracing::debug!(peer = %from, origin = %origin, "gossip delta of a node that is not up here; dropped");
            return;
        }
        let share = self.known_peers(relay_to, &[&origin, &from]);
        if !share.is_empty() {
            self.relay(share, |relay_to| WireMsg::GossipDelta {
                origin: origin.clone(),
                epoch,
                seq,
                changes: changes.clone(),
                relay_to,
            });
        }
        let now = self.shared.clock.now_ms();
        if let Offer::Apply(ready) = self.gossip.streams.offer(&origin, epoch, seq, changes, now) {
            let ops = ready
                .into_iter()
                .map(|changes| RegistryOp::Merge {
                    from: origin.clone(),
                    changes,
                })
                .collect();
            self.write(ops, None);
        }
        self.ask_overdue();
    }

    /// Asks the origins of gaps that lasted (and of streams with no start) for a sync.
    fn ask_overdue(&mut self) {
        if self.shared.has_bug(InjectedBug::GossipWithoutRounds) {
            return;
        }
        let due = self.gossip.streams.overdue(self.shared.clock.now_ms());
        self.ask_sync(due);
    }

    fn ask_sync(&self, origins: Vec<NodeName>) {
        let Some(transport) = self.shared.transport() else {
            return;
        };
        for origin in origins {
            tracing::debug!(origin = %origin, "behind in a gossip stream: asking its origin for a sync");
            if let Err(error) = transport.send(&origin, &WireMsg::SyncRequest) {
                tracing::debug!(peer = %origin, %error, "gossip sync request not sent");
            }
        }
    }

    /// Sends this node's own observations with its stream position to `to` (every peer with
    /// `None`).
    pub(super) fn send_gossip_sync(&self, to: Option<&NodeName>) {
        let Some(transport) = self.shared.transport() else {
            return;
        };
        let mut parts = chunk_by_bytes(self.own_rows(), FRAME_BUDGET_BYTES);
        if parts.is_empty() {
            parts.push(Vec::new());
        }
        let sync_id = NEXT_GOSSIP_SYNC.fetch_add(1, Ordering::Relaxed);
        let total = parts.len() as u32;
        for (rows, index) in parts.into_iter().zip(0..) {
            let msg = WireMsg::GossipSync {
                epoch: self.gossip.epoch,
                seq: self.gossip.seq,
                sync_id,
                index,
                total,
                rows,
            };
            let outcome = match to {
                Some(peer) => transport.send(peer, &msg).map(|()| Vec::new()),
                None => transport.broadcast(&msg),
            };
            super::replication::log_send(outcome, "gossip sync not sent");
        }
    }

    /// One part of `from`'s gossip sync; the whole is applied once every part arrived.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_gossip_sync(
        &mut self,
        from: NodeName,
        epoch: u64,
        seq: u64,
        sync_id: u64,
        index: u32,
        total: u32,
        rows: Vec<Row>,
    ) {
        self.gossip
            .marks
            .insert(from.clone(), (sync_id, epoch, seq));
        let bytes = encoded_len(&rows);
        let rows = match self
            .gossip
            .parts
            .accept(&from, sync_id, index, total, bytes, rows)
        {
            Ok(Some(rows)) => rows,
            Ok(None) => return,
            Err(refusal) => {
                tracing::warn!(peer = %from, sync_id, %refusal, "gossip sync part refused; the peer's next sync heals it");
                self.shared.refusals.count(Refusal::Parts);
                return;
            }
        };
        self.gossip.marks.remove(&from);
        let now = self.shared.clock.now_ms();
        let mut ops = Vec::new();
        match self.gossip.streams.synced(&from, epoch, seq, now) {
            Some(ready) => {
                ops.push(RegistryOp::Sync {
                    from: from.clone(),
                    rows,
                });
                ops.extend(ready.into_iter().map(|changes| RegistryOp::Merge {
                    from: from.clone(),
                    changes,
                }));
            }
            None => {
                tracing::debug!(peer = %from, seq, "gossip sync older than the deltas applied since; skipped");
            }
        }
        let hub = self.shared.clone();
        let synced = from;
        let done: WriteDone = Box::new(move |_outcome| {
            if let Some(coordinator) = hub.coordinator() {
                let msg = CoordinatorMsg::Cluster(ClusterMsg::Synced { from: synced });
                let _ = coordinator.cast(msg);
            }
        });
        self.write(ops, Some(done));
    }

    /// This node's positions: its own stream and the others' as applied here.
    fn own_heads(&self) -> Vec<Head> {
        let mut heads = self.gossip.streams.heads();
        heads.push((self.shared.node.clone(), self.gossip.epoch, self.gossip.seq));
        heads
    }

    /// The periodic sync of a gossiping hub: start a round when this node starts them, send
    /// this node's sync to the next peer in turn, and ask for what lasted too long.
    pub(super) fn gossip_tick(&mut self, restricted_init: bool) {
        if self.shared.has_bug(InjectedBug::GossipWithoutRounds) {
            return;
        }
        let Some(transport) = self.shared.transport() else {
            return;
        };
        let mut peers = transport.peers();
        peers.sort();
        if peers.is_empty() {
            return;
        }
        let first = peers.first().is_some_and(|p| *p > self.shared.node);
        if !restricted_init || first {
            self.gossip.rounds += 1;
            let heads = self.own_heads();
            let mut route = peers.clone();
            rand::seq::SliceRandom::shuffle(&mut route[..], &mut self.gossip.rng);
            let (initiator, round) = (self.shared.node.clone(), self.gossip.rounds);
            self.pass_round(initiator, round, heads, route, false);
        }
        let to = peers[self.gossip.next_direct % peers.len()].clone();
        self.gossip.next_direct = self.gossip.next_direct.wrapping_add(1);
        self.send_periodic_sync(Some(&to));
        self.ask_overdue();
    }

    /// A round passed on to this node.
    pub(super) fn on_gossip_round(
        &mut self,
        initiator: NodeName,
        round: u64,
        heads: Vec<Head>,
        route: Vec<NodeName>,
        spreading: bool,
    ) {
        if heads.len() > MAX_NODE_LIST || route.len() > MAX_NODE_LIST {
            tracing::warn!(initiator = %initiator, "gossip round refused: too many nodes named");
            self.shared.refusals.count(Refusal::InvalidChild);
            return;
        }
        let mut heads = heads;
        merge_heads(&mut heads, self.own_heads(), &self.shared.node.clone());
        let route = self.known_peers(route, &[]);
        self.pass_round(initiator, round, heads, route, spreading);
    }

    /// Gathering: to the next node of the route that answers; the last one spreads. Spreading:
    /// ask for what this node is behind in, and pass the round to the share.
    fn pass_round(
        &mut self,
        initiator: NodeName,
        round: u64,
        heads: Vec<Head>,
        mut route: Vec<NodeName>,
        spreading: bool,
    ) {
        let Some(transport) = self.shared.transport() else {
            return;
        };
        if !spreading {
            while !route.is_empty() {
                let next = route.remove(0);
                let msg = WireMsg::GossipRound {
                    initiator: initiator.clone(),
                    round,
                    heads: heads.clone(),
                    route: route.clone(),
                    spreading: false,
                };
                match transport.send(&next, &msg) {
                    Ok(()) => return,
                    Err(error) => {
                        tracing::debug!(peer = %next, %error, "gossip round skipped an unreachable peer")
                    }
                }
            }
            // Every position gathered: spread it to everyone from here.
            route = transport.peers();
        }
        // Only members' positions are judged: a forged name in a round adds no stream.
        let members = transport.peers();
        let known: Vec<Head> = heads
            .iter()
            .filter(|(origin, ..)| members.contains(origin))
            .cloned()
            .collect();
        {
            let at = self.shared.mono_ms();
            let mut lag = self.shared.sync_lag();
            for origin in self.gossip.streams.caught_up(&known, &self.shared.node) {
                lag.in_sync(&origin, at);
            }
        }
        let behind =
            self.gossip
                .streams
                .behind(&known, &self.shared.node, self.shared.clock.now_ms());
        self.ask_sync(behind);
        self.relay(route, |share| WireMsg::GossipRound {
            initiator: initiator.clone(),
            round,
            heads: heads.clone(),
            route: share,
            spreading: true,
        });
    }
}
