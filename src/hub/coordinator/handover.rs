//! Hot moves carried out (`migration = "hot"`; the decisions and buffers are `core::handover`).
//!
//! A child whose kind hands its state over moves in three steps, each a message to this actor:
//! 1. [`CoordinatorState::begin_export`]: the child is taken out of local routing (its casts
//!    are held from now on) and asked for its state, in a task bounded by
//!    `handover_data_wait_ms`;
//! 2. [`CoordinatorState::on_exported`]: each state goes to the new node ahead of the start
//!    (`WireMsg::HandoverState`), then the start is sent (awaited for
//!    `child_migration_timeout_ms`). A child whose export failed moves cold instead: stopped
//!    here, then started there ([`HandoverOutcome::FellBackCold`]);
//! 3. [`CoordinatorState::finish_hot`], when the start completes: the held casts go to the
//!    new instance, the old one is stopped (released: its row keeps the new binding), and
//!    [`HubEvent::ChildHandover`] says whether the state went along. A start the new node
//!    refused leaves the child here, routed again, with the held casts delivered to it. A
//!    start with no answer (timed out, or the node went down) may have run there: the old
//!    instance stops, and the child is placed again only if it runs nowhere. So does a move
//!    this Coordinator never finishes because it restarted after the state went
//!    ([`HubShared::abandon_all_handoffs`](crate::hub::shared::HubShared::abandon_all_handoffs)).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;
use ractor::message::SerializedMessage;
use ractor::{ActorCell, ActorRef, RpcReplyPort};

use super::cluster::{Cause, Internal};
use super::{CoordinatorState, StartPurpose, StopPurpose};
use crate::cluster::wire::WireMsg;
use crate::core::handover::{move_mode, state_digest, HeldCast, MoveMode, HANDOVER_METADATA_KEY};
use crate::events::{HandoverOutcome, HubEvent, MoveReason};
use crate::hub::protocol::{ClusterMsg, CoordinatorMsg};
use crate::kinds::HandoverError;
use crate::model::{ChildId, NodeName, Pid, Row};
use crate::types::ChildStartError;
use crate::types::OnFailure;
use crate::types::StartResult;

/// What to do once the exports of a batch are in.
pub(crate) enum AfterExport {
    /// A redistribution pass: start them on `target`.
    Migrate {
        target: NodeName,
        why: MoveReason,
        rows: Vec<Row>,
    },
    /// A graceful leave: start every local child on its next owner (`placed`; the children
    /// that do not hand over are in it too), then answer `reply`.
    Leave {
        placed: Vec<(NodeName, Row)>,
        reply: RpcReplyPort<()>,
    },
}

/// One child moving hot from this node.
pub(crate) struct HotMove {
    /// The old instance (taken out of local routing).
    cell: ActorCell,
    /// Its state's size once exported.
    bytes: u64,
    /// Its state's [`state_digest`], once sent: its start names it.
    digest: String,
    /// Why the state did not go along (the move is then a cold swap).
    fell_back: Option<HandoverError>,
    /// Part of a graceful leave (the hub's shutdown stops the old instance).
    leaving: bool,
    /// When the export was asked for (`HubShared::mono_ms`).
    since_ms: u64,
}

/// The Coordinator's hot moves under way.
#[derive(Default)]
pub(crate) struct HotMoves {
    moves: BTreeMap<ChildId, HotMove>,
    exports: BTreeMap<u64, AfterExport>,
    next_export: u64,
    /// Children whose hot move was abandoned and that still run here: looked at again after
    /// `migration_retry_ms` ([`CoordinatorState::retry_abandoned`]).
    abandoned: BTreeSet<ChildId>,
    /// The timer of that look is armed.
    retry_armed: bool,
}

