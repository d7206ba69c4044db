//! The Coordinator's cluster state: what a hub that spans nodes keeps beyond the pipeline (the
//! `Coordinator.State` fields that a single node does not need), and sending batches
//! to peers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorRef, RpcReplyPort};

use super::{relay, CoordinatorState, Timer};
use crate::cluster::transport::{EventSink, Network, Transport, TransportError};
use crate::cluster::wire::budget::{chunk_by_bytes, FRAME_BUDGET_BYTES};
use crate::cluster::wire::{RequestId, StartItem, WireMsg};
use crate::core::boot_token::BootTokens;
use crate::core::event_batch::{BatchConfig, EventBatch};
use crate::core::held_reap::HeldReaps;
use crate::core::left_to_owner::LeftToOwners;
use crate::core::placement::HashRing;
use crate::core::read_ahead::ReadAhead;
use crate::events::MoveReason;
use crate::hub::protocol::{
    ChildCallReplyPort, ClusterMsg, CoordinatorMsg, NodeStartReport, NodeStopReport, RegistryMsg,
    RegistryOp, StartBatch, StopBatch,
};
use crate::hub::HubShared;
use crate::model::{ChildId, NodeName, Row};
use crate::types::{ChildStartError, ChildStopError};

/// How many times a start may be forwarded between nodes whose rings disagree.
pub(super) const MAX_HOPS: u8 = 3;

/// What an internal start (a migration, a re-placement, a handover) does when it completes.
pub(crate) enum Internal {
    /// Failures are retried on the `migration_retry_ms` timer.
    Replace {
        rows: BTreeMap<ChildId, Row>,
        cause: Cause,
    },
    /// A graceful leave: answer when every child was handed over (or failed to be).
    Handover {
        rows: BTreeMap<ChildId, Row>,
        reply: Option<RpcReplyPort<()>>,
    },
}

/// How long a leaving node waits for its peers' answers to its goodbye (a peer that does not
/// answer in time is taken to stay).
pub(crate) const GOODBYE_ACK_WAIT: Duration = Duration::from_millis(500);

/// A graceful leave between its goodbye and its handover.
pub(crate) struct PendingLeave {
    pub reply: RpcReplyPort<()>,
    /// Peers that have not answered the goodbye yet.
    pub awaiting: BTreeSet<NodeName>,
    pub timer: Option<Timer>,
}

/// Why an internal start runs, reported as an event once its children run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Stopped on `from` (this node), started on the owner: `ChildMoved`.
    Moved { from: NodeName, why: MoveReason },
    /// Its node is gone: `ChildReplaced`.
    Replaced { why: MoveReason },
}

/// The migration retry timer (`migration_retry_timer`: `nil`, a timer, or
/// `{:running, timer}`): a retry's starts in flight hold off the next timer until they answered,
/// so one retry never overlaps the next.
pub(crate) enum RetryTimer {
    /// Nothing waits for a retry.
    Idle,
    /// Failed moves wait for this timer.
    Armed(Timer),
    /// A retry's starts are in flight: these children have not answered yet.
    Running { children: BTreeSet<ChildId> },
}

impl RetryTimer {
    /// The armed timer, if any, leaving `Idle` in its place.
    pub fn take(&mut self) -> Option<Timer> {
        match std::mem::replace(self, RetryTimer::Idle) {
            RetryTimer::Armed(t) => Some(t),
            other => {
                *self = other;
                None
            }
        }
    }

    /// Arms the timer to fire `ClusterMsg::Retry` after `after`, unless it is armed already or
    /// a retry runs (which arms it when its starts answered).
    pub fn arm_if_idle(&mut self, myself: &ActorRef<CoordinatorMsg>, after: Duration) {
        if matches!(self, RetryTimer::Idle) {
            *self = RetryTimer::Armed(
                myself.send_after(after, || CoordinatorMsg::Cluster(ClusterMsg::Retry)),
            );
        }
    }

    /// Children of a running retry answered; returns whether the retry is over.
    pub fn answered<'a>(&mut self, ids: impl IntoIterator<Item = &'a ChildId>) -> bool {
        if let RetryTimer::Running { children } = self {
            for id in ids {
                children.remove(id);
            }
            if children.is_empty() {
                *self = RetryTimer::Idle;
                return true;
            }
            return false;
        }
        false
    }
}

