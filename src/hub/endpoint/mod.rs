//! The Endpoint actor: the hub's remote door, for clients on other nodes
//! (`crate::hub::protocol::endpoint`; the client is [`crate::RemoteHub`]).
//!
//! Spawned by the HubSupervisor when the hub's network serves remote clients (a ractor_cluster
//! `ClusterNode`; the in-process network does not, since ractor's pg is process-global). It
//! joins the pg group `endpoint_group(hub_id)` under a name that carries the hub and this
//! node, so ractor_cluster advertises it to every connected node.
//!
//! Every request is untrusted: it is decoded with a size limit, its specs checked with the
//! API's rules ([`validate_child`]) before the hub sees them, its timeouts bounded; a request
//! that fails any of that is answered with a typed refusal. The actor itself only decodes and
//! hands each request to a task that asks the hub's root by `HubMsg` (or, for a typed message
//! to a child, the hub's typed path), so a slow request never holds up the others; at most
//! [`MAX_IN_FLIGHT`] run at once. What answers at once stays in the actor, in order: a cast
//! that does not wait, and the monitors of clients ([`monitors`]).

mod monitors;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ractor::pg::GroupChangeMessage;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use self::monitors::Holds;
use super::typed::{call_serialized, cast_serialized, cast_serialized_within};
use super::HubShared;
use crate::cluster::wire::budget::FRAME_BUDGET_BYTES;
use crate::hub::protocol::endpoint::{
    decode, encode, endpoint_group, is_down_sink_group, EndpointBytes, EndpointMsg, EndpointReply,
    EndpointRequest, Json, RemoteFailure, MAX_IN_FLIGHT, MAX_REMOTE_TIMEOUT, MAX_VARIANT_LEN,
};
use crate::hub::protocol::HubMsg;
use crate::model::validate_child;
use crate::model::ChildId;
use crate::types::ChildRefError;

pub(crate) struct Endpoint;

pub(crate) struct EndpointArgs {
    pub hub: Arc<HubShared>,
    pub root: ActorRef<HubMsg>,
}

pub(crate) struct EndpointState {
    hub: Arc<HubShared>,
    root: ActorRef<HubMsg>,
    in_flight: Arc<AtomicUsize>,
    holds: Holds,
}

