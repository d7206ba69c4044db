//! The hub's one wire inbox: every event of the hub's transport goes through here to the actor
//! that owns it.
//!
//! | what arrives | who owns it |
//! |---|---|
//! | `NodeUp`, `NodeDown` | the Coordinator (membership, the ring); the Registry also hears `NodeDown` (it forgets the peer's unfinished sync) |
//! | starts, stops, their replies, child messages, `Goodbye` and its ack, `Reachability`, `ReachDigest` | the Coordinator |
//! | `RegistryDelta`, `FullSync`, `FullSyncPart`, `SyncRequest`, `SyncDigest`, `Gossip*` | the Registry |
//! | `DeclaredOffer`, `DeclaredOfferPart`, `DeclaredSummary`, `DeclaredDelta`, `DeclaredMutate`, `DeclaredMutateReply`, `DeclaredVersionQuery` | the DeclaredLeader |
//! | `DeclaredVersion` | recorded here, in arrival order, in the recovery state the rounds read |
//! | `TypedCast`, `TypedCall`, `MonitorChild` | handed to the local child or answered here (`hub/typed/`): no actor hop |
//! | `TypedReply`, `ChildDown`, `Demonitor` | the typed calls and monitors of `HubShared` |
//! | `SummaryQuery`, `SummaryReply` | answered from a task, or the queries of `HubShared` (`hub/summary`) |
//!
//! **Order.** The transport calls the inbox one event at a time per peer, in the order the peer
//! sent them, and each event becomes one cast into one mailbox, so what one peer sends to one
//! actor arrives in order. A peer's `DeclaredVersion` (which it sends ahead of its `FullSync`)
//! is recorded before the inbox returns, so it is known before the Registry merges that sync and
//! before the reconcile round the sync's completion may start.
//!
//! **Never left unanswered.** A declared-list mutation that no DeclaredLeader can take (recovery
//! is off, or the actor is restarting) is refused back to its sender at once, so the sender does
//! not wait for its timeout.
//!
//! The transport may call the inbox with its own locks held (the in-process router does): the
//! inbox only casts into mailboxes and never calls back into the transport; a refusal is sent
//! from a task of its own. A hub whose last reference the inbox held is dropped here: its
//! endpoint's close is then deferred by the in-process router until its lock is released.

use std::sync::{Arc, Weak};

use ractor::ActorRef;

use super::protocol::{CoordinatorMsg, DeclaredMsg, RegistryMsg};
use super::summary;
use super::typed;
use super::HubShared;
use crate::cluster::transport::{EventSink, TransportEvent};
use crate::cluster::wire::WireMsg;
use crate::core::declared::list::check_version;
use crate::core::sync_digest::BindingDigest;
use crate::model::NodeName;
use crate::telemetry::refusals::Refusal;
use crate::types::RecoveryError;

/// The sink of the endpoint that `coordinator` opens. The Coordinator's own events go to the
/// Coordinator that opened the endpoint (it opens it in `pre_start`, before its ref is
/// published, and the transport announces the peers already up right away); the other actors
/// are looked up at delivery. Holds the hub weakly: the endpoint (and so this sink) may outlive
/// the hub for a moment while it closes.
pub(crate) fn sink(hub: &Arc<HubShared>, coordinator: ActorRef<CoordinatorMsg>) -> EventSink {
    let inbox = Inbox {
        hub: Arc::downgrade(hub),
        coordinator,
    };
    Arc::new(move |event| inbox.deliver(event))
}

struct Inbox {
    hub: Weak<HubShared>,
    coordinator: ActorRef<CoordinatorMsg>,
}

