//! Typed messages to children by id, from any node: the host's side, and where a sender
//! routes (shared by `ChildRef`, monitors and the inbox).
//!
//! A typed message crosses the wire as ractor's `SerializedMessage` (its variant's name and
//! its fields' bytes): `#[derive(ChildMessage)]` encodes serde fields (`api::child_codec`), and
//! a message type made for ractor_cluster (`BytesConvertable` fields) works unchanged. The sender encodes it and sends the frame itself; the host's wire inbox decodes
//! it with the child's kind ([`crate::kinds::ChildKinds`] captured the type at registration)
//! and hands it to the child's mailbox. No actor of the hub sits on the path: a cast is one
//! frame, a call one frame each way.
//!
//! - **Casts** keep their order per sender while the child stays on one node (one FIFO link,
//!   one mailbox). A host that does not run the child forwards the cast where its registry says
//!   (at most [`MAX_HOPS`] hops); a cast nobody can deliver is dropped and logged.
//! - **Calls** are answered by the host, never forwarded: a host that does not run the child
//!   answers `moved` (naming where its registry says) or `not_found`, and the caller's
//!   `ChildRef` retries within its timeout. A call waits for the child in a task of its own,
//!   bounded by the caller's timeout and by [`MAX_CONCURRENT_COMMANDS`] per node (beyond it:
//!   `overloaded`); a reply above the frame budget is answered `too_large`.
//!
//! The inbox may be called under the transport's lock, so everything that sends from here does
//! so from a task. The calls this node waits on are [`calls`], a leaf `HubShared` holds.

pub(crate) mod calls;

use std::sync::Arc;
use std::time::Duration;

use ractor::message::SerializedMessage;
use ractor::RpcReplyPort;

use super::monitors::table::WatchOutcome;
use super::shared::{HubShared, MAX_CONCURRENT_COMMANDS};
use super::simulation::InjectedBug;
use crate::cluster::wire::budget::FRAME_BUDGET_BYTES;
use crate::cluster::wire::{ChildFailure, RequestId, WireMsg};
use crate::core::child_route::{retry_pause_ms, route_child, Asking, ChildRoute, Known};
use crate::core::handover::{HeldCast, HoldOutcome};
use crate::kinds::DeliverError;
use crate::model::{ChildId, DownReason, NodeName};
use crate::telemetry::refusals::Refusal;
use crate::types::ChildRefError;

/// Forwarding bound of a typed cast.
pub(crate) const MAX_HOPS: u8 = 3;

/// The longest a host waits for a child to answer a peer's call, whatever the caller asked.
const MAX_CALL_WAIT: Duration = Duration::from_secs(3600);

impl HubShared {
    /// Where a message to child `id` goes from this node now; `asking` says whether this
    /// node originates it (it may ask the ring owner) or answers a peer.
    pub fn route_child(&self, id: &ChildId, asking: Asking) -> ChildRoute {
        if let Some(route) = self.replica_route(id, asking) {
            return route;
        }
        let here = self.local_children.contains_key(id);
        if here {
            return ChildRoute::Here;
        }
        let row = self.storage.get(id);
        let known = match &row {
            Some(row) => Known::Bound(row.node_pids.keys().cloned().collect()),
            None => Known::Unknown,
        };
        let owner = self.placement_of(&self.ring(), id, row.as_ref().map(|r| &r.metadata));
        // The published membership, not the transport's peers: the inbox routes under the
        // in-process router's lock, and asking the transport would take that lock again.
        route_child(
            false,
            &known,
            &self.node,
            &owner,
            |n| n != self.node && self.is_member(n),
            asking,
        )
    }

