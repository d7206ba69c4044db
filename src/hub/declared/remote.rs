//! The declared list across nodes: mutations routed to a remote leader and their replies, and
//! the entry point of declared-list wire messages (docs/recovery.md, "The leader":
//! mutations are serialized through the hub's leader node).
//!
//! A node that is not the leader sends its mutation ([`WireMsg::DeclaredMutate`]) to the node
//! it takes for the leader and waits for the reply, which the leader sends only once the
//! mutation is persisted. A send that fails is `no_leader`: the caller's durable start or stop is
//! refused and nothing else is affected. A mutation that was sent but got no reply within the
//! hub's `default_timeout_ms`, or whose leader went down before answering (failed at once, not
//! at the timeout), is `outcome_unknown`: the leader may have applied it, so the caller is not
//! told "refused" (retrying is safe: the mutations are idempotent).
//! The leader then broadcasts the change ([`WireMsg::DeclaredDelta`]) to every peer, which
//! fetches the whole copy ([`WireMsg::DeclaredOffer`]) when it cannot apply it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ractor::ActorRef;

use super::Then;
use crate::cluster::wire::budget::FRAME_BUDGET_BYTES;
use crate::cluster::wire::{DeclaredOp, RequestId, WireMsg};
use crate::hub::protocol::DeclaredMsg;
use crate::hub::HubShared;
use crate::model::{ChildId, NodeName};
use crate::types::RecoveryError;

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
    /// Sends `op` to `leader`; `then` runs with its reply, or `no_leader`. An op too large for
    /// one frame travels as several mutations (see [`DeclaredOp::split_by_bytes`]) answered as
    /// one: the highest version when every part is applied, else the first refusal, after which
    /// the children of the parts that were applied are undeclared again so that a refused
    /// durable start does not run later.
    pub fn send(
        &mut self,
        hub: &HubShared,
        myself: &ActorRef<DeclaredMsg>,
        leader: &NodeName,
        op: DeclaredOp,
        then: Then,
    ) {
        let mut parts = op.split_by_bytes(FRAME_BUDGET_BYTES);
        if parts.len() == 1 {
            let op = parts.pop().expect("one part");
            return self.send_one(hub, myself, leader, op, then);
        }
        tracing::debug!(parts = parts.len(), %leader, "declared mutation cut into parts");
        let joint = Arc::new(Mutex::new(Joint {
            remaining: parts.len(),
            version: 0,
            refusal: None,
            applied: Vec::new(),
            then: Some(then),
        }));
        for part in parts {
            let declared: Vec<ChildId> = match &part {
                DeclaredOp::Declare { children } => {
                    children.iter().map(|(s, _)| s.id.clone()).collect()
                }
                _ => Vec::new(),
            };
            let joint = Arc::clone(&joint);
            let me = myself.clone();
            let answer: Then = Box::new(move |result| {
                let done = {
                    let mut j = joint.lock().unwrap_or_else(|p| p.into_inner());
                    j.part_answered(result, declared)
                };
                if let Some((then, result, applied)) = done {
                    if result.is_err() && !applied.is_empty() {
                        let _ = me.cast(DeclaredMsg::Forget {
                            ids: applied,
                            why: "a durable start cut into parts was refused in part",
                        });
                    }
                    then(result);
                }
            });
            self.send_one(hub, myself, leader, part, answer);
        }
    }

    fn send_one(
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

    /// The leader did not answer in time: it may have applied the mutation.
    pub fn timed_out(&mut self, request_id: u64) {
        let leader = self.sent_to.remove(&request_id);
        if let Some((then, _)) = self.pending.remove(&request_id) {
            then(Err(RecoveryError::OutcomeUnknown {
                reason: format!(
                    "the declared list's leader {} did not answer in time; it may have applied the change",
                    leader.as_deref().unwrap_or("?")
                ),
            }));
        }
    }
}

impl RemoteMutations {
    /// `node` went down: the mutations waiting on it are `outcome_unknown` now, not at the
    /// timeout (the mutation may or may not have been applied, as with a timeout; the next
    /// round settles the rest).
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
                then(Err(RecoveryError::OutcomeUnknown {
                    reason: format!(
                        "the declared list's leader {node} went down before answering; it may have applied the change"
                    ),
                }));
            }
        }
    }
}

impl Drop for RemoteMutations {
    fn drop(&mut self) {
        for (_, (then, timer)) in std::mem::take(&mut self.pending).into_iter() {
            timer.abort();
            // Sent, never answered: the remote leader may have applied it.
            then(Err(RecoveryError::OutcomeUnknown {
                reason: "this node's declared-list actor stopped before the leader answered".into(),
            }));
        }
    }
}

/// The parts of one mutation cut by bytes, answered as one.
struct Joint {
    remaining: usize,
    version: u64,
    refusal: Option<RecoveryError>,
    /// The children of the declare parts the leader applied.
    applied: Vec<ChildId>,
    then: Option<Then>,
}

impl Joint {
    /// Records one part's answer; once every part has answered, what to tell the caller and
    /// the children to undeclare again.
    fn part_answered(
        &mut self,
        result: Result<u64, RecoveryError>,
        declared: Vec<ChildId>,
    ) -> Option<(Then, Result<u64, RecoveryError>, Vec<ChildId>)> {
        match result {
            Ok(version) => {
                self.version = self.version.max(version);
                self.applied.extend(declared);
            }
            // An unanswered part outweighs a refused one: the whole may have been applied in part.
            Err(e @ RecoveryError::OutcomeUnknown { .. }) => self.refusal = Some(e),
            Err(e) => {
                self.refusal.get_or_insert(e);
            }
        }
        self.remaining = self.remaining.saturating_sub(1);
        if self.remaining > 0 {
            return None;
        }
        let then = self.then.take()?;
        let result = match self.refusal.take() {
            Some(e) => Err(e),
            None => Ok(self.version),
        };
        Some((then, result, std::mem::take(&mut self.applied)))
    }
}
