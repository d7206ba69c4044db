//! The cluster half's own messages ([`ClusterMsg`]): its timers (membership batches, grace
//! periods, the periodic sync, retries), the Registry's write completions and the handle's
//! requests that go through the cluster (messages to a child by id, the graceful leave), and
//! how the Coordinator arms those timers and dispatches what comes back. Apart from the
//! membership handling (`super`) so that every way back into the cluster half reads in one
//! place.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use ractor::ActorRef;

use super::{CoordinatorState, Timer};
use crate::hub::protocol::{
    ClusterMsg, CoordinatorMsg, DeclaredMsg, ReconcilerMsg, RegistryMsg, RegistryOp,
};
use crate::model::NodeName;

fn arm(myself: &ActorRef<CoordinatorMsg>, after: Duration, msg: fn() -> ClusterMsg) -> Timer {
    myself.send_after(after, move || CoordinatorMsg::Cluster(msg()))
}

impl CoordinatorState {
    pub(in crate::hub) fn arm_sync_timer(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let period = Duration::from_millis(self.hub.config.sync_period_ms());
        if let Some(cluster) = &mut self.cluster {
            cluster.sync_timer = Some(arm(myself, period, || ClusterMsg::SyncTick));
        }
    }

    /// Arms the flush timer for the earliest pending batch deadline.
    pub(super) fn arm_flush(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let deadline = [
            cluster.nodedowns.deadline(),
            cluster.joins.deadline(),
            cluster.leaves.deadline(),
            cluster.grace_expiries.deadline(),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(t) = cluster.flush_timer.take() {
            t.abort();
        }
        if let Some(deadline) = deadline {
            let after = deadline.saturating_duration_since(Instant::now().into_std());
            cluster.flush_timer = Some(arm(myself, after, || ClusterMsg::Flush));
        }
    }

    pub(in crate::hub) fn on_cluster_msg(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        msg: ClusterMsg,
    ) {
        let msg = match msg {
            // Messaging a child by id works on one node too.
            ClusterMsg::ChildCast { id, payload } => return self.child_cast(id, payload, 0),
            ClusterMsg::ChildCall {
                id,
                payload,
                timeout,
                reply,
            } => return self.child_call(myself, id, payload, timeout, reply),
            // A node without a network restores its kept rows too.
            ClusterMsg::BootHoldCheck => return self.check_boot_hold(myself),
            other => other,
        };
        if self.cluster.is_none() {
            match msg {
                ClusterMsg::Leave { reply } => {
                    let _ = reply.send(());
                }
                ClusterMsg::ResetClusterSize { reply, .. } => {
                    let _ = reply.send(false);
                }
                _ => {}
            }
            return;
        }
        match msg {
            ClusterMsg::Flush => self.flush(myself),
            ClusterMsg::GraceExpired { node } => {
                let Some(cluster) = &mut self.cluster else {
                    return;
                };
                cluster.grace_timers.remove(&node);
                if cluster.peers.contains(&node) {
                    return; // came back within its grace: a flap, nothing moves
                }
                tracing::debug!(%node, "grace over: its children are re-placed");
                // Reaped with the other expiries of its window, in one registry write. When no
                // other grace is running, no other expiry can join the window: the grace
                // itself was the wait, so the reap (and the re-placement after it) go at once.
                let now = Instant::now().into_std();
                if cluster.grace_timers.is_empty() {
                    cluster.grace_expiries.on_closing_event(node, now);
                    // Due now: flushed in this turn, not after a timer's tick and the mailbox.
                    self.flush(myself);
                } else {
                    cluster.grace_expiries.on_event(node, now);
                    self.arm_flush(myself);
                }
            }
            ClusterMsg::ReadAhead { node } => self.read_ahead(&node),
            ClusterMsg::Reaped { nodes } => {
                if let Some(cluster) = &mut self.cluster {
                    // The reaped nodes came in one write; with no grace running and no expiry
                    // waiting, no other leave is on its way, so their pass runs at once
                    // rather than after a quiet time.
                    let closing =
                        cluster.grace_timers.is_empty() && !cluster.grace_expiries.is_pending();
                    let now = Instant::now().into_std();
                    for node in nodes {
                        self.node_left(node, closing, now);
                    }
                }
                self.arm_flush(myself);
            }
            ClusterMsg::NodeUpReconcile { node, attempt } => {
                self.on_nodeup_reconcile(myself, node, attempt)
            }
            ClusterMsg::Synced { from } => {
                let Some(cluster) = &mut self.cluster else {
                    return;
                };
                if cluster.peers.contains(&from) {
                    cluster.delivered_by.insert(from.clone());
                    if let Some(hold) = self
                        .hub
                        .boot_hold
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .as_mut()
                    {
                        hold.heard_peer();
                    }
                    // Durable children: a completed sync round may call for a reconcile.
                    if let Some(reconciler) = self.hub.reconciler() {
                        let _ = reconciler.cast(ReconcilerMsg::SyncCompleted);
                    }
                    // A sync can reveal duplicates (after a partition) or orphans: a pass,
                    // batched with the other events.
                    cluster.joins.on_event(from, Instant::now().into_std());
                }
                self.publish_membership();
                self.arm_flush(myself);
            }
            ClusterMsg::BootHoldCheck => {}
            ClusterMsg::SyncTick => {
                self.announce_declared_version();
                self.send_reach_digest();
                if let Some(registry) = self.hub.registry() {
                    let _ = registry.cast(RegistryMsg::SyncTick);
                }
                self.arm_sync_timer(myself);
            }
            ClusterMsg::Retry => self.retry_failed(myself),
            ClusterMsg::Leave { reply } => self.leave(myself, reply),
            ClusterMsg::GoodbyeAckTimeout => self.goodbye_answers_done(myself),
            ClusterMsg::StartOutcome { request_id, report } => {
                self.on_node_started(myself, request_id, report)
            }
            ClusterMsg::ChildCast { id, payload } => self.child_cast(id, payload, 0),
            ClusterMsg::ChildCall {
                id,
                payload,
                timeout,
                reply,
            } => self.child_call(myself, id, payload, timeout, reply),
            ClusterMsg::CallTimeout { request_id } => self.child_call_timeout(request_id),
            ClusterMsg::HandoverExported { export_id, results } => {
                self.on_exported(myself, export_id, results)
            }
            ClusterMsg::HandoffsExpire => self.hub.expire_handoffs(),
            ClusterMsg::RetryAbandonedMoves => self.retry_abandoned(myself),
            ClusterMsg::LoadTick => self.on_load_tick(myself),
            ClusterMsg::QuorumTick => self.on_quorum_tick(myself),
            ClusterMsg::ReachCheck => {
                if let Some(cluster) = &mut self.cluster {
                    cluster.reach.check_timer = None;
                }
                self.decide_reach(myself);
            }
            ClusterMsg::ReachDigestTick => self.on_reach_digest_tick(myself),
            ClusterMsg::ResetClusterSize { size, reply } => {
                self.reset_cluster_size(myself, size);
                let _ = reply.send(self.hub.partition.partitioned());
            }
        }
    }

    /// Runs a redistribution pass when a batch is due.
    fn flush(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let now = Instant::now().into_std();
        if let Some(downs) = cluster.nodedowns.take_due(now) {
            // The declared leader hears a storm of node-downs as one batch.
            if let Some(declared) = self.hub.declared_leader() {
                for node in downs.into_iter().filter(|n| !cluster.peers.contains(n)) {
                    let _ = declared.cast(DeclaredMsg::PeerDown { node });
                }
            }
        }
        // Nodes whose grace ran out are gone for good: their children are re-placed in this
        // flush's pass, and their bindings reaped once the starts it sends answered and the
        // other owners took the children left to them ([`HeldReaps`]). A node out of the ring
        // and past its grace runs nothing for the planner, bound or not, so the pass need not
        // wait for the reap.
        let mut reap = Vec::new();
        if let Some(expired) = cluster.grace_expiries.take_due(now) {
            let closing = cluster.grace_timers.is_empty();
            reap = expired
                .into_iter()
                .filter(|n| !cluster.peers.contains(n))
                .collect();
            for node in &reap {
                // Its bindings go from each row written from now on; the reap unbinds the rest.
                self.hub.set_gone(node, true);
                self.node_left(node.clone(), closing, now);
            }
        }
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let joined = cluster.joins.take_due(now);
        let left = cluster.leaves.take_due(now);
        let mut replacing = BTreeSet::new();
        if joined.is_some() || left.is_some() {
            let joined = joined.unwrap_or_default();
            let left = left.unwrap_or_default();
            replacing = self.redistribute(myself, &joined, &left);
        }
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        // A reap whose starts were dropped unanswered goes too, and one that waited for the
        // other owners once no stub is left to them.
        let pending = &self.pending_operations;
        let mut due = cluster.held_reaps.release(|id| !pending.contains_key(&id));
        let owners = !cluster.left_to_owners.is_empty();
        if !owners {
            due.extend(cluster.held_reaps.owners_done());
        }
        due.extend(cluster.held_reaps.hold(reap, replacing, owners));
        self.reap(myself, due);
        self.arm_flush(myself);
    }

    /// `node` leaves the ring's owners for good: `NodeLeft` unless it is up again, and its
    /// re-placement pass is due at once when `closing` (no other leave can join it), else
    /// after the membership debounce.
    fn node_left(&mut self, node: NodeName, closing: bool, now: std::time::Instant) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if !cluster.peers.contains(&node) {
            let gone = node.clone();
            self.hub
                .events
                .publish(|| crate::events::HubEvent::NodeLeft { node: gone });
        }
        if closing {
            cluster.leaves.on_closing_event(node, now);
        } else {
            cluster.leaves.on_event(node, now);
        }
    }

    /// Unbinds `nodes`, gone for good, from every row in one registry write; their rows no
    /// node runs stay as stubs for `stub_ttl_ms`.
    pub(super) fn reap(&mut self, myself: &ActorRef<CoordinatorMsg>, nodes: Vec<NodeName>) {
        if nodes.is_empty() {
            return;
        }
        let ttl = Duration::from_millis(self.hub.config.stub_ttl_ms);
        let ops = nodes
            .into_iter()
            .map(|node| RegistryOp::Reap { node, ttl })
            .collect();
        self.registry_write(myself, ops, None);
    }
}
