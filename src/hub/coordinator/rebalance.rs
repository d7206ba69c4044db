//! Redistribution carried out: what moves when the members change (the graceful leave is in
//! `leave`).
//!
//! One pass per due batch of membership events (`core::event_batch`), whatever the number of
//! events in it, never per event. A pass scans the registry's bindings (ids and nodes, no row
//! unpacked) and reads whole only the rows that can move (`core::redistribution::may_plan`):
//! those bound to no live node, and those this node runs off their owner (`pass_plan`, which
//! plans from them half-way through a node's grace for the pass at its end). The decision is
//! the pure [`plan_redistribution`]; this file carries it out:
//! - a **migration** is a cold swap: stopped here (one stop batch per owner), then started on
//!   the owner (one start batch per owner, awaited) with `check_existing: false`, so an owner
//!   already running it (a duplicate after a partition) just keeps its copy;
//! - a **re-placement** is one start batch per owner per pass, never a frame per child. The
//!   owner re-places the stubs it owns in its own pass; another node holding such a stub keeps
//!   it for the retry timer and sends it only if no node runs it by then (the owner restarted
//!   empty or never had the row), and the owner's supervisor keeps one child. With replicas
//!   every node holding the stub sends it at once.
//!
//! A migration's stop *releases* the child (`RegistryOp::Release`, wire `Unbind`): its row stays
//! as a stub on every node until the new owner's upsert replaces it, so a child whose migration
//! is cut short (the old owner crashes) is still re-placed. A deliberate stop sends `Removed`.
//!
//! Failed migrations and re-placements, and the stubs left to their owner, are retried on the
//! `migration_retry_ms` timer.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ractor::ActorRef;

use super::cluster::{Cause, Internal, RetryTimer};
use super::handover::AfterExport;
use super::pass_plan::{declared_basis, pass_plan};
use super::{CoordinatorState, StartPurpose, StopPurpose};
use crate::core::redistribution::{replacement_batches, Liveness};
use crate::events::{HubEvent, MoveReason};
use crate::hooks::{HookEvent, HookKey};
use crate::hub::protocol::CoordinatorMsg;
use crate::hub::simulation::InjectedBug;
use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Row};
use crate::telemetry::failure_tally::FailureTally;
use crate::types::OnFailure;
use crate::types::{ChildStartError, ChildStopError};
use crate::types::{StartResult, StopFailure};

type Batches = BTreeMap<NodeName, Vec<(ChildSpec, Metadata)>>;

pub(super) fn batches<'a>(rows: impl IntoIterator<Item = (&'a NodeName, &'a Row)>) -> Batches {
    let mut by_node: Batches = BTreeMap::new();
    for (node, row) in rows {
        let child = (row.spec.clone(), row.metadata.clone());
        // The node's name is copied once per batch, not once per child.
        match by_node.get_mut(node) {
            Some(children) => children.push(child),
            None => {
                by_node.insert(node.clone(), vec![child]);
            }
        }
    }
    by_node
}

/// What an internal batch's timeout grows by per child: about 30 times what a start or stop
/// takes per child on a loaded node.
const INTERNAL_ALLOWANCE_PER_CHILD: Duration = Duration::from_millis(1);

impl CoordinatorState {
    /// How long the cluster's own start or stop of `children` may take: the configured
    /// timeout (10 s when none) plus [`INTERNAL_ALLOWANCE_PER_CHILD`] for each child, so that a
    /// re-placement of a quarter million children after a node loss is not failed whole, and
    /// sent again whole, because it took longer than a batch of ten.
    fn internal_timeout(&self, children: usize) -> Duration {
        let t = self.hub.config.default_timeout();
        let base = if t.is_zero() {
            Duration::from_secs(10)
        } else {
            t
        };
        base + INTERNAL_ALLOWANCE_PER_CHILD * children.min(u32::MAX as usize) as u32
    }

    /// Starts `rows` on the given nodes for the cluster itself (awaited; failures retried).
    /// Answers the start request's id, none when there was nothing to start.
    pub(super) fn start_internal(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        by_node: Batches,
        internal: Internal,
    ) -> Option<u64> {
        self.start_internal_behind(myself, by_node, internal, 0)
    }