impl Inbox {
    fn deliver(&self, event: TransportEvent) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        match event {
            TransportEvent::NodeDown { node } => {
                // Typed calls and monitors waiting on the peer fail now, not at a timeout.
                hub.typed.peer_down(&node, &hub.node);
                hub.summaries.peer_down(&node);
                hub.monitors_peer_down(&node);
                if let Some(registry) = hub.registry() {
                    let _ = registry.cast(RegistryMsg::PeerDown { node: node.clone() });
                }
                self.to_coordinator(TransportEvent::NodeDown { node });
            }
            up @ TransportEvent::NodeUp { .. } => self.to_coordinator(up),
            TransportEvent::Message { from, msg } => self.deliver_message(&hub, from, msg),
        }
    }

    /// A stopped Coordinator's endpoint is replaced by its successor's, which is told every
    /// peer again; what was sent to the old one is answered by its senders' timeouts.
    fn to_coordinator(&self, event: TransportEvent) {
        let _ = self.coordinator.cast(CoordinatorMsg::Transport(event));
    }

    fn deliver_message(&self, hub: &Arc<HubShared>, from: NodeName, msg: WireMsg) {
        match msg {
            msg @ (WireMsg::StartChildren { .. }
            | WireMsg::StartReply { .. }
            | WireMsg::StopChildren { .. }
            | WireMsg::StopReply { .. }
            | WireMsg::ChildCast { .. }
            | WireMsg::ChildCall { .. }
            | WireMsg::ChildCallReply { .. }
            | WireMsg::Goodbye
            | WireMsg::GoodbyeAck { .. }
            | WireMsg::Rebalance { .. }
            | WireMsg::Reachability { .. }
            | WireMsg::ReachDigest { .. }) => {
                self.to_coordinator(TransportEvent::Message { from, msg })
            }
            WireMsg::RegistryDelta { changes } => {
                to_registry(hub, RegistryMsg::Merge { from, changes })
            }
            WireMsg::FullSync { rows } => to_registry(hub, RegistryMsg::PeerSync { from, rows }),
            WireMsg::FullSyncPart {
                sync_id,
                index,
                total,
                rows,
            } => to_registry(
                hub,
                RegistryMsg::PeerSyncPart {
                    from,
                    sync_id,
                    index,
                    total,
                    rows,
                },
            ),
            WireMsg::SyncRequest => to_registry(hub, RegistryMsg::SendFullSync { to: Some(from) }),
            WireMsg::SyncDigest { count, digest } => to_registry(
                hub,
                RegistryMsg::PeerDigest {
                    from,
                    digest: BindingDigest::from_words(count, digest),
                },
            ),
            WireMsg::GossipDelta {
                origin,
                epoch,
                seq,
                changes,
                relay_to,
            } => to_registry(
                hub,
                RegistryMsg::GossipDelta {
                    from,
                    origin,
                    epoch,
                    seq,
                    changes,
                    relay_to,
                },
            ),
            WireMsg::GossipSync {
                epoch,
                seq,
                sync_id,
                index,
                total,
                rows,
            } => to_registry(
                hub,
                RegistryMsg::GossipSync {
                    from,
                    epoch,
                    seq,
                    sync_id,
                    index,
                    total,
                    rows,
                },
            ),
            WireMsg::GossipRound {
                initiator,
                round,
                heads,
                route,
                spreading,
            } => to_registry(
                hub,
                RegistryMsg::GossipRound {
                    initiator,
                    round,
                    heads,
                    route,
                    spreading,
                },
            ),
            WireMsg::DeclaredVersion {
                version,
                last_mutated_by,
            } => note_declared_version(hub, from, version, last_mutated_by),
            msg @ (WireMsg::DeclaredOffer { .. }
            | WireMsg::DeclaredOfferPart { .. }
            | WireMsg::DeclaredDelta { .. }
            | WireMsg::DeclaredMutate { .. }
            | WireMsg::DeclaredMutateReply { .. }
            | WireMsg::DeclaredVersionQuery
            | WireMsg::DeclaredSummary { .. }) => to_declared_leader(hub, from, msg),
            WireMsg::TypedCast {
                id,
                variant,
                args,
                hops,
            } => typed::on_cast(hub, &from, id, variant, args, hops),
            WireMsg::TypedCall {
                request_id,
                id,
                variant,
                args,
                timeout_ms,
            } => typed::on_call(hub, from, request_id, id, variant, args, timeout_ms),
            WireMsg::TypedReply { request_id, result } => {
                hub.typed.complete(&from, request_id.0, result)
            }
            WireMsg::MonitorChild {
                monitor,
                id,
                follow_restarts,
            } => typed::on_monitor(hub, from, monitor, id, follow_restarts),
            WireMsg::Demonitor { monitor } => hub.peer_demonitor(&from, monitor),
            WireMsg::ChildDown {
                monitor, reason, ..
            } => hub.fire_remote_monitor(&from, monitor, reason),
            WireMsg::HandoverState { id, state } => {
                if let Err(refused) = hub.accept_import(id.clone(), state) {
                    tracing::warn!(peer = %from, child = %id, %refused, "handover state refused: the child starts without it");
                    hub.refusals.count(Refusal::Overloaded);
                }
            }
            WireMsg::LoadReport { sample } => {
                if hub.config.distribution == crate::config::Distribution::LoadBalanced
                    && hub.is_leader()
                    && hub.is_member(&from)
                {
                    let decay = hub.config.load_balancer.decay();
                    hub.loads.note_report(&from, sample, decay);
                }
            }
            WireMsg::LoadTable { loads } => {
                if hub.config.distribution == crate::config::Distribution::LoadBalanced
                    && hub.leader().as_ref() == Some(&from)
                {
                    hub.loads.set_table(loads, &hub.members());
                }
            }
            WireMsg::SummaryQuery { request_id } => summary::on_query(hub, from, request_id),
            WireMsg::SummaryReply {
                request_id,
                summary,
            } => hub.summaries.complete(&from, request_id.0, *summary),
            // The transport consumes these; nothing of the hub's owns them.
            WireMsg::Hello { .. } | WireMsg::Heartbeat { .. } => {}
        }
    }
}

