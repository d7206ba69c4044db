//! The start/stop pipeline: validate, plan, deliver one batch per node, and wait for the
//! nodes' answers in `pending_operations` (see the [module doc](super)).
//!
//! On one node the owner is always this node and delivery is a message to the local
//! ChildSupervisor (`HubShared::deliver_start`). Routing is isolated in
//! [`CoordinatorState::owner_of`] (placement) and [`CoordinatorState::deliver_start`] (local or
//! over the wire), so the rest of the pipeline (pending table, timeouts, rollback) is the same on
//! one node and many.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ractor::ActorRef;

use super::{
    CoordinatorState, PendingOperation, PendingStart, PendingStop, ReplicaStarts, StartPurpose,
    StopPurpose,
};
use crate::core::{plan_start, Rejection};
use crate::hub::protocol::{
    CoordinatorMsg, NodeStartReport, StartBatch, StartReply, StartReplyPort, StopBatch, StopReply,
    StopReplyPort,
};
use crate::hub::simulation::InjectedBug;
use crate::model::{ChildId, ChildSpec, FastHashMap, Metadata, NodeName};
use crate::types::ChildStartError;
use crate::types::ChildStopError;
use crate::types::{ChildFailure, StartResult, StopFailure, StopResult};
use crate::types::{OnFailure, StartOptions, StopOptions};