impl CoordinatorState {
    /// Splits `rows` into the children that move hot from this node and the others.
    pub(super) fn split_hot(&self, rows: Vec<Row>) -> (Vec<Row>, Vec<Row>) {
        let hub = &self.hub;
        // Replicas move cold: each replica's state is its own, and a node taking a replica
        // slot may already run another instance this node's registry does not show yet.
        if hub.config.replication_factor > 1 {
            return (Vec::new(), rows);
        }
        rows.into_iter().partition(|row| {
            move_mode(hub.config.migration, hub.kinds.hands_over(&row.spec.kind)) == MoveMode::Hot
                && hub.local_children.contains_key(&row.spec.id)
        })
    }

    /// Step 1: holds the casts to `rows` and asks each for its state (in a task).
    pub(super) fn begin_export(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        rows: &[Row],
        after: AfterExport,
    ) {
        let hub = self.hub.clone();
        let wait = Duration::from_millis(hub.config.hot_swap.handover_data_wait_ms);
        let leaving = matches!(after, AfterExport::Leave { .. });
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let hot = &mut cluster.hot;
        hot.next_export += 1;
        let export_id = hot.next_export;
        hot.exports.insert(export_id, after);
        let mut exports = Vec::new();
        for row in rows {
            let id = row.spec.id.clone();
            let Some(cell) = hub.begin_handoff(&id) else {
                continue;
            };
            exports.push((id.clone(), hub.kinds.export(&row.spec.kind, &cell, wait)));
            hot.moves.insert(
                id,
                HotMove {
                    cell,
                    bytes: 0,
                    digest: String::new(),
                    fell_back: None,
                    leaving,
                    since_ms: hub.mono_ms(),
                },
            );
        }
        let coordinator = myself.clone();
        tokio::spawn(async move {
            let results = join_all(exports.into_iter().map(|(id, export)| async move {
                let result = match export {
                    Some(export) => export.await,
                    None => Err(HandoverError::NoAnswer),
                };
                (id, result)
            }))
            .await;
            let _ = coordinator.cast(CoordinatorMsg::Cluster(ClusterMsg::HandoverExported {
                export_id,
                results,
            }));
        });
    }