fn to_registry(hub: &HubShared, msg: RegistryMsg) {
    match hub.registry() {
        Some(registry) => {
            // Counted waiting before the cast, so the Registry cannot handle it first.
            let sender = msg.stream_sender().cloned();
            if let Some(peer) = &sender {
                hub.sync_lag().received(peer, hub.mono_ms());
            }
            if registry.cast(msg).is_err() {
                if let Some(peer) = &sender {
                    hub.sync_lag().handled(peer);
                }
            }
        }
        // The next full sync heals what this carried.
        None => tracing::warn!("registry is restarting; a peer's registry update was skipped"),
    }
}

/// Recorded at arrival, so the round that follows this peer's `FullSync` already knows whether
/// this node's copy is outdated; a newer copy is then fetched from the peer.
fn note_declared_version(
    hub: &HubShared,
    from: NodeName,
    version: u64,
    last_mutated_by: Option<NodeName>,
) {
    let Some(recovery) = &hub.recovery else {
        return;
    };
    // An implausible announcement would hold the rounds parked waiting for a copy that is
    // refused when it arrives: it is not recorded.
    if let Err(refused) = check_version(recovery.snapshot().list.version(), version) {
        tracing::warn!(peer = %from, %refused, "declared version announcement refused");
        hub.refusals.count(Refusal::ImplausibleVersion);
        return;
    }
    if recovery.note_announced(from.clone(), version, last_mutated_by) {
        tracing::debug!(peer = %from, version, "a peer announced a newer declared copy");
        if let Some(leader) = hub.declared_leader() {
            let _ = leader.cast(DeclaredMsg::Announced { from });
        }
    }
}

fn to_declared_leader(hub: &Arc<HubShared>, from: NodeName, msg: WireMsg) {
    if hub.recovery.is_none() {
        return refuse(hub, msg, RecoveryError::AutoRecoveryDisabled);
    }
    let restarting = || RecoveryError::HubUnavailable {
        reason: "declared leader is restarting".into(),
    };
    let Some(leader) = hub.declared_leader() else {
        return refuse(hub, msg, restarting());
    };
    if let Err(ractor::MessagingErr::SendErr(DeclaredMsg::Wire { msg, .. })) =
        leader.cast(DeclaredMsg::Wire { from, msg })
    {
        refuse(hub, msg, restarting());
    }
}

/// Refuses a mutation no DeclaredLeader can take, from a task: the reply goes through the
/// transport, which may be holding its lock while it calls the inbox.
fn refuse(hub: &Arc<HubShared>, msg: WireMsg, error: RecoveryError) {
    if !matches!(msg, WireMsg::DeclaredMutate { .. }) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("a declared-list mutation could not be refused: no runtime");
        return;
    };
    let hub = hub.clone();
    runtime.spawn(async move { hub.refuse_mutation(&msg, error) });
}
