//! Membership: `NodeUp` / `NodeDown` from the transport, boot tokens (a new token = the node
//! restarted: reap its bindings now; the same token after a flap: keep them), the grace timer of
//! a node that went down, the batches of membership events (`core::event_batch`),
//! `registry_delivered_by` and `cluster_settled`, and publishing the members and the ring that
//! every other actor reads.

use std::time::Duration;

use tokio::time::Instant;

use ractor::ActorRef;

use super::{CoordinatorState, PendingOperation};
use crate::cluster::transport::TransportEvent;
use crate::cluster::wire::WireMsg;
use crate::core::boot_token::PeerBoot;
use crate::events::HubEvent;
use crate::hooks::{HookEvent, HookKey};
use crate::hub::protocol::{ClusterMsg, CoordinatorMsg, DeclaredMsg, NodeStopReport, RegistryOp};
use crate::model::{ChildId, NodeName};
use crate::types::{ChildStartError, ChildStopError};

/// How long after a peer came up its registry may take before it is asked for again (and
/// then at this interval, [`NODEUP_RECONCILE_ATTEMPTS`] times in all).
pub(super) const NODEUP_RECONCILE: Duration = Duration::from_millis(1_000);

/// How many times a peer's registry is asked for again after it came up.
pub(super) const NODEUP_RECONCILE_ATTEMPTS: u32 = 5;

