//! Messages to a child by id, from any node, routed through the hubs.
//!
//! The alternative, ractor_cluster's remotable actors, gives every node an eager proxy per
//! child (~11.8 KB each, measured; `docs/cluster.md`): 23.6 KB per child on 3 nodes. Routing
//! costs nothing per child: the sender's hub finds where the child runs (this node, a node its
//! registry names, else the ring owner) and sends `ChildCast` / `ChildCall` to that hub, which
//! hands the payload to the kind's command handler (`ChildKinds::register_command`) for its
//! local child. A hub that does not run the child forwards once more (bounded by `MAX_HOPS`),
//! under its own request id, and relays the answer back ([`super::relay`]).
//! Failures come back as `ChildFailure`s with a code: `not_found`, `between_nodes` (retryable:
//! the child's host is down within its grace or it is being moved; `node` names the registry's
//! host), `no_command_handler`, `command_failed`, `timeout`, `forward_limit`,
//! `hub_unavailable`, `unreachable`.

use std::time::Duration;

use ractor::ActorRef;

use super::cluster::MAX_HOPS;
use super::CoordinatorState;
use crate::cluster::wire::{ChildFailure, RequestId, WireMsg};
use crate::core::child_route::{route_child, Asking, ChildRoute, Known};
use crate::core::handover::{HeldCast, HoldOutcome};
use crate::hub::protocol::{ChildCallReplyPort, ClusterMsg, CoordinatorMsg};
use crate::hub::shared::MAX_CONCURRENT_COMMANDS;
use crate::model::{ChildId, NodeName};
use crate::telemetry::refusals::Refusal;

/// Answers a child call (the wire's failure becomes the API's error).
pub(super) fn answer_call(reply: ChildCallReplyPort, result: Result<Vec<u8>, ChildFailure>) {
    let _ = reply.send(result.map_err(Into::into));
}

/// A failure with a code.
pub(crate) fn failure(
    node: &NodeName,
    id: Option<&ChildId>,
    code: &str,
    message: &str,
) -> ChildFailure {
    ChildFailure {
        id: id.cloned().unwrap_or_else(|| ChildId::from("-")),
        node: node.clone(),
        reason: code.to_owned(),
        message: message.to_owned(),
    }
}

/// Where a message for `id` goes from here.
enum Route {
    Here,
    Peer(NodeName),
    /// The child exists but no reachable node runs it now (its host is down within the
    /// grace, or it is being moved): answered `between_nodes`, naming the registry's host.
    BetweenNodes(Option<NodeName>),
    Nowhere,
}

impl CoordinatorState {
    fn route(&self, id: &ChildId, asking: Asking) -> Route {
        match self.hub.replica_route(id, asking) {
            Some(ChildRoute::Here) => return Route::Here,
            Some(ChildRoute::Peer(node)) if self.cluster.is_some() => return Route::Peer(node),
            _ => {}
        }
        let here = self.hub.local_children.contains_key(id);
        let Some(cluster) = &self.cluster else {
            return if here { Route::Here } else { Route::Nowhere };
        };
        let row = self.hub.storage.get(id);
        let known = match &row {
            Some(row) => Known::Bound(row.node_pids.keys().cloned().collect()),
            None => Known::Unknown,
        };
        let owner = self.placement_of(id, row.as_ref().map(|r| &r.metadata));
        match route_child(
            here,
            &known,
            &self.hub.node,
            &owner,
            |n| cluster.peers.contains(n),
            asking,
        ) {
            ChildRoute::Here => Route::Here,
            ChildRoute::Peer(node) => Route::Peer(node),
            ChildRoute::BetweenNodes { host } => Route::BetweenNodes(host),
            ChildRoute::NotFound => Route::Nowhere,
        }
    }

    /// The `between_nodes` failure: retryable, naming the host the registry gives.
    fn between_nodes(&self, id: &ChildId, host: Option<NodeName>) -> ChildFailure {
        let node = host.unwrap_or_else(|| self.hub.node.clone());
        failure(
            &node,
            Some(id),
            "between_nodes",
            "the child's node is down or the child is being moved; retry shortly",
        )
    }

