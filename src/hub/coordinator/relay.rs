//! Requests this node waits on for someone else, and their failure when a peer goes down.
//!
//! **Forwarded starts are proxied.** A node that receives starts for children it does not own
//! (its ring differs from the sender's, typically while the cluster is forming) forwards them to
//! the owner under a request id of its own with itself as `reply_to`, and relays the owner's
//! answer back to the node it got the starts from. The answer thus travels back over the links
//! the request came through, both known to be up, rather than over a direct owner → origin link
//! that may not exist yet (the cluster is still forming) or may be cut: such a reply used to be
//! dropped and the origin learned only at its `default_timeout`. The forwarder also sees the
//! owner go down and answers `node_unavailable` for what it forwarded at once, where the origin,
//! which only knows the forwarder, could not.
//!
//! **Child calls** record the peer they were sent to, so a call waiting on a peer that goes down
//! fails `unreachable` at once instead of at the caller's timeout. Forwarded calls are proxied
//! like forwarded starts, for the same reasons.
//!
//! Everything here is bookkeeping of the Coordinator's cluster state; membership
//! (`on_node_down`) calls [`CoordinatorState::fail_relayed_on`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use super::messaging::{self, answer_call};
use super::CoordinatorState;
use crate::cluster::wire::{RequestId, StartedChild, WireMsg};
use crate::model::{ChildId, NodeName};
use crate::types::ChildStartError;

/// A forwarded start is forgotten after this many `default_timeout`s without an answer: only a
/// memory bound (the origin gave up long before), never a behaviour.
const FORWARD_TTL_TIMEOUTS: u32 = 10;

/// Starts this node forwarded to their owner, waiting for the owner's answer.
struct Forward {
    /// The node that sent the starts here, and its request id.
    origin: NodeName,
    origin_request: RequestId,
    /// The node they were forwarded to.
    owner: NodeName,
    /// Children not answered yet.
    awaiting: BTreeSet<ChildId>,
    since: Instant,
}

/// A child call this node forwarded to `next`, waiting for its answer.
struct CallForward {
    origin: NodeName,
    origin_request: RequestId,
    next: NodeName,
    id: ChildId,
    since: Instant,
}

/// What this node waits on for others: forwarded starts and calls, and the peers of child calls.
#[derive(Default)]
pub(crate) struct Relays {
    /// Forwarded starts by the request id this node gave them.
    forwards: BTreeMap<u64, Forward>,
    /// The peer each pending child call (`ClusterState::calls`) was sent to, and the child.
    call_peers: BTreeMap<u64, (NodeName, ChildId)>,
    /// Forwarded child calls by the request id this node gave them.
    call_forwards: BTreeMap<u64, CallForward>,
}

impl Relays {
    /// Requests this node relays or waits on for someone else.
    pub fn len(&self) -> usize {
        self.forwards.len() + self.call_peers.len() + self.call_forwards.len()
    }

    /// Records starts forwarded to `owner` under `request_id` (this node's id) on behalf of
    /// `origin`'s `origin_request`.
    pub fn forwarded(
        &mut self,
        request_id: u64,
        origin: NodeName,
        origin_request: RequestId,
        owner: NodeName,
        awaiting: BTreeSet<ChildId>,
        ttl: Duration,
    ) {
        let now = Instant::now();
        self.forwards
            .retain(|_, f| now.saturating_duration_since(f.since) < ttl);
        self.forwards.insert(
            request_id,
            Forward {
                origin,
                origin_request,
                owner,
                awaiting,
                since: now,
            },
        );
    }

    /// Records a call for `id` forwarded to `next` under `request_id` (this node's id) on
    /// behalf of `origin` (its node and request id).
    pub fn call_forwarded(
        &mut self,
        request_id: u64,
        origin: (NodeName, RequestId),
        next: NodeName,
        id: ChildId,
        ttl: Duration,
    ) {
        let now = Instant::now();
        self.call_forwards
            .retain(|_, f| now.saturating_duration_since(f.since) < ttl);
        let (origin, origin_request) = origin;
        self.call_forwards.insert(
            request_id,
            CallForward {
                origin,
                origin_request,
                next,
                id,
                since: now,
            },
        );
    }

    /// Whether `msg` answers a start or a call this node forwarded (it is relayed, not
    /// consumed).
    pub fn is_forward_reply(&self, msg: &WireMsg) -> bool {
        match msg {
            WireMsg::StartReply { request_id, .. } => self.forwards.contains_key(&request_id.0),
            WireMsg::ChildCallReply { request_id, .. } => {
                self.call_forwards.contains_key(&request_id.0)
            }
            _ => false,
        }
    }

    /// Records the peer a child call went to.
    pub fn call_sent(&mut self, request_id: u64, peer: NodeName, id: ChildId) {
        self.call_peers.insert(request_id, (peer, id));
    }

    /// Forgets a child call (answered or timed out).
    pub fn call_done(&mut self, request_id: u64) {
        self.call_peers.remove(&request_id);
    }
}

