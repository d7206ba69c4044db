//! Where the DeclaredLeader hands requests on once the declared list allows them: the
//! Coordinator's normal start and stop paths (add before start, remove before terminate).

use std::sync::Arc;

use ractor::ActorRef;

use super::coordinator::{CoordinatorMsg, StartReplyPort, StopReplyPort};
use super::declared_leader::DeclaredMsg;
use super::HubShared;
use crate::api::errors::{ChildStartError, StartError, StopError};
use crate::api::options::{StartOptions, StopOptions};
use crate::api::results::ChildFailure;
use crate::model::{ChildId, ChildSpec};

/// After the declaration is durable: start through the Coordinator, merge the refusals, and
/// undeclare children whose start can never succeed.
pub(crate) async fn start_declared(
    hub: Arc<HubShared>,
    me: ActorRef<DeclaredMsg>,
    accepted: Vec<ChildSpec>,
    opts: StartOptions,
    refused: Vec<ChildFailure>,
    reply: StartReplyPort,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    forward_start(&hub, accepted, opts, tx.into());
    let answer = rx
        .await
        .unwrap_or_else(|_| Err(StartError::HubUnavailable("the coordinator stopped".into())));
    let answer = answer.map(|mut result| {
        let never: Vec<ChildId> = result
            .errors
            .iter()
            .filter(|e| {
                matches!(
                    e.reason,
                    ChildStartError::UnknownKind { .. } | ChildStartError::InvalidArgs { .. }
                )
            })
            .map(|e| e.id.clone())
            .collect();
        if !never.is_empty() {
            let _ = me.cast(DeclaredMsg::Forget { ids: never });
        }
        result.errors.extend(refused);
        result
    });
    let _ = reply.send(answer);
}

/// Forwards a start to the Coordinator (answers `HubUnavailable` if it is restarting).
pub(crate) fn forward_start(
    hub: &HubShared,
    specs: Vec<ChildSpec>,
    opts: StartOptions,
    reply: StartReplyPort,
) {
    let unavailable = || StartError::HubUnavailable("coordinator is restarting".into());
    let Some(coordinator) = hub.coordinator() else {
        let _ = reply.send(Err(unavailable()));
        return;
    };
    if let Err(ractor::MessagingErr::SendErr(CoordinatorMsg::Start { reply, .. })) =
        coordinator.cast(CoordinatorMsg::Start { specs, opts, reply })
    {
        let _ = reply.send(Err(unavailable()));
    }
}

/// Forwards a stop to the Coordinator (answers `HubUnavailable` if it is restarting).
pub(crate) fn forward_stop(
    hub: &HubShared,
    ids: Vec<ChildId>,
    opts: StopOptions,
    reply: StopReplyPort,
) {
    let unavailable = || StopError::HubUnavailable("coordinator is restarting".into());
    let Some(coordinator) = hub.coordinator() else {
        let _ = reply.send(Err(unavailable()));
        return;
    };
    if let Err(ractor::MessagingErr::SendErr(CoordinatorMsg::Stop { reply, .. })) =
        coordinator.cast(CoordinatorMsg::Stop { ids, opts, reply })
    {
        let _ = reply.send(Err(unavailable()));
    }
}