    /// [`Self::start_internal`] of a batch sent right after others of `ahead` children to the
    /// same supervisors: its timeout also allows for theirs, which start first, so the last of
    /// a re-placement's batches has the time one batch of them all had.
    pub(super) fn start_internal_behind(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        by_node: Batches,
        internal: Internal,
        ahead: usize,
    ) -> Option<u64> {
        if by_node.is_empty() {
            if let Internal::Handover {
                reply: Some(reply), ..
            } = internal
            {
                let _ = reply.send(());
            }
            return None;
        }
        let rows = match &internal {
            Internal::Replace { rows, .. } | Internal::Handover { rows, .. } => rows,
        };
        let durable = rows
            .values()
            .filter(|row| row.hub.durable)
            .map(|row| row.spec.id.clone())
            .collect();
        let request_id = self.next_id();
        let timeout = self.internal_timeout(ahead + by_node.values().map(Vec::len).sum::<usize>());
        let result = StartResult {
            awaited: true,
            ..StartResult::default()
        };
        self.begin_start(
            myself,
            request_id,
            by_node,
            true,
            // A moved or re-placed child keeps its row's durable mark.
            durable,
            result,
            StartPurpose::Internal(internal),
            OnFailure::Continue,
            timeout,
        );
        Some(request_id)
    }