impl CoordinatorState {
    /// (from this node) or as a `StartReply` over the wire (from a peer).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn deliver_start(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        node: &NodeName,
        request_id: u64,
        children: Vec<(ChildSpec, Metadata)>,
        existing_ok: bool,
        durable: &BTreeSet<ChildId>,
        awaited: bool,
    ) {
        let durable: BTreeSet<ChildId> = children
            .iter()
            .filter(|(spec, _)| durable.contains(&spec.id))
            .map(|(spec, _)| spec.id.clone())
            .collect();
        let coordinator = myself.clone();
        let reply: StartReply = if awaited {
            Box::new(move |report| {
                let _ = coordinator.cast(CoordinatorMsg::NodeStarted { request_id, report });
            })
        } else {
            Box::new(|report: NodeStartReport| {
                for (id, e) in report.errors {
                    tracing::warn!(child = %id, node = %report.node, error = %e, "child did not start");
                }
            })
        };
        let batch = StartBatch {
            children,
            existing_ok,
            durable,
            reply,
        };
        match &self.cluster {
            Some(cluster) if node != &self.hub.node => {
                cluster.send_start(&self.hub.node, node, request_id, batch)
            }
            _ => self.hub.deliver_start(node, batch),
        }
    }

    /// Sends a stop batch to `node`; when awaited its answer comes back as `NodeStopped`.
    pub(crate) fn deliver_stop(
        &self,
        myself: &ActorRef<CoordinatorMsg>,
        node: &NodeName,
        request_id: u64,
        ids: Vec<ChildId>,
        awaited: bool,
        release: bool,
    ) {
        let coordinator = myself.clone();
        let reply: StopReply = if awaited {
            Box::new(move |report| {
                let _ = coordinator.cast(CoordinatorMsg::NodeStopped { request_id, report });
            })
        } else {
            Box::new(|_| {})
        };
        let batch = StopBatch {
            ids,
            reply,
            release,
        };
        match &self.cluster {
            Some(cluster) if node != &self.hub.node => {
                cluster.send_stop(&self.hub.node, node, request_id, batch)
            }
            _ => self.hub.deliver_stop(node, batch),
        }
    }

    pub(super) fn start(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    ) {
        let timeout = match opts.validate(specs.len(), self.hub.config.default_timeout()) {
            Ok(timeout) => timeout,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let node = self.hub.node.clone();
        let mut result = StartResult {
            awaited: opts.awaitable,
            ..StartResult::default()
        };
        let ring = self.hub.ring();
        let mut opts = opts;
        self.hub.refresh_load_placements(&ring, &mut opts);
        let mut placed = Vec::with_capacity(specs.len());
        for spec in specs {
            let checked = self
                .hub
                .check_kind(&spec)
                .and_then(|()| Ok(self.hub.check_mapping(&ring, &opts, &spec.id)?));
            match checked {
                Ok(()) => placed.push(spec),
                Err(reason) => result.errors.push(ChildFailure {
                    id: spec.id,
                    node: node.clone(),
                    reason,
                }),
            }
        }
        let specs = placed;
        let storage = self.hub.storage.clone();
        let plan = plan_start(
            specs,
            &opts.metadata,
            opts.check_existing,
            |id| storage.contains(id),
            |id| self.placement_of(id, Some(&opts.metadata_for(id))),
        );
        for (id, rejection) in plan.rejected {
            let reason = match rejection {
                Rejection::AlreadyStarted => ChildStartError::AlreadyStarted,
                Rejection::InvalidId(reason) => ChildStartError::InvalidId { reason },
                Rejection::Invalid(e) => ChildStartError::from(e),
            };
            result.errors.push(ChildFailure {
                id,
                node: node.clone(),
                reason,
            });
        }
        if plan.by_node.is_empty() {
            let _ = reply.send(Ok(result));
            return;
        }
        let request_id = self.next_id();
        let existing_ok = !opts.check_existing;
        let durable: BTreeSet<ChildId> = if opts.durable {
            plan.by_node
                .values()
                .flatten()
                .map(|c| c.spec.id.clone())
                .collect()
        } else {
            BTreeSet::new()
        };
        let replicas = self.replica_starts(&ring, &plan.by_node, &opts);
        if !opts.awaitable {
            if let Some(replicas) = replicas {
                self.deliver_replicas(myself, replicas.by_node, &durable);
            }
            for (node, children) in plan.by_node {
                let children = children
                    .into_iter()
                    .map(|c| {
                        let metadata = opts.metadata_for(&c.spec.id);
                        (c.spec, metadata)
                    })
                    .collect();
                self.deliver_start(
                    myself,
                    &node,
                    request_id,
                    children,
                    existing_ok,
                    &durable,
                    false,
                );
            }
            let _ = reply.send(Ok(result));
            return;
        }
        let by_node = plan
            .by_node
            .into_iter()
            .map(|(node, children)| {
                let children = children
                    .into_iter()
                    .map(|c| {
                        let metadata = opts.metadata_for(&c.spec.id);
                        (c.spec, metadata)
                    })
                    .collect();
                (node, children)
            })
            .collect();
        let replicas = replicas.map(|r| ReplicaStarts {
            by_node: r.by_node,
            durable: durable.clone(),
        });
        self.begin_start(
            myself,
            request_id,
            by_node,
            existing_ok,
            durable,
            result,
            StartPurpose::Request(reply),
            opts.on_failure,
            timeout,
        );
        if let Some(PendingOperation::Start(op)) = self.pending_operations.get_mut(&request_id) {
            op.replicas = replicas;
        }
    }

    /// With a replication factor above 1, each planned child's other owners, by node. They are
    /// started once the first owners answered (an awaited start: only the children that
    /// started, so a replica never outlives a refused start nor races the first owner's start),
    /// or at once (a start nobody awaits); a replica that fails to start is started again by
    /// the next redistribution pass or reconcile round.
    fn replica_starts(
        &self,
        ring: &crate::core::placement::HashRing,
        by_node: &BTreeMap<NodeName, Vec<crate::core::PlannedChild>>,
        opts: &StartOptions,
    ) -> Option<ReplicaStarts> {
        if self.hub.config.replication_factor <= 1 || self.cluster.is_none() {
            return None;
        }
        let mut replicas: BTreeMap<NodeName, Vec<(ChildSpec, Metadata)>> = BTreeMap::new();
        for (primary, children) in by_node {
            for child in children {
                let metadata = opts.metadata_for(&child.spec.id);
                for owner in self.hub.owners_of(ring, &child.spec.id, Some(&metadata)) {
                    if &owner != primary {
                        replicas
                            .entry(owner)
                            .or_default()
                            .push((child.spec.clone(), metadata.clone()));
                    }
                }
            }
        }
        Some(ReplicaStarts {
            by_node: replicas,
            durable: BTreeSet::new(),
        })
    }

    /// Delivers replica starts, unawaited (`existing_ok`: an owner already running one keeps
    /// it).
    pub(crate) fn deliver_replicas(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        by_node: BTreeMap<NodeName, Vec<(ChildSpec, Metadata)>>,
        durable: &BTreeSet<ChildId>,
    ) {
        for (node, children) in by_node {
            if children.is_empty() {
                continue;
            }
            let request_id = self.next_id();
            self.deliver_start(myself, &node, request_id, children, true, durable, false);
        }
    }

    /// Delivers planned batches and waits for them in `pending_operations[request_id]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn begin_start(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        by_node: BTreeMap<NodeName, Vec<(ChildSpec, Metadata)>>,
        existing_ok: bool,
        durable: BTreeSet<ChildId>,
        result: StartResult,
        purpose: StartPurpose,
        on_failure: OnFailure,
        timeout: Duration,
    ) {
        let mut awaiting: FastHashMap<ChildId, NodeName> = FastHashMap::with_capacity_and_hasher(
            by_node.values().map(Vec::len).sum(),
            Default::default(),
        );
        for (node, children) in &by_node {
            awaiting.extend(
                children
                    .iter()
                    .map(|(spec, _)| (spec.id.clone(), node.clone())),
            );
        }
        let span = tracing::info_span!(
            "process_hub.start",
            otel.name = "process_hub.start",
            otel.kind = "client",
            hub = %self.hub.config.hub_id,
            node = %self.hub.node,
            request_id,
            purpose = match &purpose {
                StartPurpose::Request(_) => "request",
                StartPurpose::Internal(_) => "re_placement",
            },
            children = awaiting.len(),
            nodes = by_node.len(),
            started = tracing::field::Empty,
            failed = tracing::field::Empty,
        );
        self.pending_operations.insert(
            request_id,
            PendingOperation::Start(PendingStart {
                purpose,
                awaiting,
                result,
                on_failure,
                timeout,
                timer: self.arm_timer(myself, request_id, timeout),
                replicas: None,
                span: span.clone(),
            }),
        );
        let _entered = span.enter();
        for (node, children) in by_node {
            tracing::debug!(to = %node, children = children.len(), "start batch delivered");
            self.deliver_start(
                myself,
                &node,
                request_id,
                children,
                existing_ok,
                &durable,
                true,
            );
        }
        if timeout.is_zero() {
            self.on_timeout(myself, request_id);
        }
    }

    pub(super) fn stop(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        ids: Vec<ChildId>,
        opts: StopOptions,
        reply: StopReplyPort,
    ) {
        if self.hub.has_bug(InjectedBug::ForgetStopReplies) {
            std::mem::forget(reply);
            return;
        }
        let timeout = match opts.validate(ids.len(), self.hub.config.default_timeout()) {
            Ok(timeout) => timeout,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let mut errors = Vec::new();
        let mut by_node: BTreeMap<NodeName, Vec<ChildId>> = BTreeMap::new();
        // One allocation for the whole stop, not a tree node per few ids.
        let mut seen =
            crate::model::FastHashSet::with_capacity_and_hasher(ids.len(), Default::default());
        for id in ids {
            if !seen.insert(id.clone()) {
                continue;
            }
            // Only the row's bindings: a stop of many children must not unpack every row. Each
            // node's name is copied once per stop, not once per child.
            let mut bound = 0usize;
            let known = self.hub.storage.each_bound_node(&id, &mut |node| {
                bound += 1;
                match by_node.get_mut(node) {
                    Some(ids) => ids.push(id.clone()),
                    None => {
                        by_node.insert(node.to_owned(), vec![id.clone()]);
                    }
                }
            });
            match (known, bound) {
                // Bound: routed above.
                (true, 1..) => {}
                // Unknown here, but a peer may have just started it (its row is on the way):
                // starts go to the ring owner, so the owner is asked.
                (false, _) if self.owner_of(&id) != self.hub.node => {
                    by_node.entry(self.owner_of(&id)).or_default().push(id);
                }
                (false, _) => errors.push(StopFailure {
                    id,
                    node: None,
                    reason: ChildStopError::NotFound,
                }),
                // A row nothing runs (left by a previous run): its owner forgets it.
                (true, 0) => {
                    by_node.entry(self.owner_of(&id)).or_default().push(id);
                }
            }
        }
        // A replica this node's registry does not show (its start still on its way, or this
        // node's copy behind after a restart) must stop too: with replicas every other member
        // is told (unawaited); one not running the child ignores it.
        let mut told_too: BTreeMap<NodeName, Vec<ChildId>> = BTreeMap::new();
        if self.hub.config.replication_factor > 1 {
            for member in self.hub.members() {
                if member == self.hub.node {
                    continue;
                }
                let asked: BTreeSet<&ChildId> =
                    by_node.get(&member).into_iter().flatten().collect();
                let mut rest: Vec<ChildId> = seen
                    .iter()
                    .filter(|id| !asked.contains(id))
                    .cloned()
                    .collect();
                // In the order of the ids, as every batch is (the set's order is random).
                rest.sort_unstable();
                if !rest.is_empty() {
                    told_too.insert(member, rest);
                }
            }
        }
        for (node, ids) in told_too {
            let request_id = self.next_id();
            self.deliver_stop(myself, &node, request_id, ids, false, false);
        }
        let request_id = self.next_id();
        if !opts.awaitable || by_node.is_empty() {
            for (node, ids) in by_node {
                self.deliver_stop(myself, &node, request_id, ids, false, false);
            }
            let _ = reply.send(Ok(StopResult {
                awaited: opts.awaitable,
                stopped: Vec::new(),
                errors,
                pending: Vec::new(),
            }));
            return;
        }
        self.begin_stop(
            myself,
            request_id,
            by_node,
            errors,
            StopPurpose::Request(reply),
            timeout,
        );
    }

    pub(crate) fn begin_stop(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        request_id: u64,
        by_node: BTreeMap<NodeName, Vec<ChildId>>,
        errors: Vec<StopFailure>,
        purpose: StopPurpose,
        timeout: Duration,
    ) {
        let release = matches!(purpose, StopPurpose::Migration { .. });
        self.pending_operations.insert(
            request_id,
            PendingOperation::Stop(PendingStop {
                purpose,
                awaiting: by_node
                    .iter()
                    .map(|(n, ids)| (n.clone(), ids.iter().cloned().collect()))
                    .collect(),
                stopped: FastHashMap::with_capacity_and_hasher(
                    by_node.values().map(Vec::len).sum(),
                    Default::default(),
                ),
                errors,
                timer: self.arm_timer(myself, request_id, timeout),
            }),
        );
        for (node, ids) in by_node {
            self.deliver_stop(myself, &node, request_id, ids, true, release);
        }
        if timeout.is_zero() {
            self.on_timeout(myself, request_id);
        }
    }
}