    /// With replicas, where a message this node originates goes: to the active replica
    /// (`core::replication`) when it is this node's running instance or a peer that is up.
    /// `None` leaves the choice to the single-instance rules (one instance, a peer's question,
    /// or no active replica reachable now).
    pub(crate) fn replica_route(&self, id: &ChildId, asking: Asking) -> Option<ChildRoute> {
        if self.config.replication_factor <= 1 || asking == Asking::Answering {
            return None;
        }
        let row = self.storage.get(id)?;
        let roles = self.replica_roles(&self.ring(), id, Some(&row.metadata), row.node_pids.keys());
        // The best-ranked reachable replica, whatever the model: in active-active every
        // replica is active, and messages still prefer the first owner.
        let (node, _) = roles
            .iter()
            .find(|(n, _)| *n == self.node || self.is_member(n))?;
        if *node == self.node {
            return self
                .local_children
                .contains_key(id)
                .then_some(ChildRoute::Here);
        }
        Some(ChildRoute::Peer(node.clone()))
    }

    /// The failure a host answers for a child it does not run (a call or a monitor that
    /// found no child here): `moved` naming the node its registry names, or `not_found`.
    fn not_here(&self, id: &ChildId) -> ChildFailure {
        let (reason, message) = match self.route_child(id, Asking::Answering) {
            ChildRoute::Peer(node) => ("moved", node),
            ChildRoute::BetweenNodes { host } => ("between_nodes", host.unwrap_or_default()),
            ChildRoute::Here | ChildRoute::NotFound => ("not_found", String::new()),
        };
        failure(&self.node, id, reason, &message)
    }
}

pub(crate) fn failure(node: &NodeName, id: &ChildId, code: &str, message: &str) -> ChildFailure {
    ChildFailure {
        id: id.clone(),
        node: node.clone(),
        reason: code.to_owned(),
        message: message.to_owned(),
    }
}

/// Hands a serialized message to local child `id`. The message goes into the mailbox while
/// the child's `local_children` entry is held, so a hot move that takes the child out of local
/// routing (`HubShared::begin_handoff`) waits for it and exports after it.
fn deliver_here(
    hub: &HubShared,
    id: &ChildId,
    message: SerializedMessage,
) -> Result<(), ChildFailure> {
    if !hub.local_children.contains_key(id) {
        return Err(hub.not_here(id));
    }
    let kind = hub.storage.get(id).map(|r| r.spec.kind).unwrap_or_default();
    let Some(deliver) = hub.kinds.deliver(&kind) else {
        return Err(failure(
            &hub.node,
            id,
            "decode",
            &format!("kind {kind:?} is not registered here"),
        ));
    };
    let outcome = match hub.local_children.get(id) {
        Some(cell) => deliver(cell.value(), message),
        None => return Err(hub.not_here(id)),
    };
    outcome.map_err(|e| match e {
        DeliverError::Undecodable => {
            hub.refusals.count(Refusal::Undecodable);
            tracing::warn!(child = %id, %kind, "typed message refused: it does not decode as the kind's message type");
            failure(
            &hub.node,
            id,
            "decode",
            &format!("not a message of kind {kind:?}"),
        )
        }
        DeliverError::Gone => hub.not_here(id),
    })
}

/// Runs `f` in a task (the inbox must not send while the transport may hold its lock).
fn in_task(f: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move { f() });
        }
        Err(_) => tracing::warn!("typed message: no runtime to answer from"),
    }
}

