//! The hub protocol on the receiving side: what a Coordinator does with a peer's message.
//!
//! Starts re-check ownership: a child this node owns (by its own ring) starts here; one it does
//! not own is forwarded to its owner with `hops + 1` under this node's own request id, and the
//! owner's answer is relayed back to the sender ([`super::relay`]); past [`MAX_HOPS`] it is refused
//! (`node_unavailable: forward limit`) rather than bounced forever between disagreeing rings.
//! Two nodes starting the same id concurrently both reach the owner, whose ChildSupervisor
//! accepts the first and refuses the second: one child.
//!
//! Failures cross the wire as `ChildFailure { reason: code, message: the error as JSON }`, so
//! the origin gets back the same typed error the owner produced.

use std::collections::BTreeMap;

use ractor::ActorRef;

use super::cluster::MAX_HOPS;
use super::CoordinatorState;
use crate::cluster::wire::{self, RequestId, StartItem, StartedChild, WireMsg};
use crate::core::handover::HANDOVER_METADATA_KEY;
use crate::hooks::{HookEvent, HookKey};
use crate::hub::protocol::{
    ClusterMsg, CoordinatorMsg, NodeStartReport, NodeStopReport, RegistryOp, StartBatch,
    StartReply, StopBatch, StopReply,
};
use crate::model::{validate_stored_child, ChildId, NodeName};
use crate::telemetry::refusals::Refusal;
use crate::types::{ChildStartError, ChildStopError};

fn code_of<E: serde::Serialize>(e: &E) -> (String, String) {
    let json = serde_json::to_value(e).unwrap_or_default();
    let code = json
        .get("code")
        .and_then(|c| c.as_str())
        .unwrap_or("error")
        .to_owned();
    (code, json.to_string())
}

/// A start error as it crosses the wire.
pub(crate) fn start_failure(
    id: ChildId,
    node: &NodeName,
    e: &ChildStartError,
) -> wire::ChildFailure {
    let (reason, message) = code_of(e);
    wire::ChildFailure {
        id,
        node: node.clone(),
        reason,
        message,
    }
}

/// The typed start error back from the wire (an unknown shape keeps its code and text).
pub(crate) fn start_error(f: &wire::ChildFailure) -> ChildStartError {
    serde_json::from_str(&f.message).unwrap_or_else(|_| ChildStartError::NodeUnavailable {
        reason: format!("{}: {}", f.reason, f.message),
    })
}

fn stop_failure(id: ChildId, node: &NodeName, e: &ChildStopError) -> wire::ChildFailure {
    let (reason, message) = code_of(e);
    wire::ChildFailure {
        id,
        node: node.clone(),
        reason,
        message,
    }
}

fn stop_error(f: &wire::ChildFailure) -> ChildStopError {
    serde_json::from_str(&f.message).unwrap_or_else(|_| ChildStopError::NodeUnavailable {
        reason: format!("{}: {}", f.reason, f.message),
    })
}