impl Actor for Endpoint {
    type Msg = EndpointMsg;
    type State = EndpointState;
    type Arguments = EndpointArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: EndpointArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(
            endpoint_group(&args.hub.config.hub_id),
            vec![myself.get_cell()],
        );
        Ok(EndpointState {
            hub: args.hub,
            root: args.root,
            in_flight: Arc::default(),
            holds: Holds::default(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.holds.drain(&state.hub);
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ProcessGroupChanged(GroupChangeMessage::Leave(_, group, _)) = event
        {
            if is_down_sink_group(&group) {
                state.holds.sink_left(&myself, &state.hub, &group);
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: EndpointMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let EndpointMsg::Request(bytes, reply) = msg;
        let request = match decode::<EndpointRequest>(&bytes.0).and_then(checked) {
            Ok(request) => request,
            Err(failure) => {
                tracing::warn!(hub = %state.hub.config.hub_id, code = %failure.code, error = %failure.message, "remote request refused");
                return answer(reply, EndpointReply::Failed(failure));
            }
        };
        let hub = &state.hub;
        let request = match request {
            EndpointRequest::Monitor {
                id,
                sink,
                monitor,
                follow_restarts,
            } => {
                let outcome = state
                    .holds
                    .monitor(&myself, hub, id, sink, monitor, follow_restarts);
                return answer(reply, outcome);
            }
            EndpointRequest::Demonitor { sink, monitor } => {
                let outcome = state.holds.demonitor(&myself, hub, &sink, monitor);
                return answer(reply, outcome);
            }
            EndpointRequest::Held { sink } => return answer(reply, state.holds.held(&sink)),
            EndpointRequest::CastTyped {
                id,
                variant,
                args,
                within_ms: 0,
            } => {
                let cast = cast_serialized(hub, &id, variant, args);
                let outcome = match hub.messages.casted(cast, |e: &ChildRefError| e.code()) {
                    Ok(()) => EndpointReply::Cast,
                    Err(e) => EndpointReply::ChildFailed(Json(e)),
                };
                return answer(reply, outcome);
            }
            other => other,
        };
        if state.in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_IN_FLIGHT {
            state.in_flight.fetch_sub(1, Ordering::AcqRel);
            let failure = RemoteFailure::new("overloaded", "too many remote requests at once");
            return answer(reply, EndpointReply::Failed(failure));
        }
        let (root, in_flight) = (state.root.clone(), state.in_flight.clone());
        let hub = state.hub.clone();
        let budget = state.hub.config.default_timeout();
        tokio::spawn(async move {
            let outcome = serve(&root, &hub, request, budget).await;
            in_flight.fetch_sub(1, Ordering::AcqRel);
            let _ = reply.send(encode(&outcome));
        });
        Ok(())
    }
}

fn answer(
    reply: RpcReplyPort<EndpointBytes>,
    outcome: EndpointReply,
) -> Result<(), ActorProcessingErr> {
    let _ = reply.send(encode(&outcome));
    Ok(())
}

/// The API's rules, before the hub sees the request: every spec valid, timeouts in range.
fn checked(request: EndpointRequest) -> Result<EndpointRequest, RemoteFailure> {
    match &request {
        EndpointRequest::StartChildren { specs, opts } => {
            for spec in specs {
                validate_child(spec, &opts.metadata)
                    .map_err(|e| RemoteFailure::new("invalid_child", e.to_string()))?;
            }
        }
        EndpointRequest::CallChild { timeout_ms, .. }
            if Duration::from_millis(*timeout_ms) > MAX_REMOTE_TIMEOUT =>
        {
            return Err(RemoteFailure::new(
                "invalid_option",
                "the call's timeout is above an hour",
            ));
        }
        EndpointRequest::CallTyped { timeout_ms: ms, .. }
        | EndpointRequest::CastTyped { within_ms: ms, .. }
            if Duration::from_millis(*ms) > MAX_REMOTE_TIMEOUT =>
        {
            return Err(RemoteFailure::new(
                "invalid_option",
                "the message's timeout is above an hour",
            ));
        }
        EndpointRequest::CallTyped {
            id, variant, args, ..
        }
        | EndpointRequest::CastTyped {
            id, variant, args, ..
        } => {
            ChildId::parse(id.as_str())
                .map_err(|e| RemoteFailure::new("invalid_child", e.to_string()))?;
            if args.len() as u64 > FRAME_BUDGET_BYTES || variant.len() > MAX_VARIANT_LEN {
                return Err(RemoteFailure::new(
                    "bad_request",
                    "the message is too large",
                ));
            }
        }
        EndpointRequest::Monitor { id, sink, .. } => {
            ChildId::parse(id.as_str())
                .map_err(|e| RemoteFailure::new("invalid_child", e.to_string()))?;
            if !is_down_sink_group(sink) {
                return Err(RemoteFailure::new(
                    "unknown_sink",
                    "not a down sink's group",
                ));
            }
        }
        EndpointRequest::Demonitor { sink, .. } | EndpointRequest::Held { sink }
            if !is_down_sink_group(sink) =>
        {
            return Err(RemoteFailure::new(
                "unknown_sink",
                "not a down sink's group",
            ));
        }
        EndpointRequest::CastChild { id, payload }
        | EndpointRequest::CallChild { id, payload, .. } => {
            ChildId::parse(id.as_str())
                .map_err(|e| RemoteFailure::new("invalid_child", e.to_string()))?;
            if payload.len() as u64 > crate::model::MAX_CHILD_BYTES {
                return Err(RemoteFailure::new(
                    "bad_request",
                    "the payload is too large",
                ));
            }
        }
        _ => {}
    }
    Ok(request)
}

/// Asks the hub's root, the way a local actor would.
async fn serve(
    root: &ActorRef<HubMsg>,
    hub: &Arc<HubShared>,
    request: EndpointRequest,
    budget: Duration,
) -> EndpointReply {
    // The hub answers starts and stops within their own timeouts; this only guards against a
    // hub that stopped answering.
    let wait = Some(budget.max(Duration::from_secs(1)) * 2);
    let unavailable = || {
        EndpointReply::Failed(RemoteFailure::new(
            "hub_unavailable",
            "the hub did not answer",
        ))
    };
    match request {
        EndpointRequest::StartChildren { specs, opts } => {
            let wait = opts
                .timeout
                .map(|t| Some(t + Duration::from_secs(1)))
                .unwrap_or(wait);
            match root
                .call(|reply| HubMsg::StartChildren { specs, opts, reply }, wait)
                .await
            {
                Ok(CallResult::Success(Ok(result))) => EndpointReply::Started(Json(result)),
                Ok(CallResult::Success(Err(e))) => EndpointReply::Failed(e.into()),
                _ => unavailable(),
            }
        }
        EndpointRequest::StopChildren { ids } => {
            let opts = crate::types::StopOptions::new();
            match root
                .call(|reply| HubMsg::StopChildren { ids, opts, reply }, wait)
                .await
            {
                Ok(CallResult::Success(Ok(result))) => EndpointReply::Stopped(Json(result)),
                Ok(CallResult::Success(Err(e))) => EndpointReply::Failed(e.into()),
                _ => unavailable(),
            }
        }
        EndpointRequest::ChildLookup { id } => {
            match root
                .call(
                    |reply| HubMsg::ChildLookup {
                        id,
                        with_metadata: true,
                        reply,
                    },
                    wait,
                )
                .await
            {
                Ok(CallResult::Success(info)) => EndpointReply::Child(info),
                _ => unavailable(),
            }
        }
        EndpointRequest::CallChild {
            id,
            payload,
            timeout_ms,
        } => {
            let timeout = Duration::from_millis(timeout_ms);
            let call = root.call(
                |reply| HubMsg::CallChild {
                    id,
                    payload,
                    timeout,
                    reply,
                },
                Some(timeout + Duration::from_millis(100)),
            );
            match call.await {
                Ok(CallResult::Success(Ok(answer))) => EndpointReply::Called(answer),
                Ok(CallResult::Success(Err(e))) => EndpointReply::Failed(e.into()),
                Ok(CallResult::Timeout) => EndpointReply::Failed(RemoteFailure::new(
                    "timeout",
                    "the child did not answer in time",
                )),
                _ => unavailable(),
            }
        }
        EndpointRequest::CastChild { id, payload } => {
            match root.cast(HubMsg::CastChild { id, payload }) {
                Ok(()) => EndpointReply::Cast,
                Err(_) => unavailable(),
            }
        }
        EndpointRequest::Nodes => {
            match root
                .call(
                    |reply| HubMsg::Nodes {
                        include_local: true,
                        reply,
                    },
                    wait,
                )
                .await
            {
                Ok(CallResult::Success(nodes)) => EndpointReply::Nodes(nodes),
                _ => unavailable(),
            }
        }
        EndpointRequest::CallTyped {
            id,
            variant,
            args,
            timeout_ms,
        } => {
            let timeout = Duration::from_millis(timeout_ms);
            let began = std::time::Instant::now();
            let called = call_serialized(hub, &id, variant, args, timeout).await;
            match hub
                .messages
                .called(called, |e: &ChildRefError| e.code(), began)
            {
                Ok(answer) => EndpointReply::Called(answer),
                Err(e) => EndpointReply::ChildFailed(Json(e)),
            }
        }
        EndpointRequest::CastTyped {
            id,
            variant,
            args,
            within_ms,
        } => {
            let within = Duration::from_millis(within_ms);
            let cast = cast_serialized_within(hub, &id, variant, args, within).await;
            match hub.messages.casted(cast, |e: &ChildRefError| e.code()) {
                Ok(()) => EndpointReply::Cast,
                Err(e) => EndpointReply::ChildFailed(Json(e)),
            }
        }
        // Answered by the actor itself.
        EndpointRequest::Monitor { .. }
        | EndpointRequest::Demonitor { .. }
        | EndpointRequest::Held { .. } => {
            EndpointReply::Failed(RemoteFailure::new("bad_request", "not served here"))
        }
    }
}