/// A peer's typed cast: delivered here, or forwarded where the registry says.
pub(crate) fn on_cast(
    hub: &Arc<HubShared>,
    from: &NodeName,
    id: ChildId,
    variant: String,
    args: Vec<u8>,
    hops: u8,
) {
    if hub.has_bug(InjectedBug::DropTypedCasts) {
        return;
    }
    if hub.local_children.contains_key(&id) {
        let kind = hub
            .storage
            .get(&id)
            .map(|r| r.spec.kind)
            .unwrap_or_default();
        let Some(deliver) = hub.kinds.deliver(&kind) else {
            tracing::debug!(child = %id, %from, %kind, "typed cast not delivered: kind not registered here");
            return;
        };
        // Into the mailbox under the entry's lock (see `deliver_here`); a child taken out of
        // local routing meanwhile is moving: its cast is held below.
        if let Some(cell) = hub.local_children.get(&id) {
            let message = SerializedMessage::Cast {
                variant,
                args,
                metadata: None,
            };
            let outcome = deliver(cell.value(), message);
            drop(cell);
            match outcome {
                Ok(()) => {}
                Err(DeliverError::Undecodable) => {
                    hub.refusals.count(Refusal::Undecodable);
                    tracing::warn!(child = %id, %from, %kind, "typed cast refused: it does not decode as the kind's message type");
                }
                Err(e) => {
                    tracing::debug!(child = %id, %from, error = %e, "typed cast not delivered")
                }
            }
            return;
        }
    }
    // Moving away (hot swap): held for the new instance, or sent on to it.
    let (variant, args) = match hub.hold_cast(&id, HeldCast::Typed { variant, args }) {
        Err(HeldCast::Typed { variant, args }) => (variant, args),
        Err(HeldCast::Bytes { .. }) | Ok(HoldOutcome::Held | HoldOutcome::Full) => return,
        Ok(HoldOutcome::Forward {
            to,
            cast: HeldCast::Typed { variant, args },
        }) if hops < MAX_HOPS && &to != from => {
            return forward_cast(hub, to, id, variant, args, hops);
        }
        Ok(HoldOutcome::Forward { .. }) => return,
    };
    match hub.route_child(&id, Asking::Answering) {
        ChildRoute::Peer(next) if hops < MAX_HOPS && &next != from => {
            forward_cast(hub, next, id, variant, args, hops)
        }
        _ => tracing::debug!(child = %id, %from, "typed cast dropped: the child does not run here"),
    }
}

/// Sends a typed cast on to `next` (from a task: the inbox may hold the transport's lock).
fn forward_cast(
    hub: &Arc<HubShared>,
    next: NodeName,
    id: ChildId,
    variant: String,
    args: Vec<u8>,
    hops: u8,
) {
    let hub = hub.clone();
    in_task(move || {
        let msg = WireMsg::TypedCast {
            id,
            variant,
            args,
            hops: hops + 1,
        };
        if let Some(t) = hub.transport() {
            if let Err(e) = t.send(&next, &msg) {
                tracing::debug!(%next, error = %e, "typed cast not forwarded");
            }
        }
    });
}

/// A peer's typed call: handed to the local child, its answer sent back from a task.
pub(crate) fn on_call(
    hub: &Arc<HubShared>,
    from: NodeName,
    request_id: RequestId,
    id: ChildId,
    variant: String,
    args: Vec<u8>,
    timeout_ms: u64,
) {
    if hub.has_bug(InjectedBug::IgnoreTypedCalls) {
        return;
    }
    let answer = {
        let hub = hub.clone();
        move |result: Result<Vec<u8>, ChildFailure>| {
            let Some(t) = hub.transport() else { return };
            let msg = WireMsg::TypedReply { request_id, result };
            if let Err(e) = t.send(&from, &msg) {
                tracing::debug!(origin = %from, error = %e, "typed reply not sent");
            }
        }
    };
    let node = hub.node.clone();
    let Ok(slot) = hub.command_slots.clone().try_acquire_owned() else {
        tracing::warn!(child = %id, limit = MAX_CONCURRENT_COMMANDS, "typed call refused: too many in flight");
        hub.refusals.count(Refusal::Overloaded);
        let f = failure(&node, &id, "overloaded", "");
        return in_task(move || answer(Err(f)));
    };
    let wait = Duration::from_millis(timeout_ms).min(MAX_CALL_WAIT);
    let (tx, rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
    let message = SerializedMessage::Call {
        variant,
        args,
        reply: RpcReplyPort::from((tx, wait)),
        metadata: None,
    };
    if let Err(f) = deliver_here(hub, &id, message) {
        drop(slot);
        return in_task(move || answer(Err(f)));
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let result = match tokio::time::timeout(wait, rx).await {
            Ok(Ok(bytes)) if bytes.len() as u64 > FRAME_BUDGET_BYTES => {
                Err(failure(&node, &id, "too_large", &bytes.len().to_string()))
            }
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(_)) => Err(failure(&node, &id, "no_reply", "")),
            Err(_) => Err(failure(&node, &id, "timeout", &timeout_ms.to_string())),
        };
        drop(slot);
        answer(result);
    });
}