    /// The redistribution pass for a due batch. Answers the ids of the start requests that
    /// re-place children no live node runs.
    pub(super) fn redistribute(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        joined: &[NodeName],
        left: &[NodeName],
    ) -> BTreeSet<u64> {
        let hub = self.hub.clone();
        let me = hub.node.clone();
        let span = tracing::info_span!(
            "process_hub.redistribution",
            otel.name = "process_hub.redistribution",
            hub = %hub.config.hub_id,
            node = %me,
            joined = joined.len(),
            left = left.len(),
        );
        let _entered = span.enter();
        let Some(cluster) = &mut self.cluster else {
            return BTreeSet::new();
        };
        if cluster.self_leaving {
            return BTreeSet::new();
        }
        if hub.partition.partitioned() {
            // Nothing starts on this side; leaving partition mode runs a pass over everyone.
            tracing::debug!("redistribution pass skipped: partition mode");
            return BTreeSet::new();
        }
        hub.hooks.fire(HookKey::PreNodesRedistribution, || {
            HookEvent::PreNodesRedistribution {
                joined: joined.to_vec(),
                left: left.to_vec(),
            }
        });
        let declared = declared_basis(&hub);
        // Why things move, for the events: a join moves children to the new owner; a node
        // gone for good has its children re-placed, reported as left when it said goodbye.
        let moved_because = if joined.is_empty() {
            MoveReason::Rebalance
        } else {
            MoveReason::NodeJoined
        };
        let replaced_because =
            if !left.is_empty() && left.iter().all(|n| cluster.departed.contains(n)) {
                MoveReason::NodeLeft
            } else {
                MoveReason::NodeDown
            };
        for node in left {
            cluster.departed.remove(node);
        }
        let (inputs, mut plan) = pass_plan(&hub, cluster, &declared);
        let factor = inputs.factor;
        if hub.has_bug(InjectedBug::NeverMigrate) {
            plan.migrations.clear();
        }
        if hub.has_bug(InjectedBug::SkipReplicaRecreation) {
            // Only children no node runs any more are re-placed.
            for rows in plan.replacements.values_mut() {
                rows.retain(|row| row.node_pids.is_empty());
            }
            plan.replacements.retain(|_, rows| !rows.is_empty());
        }
        // A stub whose owner is another node: that owner holds it too (every node keeps every
        // row) and re-places it in its own pass; sending it as well cost both nodes a start
        // batch of duplicates (the owner kept one child). This node keeps it for the retry
        // timer instead, which sends it only if no node runs it by then: the owner restarted
        // empty, or never heard of the row. With replicas every owner starts its own instance,
        // and the retry starts only one, so replicated stubs are still sent.
        let mut left_to_owner = Vec::new();
        if factor == 1 {
            plan.replacements.retain(|owner, rows| {
                if *owner == me {
                    return true;
                }
                left_to_owner.append(rows);
                false
            });
        }
        let (migrating, replacing) = (plan.migrating(), plan.replacing());
        if migrating + replacing > 0 {
            tracing::info!(
                migrating,
                replacing,
                held_back = plan.held_back.len(),
                left_to_owner = left_to_owner.len(),
                ?joined,
                ?left,
                "redistribution pass"
            );
        }
        cluster.migrating.extend(plan.children().cloned());
        if migrating + replacing > 0 {
            let each = |by_node: &BTreeMap<NodeName, Vec<Row>>| -> Vec<(ChildId, NodeName)> {
                by_node
                    .iter()
                    .flat_map(|(node, rows)| {
                        rows.iter().map(move |r| (r.spec.id.clone(), node.clone()))
                    })
                    .collect()
            };
            hub.hooks.fire(HookKey::PreChildrenRedistribution, || {
                HookEvent::PreChildrenRedistribution {
                    migrating: each(&plan.migrations),
                    replacing: each(&plan.replacements),
                }
            });
        }
        if !plan.excess.is_empty() {
            // Every owner runs a replica: this one stops, released (its row stays, bound to
            // the owners), and nothing starts anywhere.
            tracing::info!(
                replicas = plan.excess.len(),
                "stopping replicas off their owners"
            );
            let request_id = self.next_id();
            let excess = std::mem::take(&mut plan.excess);
            self.deliver_stop(myself, &me, request_id, excess, false, true);
        }
        for (target, rows) in plan.migrations {
            self.migrate(myself, target, rows, moved_because);
        }
        // The owner starts what it owns; another holder's stubs wait for the retry timer
        // (above). One batch per owner per pass, not one frame per child.
        let mut replacements = plan.replacements;
        let replace: Vec<(&NodeName, Row)> = replacements
            .iter_mut()
            .flat_map(|(owner, rows)| std::mem::take(rows).into_iter().map(move |r| (owner, r)))
            .collect();
        let cause = Cause::Replaced {
            why: replaced_because,
        };
        // In batches of a caller's size, not one: the owner's supervisor starts the next batch
        // while its registry records the last and the peers merge the one before, as a
        // caller's pipelined requests do.
        let mut requests = BTreeSet::new();
        for batch in replacement_batches(replace) {
            let by_node = batches(batch.children.iter().map(|(n, r)| (*n, r)));
            let rows = batch
                .children
                .into_iter()
                .map(|(_, r)| (r.spec.id.clone(), r))
                .collect();
            let cause = cause.clone();
            requests.extend(self.start_internal_behind(
                myself,
                by_node,
                Internal::Replace { rows, cause },
                batch.ahead,
            ));
        }
        // After the batches, so that the owner's supervisor starts while the stubs left to other
        // owners are noted.
        if let (false, Some(cluster)) = (left_to_owner.is_empty(), &mut self.cluster) {
            let cause = Cause::Replaced {
                why: replaced_because,
            };
            // The owners get as long as their own start of these may take.
            cluster.left_to_owners.leave(
                left_to_owner.iter().map(|row| row.spec.id.clone()),
                tokio::time::Instant::now().into_std(),
                INTERNAL_ALLOWANCE_PER_CHILD,
            );
            for row in left_to_owner {
                cluster
                    .failed
                    .insert(row.spec.id.clone(), (row, cause.clone()));
            }
            let retry = Duration::from_millis(hub.config.migration_retry_ms);
            cluster.retry_timer.arm_if_idle(myself, retry);
        }
        crate::telemetry::metrics::redistribution_pass(&hub.config.hub_id, &hub.node);
        hub.hooks.fire(HookKey::PostNodesRedistribution, || {
            HookEvent::PostNodesRedistribution {
                migrating,
                replacing,
            }
        });
        requests
    }

    /// Moves `rows`, children running here, to `target`. A cold swap: stopped here first (one
    /// batch), started there when stopped. Children that hand their state over under
    /// `migration = "hot"` export it first and start there with it. The caller has marked them
    /// `migrating`.
    pub(super) fn migrate(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        target: NodeName,
        rows: Vec<Row>,
        why: MoveReason,
    ) {
        let (hot, rows) = self.split_hot(rows);
        if !hot.is_empty() {
            let after = AfterExport::Migrate {
                target: target.clone(),
                why,
                rows: hot.clone(),
            };
            self.begin_export(myself, &hot, after);
        }
        if rows.is_empty() {
            return;
        }
        let request_id = self.next_id();
        let timeout = self.internal_timeout(rows.len());
        let ids = rows.iter().map(|r| r.spec.id.clone()).collect();
        let by_node = BTreeMap::from([(self.hub.node.clone(), ids)]);
        self.begin_stop(
            myself,
            request_id,
            by_node,
            Vec::new(),
            StopPurpose::Migration { target, why, rows },
            timeout,
        );
    }

