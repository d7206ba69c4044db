//! The graceful leave: tell the peers, wait (at most [`GOODBYE_ACK_WAIT`]) for their answers
//! (a peer leaving at the same time is no heir), then hand every local child to its next owner
//! and answer once they answered. The caller then shuts the hub down.

use std::collections::{BTreeMap, BTreeSet};

use ractor::{ActorRef, RpcReplyPort};

use super::cluster::{Internal, PendingLeave, GOODBYE_ACK_WAIT};
use super::handover::AfterExport;
use super::rebalance::batches;
use super::CoordinatorState;
use crate::cluster::wire::WireMsg;
use crate::core::guided::{Guided, Owner};
use crate::hub::protocol::{ClusterMsg, CoordinatorMsg};
use crate::hub::simulation::{InjectedBug, Observation};
use crate::model::{NodeName, Row};

impl CoordinatorState {
    /// Graceful leave: tell the peers, wait (at most [`GOODBYE_ACK_WAIT`]) for each to answer
    /// whether it is leaving too, then start every local child on its next owner (the ring
    /// without this node and without the peers leaving) and answer once they answered. The
    /// caller then shuts the hub down, which stops the local copies.
    pub(super) fn leave(&mut self, myself: &ActorRef<CoordinatorMsg>, reply: RpcReplyPort<()>) {
        let Some(cluster) = &mut self.cluster else {
            let _ = reply.send(());
            return;
        };
        if cluster.self_leaving {
            // A second leave: the first one hands over.
            let _ = reply.send(());
            return;
        }
        cluster.self_leaving = true;
        // Out of its own ring too: a start that reaches this node from now on (a peer's
        // handover that crossed this node's goodbye) is forwarded to an owner that stays.
        cluster.ring.remove(&self.hub.node);
        if let Err(e) = cluster.transport.broadcast(&WireMsg::Goodbye) {
            tracing::warn!(error = %e, "goodbye not sent");
        }
        let awaiting: BTreeSet<NodeName> = cluster
            .peers
            .iter()
            .filter(|p| !cluster.leaving.contains(*p))
            .cloned()
            .collect();
        self.publish_membership();
        if awaiting.is_empty() || self.hub.has_bug(InjectedBug::HandOverWithoutGoodbyeAnswers) {
            return self.hand_over(myself, reply);
        }
        let timer = myself.send_after(GOODBYE_ACK_WAIT, || {
            CoordinatorMsg::Cluster(ClusterMsg::GoodbyeAckTimeout)
        });
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        cluster.leave = Some(PendingLeave {
            reply,
            awaiting,
            timer: Some(timer),
        });
    }

    /// A peer answered this node's goodbye; `leaving`: it leaves too, so it gets nothing.
    pub(super) fn on_goodbye_ack(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        from: NodeName,
        leaving: bool,
    ) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if leaving && cluster.peers.contains(&from) {
            tracing::info!(peer = %from, "peer is leaving too");
            cluster.leaving.insert(from.clone());
            cluster.ring.remove(&from);
            self.publish_membership();
        }
        self.goodbye_answered(myself, &from);
    }

    /// `node` answered the goodbye or went down: hand over once nobody is awaited.
    pub(super) fn goodbye_answered(&mut self, myself: &ActorRef<CoordinatorMsg>, node: &NodeName) {
        let Some(leave) = self.cluster.as_mut().and_then(|c| c.leave.as_mut()) else {
            return;
        };
        leave.awaiting.remove(node);
        if leave.awaiting.is_empty() {
            self.goodbye_answers_done(myself);
        }
    }

    /// Every peer answered the goodbye, or the wait is over: hand over.
    pub(super) fn goodbye_answers_done(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let Some(leave) = self.cluster.as_mut().and_then(|c| c.leave.take()) else {
            return;
        };
        if let Some(timer) = leave.timer {
            timer.abort();
        }
        if !leave.awaiting.is_empty() {
            tracing::info!(peers = ?leave.awaiting, "no answer to the goodbye; taking them as staying");
        }
        self.hand_over(myself, leave.reply);
    }

    /// Starts every local child on its next owner among the members that stay.
    fn hand_over(&mut self, myself: &ActorRef<CoordinatorMsg>, reply: RpcReplyPort<()>) {
        let me = self.hub.node.clone();
        let Some(cluster) = &mut self.cluster else {
            let _ = reply.send(());
            return;
        };
        let mut ring = cluster.ring.clone();
        ring.remove(&me);
        let mut placed = Vec::new();
        let mut rows = BTreeMap::new();
        for row in self.hub.storage.export_all() {
            if !row.node_pids.contains_key(&me) {
                continue;
            }
            if self.hub.config.replication_factor > 1 {
                // A replica goes to the first owner left that runs none; when every owner
                // already runs one, it just stops with this node. An owner is a member that
                // stays: with nobody staying, a load-placed child's owners are the nodes its
                // placement names, members or not, leaving or not.
                let owners = self.hub.owners_of(&ring, &row.spec.id, Some(&row.metadata));
                if let Some(owner) = owners
                    .into_iter()
                    .find(|o| ring.contains(o) && !row.node_pids.contains_key(o))
                {
                    placed.push((owner, row.clone()));
                    rows.insert(row.spec.id.clone(), row);
                }
                continue;
            }
            let owner = match Guided::of(&row.metadata) {
                None => ring.owner(&row.spec.id).cloned(),
                Some(guided) => {
                    match guided.owner(|n| ring.contains(n), ring.owner(&row.spec.id)) {
                        Some(Owner::Node(node)) => Some(node.clone()),
                        // Its nodes are all leaving and it may not fall back: it stops here.
                        _ => None,
                    }
                }
            };
            if let Some(owner) = owner {
                placed.push((owner, row.clone()));
                rows.insert(row.spec.id.clone(), row);
            }
        }
        tracing::info!(
            children = rows.len(),
            "leaving the cluster: handing children over"
        );
        let (hot, _) = self.split_hot(rows.into_values().collect());
        if !hot.is_empty() {
            return self.begin_export(myself, &hot, AfterExport::Leave { placed, reply });
        }
        self.start_handover(myself, placed, reply);
    }

    /// Starts the children of a graceful leave on their next owners; answers once they did.
    pub(super) fn start_handover(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        placed: Vec<(NodeName, Row)>,
        reply: RpcReplyPort<()>,
    ) {
        let rows = placed
            .iter()
            .map(|(_, r)| (r.spec.id.clone(), r.clone()))
            .collect();
        let mut by_node = batches(placed.iter().map(|(n, r)| (n, r)));
        self.mark_states_sent(&mut by_node);
        self.hub.observe(|| Observation::HandedOver {
            from: self.hub.node.clone(),
            to: by_node.keys().cloned().collect(),
        });
        self.start_internal(
            myself,
            by_node,
            Internal::Handover {
                rows,
                reply: Some(reply),
            },
        );
    }
}