/// The coordinator's cluster state.
pub(crate) struct ClusterState {
    pub transport: Arc<dyn Transport>,
    /// Members that own children: up peers (minus those that said goodbye) and this node.
    pub ring: HashRing,
    /// Peers up for this hub.
    pub peers: BTreeSet<NodeName>,
    /// Peers that announced a graceful leave: no grace when they go down.
    pub leaving: BTreeSet<NodeName>,
    /// Peers that went down after a goodbye and are not reaped yet: their children's
    /// re-placement is reported as `NodeLeft`, not `NodeDown`.
    pub departed: BTreeSet<NodeName>,
    pub tokens: BootTokens,
    /// Node-downs waiting to be told to the declared leader as one batch (`nodedown`).
    pub nodedowns: EventBatch,
    /// Joins (and syncs) waiting for a redistribution pass (`cluster_join`).
    pub joins: EventBatch,
    /// Nodes gone for good (grace over, reaped) waiting for a re-placement pass
    /// (`cluster_leave`).
    pub leaves: EventBatch,
    /// Nodes whose grace ran out, waiting to be reaped in one registry write
    /// (`grace_expired`).
    pub grace_expiries: EventBatch,
    /// Reaps of nodes gone for good, waiting for the starts that re-place their children.
    pub held_reaps: HeldReaps,
    /// The rows the next pass would read, read during a grace ([`ReadAhead`]).
    pub read_ahead: Option<ReadAhead>,
    /// Per peer that came up: a timer that asks for its registry again if it has not arrived
    /// (a lost `SyncRequest` or `FullSync` would otherwise wait for the periodic sync).
    pub nodeup_reconcile_timers: BTreeMap<NodeName, Timer>,
    pub flush_timer: Option<Timer>,
    pub grace_timers: BTreeMap<NodeName, Timer>,
    /// Peers whose registry has been merged since they came up (`registry_delivered_by`).
    pub delivered_by: BTreeSet<NodeName>,
    /// Children with a migration or re-placement in flight: passes skip them.
    pub migrating: BTreeSet<ChildId>,
    /// Children whose migration or re-placement failed, waiting for the retry timer.
    pub failed: BTreeMap<ChildId, (Row, Cause)>,
    /// Which of the `failed` are stubs left to their owners, looked at by the retry timer
    /// ([`LeftToOwners`]).
    pub left_to_owners: LeftToOwners,
    pub retry_timer: RetryTimer,
    pub sync_timer: Option<Timer>,
    /// The next load report (`Distribution::LoadBalanced`).
    pub load_timer: Option<Timer>,
    /// On the leader: report intervals to let pass before the next rebalance.
    pub load_cooldown: u32,
    /// This node is leaving: no more passes.
    pub self_leaving: bool,
    /// A graceful leave waiting for the peers' answers to its goodbye before it hands over.
    pub leave: Option<PendingLeave>,
    /// Child calls waiting for a reply.
    pub calls: BTreeMap<u64, (ChildCallReplyPort, Option<Timer>)>,
    /// Forwarded starts and child calls waiting on a peer (failed at once when it goes down).
    pub relay: relay::Relays,
    /// Hot moves under way (`migration = "hot"`).
    pub hot: super::handover::HotMoves,
    /// Quorum under the hub's `partition_tolerance` (`coordinator::partition`).
    pub quorum: crate::core::quorum::QuorumTracker,
    /// Reachability: the table, the decision, the peers the transport reaches
    /// (`coordinator::reach`).
    pub reach: super::reach::ReachState,
    /// The dynamic quorum's re-judging timer, while partitioned (and the one re-judging of a
    /// restarted Coordinator, once its peers had time to reconnect).
    pub quorum_timer: Option<Timer>,
    /// This Coordinator took over a predecessor's tracker: quorum is judged again once the
    /// peers had time to reconnect.
    pub quorum_recheck: bool,
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
        hub.publish_membership(vec![hub.node.clone()], HashRing::new([hub.node.clone()]));
        hub.settled.send_replace(true);
        let batch = BatchConfig {
            debounce: Duration::from_millis(hub.config.membership_debounce_ms),
            max_wait: Duration::from_millis(hub.config.membership_max_wait_ms),
        };
        Ok(Self {
            transport,
            ring: HashRing::new([hub.node.clone()]),
            peers: BTreeSet::new(),
            leaving: BTreeSet::new(),
            departed: BTreeSet::new(),
            tokens: BootTokens::new(),
            nodedowns: EventBatch::new(batch),
            joins: EventBatch::new(batch),
            leaves: EventBatch::new(batch),
            grace_expiries: EventBatch::new(batch),
            held_reaps: HeldReaps::default(),
            read_ahead: None,
            nodeup_reconcile_timers: BTreeMap::new(),
            flush_timer: None,
            grace_timers: BTreeMap::new(),
            delivered_by: BTreeSet::new(),
            migrating: BTreeSet::new(),
            failed: BTreeMap::new(),
            left_to_owners: LeftToOwners::default(),
            retry_timer: RetryTimer::Idle,
            sync_timer: None,
            load_timer: None,
            load_cooldown: 0,
            self_leaving: false,
            leave: None,
            calls: BTreeMap::new(),
            relay: relay::Relays::default(),
            hot: Default::default(),
            quorum: crate::core::quorum::QuorumTracker::new(
                hub.config.partition_tolerance.clone(),
                1,
            ),
            quorum_timer: None,
            quorum_recheck: false,
            reach: super::reach::ReachState::new(hub),
        })
    }

    /// Sends a start batch to peer `node`, cut into frames of at most the frame budget (the
    /// peer answers each with a `StartReply` of the same request, which the pending operation
    /// collects child by child); a frame that cannot be sent answers its children
    /// `node_unavailable` at once.
    pub fn send_start(
        &self,
        local: &NodeName,
        node: &NodeName,
        request_id: u64,
        batch: StartBatch,
    ) {
        let items: Vec<StartItem> = batch
            .children
            .iter()
            .map(|(spec, metadata)| StartItem {
                spec: spec.clone(),
                metadata: metadata.clone(),
                durable: batch.durable.contains(&spec.id),
            })
            .collect();
        let mut errors = Vec::new();
        for children in chunk_by_bytes(items, FRAME_BUDGET_BYTES) {
            let ids: Vec<ChildId> = children.iter().map(|c| c.spec.id.clone()).collect();
            let msg = WireMsg::StartChildren {
                request_id: RequestId(request_id),
                reply_to: local.clone(),
                hops: 0,
                check_existing: !batch.existing_ok,
                children,
            };
            if let Err(e) = self.transport.send(node, &msg) {
                let reason = e.to_string();
                errors.extend(ids.into_iter().map(|id| {
                    let reason = reason.clone();
                    (id, ChildStartError::NodeUnavailable { reason })
                }));
            }
        }
        if !errors.is_empty() {
            (batch.reply)(NodeStartReport {
                node: node.clone(),
                started: Vec::new(),
                errors,
            });
        }
    }

    /// Sends a stop batch to peer `node`, cut into frames of at most the frame budget (the peer
    /// answers each frame with a `StopReply` naming its children, which the pending operation
    /// settles child by child); a frame that cannot be sent answers its children
    /// `node_unavailable` at once.
    pub fn send_stop(&self, local: &NodeName, node: &NodeName, request_id: u64, batch: StopBatch) {
        let mut errors = Vec::new();
        for ids in chunk_by_bytes(batch.ids, FRAME_BUDGET_BYTES) {
            let msg = WireMsg::StopChildren {
                request_id: RequestId(request_id),
                reply_to: local.clone(),
                ids,
            };
            if let Err(e) = self.transport.send(node, &msg) {
                let reason = e.to_string();
                if let WireMsg::StopChildren { ids, .. } = msg {
                    errors.extend(ids.into_iter().map(|id| {
                        let reason = reason.clone();
                        (id, ChildStopError::NodeUnavailable { reason })
                    }));
                }
            }
        }
        if !errors.is_empty() {
            (batch.reply)(NodeStopReport {
                node: node.clone(),
                stopped: Vec::new(),
                errors,
            });
        }
    }

    /// Every peer's registry has been merged (of the members this node reaches: one reached
    /// only through others cannot deliver it).
    pub(super) fn settled(&self) -> bool {
        self.peers
            .iter()
            .filter(|p| self.reach.reachable.contains(*p))
            .all(|p| self.delivered_by.contains(p))
    }
}

