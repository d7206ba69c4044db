//! The Coordinator's cluster half: membership, the placement ring, and the bookkeeping of
//! replication and redistribution (the seed's `Coordinator.State` fields that a single node
//! does not need).
//!
//! - [`membership`](self) (this file): `NodeUp` / `NodeDown` from the transport, boot tokens
//!   (a new token = the node restarted: reap its bindings now; the same token after a flap: keep
//!   them), the grace timer of a node that went down, the batches of membership events
//!   (`core::event_batch`), `registry_delivered_by` and `cluster_settled`;
//! - [`remote`]: the hub protocol — starts and stops for this node sent by peers (re-checking
//!   ownership and forwarding with `hops + 1`), their replies, registry deltas and syncs;
//! - [`rebalance`]: the redistribution pass run when a batch of membership events is due
//!   (cold-swap migrations to new owners, re-placement of children whose node is gone), retries,
//!   and the graceful leave.
//! - [`messaging`]: messages to a child by id, routed through the hubs.
//! - [`msg`]: the cluster half's timers and completions ([`ClusterMsg`]): arming them and
//!   dispatching what they cast back into the Coordinator.
//!
//! Nothing here blocks: writes go to the Registry with a completion that casts back, requests
//! go to peers and their replies come back as transport messages.

pub(super) mod messaging;
pub(super) mod rebalance;
pub(super) mod relay;
pub(super) mod remote;

mod msg;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{ActorRef, RpcReplyPort};

use super::coordinator::{CoordinatorMsg, CoordinatorState, Timer};
use super::delivery::{NodeStartReport, NodeStopReport, StartBatch, StopBatch};
use super::registry::{RegistryMsg, RegistryOp};
use super::HubShared;
use crate::api::errors::{ChildStartError, ChildStopError};
use crate::cluster::transport::{EventSink, Network, Transport, TransportError, TransportEvent};
use crate::cluster::wire::{RequestId, StartItem, WireMsg};
use crate::core::boot_token::{BootTokens, PeerBoot};
use crate::core::event_batch::{BatchConfig, EventBatch};
use crate::core::placement::HashRing;
use crate::core::sync_parts::SyncAssembler;
use crate::hooks::{HookEvent, HookKey};
use crate::model::{ChildId, NodeName, Row};

pub(crate) use messaging::ChildCallReplyPort;
pub(crate) use msg::ClusterMsg;

/// How many times a start may be forwarded between nodes whose rings disagree.
pub(super) const MAX_HOPS: u8 = 3;

/// What an internal start (a migration, a re-placement, a handover) does when it completes.
pub(crate) enum Internal {
    /// Failures are retried on the `migration_retry_ms` timer.
    Replace { rows: HashMap<ChildId, Row> },
    /// A graceful leave: answer when every child was handed over (or failed to be).
    Handover {
        rows: HashMap<ChildId, Row>,
        reply: Option<RpcReplyPort<()>>,
    },
}

/// The coordinator's cluster state.
pub(crate) struct ClusterState {
    pub transport: Arc<dyn Transport>,
    /// Members that own children: up peers (minus those that said goodbye) and this node.
    pub ring: HashRing,
    /// Peers up for this hub.
    pub peers: BTreeSet<NodeName>,
    /// Peers that announced a graceful leave: no grace when they go down.
    pub leaving: HashSet<NodeName>,
    pub tokens: BootTokens,
    /// Joins (and syncs) waiting for a redistribution pass.
    pub joins: EventBatch,
    /// Nodes gone for good (grace over, reaped) waiting for a re-placement pass.
    pub leaves: EventBatch,
    pub flush_timer: Option<Timer>,
    pub grace_timers: HashMap<NodeName, Timer>,
    /// Peers whose registry has been merged since they came up (`registry_delivered_by`).
    pub delivered_by: BTreeSet<NodeName>,
    /// Children with a migration or re-placement in flight: passes skip them.
    pub migrating: HashSet<ChildId>,
    /// Children whose migration or re-placement failed, waiting for the retry timer.
    pub failed: HashMap<ChildId, Row>,
    pub retry_timer: Option<Timer>,
    pub sync_timer: Option<Timer>,
    /// This node is leaving: no more passes.
    pub self_leaving: bool,
    /// Child calls waiting for a reply.
    pub calls: HashMap<u64, (ChildCallReplyPort, Option<Timer>)>,
    /// Full syncs arriving in parts, applied once complete.
    pub sync_parts: SyncAssembler,
    /// Forwarded starts and child calls waiting on a peer (failed at once when it goes down).
    pub relay: relay::Relays,
}