    /// Runs the kind's handler on the local child; `done` gets the outcome (in a task: the
    /// Coordinator never waits on a child).
    fn run_here(
        &self,
        id: &ChildId,
        payload: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, ChildFailure>) + Send + 'static,
    ) {
        let node = self.hub.node.clone();
        let cell = self.hub.local_children.get(id).map(|c| c.value().clone());
        let kind = self.hub.storage.get(id).map(|r| r.spec.kind);
        let (Some(cell), Some(kind)) = (cell, kind) else {
            return done(Err(failure(
                &node,
                Some(id),
                "not_found",
                "no such child here",
            )));
        };
        let Some(handler) = self.hub.kinds.command(&kind) else {
            return done(Err(failure(
                &node,
                Some(id),
                "no_command_handler",
                &format!("kind {kind:?} has no command handler"),
            )));
        };
        // One task per message: bounded, so a flood of casts or calls (a peer's, most likely)
        // is refused rather than queued without limit.
        let Ok(slot) = self.hub.command_slots.clone().try_acquire_owned() else {
            tracing::warn!(child = %id, limit = MAX_CONCURRENT_COMMANDS, "child message refused: too many in flight");
            self.hub.refusals.count(Refusal::Overloaded);
            return done(Err(failure(
                &node,
                Some(id),
                "overloaded",
                &format!("{MAX_CONCURRENT_COMMANDS} child messages are in flight on this node"),
            )));
        };
        let id = id.clone();
        tokio::spawn(async move {
            let outcome = handler(cell, payload)
                .await
                .map_err(|e| failure(&node, Some(&id), "command_failed", &e));
            drop(slot);
            done(outcome);
        });
    }

    /// A cast to child `id` (from the handle with `hops == 0`, or from a peer).
    pub(super) fn child_cast(&mut self, id: ChildId, payload: Vec<u8>, hops: u8) {
        let route = self.route(
            &id,
            if hops == 0 {
                Asking::Origin
            } else {
                Asking::Answering
            },
        );
        // Moving away (hot swap): held for the new instance, or sent on to it.
        let payload = if matches!(route, Route::Here) {
            payload
        } else {
            match self.hub.hold_cast(&id, HeldCast::Bytes { payload }) {
                Err(HeldCast::Bytes { payload }) => payload,
                Ok(HoldOutcome::Forward {
                    to,
                    cast: HeldCast::Bytes { payload },
                }) if hops < MAX_HOPS => {
                    return self.send_child_cast(&to, id, payload, hops + 1);
                }
                _ => return,
            }
        };
        match route {
            Route::Here => self.run_here(&id, payload, |outcome| {
                if let Err(e) = outcome {
                    tracing::debug!(child = %e.id, code = %e.reason, "child cast failed");
                }
            }),
            Route::Peer(node) if hops < MAX_HOPS => {
                self.send_child_cast(&node, id, payload, hops + 1)
            }
            _ => tracing::debug!(child = %id, "child cast dropped: no node runs the child"),
        }
    }

    /// Sends a cast by bytes to `node`'s hub.
    pub(super) fn send_child_cast(&self, node: &NodeName, id: ChildId, payload: Vec<u8>, hops: u8) {
        if let Some(cluster) = &self.cluster {
            let msg = WireMsg::ChildCast { id, payload, hops };
            if let Err(e) = cluster.transport.send(node, &msg) {
                tracing::debug!(peer = %node, error = %e, "child cast not sent");
            }
        }
    }

    /// A call to child `id` from the handle.
    pub(super) fn child_call(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        id: ChildId,
        payload: Vec<u8>,
        timeout: Duration,
        reply: ChildCallReplyPort,
    ) {
        let node = self.hub.node.clone();
        match self.route(&id, Asking::Origin) {
            Route::Here => self.run_here(&id, payload, move |outcome| {
                answer_call(reply, outcome);
            }),
            Route::Nowhere => {
                answer_call(
                    reply,
                    Err(failure(
                        &node,
                        Some(&id),
                        "not_found",
                        "no node runs the child",
                    )),
                );
            }
            Route::BetweenNodes(host) => {
                answer_call(reply, Err(self.between_nodes(&id, host)));
            }
            Route::Peer(peer) => {
                let request_id = self.next_id();
                let msg = WireMsg::ChildCall {
                    request_id: RequestId(request_id),
                    reply_to: node.clone(),
                    id: id.clone(),
                    payload,
                    hops: 1,
                };
                let Some(cluster) = &mut self.cluster else {
                    return;
                };
                if let Err(e) = cluster.transport.send(&peer, &msg) {
                    answer_call(
                        reply,
                        Err(failure(&peer, Some(&id), "unreachable", &e.to_string())),
                    );
                    return;
                }
                let timer = myself.send_after(timeout, move || {
                    CoordinatorMsg::Cluster(ClusterMsg::CallTimeout { request_id })
                });
                cluster.calls.insert(request_id, (reply, Some(timer)));
                cluster.relay.call_sent(request_id, peer, id);
            }
        }
    }

    /// A call from a peer: run it here, or forward it once more.
    pub(super) fn remote_child_call(
        &mut self,
        _myself: &ActorRef<CoordinatorMsg>,
        request_id: RequestId,
        reply_to: NodeName,
        id: ChildId,
        payload: Vec<u8>,
        hops: u8,
    ) {
        let Some(transport) = self.cluster.as_ref().map(|c| c.transport.clone()) else {
            return;
        };
        let node = self.hub.node.clone();
        let route = self.route(&id, Asking::Answering);
        if let Route::Peer(peer) = &route {
            if hops < MAX_HOPS {
                // The child runs elsewhere (it moved): forward under this node's own request
                // id and relay the answer back (`relay`), like a forwarded start.
                let forward_id = self.next_id();
                let msg = WireMsg::ChildCall {
                    request_id: RequestId(forward_id),
                    reply_to: node.clone(),
                    id: id.clone(),
                    payload,
                    hops: hops + 1,
                };
                match transport.send(peer, &msg) {
                    Ok(()) => {
                        let ttl = self.forward_ttl();
                        if let Some(cluster) = &mut self.cluster {
                            let origin = (reply_to, request_id);
                            cluster
                                .relay
                                .call_forwarded(forward_id, origin, peer.clone(), id, ttl);
                        }
                        return;
                    }
                    Err(e) => {
                        // Not forwarded: the origin is told now rather than at its timeout.
                        tracing::debug!(peer = %peer, error = %e, "child call not forwarded");
                        let failed = failure(peer, Some(&id), "unreachable", &e.to_string());
                        let msg = WireMsg::ChildCallReply {
                            request_id,
                            result: Err(failed),
                        };
                        if let Err(e) = transport.send(&reply_to, &msg) {
                            tracing::debug!(origin = %reply_to, error = %e, "child call failure not sent");
                        }
                        return;
                    }
                }
            }
        }
        let answer = move |result: Result<Vec<u8>, ChildFailure>| {
            let msg = WireMsg::ChildCallReply { request_id, result };
            if let Err(e) = transport.send(&reply_to, &msg) {
                tracing::debug!(origin = %reply_to, error = %e, "child call reply not sent");
            }
        };
        match route {
            Route::Here => self.run_here(&id, payload, answer),
            Route::Peer(_) => answer(Err(failure(
                &node,
                Some(&id),
                "forward_limit",
                "too many hops",
            ))),
            Route::BetweenNodes(host) => answer(Err(self.between_nodes(&id, host))),
            Route::Nowhere => answer(Err(failure(
                &node,
                Some(&id),
                "not_found",
                "no node runs the child",
            ))),
        }
    }

    pub(super) fn child_call_timeout(&mut self, request_id: u64) {
        let node = self.hub.node.clone();
        if let Some(cluster) = &mut self.cluster {
            cluster.relay.call_done(request_id);
            if let Some((reply, _)) = cluster.calls.remove(&request_id) {
                answer_call(
                    reply,
                    Err(failure(
                        &node,
                        None,
                        "timeout",
                        "the child did not answer in time",
                    )),
                );
            }
        }
    }

    pub(super) fn child_call_done(
        &mut self,
        request_id: u64,
        result: Result<Vec<u8>, ChildFailure>,
    ) {
        if let Some(cluster) = &mut self.cluster {
            cluster.relay.call_done(request_id);
            if let Some((reply, timer)) = cluster.calls.remove(&request_id) {
                if let Some(t) = timer {
                    t.abort();
                }
                answer_call(reply, result);
            }
        }
    }
}