impl CoordinatorState {
    /// A message from peer `from`.
    pub(super) fn on_wire(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        from: NodeName,
        msg: WireMsg,
    ) {
        match msg {
            msg @ (WireMsg::StartReply { .. } | WireMsg::ChildCallReply { .. })
                if self.is_forward_reply(&msg) =>
            {
                self.relay_reply(&from, msg);
            }
            WireMsg::StartChildren {
                request_id,
                reply_to,
                hops,
                check_existing,
                children,
            } => {
                // The origin's request, as seen here: its `request_id` and `origin` tie this
                // span to the origin's `process_hub.start`.
                let span = tracing::info_span!(
                    "process_hub.start_batch",
                    otel.name = "process_hub.start_batch",
                    otel.kind = "server",
                    hub = %self.hub.config.hub_id,
                    node = %self.hub.node,
                    request_id = request_id.0,
                    origin = %reply_to,
                    children = children.len(),
                    hops,
                );
                let _entered = span.enter();
                self.on_start_children(myself, request_id, reply_to, hops, check_existing, children)
            }
            WireMsg::StartReply {
                request_id,
                started,
                errors,
            } => {
                let started = started.into_iter().map(|s| (s.id, s.node, s.pid)).collect();
                let errors = errors
                    .iter()
                    .map(|f| (f.id.clone(), f.node.clone(), start_error(f)))
                    .collect();
                self.on_start_outcome(myself, request_id.0, started, errors);
            }
            WireMsg::StopChildren {
                request_id,
                reply_to,
                ids,
            } => self.on_stop_children(myself, request_id, reply_to, ids),
            WireMsg::StopReply {
                request_id,
                stopped,
                errors,
            } => {
                let report = NodeStopReport {
                    node: from,
                    stopped: stopped.into_iter().map(|(id, _)| id).collect(),
                    errors: errors
                        .iter()
                        .map(|f| (f.id.clone(), stop_error(f)))
                        .collect(),
                };
                self.on_node_stopped(myself, request_id.0, report);
            }
            WireMsg::Goodbye => {
                // The peer hands its children over and leaves: take it out of the ring now (so
                // nobody migrates children back to it) and skip the grace when it goes down.
                if let Some(cluster) = &mut self.cluster {
                    tracing::info!(peer = %from, "peer is leaving");
                    cluster.leaving.insert(from.clone());
                    cluster.ring.remove(&from);
                    // Tell it whether this node leaves too, so it hands nothing to it.
                    let ack = WireMsg::GoodbyeAck {
                        leaving: cluster.self_leaving,
                    };
                    if let Err(e) = cluster.transport.send(&from, &ack) {
                        tracing::debug!(peer = %from, error = %e, "goodbye not answered");
                    }
                }
                self.publish_membership();
            }
            WireMsg::GoodbyeAck { leaving } => self.on_goodbye_ack(myself, from, leaving),
            WireMsg::Reachability { records } => self.on_reach_records(myself, from, records),
            WireMsg::ReachDigest { digest, reply } => self.on_reach_digest(from, digest, reply),
            WireMsg::Rebalance { to, count } => self.rebalance_out(myself, &from, to, count),
            WireMsg::ChildCast { id, payload, hops } => self.child_cast(id, payload, hops),
            WireMsg::ChildCall {
                request_id,
                reply_to,
                id,
                payload,
                hops,
            } => self.remote_child_call(myself, request_id, reply_to, id, payload, hops),
            WireMsg::ChildCallReply { request_id, result } => {
                self.child_call_done(request_id.0, result)
            }
            // The inbox hands every other message to the actor that owns it.
            other => {
                tracing::debug!(peer = %from, kind = other.kind(), "not a Coordinator message")
            }
        }
    }

    /// Whether this node refuses a peer's start of `item` (from `origin`) that names it,
    /// because its own row places the child elsewhere in a way the start cannot be newer than
    /// (`core::replication::refuse_start_placed_elsewhere`: seeds 5067 and 5407 of the
    /// simulator under gossip, where such starts authored old placements over newer ones).
    fn placed_elsewhere(&self, item: &StartItem, origin: &NodeName) -> bool {
        use crate::core::guided::Guided;
        use crate::core::replication::{refuse_start_placed_elsewhere, KnownPlacement};
        let Some(cluster) = &self.cluster else {
            return false;
        };
        let Some(row) = self.hub.storage.get(&item.spec.id) else {
            return false;
        };
        let (Some(known), Some(asked)) = (Guided::of(&row.metadata), Guided::of(&item.metadata))
        else {
            return false;
        };
        let owners = self
            .hub
            .owners_of(&cluster.ring, &item.spec.id, Some(&row.metadata));
        let placement = KnownPlacement {
            nodes: &known.nodes,
            author: &row.hub.changed_by,
            owners: &owners,
        };
        refuse_start_placed_elsewhere(&self.hub.node, origin, &asked.nodes, &placement, |n| {
            row.node_pids.contains_key(n)
        })
    }