impl ClusterState {
    /// Opens the hub's endpoint on `network` and publishes it for the Registry.
    pub fn open(
        hub: &HubShared,
        network: &dyn Network,
        sink: EventSink,
    ) -> Result<Self, TransportError> {
        let transport = network.open_hub(&hub.config.hub_id, sink)?;
        hub.set_transport(Some(transport.clone()));
        hub.set_members(vec![hub.node.clone()]);
        hub.settled.send_replace(true);
        let batch = BatchConfig {
            debounce: Duration::from_millis(hub.config.membership_debounce_ms),
            max_wait: Duration::from_millis(hub.config.membership_max_wait_ms),
        };
        Ok(Self {
            transport,
            ring: HashRing::new([hub.node.clone()]),
            peers: BTreeSet::new(),
            leaving: HashSet::new(),
            tokens: BootTokens::new(),
            joins: EventBatch::new(batch),
            leaves: EventBatch::new(batch),
            flush_timer: None,
            grace_timers: HashMap::new(),
            delivered_by: BTreeSet::new(),
            migrating: HashSet::new(),
            failed: HashMap::new(),
            retry_timer: None,
            sync_timer: None,
            self_leaving: false,
            calls: HashMap::new(),
            sync_parts: SyncAssembler::new(),
            relay: relay::Relays::default(),
        })
    }

    /// Sends a start batch to peer `node`; a send failure answers `node_unavailable` at once.
    pub fn send_start(
        &self,
        local: &NodeName,
        node: &NodeName,
        request_id: u64,
        batch: StartBatch,
    ) {
        let msg = WireMsg::StartChildren {
            request_id: RequestId(request_id),
            reply_to: local.clone(),
            hops: 0,
            check_existing: !batch.existing_ok,
            children: batch
                .children
                .iter()
                .map(|(spec, metadata)| StartItem {
                    spec: spec.clone(),
                    metadata: metadata.clone(),
                    durable: batch.durable.contains(&spec.id),
                })
                .collect(),
        };
        if let Err(e) = self.transport.send(node, &msg) {
            let reason = e.to_string();
            (batch.reply)(NodeStartReport {
                node: node.clone(),
                started: Vec::new(),
                errors: batch
                    .children
                    .into_iter()
                    .map(|(spec, _)| {
                        let reason = reason.clone();
                        (spec.id, ChildStartError::NodeUnavailable { reason })
                    })
                    .collect(),
            });
        }
    }

    /// Sends a stop batch to peer `node`; a send failure answers `node_unavailable` at once.
    pub fn send_stop(&self, local: &NodeName, node: &NodeName, request_id: u64, batch: StopBatch) {
        let msg = WireMsg::StopChildren {
            request_id: RequestId(request_id),
            reply_to: local.clone(),
            ids: batch.ids.clone(),
        };
        if let Err(e) = self.transport.send(node, &msg) {
            let reason = e.to_string();
            (batch.reply)(NodeStopReport {
                node: node.clone(),
                stopped: Vec::new(),
                errors: batch
                    .ids
                    .into_iter()
                    .map(|id| {
                        let reason = reason.clone();
                        (id, ChildStopError::NodeUnavailable { reason })
                    })
                    .collect(),
            });
        }
    }

    /// Every peer's registry has been merged.
    fn settled(&self) -> bool {
        self.peers.iter().all(|p| self.delivered_by.contains(p))
    }
}