    /// The second half of a migration: the children stopped here start on their owner.
    pub(crate) fn continue_migration(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        target: NodeName,
        why: MoveReason,
        rows: Vec<Row>,
        stop_errors: Vec<StopFailure>,
    ) {
        let refused: BTreeMap<ChildId, ChildStopError> = stop_errors
            .into_iter()
            .filter(|e| e.reason != ChildStopError::NotFound)
            .map(|e| (e.id, e.reason))
            .collect();
        let mut moving = BTreeMap::new();
        let mut placed = Vec::new();
        let mut not_stopped = FailureTally::new();
        for row in rows {
            let id = row.spec.id.clone();
            if let Some(reason) = refused.get(&id) {
                not_stopped.add(&id, reason);
                if let Some(cluster) = &mut self.cluster {
                    cluster.migrating.remove(&id);
                }
                continue;
            }
            // The ring may have changed while the stop ran: go to the owner of now (a replica:
            // the planned owner while it still is one).
            let owner = if self.hub.config.replication_factor > 1 {
                let owners = self
                    .hub
                    .owners_of(&self.hub.ring(), &id, Some(&row.metadata));
                if owners.contains(&target) {
                    target.clone()
                } else {
                    owners.into_iter().next().unwrap_or_else(|| target.clone())
                }
            } else {
                self.placement_of(&id, Some(&row.metadata))
            };
            if owner != target {
                tracing::debug!(child = %id, planned = %target, owner = %owner, "migration target changed");
            }
            placed.push((owner, row.clone()));
            moving.insert(id, row);
        }
        not_stopped.warn("migration: children could not be stopped here; a later pass retries");
        let by_node = batches(placed.iter().map(|(n, r)| (n, r)));
        let cause = Cause::Moved {
            from: self.hub.node.clone(),
            why,
        };
        self.start_internal(
            myself,
            by_node,
            Internal::Replace {
                rows: moving,
                cause,
            },
        );
    }

    /// An internal start completed: record failures for the retry timer.
    pub(crate) fn finish_internal_start(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        internal: Internal,
        result: StartResult,
    ) {
        let stays = self.finish_hot(myself, &result);
        let retry = Duration::from_millis(self.hub.config.migration_retry_ms);
        let me = self.hub.node.clone();
        let (mut rows, reply, cause) = match internal {
            Internal::Replace { rows, cause } => (rows, None, Some(cause)),
            Internal::Handover { rows, reply } => (rows, reply, None),
        };
        let Some(cluster) = &mut self.cluster else {
            if let Some(reply) = reply {
                let _ = reply.send(());
            }
            return;
        };
        for id in rows.keys() {
            cluster.migrating.remove(id);
        }
        cluster.retry_timer.answered(rows.keys());
        for id in &stays {
            rows.remove(id);
        }

        let mut not_placed = FailureTally::new();
        for failure in &result.errors {
            if failure.reason == ChildStartError::AlreadyStarted {
                continue;
            }
            not_placed.add(
                &failure.id,
                format_args!("{}: {}", failure.node, failure.reason),
            );
            if let (Some(cause), Some(row)) = (&cause, rows.remove(&failure.id)) {
                cluster
                    .failed
                    .insert(failure.id.clone(), (row, cause.clone()));
            }
        }
        not_placed.warn("re-placement failed");
        if !cluster.failed.is_empty() {
            cluster.retry_timer.arm_if_idle(myself, retry);
        }
        // Where each child now runs (its first node): read from the answer, copied only into
        // the events and, when a hook listens, the hook's list.
        let placed = || {
            result
                .started
                .iter()
                .filter_map(|s| s.nodes.first().map(|(n, _)| (&s.id, n)))
        };
        for (id, to) in placed() {
            self.hub.events.publish(|| match &cause {
                Some(Cause::Moved { from, why }) => HubEvent::ChildMoved {
                    id: id.clone(),
                    from: from.clone(),
                    to: to.clone(),
                    why: *why,
                },
                Some(Cause::Replaced { why }) => HubEvent::ChildReplaced {
                    id: id.clone(),
                    node: to.clone(),
                    why: *why,
                },
                None => HubEvent::ChildMoved {
                    id: id.clone(),
                    from: me.clone(),
                    to: to.clone(),
                    why: MoveReason::NodeLeft,
                },
            });
        }
        if placed().next().is_some() {
            self.hub
                .hooks
                .fire(HookKey::ChildrenMigrated, || HookEvent::ChildrenMigrated {
                    children: placed().map(|(id, to)| (id.clone(), to.clone())).collect(),
                });
        }
        if let Some(reply) = reply {
            let _ = reply.send(());
        }
    }

