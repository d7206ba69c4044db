//! The declared list across nodes: mutations routed to a remote leader and their replies, and
//! the entry point of declared-list wire messages (seed, "The declared list": "mutations are
//! serialized through the hub's leader node").
//!
//! A node that is not the leader sends its mutation ([`WireMsg::DeclaredMutate`]) to the node
//! it takes for the leader and waits for the reply, which the leader sends only once the
//! mutation is persisted. No reply within the hub's `default_timeout_ms`, a send that fails, or
//! the leader going down before it answers (failed at once, not at the timeout) is `no_leader`:
//! the caller's durable start or stop is refused and nothing else is affected.
//! The leader then broadcasts the change ([`WireMsg::DeclaredDelta`]) to every peer, which
//! fetches the whole copy ([`WireMsg::DeclaredOffer`]) when it cannot apply it.

use std::collections::BTreeMap;

use ractor::ActorRef;

use super::Then;
use crate::api::errors::RecoveryError;
use crate::cluster::wire::{DeclaredOp, RequestId, WireMsg};
use crate::hub::protocol::DeclaredMsg;
use crate::hub::HubShared;
use crate::model::NodeName;

type Timer = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<DeclaredMsg>>>;

/// Mutations sent to a remote leader, by request id.
#[derive(Default)]
pub(crate) struct RemoteMutations {
    pending: BTreeMap<u64, (Then, Timer)>,
    /// The leader each pending mutation was sent to: it going down fails the mutation at once.
    sent_to: BTreeMap<u64, NodeName>,
    next: u64,
}

impl RemoteMutations {
    /// Sends `op` to `leader`; `then` runs with its reply, or `no_leader`.
    pub fn send(
        &mut self,
        hub: &HubShared,
        myself: &ActorRef<DeclaredMsg>,
        leader: &NodeName,
        op: DeclaredOp,
        then: Then,
    ) {
        let unreachable = |why: String| RecoveryError::NoLeader {
            reason: format!("the leader {leader} cannot be reached: {why}"),
        };
        let Some(transport) = hub.transport() else {
            return then(Err(unreachable("this node has no network".into())));
        };
        self.next += 1;
        let request_id = self.next;
        let msg = WireMsg::DeclaredMutate {
            request_id: RequestId(request_id),
            reply_to: hub.node.clone(),
            op,
        };
        if let Err(e) = transport.send(leader, &msg) {
            return then(Err(unreachable(e.to_string())));
        }
        let timer = myself.send_after(hub.config.default_timeout(), move || {
            DeclaredMsg::MutateTimeout { request_id }
        });
        self.pending.insert(request_id, (then, timer));
        self.sent_to.insert(request_id, leader.clone());
    }

    /// The leader answered.
    pub fn answered(&mut self, request_id: u64, result: Result<u64, RecoveryError>) {
        self.sent_to.remove(&request_id);
        if let Some((then, timer)) = self.pending.remove(&request_id) {
            timer.abort();
            then(result);
        }
    }

    /// The leader did not answer in time.
    pub fn timed_out(&mut self, request_id: u64) {
        self.sent_to.remove(&request_id);
        if let Some((then, _)) = self.pending.remove(&request_id) {
            then(Err(RecoveryError::NoLeader {
                reason: "the leader did not answer in time".into(),
            }));
        }
    }
}

impl RemoteMutations {
    /// `node` went down: the mutations waiting on it are `no_leader` now, not at the timeout
    /// (the mutation may or may not have been applied, as with a timeout; the caller's durable
    /// start or stop is refused and the next round settles the rest).
    pub fn node_down(&mut self, node: &NodeName) {
        let ids: Vec<u64> = self
            .sent_to
            .iter()
            .filter(|(_, leader)| *leader == node)
            .map(|(id, _)| *id)
            .collect();
        for request_id in ids {
            self.sent_to.remove(&request_id);
            if let Some((then, timer)) = self.pending.remove(&request_id) {
                timer.abort();
                then(Err(RecoveryError::NoLeader {
                    reason: format!("the leader {node} went down before answering"),
                }));
            }
        }
    }
}

impl Drop for RemoteMutations {
    fn drop(&mut self) {
        for (_, (then, timer)) in std::mem::take(&mut self.pending).into_iter() {
            timer.abort();
            then(Err(RecoveryError::HubUnavailable {
                reason: "the declared leader stopped".into(),
            }));
        }
    }
}