impl CoordinatorState {
    fn publish_membership(&self) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let mut members: Vec<NodeName> = cluster.peers.iter().cloned().collect();
        members.push(self.hub.node.clone());
        members.sort();
        self.hub.set_members(members);
        self.hub.settled.send_replace(cluster.settled());
    }

    /// Sends ops to the Registry; `then` is cast back once they are committed.
    pub(super) fn registry_write(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        ops: Vec<RegistryOp>,
        then: Option<ClusterMsg>,
    ) {
        let Some(registry) = self.hub.registry() else {
            tracing::warn!("registry is restarting; a cluster registry write was skipped");
            return;
        };
        let coordinator = myself.clone();
        let done = then.map(|msg| {
            Box::new(move |_outcome| {
                let _ = coordinator.cast(CoordinatorMsg::Cluster(msg));
            }) as super::registry::WriteDone
        });
        let _ = registry.cast(RegistryMsg::Write { ops, done });
    }

    /// Tells the peers this node's declared version, ahead of its `FullSync` on the same links,
    /// so a peer that missed a broadcast catches up before its next round (a parked copy
    /// means nothing and is not announced).
    fn announce_declared_version(&self) {
        let (Some(msg), Some(transport)) = (self.declared_announcement(), self.hub.transport())
        else {
            return;
        };
        if let Err(error) = transport.broadcast(&msg) {
            tracing::debug!(%error, "declared version not announced");
        }
    }

    /// This node's declared version as announced to peers (none without auto-recovery or
    /// while parked: a parked copy means nothing). The published copy is the persisted one, and
    /// a stop's removal is published before its terminate, so an answer given after a child
    /// stopped never predates its removal.
    pub(super) fn declared_announcement(&self) -> Option<WireMsg> {
        let snapshot = self.hub.recovery.as_ref()?.snapshot();
        (!snapshot.parked).then(|| WireMsg::DeclaredVersion {
            version: snapshot.list.version(),
            last_mutated_by: snapshot.list.last_mutated_by().map(str::to_owned),
        })
    }

    /// Drops the endpoint and every timer (the Coordinator is stopping).
    pub(super) fn close_cluster(&mut self) {
        let Some(mut cluster) = self.cluster.take() else {
            return;
        };
        for t in cluster
            .grace_timers
            .drain()
            .map(|(_, t)| t)
            .chain(cluster.flush_timer.take())
            .chain(cluster.retry_timer.take())
            .chain(cluster.sync_timer.take())
        {
            t.abort();
        }
        for (_, (reply, timer)) in cluster.calls.drain() {
            if let Some(t) = timer {
                t.abort();
            }
            let _ = reply.send(Err(messaging::failure(
                &self.hub.node,
                None,
                "hub_unavailable",
                "hub is shutting down",
            )));
        }
        self.hub.set_transport(None);
    }

    pub(super) fn on_transport(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        event: TransportEvent,
    ) {
        match event {
            TransportEvent::NodeUp { node, boot_token } => {
                self.on_node_up(myself, node, boot_token)
            }
            TransportEvent::NodeDown { node } => self.on_node_down(myself, node),
            TransportEvent::Message { from, msg } => self.on_wire(myself, from, msg),
        }
    }

    fn on_node_up(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        node: NodeName,
        boot_token: crate::core::boot_token::BootToken,
    ) {
        let hub = self.hub.clone();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        hub.hooks
            .fire(HookKey::PreClusterJoin, || HookEvent::PreClusterJoin {
                node: node.clone(),
            });
        let verdict = cluster.tokens.observe(&node, boot_token);
        if let Some(t) = cluster.grace_timers.remove(&node) {
            t.abort();
        }
        cluster.leaving.remove(&node);
        cluster.peers.insert(node.clone());
        cluster.ring.add(node.clone());
        cluster.delivered_by.remove(&node);
        // Ask for the peer's registry; `cluster_settled` waits for it.
        if let Err(e) = cluster.transport.send(&node, &WireMsg::SyncRequest) {
            tracing::debug!(peer = %node, error = %e, "sync request not sent");
        }
        let restarted = matches!(verdict, PeerBoot::Restarted { .. });
        tracing::info!(peer = %node, restarted, "peer up");
        self.publish_membership();
        // Durable children: offer the peer this node's declared list (boot adoption).
        if let Some(declared) = hub.declared_leader() {
            let _ =
                declared.cast(super::declared_leader::DeclaredMsg::PeerUp { node: node.clone() });
        }
        if restarted {
            // Its previous boot's children died with it: reap now, not after a grace; the
            // pass after the reap re-places them.
            let ttl = Duration::from_millis(hub.config.stub_ttl_ms);
            self.registry_write(
                myself,
                vec![RegistryOp::Reap {
                    node: node.clone(),
                    ttl,
                }],
                Some(ClusterMsg::Reaped { node: node.clone() }),
            );
        } else if let Some(cluster) = &mut self.cluster {
            cluster.joins.on_event(node.clone(), Instant::now());
            self.arm_flush(myself);
        }
        hub.hooks
            .fire(HookKey::PostClusterJoin, || HookEvent::PostClusterJoin {
                node,
            });
    }

    fn on_node_down(&mut self, myself: &ActorRef<CoordinatorMsg>, node: NodeName) {
        let hub = self.hub.clone();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if !cluster.peers.remove(&node) {
            return;
        }
        hub.hooks
            .fire(HookKey::PreClusterLeave, || HookEvent::PreClusterLeave {
                node: node.clone(),
            });
        cluster.ring.remove(&node);
        cluster.delivered_by.remove(&node);
        cluster.sync_parts.forget(&node);
        cluster.joins.cancel(&node);
        let graceful = cluster.leaving.remove(&node);
        let grace = if graceful {
            Duration::ZERO
        } else {
            Duration::from_millis(hub.config.nodedown_grace_ms)
        };
        tracing::info!(peer = %node, graceful, grace_ms = grace.as_millis() as u64, "peer down");
        let expired = node.clone();
        let timer = myself.send_after(grace, move || {
            CoordinatorMsg::Cluster(ClusterMsg::GraceExpired { node: expired })
        });
        if let Some(old) = cluster.grace_timers.insert(node.clone(), timer) {
            old.abort();
        }
        self.publish_membership();
        self.fail_pending_on(myself, &node);
        self.fail_relayed_on(&node);
        if let Some(declared) = hub.declared_leader() {
            let _ =
                declared.cast(super::declared_leader::DeclaredMsg::PeerDown { node: node.clone() });
        }
        hub.hooks
            .fire(HookKey::PostClusterLeave, || HookEvent::PostClusterLeave {
                node,
            });
    }

    /// Requests waiting on a node that went down are answered `node_unavailable` now rather
    /// than at their timeout.
    fn fail_pending_on(&mut self, myself: &ActorRef<CoordinatorMsg>, node: &NodeName) {
        use super::coordinator::PendingOperation;
        let mut starts = Vec::new();
        let mut stops = Vec::new();
        for (request_id, op) in &self.pending_operations {
            match op {
                PendingOperation::Start(op) => {
                    let ids: Vec<ChildId> = op
                        .awaiting
                        .iter()
                        .filter(|(_, n)| *n == node)
                        .map(|(id, _)| id.clone())
                        .collect();
                    if !ids.is_empty() {
                        starts.push((*request_id, ids));
                    }
                }
                PendingOperation::Stop(op) => {
                    if let Some(ids) = op.awaiting.get(node) {
                        stops.push((*request_id, ids.clone()));
                    }
                }
            }
        }
        let reason = format!("node {node} went down");
        for (request_id, ids) in starts {
            let errors = ids
                .into_iter()
                .map(|id| {
                    let reason = reason.clone();
                    (
                        id,
                        node.clone(),
                        ChildStartError::NodeUnavailable { reason },
                    )
                })
                .collect();
            self.on_start_outcome(myself, request_id, Vec::new(), errors);
        }
        for (request_id, ids) in stops {
            let report = NodeStopReport {
                node: node.clone(),
                stopped: Vec::new(),
                errors: ids
                    .into_iter()
                    .map(|id| {
                        let reason = reason.clone();
                        (id, ChildStopError::NodeUnavailable { reason })
                    })
                    .collect(),
            };
            self.on_node_stopped(myself, request_id, report);
        }
    }
}