    /// Whether `msg` answers a start or a call this node forwarded (see [`super::relay`]).
    fn is_forward_reply(&self, msg: &WireMsg) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|c| c.relay.is_forward_reply(msg))
    }

    /// Sends `msg` to `to`, or hands it to this Coordinator when `to` is this node.
    fn reply_start(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        to: &NodeName,
        request_id: RequestId,
        report: NodeStartReport,
    ) {
        if to == &self.hub.node {
            let _ = myself.cast(CoordinatorMsg::Cluster(ClusterMsg::StartOutcome {
                request_id: request_id.0,
                report,
            }));
            return;
        }
        if let Some(cluster) = &self.cluster {
            let msg = start_reply(request_id, report);
            if let Err(e) = cluster.transport.send(to, &msg) {
                tracing::debug!(origin = %to, error = %e, "start reply not sent (its link is down: the origin sees this node go down)");
            }
        }
    }

    fn on_start_children(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: RequestId,
        reply_to: NodeName,
        hops: u8,
        check_existing: bool,
        children: Vec<StartItem>,
    ) {
        let local = self.hub.node.clone();
        let durable = children
            .iter()
            .filter(|i| i.durable)
            .map(|i| i.spec.id.clone())
            .collect();
        let mut here = Vec::new();
        let mut forward: BTreeMap<NodeName, Vec<StartItem>> = BTreeMap::new();
        let mut refused = Vec::new();
        let mut announce = Vec::new();
        for item in children {
            if let Err(e) = validate_stored_child(&item.spec, &item.metadata) {
                tracing::warn!(peer = %reply_to, error = %e, "invalid child in a peer's start refused");
                self.hub.refusals.count(Refusal::InvalidChild);
                refused.push((item.spec.id, ChildStartError::from(e)));
                continue;
            }
            // A replica start comes to any of the child's owners, not only the first.
            let owners = match &self.cluster {
                Some(cluster) => {
                    self.hub
                        .owners_of(&cluster.ring, &item.spec.id, Some(&item.metadata))
                }
                None => vec![local.clone()],
            };
            let owner = owners.first().cloned().unwrap_or_else(|| local.clone());
            if owners.contains(&local) && self.placed_elsewhere(&item, &reply_to) {
                tracing::debug!(peer = %reply_to, child = %item.spec.id, "start refused: this node's row places the child elsewhere");
                announce.push(RegistryOp::Announce {
                    id: item.spec.id.clone(),
                });
                refused.push((
                    item.spec.id,
                    ChildStartError::NodeUnavailable {
                        reason: "this node's row places the child on other nodes".into(),
                    },
                ));
            } else if owners.contains(&local) {
                here.push((item.spec, item.metadata));
            } else if hops >= MAX_HOPS {
                refused.push((
                    item.spec.id,
                    ChildStartError::NodeUnavailable {
                        reason: "forward limit reached (nodes disagree about the owner)".into(),
                    },
                ));
            } else {
                forward.entry(owner).or_default().push(item);
            }
        }
        if !announce.is_empty() {
            self.registry_write(myself, announce, None);
        }
        if !refused.is_empty() {
            let report = NodeStartReport {
                node: local.clone(),
                started: Vec::new(),
                errors: refused,
            };
            self.reply_start(myself, &reply_to, request_id, report);
        }
        for (owner, items) in forward {
            tracing::debug!(owner = %owner, children = items.len(), hops, "forwarding starts to their owner");
            self.hub.hooks.fire(HookKey::ForwardedMigration, || {
                HookEvent::ForwardedMigration {
                    to: owner.clone(),
                    ids: items.iter().map(|i| i.spec.id.clone()).collect(),
                }
            });
            // Proxied (`relay`): the owner answers this node, which relays to `reply_to`
            // over the link the starts came through.
            let forward_id = self.next_id();
            let msg = WireMsg::StartChildren {
                request_id: RequestId(forward_id),
                reply_to: local.clone(),
                hops: hops + 1,
                check_existing,
                children: items.clone(),
            };
            let ttl = self.forward_ttl();
            let sent = self.cluster.as_mut().map(|c| {
                // A hot move's state goes ahead of its start (same link, in order).
                for item in &items {
                    let Some(digest) = item.metadata.get(HANDOVER_METADATA_KEY) else {
                        continue;
                    };
                    if let Some(state) = self.hub.take_import(&item.spec.id, digest) {
                        let id = item.spec.id.clone();
                        let _ = c
                            .transport
                            .send(&owner, &WireMsg::HandoverState { id, state });
                    }
                }
                let sent = c.transport.send(&owner, &msg);
                if sent.is_ok() {
                    let ids = items.iter().map(|i| i.spec.id.clone()).collect();
                    c.relay.forwarded(
                        forward_id,
                        reply_to.clone(),
                        request_id,
                        owner.clone(),
                        ids,
                        ttl,
                    );
                }
                sent
            });
            if let Some(Err(e)) = sent {
                let reason = e.to_string();
                let report = NodeStartReport {
                    node: owner.clone(),
                    started: Vec::new(),
                    errors: items
                        .into_iter()
                        .map(|i| {
                            let reason = reason.clone();
                            (i.spec.id, ChildStartError::NodeUnavailable { reason })
                        })
                        .collect(),
                };
                self.reply_start(myself, &reply_to, request_id, report);
            }
        }
        if here.is_empty() {
            return;
        }
        let transport = self.cluster.as_ref().map(|c| c.transport.clone());
        let coordinator = myself.clone();
        let reply: StartReply = if reply_to == local {
            Box::new(move |report| {
                let _ = coordinator.cast(CoordinatorMsg::Cluster(ClusterMsg::StartOutcome {
                    request_id: request_id.0,
                    report,
                }));
            })
        } else {
            Box::new(move |report| {
                if let Some(transport) = transport {
                    if let Err(e) = transport.send(&reply_to, &start_reply(request_id, report)) {
                        tracing::debug!(origin = %reply_to, error = %e, "start reply not sent");
                    }
                }
            })
        };
        self.hub.deliver_start(
            &local,
            StartBatch {
                children: here,
                existing_ok: !check_existing,
                durable,
                reply,
            },
        );
    }

    fn on_stop_children(
        &mut self,
        _myself: &ActorRef<CoordinatorMsg>,
        request_id: RequestId,
        reply_to: NodeName,
        ids: Vec<ChildId>,
    ) {
        let transport = self.cluster.as_ref().map(|c| c.transport.clone());
        let reply: StopReply = Box::new(move |report: NodeStopReport| {
            let node = report.node.clone();
            let msg = WireMsg::StopReply {
                request_id,
                stopped: report
                    .stopped
                    .into_iter()
                    .map(|id| (id, node.clone()))
                    .collect(),
                errors: report
                    .errors
                    .iter()
                    .map(|(id, e)| stop_failure(id.clone(), &node, e))
                    .collect(),
            };
            if let Some(transport) = transport {
                if let Err(e) = transport.send(&reply_to, &msg) {
                    tracing::debug!(origin = %reply_to, error = %e, "stop reply not sent");
                }
            }
        });
        let batch = StopBatch {
            ids,
            reply,
            release: false,
        };
        self.hub.deliver_stop(&self.hub.node, batch);
    }
}

fn start_reply(request_id: RequestId, report: NodeStartReport) -> WireMsg {
    let node = report.node;
    WireMsg::StartReply {
        request_id,
        started: report
            .started
            .into_iter()
            .map(|(id, pid)| StartedChild {
                id,
                node: node.clone(),
                pid,
            })
            .collect(),
        errors: report
            .errors
            .iter()
            .map(|(id, e)| start_failure(id.clone(), &node, e))
            .collect(),
    }
}