impl CoordinatorState {
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
            }) as crate::hub::protocol::WriteDone
        });
        let _ = registry.cast(RegistryMsg::Write { ops, done });
    }

    /// Tells the peers this node's declared version, ahead of its `FullSync` on the same links,
    /// so a peer that missed a broadcast catches up before its next round (a parked copy
    /// means nothing and is not announced).
    pub(super) fn announce_declared_version(&self) {
        let announcement = self.hub.recovery.as_ref().and_then(|r| r.announcement());
        let (Some(msg), Some(transport)) = (announcement, self.hub.transport()) else {
            return;
        };
        if let Err(error) = transport.broadcast(&msg) {
            tracing::debug!(%error, "declared version not announced");
        }
    }

    /// Drops the endpoint and every timer (the Coordinator is stopping).
    pub(super) fn close_cluster(&mut self) {
        let Some(mut cluster) = self.cluster.take() else {
            return;
        };
        if let Some(leave) = cluster.leave.take() {
            if let Some(t) = leave.timer {
                t.abort();
            }
            let _ = leave.reply.send(());
        }
        for t in std::mem::take(&mut cluster.grace_timers)
            .into_values()
            .chain(std::mem::take(&mut cluster.nodeup_reconcile_timers).into_values())
            .chain(cluster.flush_timer.take())
            .chain(cluster.retry_timer.take())
            .chain(cluster.sync_timer.take())
            .chain(cluster.load_timer.take())
            .chain(cluster.quorum_timer.take())
            .chain(cluster.reach.timers().collect::<Vec<_>>())
        {
            t.abort();
        }
        for (_, (reply, timer)) in std::mem::take(&mut cluster.calls).into_iter() {
            if let Some(t) = timer {
                t.abort();
            }
            super::messaging::answer_call(
                reply,
                Err(super::messaging::failure(
                    &self.hub.node,
                    None,
                    "hub_unavailable",
                    "hub is shutting down",
                )),
            );
        }
        self.hub.set_transport(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_retry_ends_when_its_last_child_answered() {
        let id = |s: &str| ChildId::parse(s).unwrap();
        let mut timer = RetryTimer::Running {
            children: [id("a"), id("b")].into(),
        };
        assert!(
            timer.take().is_none(),
            "a running retry has no timer to take"
        );
        assert!(!timer.answered([&id("a"), &id("z")]));
        assert!(matches!(timer, RetryTimer::Running { .. }));
        assert!(timer.answered([&id("b")]));
        assert!(matches!(timer, RetryTimer::Idle));
        assert!(!timer.answered([&id("b")]), "idle stays idle");
    }
}
