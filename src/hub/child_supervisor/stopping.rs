//! Stopping children on request: a stop batch becomes a stop group that waits for each
//! child's exit, kills the ones whose shutdown grace runs out (one timer per distinct grace, not
//! per child), then unbinds them all in one registry write and answers once.
//!
//! An id this node neither runs, nor waits to restart, nor holds in its registry copy is
//! answered `not_found`: a peer that does not know an id asks the id's ring owner, and the
//! owner's answer is the request's answer, so "stopped" there would claim a stop of a child that
//! never existed.

use std::collections::BTreeSet;
use std::time::Duration;

use ractor::{ActorCell, ActorId, ActorRef};
use tokio::task::JoinHandle;

use super::ChildSupState;
use crate::hub::protocol::{ChildSupMsg, NodeStopReport, RegistryOp, StopBatch, StopReply};
use crate::model::{ChildId, FastHashMap, Shutdown};
use crate::storage::StorageError;
use crate::types::ChildStopError;

pub(super) struct StoppingChild {
    pub id: ChildId,
    pub cell: ActorCell,
    pub grace_ms: u64,
}

pub(super) struct StopGroup {
    reply: Option<StopReply>,
    /// The children move (a cold swap): the Coordinator reports `ChildMoved` once they run on
    /// their new node, so no `ChildStopped` here.
    pub release: bool,
    pub waiting: FastHashMap<ActorId, StoppingChild>,
    pub stopped: Vec<ChildId>,
    /// Ids this node knows nothing of (answered `not_found`, nothing written).
    not_found: Vec<ChildId>,
    timers: Vec<Deadline>,
}

type Deadline = JoinHandle<Result<(), ractor::MessagingErr<ChildSupMsg>>>;

/// One timer per distinct grace of a stop group, not per child.
fn deadlines(myself: &ActorRef<ChildSupMsg>, group: u64, graces: BTreeSet<u64>) -> Vec<Deadline> {
    graces
        .into_iter()
        .map(|grace_ms| {
            myself.send_after(Duration::from_millis(grace_ms), move || {
                ChildSupMsg::StopDeadline { group, grace_ms }
            })
        })
        .collect()
}

impl ChildSupState {
    pub(super) fn stop_batch(&mut self, myself: &ActorRef<ChildSupMsg>, batch: StopBatch) {
        self.next_group += 1;
        let group_id = self.next_group;
        let mut group = StopGroup {
            reply: Some(batch.reply),
            release: batch.release,
            waiting: FastHashMap::with_capacity_and_hasher(batch.ids.len(), Default::default()),
            stopped: Vec::new(),
            not_found: Vec::new(),
            timers: Vec::new(),
        };
        self.stopping.reserve(batch.ids.len());
        let mut graces: BTreeSet<u64> = BTreeSet::new();
        for id in batch.ids {
            if let Some(running) = self.children.remove(&id) {
                let aid = running.cell.get_id();
                self.by_actor.remove(&aid.pid());
                self.shared.local_children.remove(&id);
                self.shared.forget_moving_cell(&id);
                self.stopping.insert(aid, group_id);
                let grace_ms = match running.shutdown {
                    Shutdown::Kill => {
                        running.cell.kill();
                        0
                    }
                    Shutdown::TimeoutMs(ms) => {
                        running.cell.stop(Some("stopped by the hub".into()));
                        graces.insert(ms);
                        ms
                    }
                };
                group.waiting.insert(
                    aid,
                    StoppingChild {
                        id,
                        cell: running.cell,
                        grace_ms,
                    },
                );
            } else if self.awaiting_retry.remove(&id).is_some()
                || batch.release
                || self.shared.storage.get(&id).is_some()
            {
                // Not running here but known (waiting for a restart, or a row nothing runs):
                // stopping it only means forgetting it.
                group.stopped.push(id);
            } else {
                group.not_found.push(id);
            }
        }
        group.timers = deadlines(myself, group_id, graces);
        self.stop_groups.insert(group_id, group);
        self.maybe_finish(group_id);
    }

    pub(super) fn maybe_finish(&mut self, group_id: u64) {
        let done = self
            .stop_groups
            .get(&group_id)
            .is_some_and(|g| g.waiting.is_empty());
        if !done {
            return;
        }
        let Some(mut group) = self.stop_groups.remove(&group_id) else {
            return;
        };
        for t in &group.timers {
            t.abort();
        }
        let node = self.node().clone();
        // A child started again under the same id while this group waited (a stop followed
        // by a start) owns the row now: its binding must not be removed by this late write.
        let ops = group
            .stopped
            .iter()
            .filter(|id| !self.children.contains_key(*id))
            .map(|id| {
                let (id, node) = (id.clone(), node.clone());
                if group.release {
                    RegistryOp::Release { id, node }
                } else {
                    RegistryOp::Unbind { id, node }
                }
            })
            .collect();
        let stopped = std::mem::take(&mut group.stopped);
        let not_found = std::mem::take(&mut group.not_found);
        let reply = group.reply.take();
        self.write(
            ops,
            Some(Box::new(move |outcome: Result<(), StorageError>| {
                let mut report = NodeStopReport {
                    node,
                    ..NodeStopReport::default()
                };
                match outcome {
                    Ok(()) => report.stopped = stopped,
                    Err(e) => {
                        let error = ChildStopError::of_storage(&e);
                        report.errors = stopped.into_iter().map(|id| (id, error.clone())).collect();
                    }
                }
                report.errors.extend(
                    not_found
                        .into_iter()
                        .map(|id| (id, ChildStopError::NotFound)),
                );
                if let Some(reply) = reply {
                    reply(report);
                }
            })),
        );
    }
}