impl CoordinatorState {
    /// The forward TTL: a memory bound on forwarded starts nobody answers.
    pub(super) fn forward_ttl(&self) -> Duration {
        self.hub.config.default_timeout() * FORWARD_TTL_TIMEOUTS
    }

    /// Relays the answer to a forwarded start (`StartReply`) or call (`ChildCallReply`) back to
    /// the node it came from, under that node's request id. Does nothing when `msg` answers
    /// nothing this node forwarded (checked by the caller).
    pub(super) fn relay_reply(&mut self, from: &NodeName, msg: WireMsg) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let (request_id, started, errors) = match msg {
            WireMsg::StartReply {
                request_id,
                started,
                errors,
            } => (request_id, started, errors),
            WireMsg::ChildCallReply { request_id, result } => {
                let Some(forward) = cluster.relay.call_forwards.remove(&request_id.0) else {
                    return;
                };
                let reply = WireMsg::ChildCallReply {
                    request_id: forward.origin_request,
                    result,
                };
                if let Err(e) = cluster.transport.send(&forward.origin, &reply) {
                    tracing::debug!(next = %from, origin = %forward.origin, error = %e, "forwarded call reply not relayed");
                }
                return;
            }
            _ => return,
        };
        let Some(forward) = cluster.relay.forwards.get_mut(&request_id.0) else {
            return;
        };
        for id in started
            .iter()
            .map(|s| &s.id)
            .chain(errors.iter().map(|f| &f.id))
        {
            forward.awaiting.remove(id);
        }
        let origin = forward.origin.clone();
        let reply = WireMsg::StartReply {
            request_id: forward.origin_request,
            started,
            errors,
        };
        if forward.awaiting.is_empty() {
            cluster.relay.forwards.remove(&request_id.0);
        }
        if let Err(e) = cluster.transport.send(&origin, &reply) {
            // The origin's link is down: it sees this node go down and fails the starts itself.
            tracing::debug!(owner = %from, %origin, error = %e, "forwarded start reply not relayed");
        }
    }

    /// Fails at once what this node waits on from `node`, which went down: starts it forwarded
    /// there (answered `node_unavailable` to their origin), child calls sent or forwarded there
    /// (answered `unreachable`); and forgets what it forwarded for `node` (nobody to answer).
    pub(super) fn fail_relayed_on(&mut self, node: &NodeName) {
        let local = self.hub.node.clone();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let relay = &mut cluster.relay;
        for (_, forward) in take_where(&mut relay.forwards, |f| {
            &f.owner == node || &f.origin == node
        }) {
            if &forward.origin == node {
                continue;
            }
            let reason = format!("node {node} went down");
            let errors = forward
                .awaiting
                .into_iter()
                .map(|id| {
                    let e = ChildStartError::NodeUnavailable {
                        reason: reason.clone(),
                    };
                    super::from_peers::start_failure(id, node, &e)
                })
                .collect();
            let reply = WireMsg::StartReply {
                request_id: forward.origin_request,
                started: Vec::<StartedChild>::new(),
                errors,
            };
            tracing::debug!(owner = %node, origin = %forward.origin, "forwarded starts failed: their owner went down");
            if let Err(e) = cluster.transport.send(&forward.origin, &reply) {
                tracing::debug!(origin = %forward.origin, error = %e, "forwarded start failure not relayed");
            }
        }
        for (_, forward) in take_where(&mut relay.call_forwards, |f| {
            &f.next == node || &f.origin == node
        }) {
            if &forward.origin == node {
                continue;
            }
            let failed = messaging::failure(
                node,
                Some(&forward.id),
                "unreachable",
                &format!("node {node} went down (seen from {local})"),
            );
            let reply = WireMsg::ChildCallReply {
                request_id: forward.origin_request,
                result: Err(failed),
            };
            if let Err(e) = cluster.transport.send(&forward.origin, &reply) {
                tracing::debug!(origin = %forward.origin, error = %e, "forwarded call failure not relayed");
            }
        }
        for (request_id, (_, child)) in take_where(&mut relay.call_peers, |(peer, _)| peer == node)
        {
            if let Some((reply, timer)) = cluster.calls.remove(&request_id) {
                if let Some(t) = timer {
                    t.abort();
                }
                answer_call(
                    reply,
                    Err(messaging::failure(
                        node,
                        Some(&child),
                        "unreachable",
                        &format!("node {node} went down (seen from {local})"),
                    )),
                );
            }
        }
    }
}

/// Removes and returns the entries of `map` that `pred` selects (`BTreeMap::extract_if` needs a
/// newer Rust than this crate's minimum).
fn take_where<V>(map: &mut BTreeMap<u64, V>, pred: impl Fn(&V) -> bool) -> Vec<(u64, V)> {
    let ids: Vec<u64> = map
        .iter()
        .filter(|(_, v)| pred(v))
        .map(|(id, _)| *id)
        .collect();
    ids.into_iter()
        .filter_map(|id| map.remove(&id).map(|v| (id, v)))
        .collect()
}