impl CoordinatorState {
    /// A node-up reconcile timer fired: a peer still up whose registry has not arrived is
    /// asked again.
    pub(super) fn on_nodeup_reconcile(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        node: NodeName,
        attempt: u32,
    ) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        cluster.nodeup_reconcile_timers.remove(&node);
        if !cluster.peers.contains(&node) || cluster.delivered_by.contains(&node) {
            return;
        }
        tracing::info!(peer = %node, attempt, "peer's registry not delivered yet; asking again");
        if let Err(e) = cluster.transport.send(&node, &WireMsg::SyncRequest) {
            tracing::debug!(peer = %node, error = %e, "sync request not sent");
        }
        if attempt < NODEUP_RECONCILE_ATTEMPTS {
            let again = node.clone();
            let timer = myself.send_after(NODEUP_RECONCILE, move || {
                CoordinatorMsg::Cluster(ClusterMsg::NodeUpReconcile {
                    node: again,
                    attempt: attempt + 1,
                })
            });
            cluster.nodeup_reconcile_timers.insert(node, timer);
        }
    }

    /// Publishes the members and the ring for the other actors (and `cluster_settled`).
    pub(super) fn publish_membership(&self) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let mut members: Vec<NodeName> = cluster.peers.iter().cloned().collect();
        members.push(self.hub.node.clone());
        members.sort();
        self.hub
            .publish_membership(members.clone(), cluster.ring.clone());
        let settled = cluster.settled();
        let was = self.hub.settled.send_replace(settled);
        if settled && !was {
            self.hub
                .events
                .publish(|| HubEvent::ClusterSettled { members });
        }
    }

    pub(super) fn on_transport(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        event: TransportEvent,
    ) {
        match event {
            TransportEvent::NodeUp { node, boot_token } => {
                self.on_link_up(myself, node, boot_token)
            }
            TransportEvent::NodeDown { node } => self.on_link_down(myself, node),
            TransportEvent::Message { from, msg } => self.on_wire(myself, from, msg),
        }
    }

    /// `node` is a member (again): it joins the ring at once, is asked for its registry, and
    /// its boot token is classified (a restart is reaped now). Called when the reachability
    /// decision admits it, and when a member's link comes up again.
    pub(super) fn member_up(
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
        cluster.departed.remove(&node);
        cluster.peers.insert(node.clone());
        cluster.ring.add(node.clone());
        // A reap still held for it is off: what it binds from now on runs.
        cluster.held_reaps.strike(&node);
        // Back: the bindings it sends from now on count (before any of its frames is merged).
        hub.set_gone(&node, false);
        cluster.delivered_by.remove(&node);
        // A node-down not told to the declared leader yet is told now, before the node-up:
        // the leader forgets what it waited for from the previous incarnation.
        let down_untold = cluster.nodedowns.pending().contains(&node);
        cluster.nodedowns.cancel(&node);
        cluster.grace_expiries.cancel(&node);
        if down_untold {
            if let Some(declared) = hub.declared_leader() {
                let _ = declared.cast(DeclaredMsg::PeerDown { node: node.clone() });
            }
        }
        // Ask for the peer's registry; `cluster_settled` waits for it, and the node-up
        // reconcile timer asks again if it does not come.
        if let Err(e) = cluster.transport.send(&node, &WireMsg::SyncRequest) {
            tracing::debug!(peer = %node, error = %e, "sync request not sent");
        }
        let again = node.clone();
        let timer = myself.send_after(NODEUP_RECONCILE, move || {
            CoordinatorMsg::Cluster(ClusterMsg::NodeUpReconcile {
                node: again,
                attempt: 1,
            })
        });
        if let Some(old) = cluster.nodeup_reconcile_timers.insert(node.clone(), timer) {
            old.abort();
        }
        let restarted = matches!(verdict, PeerBoot::Restarted { .. });
        tracing::info!(peer = %node, restarted, "peer up");
        self.publish_membership();
        self.quorum_node_up(myself, &node);
        // Durable children: offer the peer this node's declared list (boot adoption).
        if let Some(declared) = hub.declared_leader() {
            let _ = declared.cast(DeclaredMsg::PeerUp { node: node.clone() });
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
                Some(ClusterMsg::Reaped {
                    nodes: vec![node.clone()],
                }),
            );
        } else if let Some(cluster) = &mut self.cluster {
            cluster
                .joins
                .on_event(node.clone(), Instant::now().into_std());
            self.arm_flush(myself);
        }
        hub.events
            .publish(|| HubEvent::NodeUp { node: node.clone() });
        hub.hooks
            .fire(HookKey::PostClusterJoin, || HookEvent::PostClusterJoin {
                node,
            });
    }

    /// `node` is no member any more (out of this node's component, set aside, or gone after a
    /// goodbye): it leaves the ring, its grace starts, what waits on it fails.
    pub(super) fn member_down(&mut self, myself: &ActorRef<CoordinatorMsg>, node: NodeName) {
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
        cluster.joins.cancel(&node);
        if let Some(t) = cluster.nodeup_reconcile_timers.remove(&node) {
            t.abort();
        }
        cluster
            .nodedowns
            .on_event(node.clone(), Instant::now().into_std());
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
        if !grace.is_zero() {
            let ahead = node.clone();
            myself.send_after(grace / 2, move || {
                CoordinatorMsg::Cluster(ClusterMsg::ReadAhead { node: ahead })
            });
        }
        if graceful {
            cluster.departed.insert(node.clone());
        }
        self.publish_membership();
        self.quorum_node_down(myself, &node);
        self.goodbye_answered(myself, &node);
        self.fail_pending_on(myself, &node);
        self.fail_relayed_on(&node);
        self.arm_flush(myself);
        hub.events.publish(|| HubEvent::NodeDown {
            node: node.clone(),
            graceful,
        });
        hub.hooks
            .fire(HookKey::PostClusterLeave, || HookEvent::PostClusterLeave {
                node,
            });
    }

    /// Requests waiting on a node that went down are answered `node_unavailable` now rather
    /// than at their timeout.
    pub(super) fn fail_pending_on(&mut self, myself: &ActorRef<CoordinatorMsg>, node: &NodeName) {
        let mut starts = Vec::new();
        let mut stops = Vec::new();
        for (request_id, op) in &self.pending_operations {
            match op {
                PendingOperation::Start(op) => {
                    let mut ids: Vec<ChildId> = op
                        .awaiting
                        .iter()
                        .filter(|(_, n)| *n == node)
                        .map(|(id, _)| id.clone())
                        .collect();
                    ids.sort_unstable();
                    if !ids.is_empty() {
                        starts.push((*request_id, ids));
                    }
                }
                PendingOperation::Stop(op) => {
                    if let Some(ids) = op.awaiting.get(node) {
                        let mut ids: Vec<ChildId> = ids.iter().cloned().collect();
                        ids.sort_unstable();
                        stops.push((*request_id, ids));
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