    /// Step 2: the states are in; send them ahead of the starts.
    pub(super) fn on_exported(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        export_id: u64,
        results: Vec<(ChildId, Result<Vec<u8>, HandoverError>)>,
    ) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let Some(after) = cluster.hot.exports.remove(&export_id) else {
            return;
        };
        let target_of: BTreeMap<ChildId, NodeName> = match &after {
            AfterExport::Migrate { target, rows, .. } => rows
                .iter()
                .map(|r| (r.spec.id.clone(), target.clone()))
                .collect(),
            AfterExport::Leave { placed, .. } => placed
                .iter()
                .map(|(n, r)| (r.spec.id.clone(), n.clone()))
                .collect(),
        };
        for (id, result) in results {
            let Some(to) = target_of.get(&id) else {
                continue;
            };
            let outcome = result.and_then(|state| {
                let bytes = state.len() as u64;
                let digest = state_digest(&state);
                let msg = WireMsg::HandoverState {
                    id: id.clone(),
                    state,
                };
                cluster
                    .transport
                    .send(to, &msg)
                    .map(|()| (bytes, digest))
                    .map_err(|e| HandoverError::NotSent {
                        node: to.clone(),
                        reason: e.to_string(),
                    })
            });
            if let Some(moving) = cluster.hot.moves.get_mut(&id) {
                match outcome {
                    Ok((bytes, digest)) => {
                        moving.bytes = bytes;
                        moving.digest = digest;
                        self.hub.handoff_state_sent(&id);
                    }
                    Err(e) => {
                        tracing::warn!(child = %id, error = %e, "handover failed: the child moves cold");
                        moving.fell_back = Some(e);
                    }
                }
            }
        }
        match after {
            AfterExport::Migrate { target, why, rows } => {
                let (cold, hot): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|r| {
                    cluster
                        .hot
                        .moves
                        .get(&r.spec.id)
                        .is_none_or(|m| m.fell_back.is_some())
                });
                if !self.hub.config.hot_swap.confirm_handover && !hot.is_empty() {
                    // Not waiting for the confirmation: the old instances stop now.
                    let ids = hot.iter().map(|r| r.spec.id.clone()).collect();
                    let me = self.hub.node.clone();
                    let request_id = self.next_id();
                    self.deliver_stop(myself, &me, request_id, ids, false, true);
                }
                self.start_hot(myself, target.clone(), why, hot);
                if !cold.is_empty() {
                    // The cold swap: stopped here first, started there when stopped.
                    let request_id = self.next_id();
                    let timeout = self.hub.config.default_timeout();
                    let ids = cold.iter().map(|r| r.spec.id.clone()).collect();
                    let by_node = BTreeMap::from([(self.hub.node.clone(), ids)]);
                    self.begin_stop(
                        myself,
                        request_id,
                        by_node,
                        Vec::new(),
                        StopPurpose::Migration {
                            target,
                            why,
                            rows: cold,
                        },
                        timeout,
                    );
                }
            }
            AfterExport::Leave { placed, reply } => self.start_handover(myself, placed, reply),
        }
    }

    /// Starts `rows` (their states sent ahead) on `target`, awaited for
    /// `child_migration_timeout_ms`.
    fn start_hot(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        target: NodeName,
        why: MoveReason,
        rows: Vec<Row>,
    ) {
        if rows.is_empty() {
            return;
        }
        let digest_of = |id: &ChildId| {
            self.cluster
                .as_ref()
                .and_then(|c| c.hot.moves.get(id))
                .map(|m| m.digest.clone())
                .unwrap_or_default()
        };
        let children = rows
            .iter()
            .map(|r| {
                let mut metadata = r.metadata.clone();
                metadata.insert(HANDOVER_METADATA_KEY.to_owned(), digest_of(&r.spec.id));
                (r.spec.clone(), metadata)
            })
            .collect();
        let durable = rows
            .iter()
            .filter(|r| r.hub.durable)
            .map(|r| r.spec.id.clone())
            .collect();
        let rows = rows.into_iter().map(|r| (r.spec.id.clone(), r)).collect();
        let cause = Cause::Moved {
            from: self.hub.node.clone(),
            why,
        };
        let request_id = self.next_id();
        let timeout = Duration::from_millis(self.hub.config.hot_swap.child_migration_timeout_ms);
        self.begin_start(
            myself,
            request_id,
            BTreeMap::from([(target, children)]),
            true,
            durable,
            StartResult {
                awaited: true,
                ..StartResult::default()
            },
            StartPurpose::Internal(Internal::Replace { rows, cause }),
            OnFailure::Continue,
            timeout,
        );
    }

    /// Step 3, at the head of every internal start's completion: settles the hot moves among
    /// its children. Answers the children that stay here (their move was abandoned), which the
    /// caller must not retry.
    pub(super) fn finish_hot(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        result: &StartResult,
    ) -> Vec<ChildId> {
        let me = self.hub.node.clone();
        let confirm = self.hub.config.hot_swap.confirm_handover;
        let Some(cluster) = &mut self.cluster else {
            return Vec::new();
        };
        if cluster.hot.moves.is_empty() {
            return Vec::new();
        }
        // Each with the new instance's pid, when the start named it.
        let mut placed: Vec<(ChildId, NodeName, Option<Pid>, bool)> = result
            .started
            .iter()
            .filter_map(|s| {
                s.nodes
                    .first()
                    .map(|(n, pid)| (s.id.clone(), n.clone(), Some(*pid), false))
            })
            .collect();
        // The new node already ran it (a duplicate): it is there all the same, but that
        // instance never took this one's state.
        placed.extend(
            result
                .errors
                .iter()
                .filter(|f| f.reason == ChildStartError::AlreadyStarted)
                .map(|f| (f.id.clone(), f.node.clone(), None, true)),
        );
        let mut finished = Vec::new();
        let mut to_stop = Vec::new();
        // Starts answered by this node itself: a peer that still took it for the owner
        // forwarded the start back here, where the old instance runs. Nothing moved: they are
        // settled below as a refused start.
        let mut failures: Vec<(ChildId, NodeName, ChildStartError)> = Vec::new();
        for (id, to, pid, duplicate) in placed {
            if to == me {
                failures.push((id, to, ChildStartError::AlreadyStarted));
                continue;
            }
            let Some(mut moving) = cluster.hot.moves.remove(&id) else {
                continue;
            };
            if duplicate && moving.fell_back.is_none() {
                moving.fell_back = Some(HandoverError::AlreadyRunning { node: to.clone() });
                if confirm && !moving.leaving {
                    // Its state was not taken, but the old instance is a duplicate now.
                    to_stop.push(id.clone());
                }
            }
            for cast in self.hub.complete_handoff(&id, to.clone()) {
                let msg = match cast {
                    HeldCast::Typed { variant, args } => WireMsg::TypedCast {
                        id: id.clone(),
                        variant,
                        args,
                        hops: 1,
                    },
                    HeldCast::Bytes { payload } => WireMsg::ChildCast {
                        id: id.clone(),
                        payload,
                        hops: 1,
                    },
                };
                if let Err(e) = cluster.transport.send(&to, &msg) {
                    tracing::warn!(child = %id, node = %to, error = %e, "held cast not forwarded");
                }
            }
            let outcome = match moving.fell_back {
                Some(reason) => HandoverOutcome::FellBackCold { reason },
                None => {
                    if confirm && !moving.leaving {
                        to_stop.push(id.clone());
                    }
                    HandoverOutcome::Imported {
                        bytes: moving.bytes,
                    }
                }
            };
            let took_ms = self.hub.mono_ms().saturating_sub(moving.since_ms);
            tracing::debug!(child = %id, node = %to, took_ms, "hot move done");
            self.hub.events.publish(|| HubEvent::ChildHandover {
                id: id.clone(),
                from: me.clone(),
                to: to.clone(),
                pid,
                outcome,
                took_ms,
            });
            finished.push(id);
        }
        let mut stays = Vec::new();
        failures.extend(
            result
                .errors
                .iter()
                .map(|f| (f.id.clone(), f.node.clone(), f.reason.clone())),
        );
        for (id, node, reason) in &failures {
            let Some(moving) = cluster.hot.moves.remove(id) else {
                continue;
            };
            if moving.fell_back.is_some() || moving.leaving || !confirm {
                // The old instance is stopped (or stops with the hub): nothing to go back to.
                self.hub.drop_handoff(id);
                continue;
            }
            if reason.may_have_started() {
                // The new node may run the child with its state, and may have answered
                // messages already: served here again, the two instances would diverge. This
                // one stops (released); the caller places the child again if it runs nowhere.
                tracing::warn!(child = %id, node = %node, error = %reason, "hot move's outcome unknown: the child stops here");
                self.hub.drop_handoff(id);
                to_stop.push(id.clone());
                continue;
            }
            let kind = self.hub.storage.get(id).map(|r| r.spec.kind);
            let Some(held) = self.hub.abandon_handoff(id, moving.cell.clone()) else {
                tracing::warn!(child = %id, node = %node, error = %reason, "hot move failed, and the child was stopped here meanwhile");
                continue;
            };
            tracing::warn!(child = %id, node = %node, error = %reason, "hot move failed: the child stays here with its state");
            for cast in held {
                match cast {
                    HeldCast::Typed { variant, args } => {
                        let deliver = kind.as_deref().and_then(|k| self.hub.kinds.deliver(k));
                        let message = SerializedMessage::Cast {
                            variant,
                            args,
                            metadata: None,
                        };
                        if let Some(deliver) = deliver {
                            let _ = deliver(&moving.cell, message);
                        }
                    }
                    HeldCast::Bytes { payload } => {
                        let _ = myself.cast(CoordinatorMsg::Cluster(ClusterMsg::ChildCast {
                            id: id.clone(),
                            payload,
                        }));
                    }
                }
            }
            cluster.hot.abandoned.insert(id.clone());
            stays.push(id.clone());
        }
        if !cluster.hot.abandoned.is_empty() && !cluster.hot.retry_armed {
            cluster.hot.retry_armed = true;
            let retry = Duration::from_millis(self.hub.config.migration_retry_ms);
            myself.send_after(retry, || {
                CoordinatorMsg::Cluster(ClusterMsg::RetryAbandonedMoves)
            });
        }
        if !to_stop.is_empty() {
            let request_id = self.next_id();
            self.deliver_stop(myself, &me, request_id, to_stop, false, true);
        }
        if !finished.is_empty() {
            let retention = Duration::from_millis(self.hub.config.hot_swap.retention_ms);
            myself.send_after(retention, || {
                CoordinatorMsg::Cluster(ClusterMsg::HandoffsExpire)
            });
        }
        stays
    }

    /// The children whose hot move was abandoned, `migration_retry_ms` later. No membership
    /// event may come to move them again, so:
    /// - one whose row binds it elsewhere and no longer here (the new node did start it; only
    ///   its confirmation was lost) is a stray copy: stopped here, the row's instance stays;
    /// - one still bound here only is moved again by a pass of its own (hot again, or cold if
    ///   its export fails then); looked at again until it no longer runs here.
    pub(super) fn retry_abandoned(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let me = self.hub.node.clone();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        cluster.hot.retry_armed = false;
        let abandoned = std::mem::take(&mut cluster.hot.abandoned);
        let mut strays = Vec::new();
        let mut again = BTreeSet::new();
        for id in abandoned {
            if cluster.hot.moves.contains_key(&id) || !self.hub.local_children.contains_key(&id) {
                continue;
            }
            let bound = self.hub.storage.get(&id).map(|row| row.node_pids);
            match bound {
                Some(nodes) if !nodes.contains_key(&me) && !nodes.is_empty() => {
                    tracing::warn!(child = %id, nodes = ?nodes.keys().collect::<Vec<_>>(), "an abandoned hot move did start the child there: this copy stops");
                    strays.push(id);
                }
                _ => {
                    again.insert(id);
                }
            }
        }
        if !strays.is_empty() {
            let request_id = self.next_id();
            self.deliver_stop(myself, &me, request_id, strays, false, true);
        }
        if again.is_empty() {
            return;
        }
        if let Some(cluster) = &mut self.cluster {
            cluster.hot.abandoned.extend(again);
            cluster.hot.retry_armed = true;
        }
        self.redistribute(myself, &[], &[]);
        let retry = Duration::from_millis(self.hub.config.migration_retry_ms);
        myself.send_after(retry, || {
            CoordinatorMsg::Cluster(ClusterMsg::RetryAbandonedMoves)
        });
    }

    /// Marks, in a graceful leave's start batches, the children whose state was sent ahead
    /// (see [`HANDOVER_METADATA_KEY`]): a next owner that did not get the state refuses them
    /// rather than start them empty as if it had (they are then re-placed once this node is
    /// gone, without state, as a node that leaves over a lossy link loses it).
    pub(super) fn mark_states_sent(
        &self,
        by_node: &mut BTreeMap<NodeName, Vec<(crate::model::ChildSpec, crate::model::Metadata)>>,
    ) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        for (spec, metadata) in by_node.values_mut().flatten() {
            let sent = cluster
                .hot
                .moves
                .get(&spec.id)
                .filter(|m| m.fell_back.is_none());
            if let Some(moving) = sent {
                metadata.insert(HANDOVER_METADATA_KEY.to_owned(), moving.digest.clone());
            }
        }
    }
}
