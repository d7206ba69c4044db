//! Stopping children on request: a stop batch becomes a stop group that waits for each
//! child's exit, kills the ones whose shutdown grace runs out (one timer per distinct grace, not
//! per child), then unbinds them all in one registry write and answers once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ractor::{ActorCell, ActorId, ActorRef};
use tokio::task::JoinHandle;

use super::ChildSupState;
use crate::api::errors::ChildStopError;
use crate::hub::protocol::{ChildSupMsg, NodeStopReport, RegistryOp, StopBatch, StopReply};
use crate::model::{ChildId, Shutdown};
use crate::storage::StorageError;

pub(super) struct StoppingChild {
    pub id: ChildId,
    pub cell: ActorCell,
    pub grace_ms: u64,
}

pub(super) struct StopGroup {
    reply: Option<StopReply>,
    release: bool,
    pub waiting: BTreeMap<ActorId, StoppingChild>,
    pub stopped: Vec<ChildId>,
    timers: Vec<JoinHandle<Result<(), ractor::MessagingErr<ChildSupMsg>>>>,
}

impl ChildSupState {
    pub(super) fn stop_batch(&mut self, myself: &ActorRef<ChildSupMsg>, batch: StopBatch) {
        self.next_group += 1;
        let group_id = self.next_group;
        let mut group = StopGroup {
            reply: Some(batch.reply),
            release: batch.release,
            waiting: BTreeMap::new(),
            stopped: Vec::new(),
            timers: Vec::new(),
        };
        let mut graces: BTreeSet<u64> = BTreeSet::new();
        for id in batch.ids {
            if let Some(running) = self.children.remove(&id) {
                let aid = running.cell.get_id();
                self.by_actor.remove(&aid);
                self.shared.local_children.remove(&id);
                self.stopping.insert(aid, group_id);
                let grace_ms = match running.spec.shutdown {
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
            } else {
                // Not running here (never was, or waiting for a restart): stopping it only
                // means forgetting it. Idempotent, like stopping a stopped child.
                self.awaiting_retry.remove(&id);
                group.stopped.push(id);
            }
        }
        for grace_ms in graces {
            group
                .timers
                .push(myself.send_after(Duration::from_millis(grace_ms), move || {
                    ChildSupMsg::StopDeadline {
                        group: group_id,
                        grace_ms,
                    }
                }));
        }
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
                if let Some(reply) = reply {
                    reply(report);
                }
            })),
        );
    }
}