/// A peer monitors child `id`: watched here, or answered down at once.
pub(crate) fn on_monitor(
    hub: &Arc<HubShared>,
    from: NodeName,
    monitor: u64,
    id: ChildId,
    follow_restarts: bool,
) {
    let reason = match hub.watch(monitor, &id, Some(from.clone()), follow_restarts) {
        WatchOutcome::Watching => return,
        WatchOutcome::NoChild => DownReason::NoChild,
        WatchOutcome::Down(reason) => reason,
        WatchOutcome::Refused => {
            hub.refusals.count(Refusal::Overloaded);
            tracing::warn!(peer = %from, "monitor refused: the peer holds too many watches here");
            DownReason::MonitorRefused {
                node: hub.node.clone(),
            }
        }
    };
    let hub = hub.clone();
    in_task(move || hub.send_down(&from, monitor, id, reason));
}

/// The longest pause between two attempts of a call to a child that is between nodes.
pub(crate) const RETRY_CAP_MS: u64 = 200;

/// One attempt of a typed call on peer `node`: the reply's bytes, or the host's failure.
pub(crate) async fn call_peer(
    hub: &HubShared,
    id: &ChildId,
    node: &str,
    variant: &str,
    args: Vec<u8>,
    left: Duration,
) -> Result<Vec<u8>, ChildRefError> {
    let transport = hub
        .transport()
        .ok_or_else(|| ChildRefError::HubUnavailable { id: id.clone() })?;
    let (request_id, done) = hub.typed.register(node.to_owned(), id.clone());
    let frame = WireMsg::TypedCall {
        request_id: RequestId(request_id),
        id: id.clone(),
        variant: variant.to_owned(),
        args,
        timeout_ms: left.as_millis() as u64,
    };
    if transport.send(&node.to_owned(), &frame).is_err() {
        hub.typed.forget(request_id);
        return Err(ChildRefError::Unreachable {
            id: id.clone(),
            node: node.to_owned(),
        });
    }
    let forget = Forget { hub, request_id };
    let outcome = tokio::time::timeout(left, done).await;
    drop(forget);
    match outcome {
        Ok(Ok(Ok(bytes))) => Ok(bytes),
        Ok(Ok(Err(failure))) => Err(ChildRefError::from_failure(failure)),
        Ok(Err(_)) => Err(ChildRefError::HubUnavailable { id: id.clone() }),
        Err(_) => Err(ChildRefError::Timeout {
            id: id.clone(),
            waited_ms: left.as_millis() as u64,
        }),
    }
}

/// Forgets a pending call when its caller stops waiting (timeout or a dropped future).
struct Forget<'a> {
    hub: &'a HubShared,
    request_id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.hub.typed.forget(self.request_id);
    }
}