    /// The retry timer: start the children whose migration or re-placement failed, and the
    /// stubs left to their owner, on their owner of now, unless some node runs them meanwhile
    /// or their row is gone.
    pub(super) fn retry_failed(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if matches!(cluster.retry_timer, RetryTimer::Running { .. }) {
            // The retry under way arms the next timer when its starts answered.
            return;
        }
        if let Some(timer) = cluster.retry_timer.take() {
            timer.abort();
        }
        if cluster.self_leaving || self.hub.partition.partitioned() {
            // Kept for leaving partition mode, which retries them.
            return;
        }
        let failed: Vec<(Row, Cause)> = std::mem::take(&mut cluster.failed).into_values().collect();
        let live = Liveness {
            me: &self.hub.node,
            up: &cluster.peers,
            in_grace: &cluster.grace_timers.keys().cloned().collect(),
        };
        // Some member runs it meanwhile (its owner re-placed it), or its row is gone here
        // (stopped, or its stub swept): nothing to start. Read from the bindings alone.
        let storage = &self.hub.storage;
        let idle = failed.into_iter().filter(|(row, _)| {
            storage
                .bound_nodes(&row.spec.id)
                .is_some_and(|nodes| !nodes.iter().any(|n| live.runs_on(n)))
        });
        let (left, mut idle): (Vec<_>, Vec<_>) =
            idle.partition(|(row, _)| cluster.left_to_owners.contains(&row.spec.id));
        let left_ids = left.iter().map(|(row, _)| row.spec.id.clone()).collect();
        let now = tokio::time::Instant::now().into_std();
        if cluster.left_to_owners.look(left_ids, now) {
            idle.extend(left);
            // The owners had their time: a reap that waited for them goes (what they did not
            // take is started here, bound to its owner of now).
            let due = cluster.held_reaps.owners_done();
            self.reap(myself, due);
        } else {
            // Their owners are at work on them: the next look.
            tracing::debug!(stubs = left.len(), "stubs left to their owners wait");
            for (row, cause) in left {
                cluster.failed.insert(row.spec.id.clone(), (row, cause));
            }
        }
        // One internal start per cause, so each child is reported as what it was.
        let mut by_cause: Vec<(Cause, Vec<(NodeName, Row)>)> = Vec::new();
        let mut retried = 0;
        for (row, cause) in idle {
            let owner = self.placement_of(&row.spec.id, Some(&row.metadata));
            if let Some(cluster) = &mut self.cluster {
                cluster.migrating.insert(row.spec.id.clone());
            }
            retried += 1;
            match by_cause.iter_mut().find(|(c, _)| *c == cause) {
                Some((_, placed)) => placed.push((owner, row)),
                None => by_cause.push((cause, vec![(owner, row)])),
            }
        }
        if retried > 0 {
            tracing::info!(children = retried, "retrying failed re-placements");
        }
        let running: BTreeSet<ChildId> = by_cause
            .iter()
            .flat_map(|(_, placed)| placed.iter().map(|(_, r)| r.spec.id.clone()))
            .collect();
        if let Some(cluster) = &mut self.cluster {
            if !running.is_empty() {
                cluster.retry_timer = RetryTimer::Running { children: running };
            } else if !cluster.failed.is_empty() {
                let retry = Duration::from_millis(self.hub.config.migration_retry_ms);
                cluster.retry_timer.arm_if_idle(myself, retry);
            }
        }
        for (cause, placed) in by_cause {
            let by_node = batches(placed.iter().map(|(n, r)| (n, r)));
            let rows = placed
                .into_iter()
                .map(|(_, r)| (r.spec.id.clone(), r))
                .collect();
            self.start_internal(myself, by_node, Internal::Replace { rows, cause });
        }
    }
}