/// A call already in ractor's serialized form (an `#[rpc]` variant's name and fields), from
/// this node to child `id` wherever it runs: what a client node's typed call becomes at the
/// endpoint. Follows the child like `ChildRef::call`: retries within `timeout` while the child
/// is between nodes, and never sends the call twice to a node that may have handled it.
pub(crate) async fn call_serialized(
    hub: &Arc<HubShared>,
    id: &ChildId,
    variant: String,
    args: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, ChildRefError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let timed_out = || ChildRefError::Timeout {
        id: id.clone(),
        waited_ms: timeout.as_millis() as u64,
    };
    let mut attempt = 0u32;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let last = match hub.route_child(id, Asking::Origin) {
            ChildRoute::Here => {
                let (tx, rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
                let message = SerializedMessage::Call {
                    variant: variant.clone(),
                    args: args.clone(),
                    reply: RpcReplyPort::from((tx, left)),
                    metadata: None,
                };
                match deliver_here(hub, id, message) {
                    Ok(()) => {
                        return match tokio::time::timeout_at(deadline, rx).await {
                            Ok(Ok(bytes)) if bytes.len() as u64 > FRAME_BUDGET_BYTES => {
                                Err(ChildRefError::TooLarge {
                                    id: id.clone(),
                                    bytes: bytes.len() as u64,
                                    max: FRAME_BUDGET_BYTES,
                                })
                            }
                            Ok(Ok(bytes)) => Ok(bytes),
                            Ok(Err(_)) => Err(ChildRefError::NoReply {
                                id: id.clone(),
                                node: hub.node.clone(),
                            }),
                            Err(_) => Err(timed_out()),
                        }
                    }
                    Err(f) => ChildRefError::from_failure(f),
                }
            }
            ChildRoute::Peer(node) => {
                match call_peer(hub, id, &node, &variant, args.clone(), left).await {
                    Ok(bytes) => return Ok(bytes),
                    Err(e) => e,
                }
            }
            ChildRoute::BetweenNodes { host } => ChildRefError::BetweenNodes {
                id: id.clone(),
                host,
            },
            ChildRoute::NotFound => return Err(ChildRefError::NotFound { id: id.clone() }),
        };
        if !last.is_retryable() {
            return Err(last);
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(last);
        }
        let pause = retry_pause_ms(attempt, RETRY_CAP_MS, left.as_millis() as u64);
        attempt = attempt.saturating_add(1);
        tokio::time::sleep(Duration::from_millis(pause.max(1))).await;
    }
}

/// One attempt of a cast already in ractor's serialized form, from this node to child `id`
/// wherever it runs: handed to the local child, or sent to its host (which forwards it if the
/// child moved on). A child between nodes fails `between_nodes` at once.
pub(crate) fn cast_serialized(
    hub: &Arc<HubShared>,
    id: &ChildId,
    variant: String,
    args: Vec<u8>,
) -> Result<(), ChildRefError> {
    match hub.route_child(id, Asking::OriginNoAnswer) {
        ChildRoute::Here => {
            let message = SerializedMessage::Cast {
                variant,
                args,
                metadata: None,
            };
            deliver_here(hub, id, message).map_err(ChildRefError::from_failure)
        }
        ChildRoute::Peer(node) => {
            let transport = hub
                .transport()
                .ok_or_else(|| ChildRefError::HubUnavailable { id: id.clone() })?;
            let frame = WireMsg::TypedCast {
                id: id.clone(),
                variant,
                args,
                hops: 1,
            };
            transport
                .send(&node, &frame)
                .map_err(|_| ChildRefError::Unreachable {
                    id: id.clone(),
                    node,
                })
        }
        ChildRoute::BetweenNodes { host } => Err(ChildRefError::BetweenNodes {
            id: id.clone(),
            host,
        }),
        ChildRoute::NotFound => Err(ChildRefError::NotFound { id: id.clone() }),
    }
}

/// [`cast_serialized`], retried while the child is between nodes until `within` ran out.
pub(crate) async fn cast_serialized_within(
    hub: &Arc<HubShared>,
    id: &ChildId,
    variant: String,
    args: Vec<u8>,
    within: Duration,
) -> Result<(), ChildRefError> {
    let deadline = tokio::time::Instant::now() + within;
    let mut attempt = 0u32;
    loop {
        match cast_serialized(hub, id, variant.clone(), args.clone()) {
            Err(e) if e.is_retryable() => {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    return Err(e);
                }
                let pause = retry_pause_ms(attempt, RETRY_CAP_MS, left.as_millis() as u64);
                attempt = attempt.saturating_add(1);
                tokio::time::sleep(Duration::from_millis(pause.max(1))).await;
            }
            other => return other,
        }
    }
}
