//! Mutations of the declared list: durable starts, stops, the operator's clear and the
//! undeclaring of children that can never start. A child module of the DeclaredLeader
//! (`super`), apart from it because this is where the ordering rules live: a declaration is
//! durable before its start is forwarded, a removal before its terminate, and a node that is
//! not the leader (or cannot reach one) defers to the leader or refuses with `no_leader`.

use std::collections::BTreeSet;

use ractor::{ActorRef, RpcReplyPort};

use super::forward::{
    forward_undeclared_stop, start_declared, undeclared_by_stop, DeclaredStart, StopAfterUndeclare,
};
use super::persist::AfterPersist;
use super::{DeclaredLeaderState, Then};
use crate::cluster::wire::DeclaredOp;
use crate::hub::protocol::{DeclaredMsg, StartReplyPort, StopReplyPort};
use crate::hub::simulation::{InjectedBug, Observation};
use crate::model::{validate_child, ChildId, ChildSpec, Restart, RESERVED_METADATA_KEY};
use crate::types::ChildFailure;
use crate::types::{ChildStartError, RecoveryError, StartError, StopError};
use crate::types::{StartOptions, StopOptions};

impl DeclaredLeaderState {
    /// Applies `op` here, this node being the leader: persists it, then `then` gets the new
    /// version (broadcast and ship follow). A parked node refuses everything but `Clear`.
    pub(crate) fn mutate_here(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        op: DeclaredOp,
        then: Then,
    ) {
        if let Some(fault) = self.refusing() {
            return then(Err(super::degraded::refusal(fault)));
        }
        if self.parked() && op != DeclaredOp::Clear {
            return then(Err(RecoveryError::DeclaredParked));
        }
        let base = self.state.list().stamp();
        let mut after = AfterPersist {
            // A parked copy means nothing: its clear is broadcast whole.
            base: (!self.parked()).then(|| base.clone()),
            ..AfterPersist::default()
        };
        let (mut declared, mut undeclared, mut untouched) = (Vec::new(), Vec::new(), Vec::new());
        let mut cleared = false;
        match op {
            DeclaredOp::Declare { children } => {
                if self.hub.has_bug(InjectedBug::AcknowledgeWithoutDeclaring) {
                    let version = self.state.list().version();
                    return then(Ok(version));
                }
                for (spec, metadata) in children {
                    let id = spec.id.clone();
                    match self.state.declare(spec, metadata) {
                        Ok(effects) => {
                            self.apply(effects, &mut after);
                            declared.push(id);
                        }
                        Err(e) => tracing::error!(child = %id, error = %e, "cannot declare"),
                    }
                }
            }
            DeclaredOp::Undeclare { ids } => {
                for id in ids {
                    let before = self.state.list().version();
                    match self.state.undeclare(&id) {
                        Ok(effects) => {
                            let changed = self.state.list().version() != before;
                            self.apply(effects, &mut after);
                            if changed {
                                undeclared.push(id);
                            } else {
                                untouched.push(id);
                            }
                        }
                        Err(e) => {
                            tracing::error!(child = %id, error = %e, "cannot undeclare");
                            untouched.push(id);
                        }
                    }
                }
            }
            DeclaredOp::Clear => {
                let effects = self.state.clear();
                tracing::warn!(hub = %self.hub.config.hub_id, version = self.state.list().version(),
                    "declared list cleared by the operator");
                self.apply(effects, &mut after);
                cleared = true;
            }
        }
        let result = self.state.list().stamp();
        let version = result.version;
        let hub = self.hub.clone();
        self.finish(myself, after, move |outcome| {
            if outcome.is_ok() {
                hub.observe(|| Observation::Authored {
                    author: hub.node.clone(),
                    base,
                    result,
                    declared,
                    undeclared,
                    untouched,
                    cleared,
                });
            }
            then(
                outcome
                    .map(|()| version)
                    .map_err(|e| super::degraded::refusal(&e)),
            )
        });
    }

    /// Applies `op` through the leader: here when this node leads, else over the wire; `then`
    /// runs once the leader persisted it (or refused, or could not be reached: `no_leader`).
    pub(super) fn mutate(&mut self, myself: &ActorRef<DeclaredMsg>, op: DeclaredOp, then: Then) {
        if self.hub.partition.partitioned() {
            // No quorum: this side's list takes nothing the majority's could contradict.
            return then(Err(RecoveryError::NoLeader {
                reason: format!(
                    "{} is partitioned: its side of the cluster has no quorum",
                    self.hub.node
                ),
            }));
        }
        match self.hub.leader() {
            None => then(Err(RecoveryError::NoLeader {
                reason: "the hub has no members".into(),
            })),
            Some(l) if l == self.hub.node => self.mutate_here(myself, op, then),
            Some(l) => self.remote.send(&self.hub, myself, &l, op, then),
        }
    }

    pub(super) fn durable_start(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    ) {
        if specs.is_empty() || opts.metadata.contains_key(RESERVED_METADATA_KEY) {
            // The Coordinator's validation answers these.
            return self.hub.start_through_coordinator(specs, opts, reply);
        }
        // Options the Coordinator would refuse are refused before anything is declared: a
        // refusal after the declaration would be an error for a change that happened.
        if let Err(e) = opts.validate(specs.len(), self.hub.config.default_timeout()) {
            let _ = reply.send(Err(e));
            return;
        }
        let mut refused = Vec::new();
        let mut accepted = Vec::new();
        let mut declare = Vec::new();
        let mut seen = BTreeSet::new();
        for spec in specs {
            if spec.restart != Restart::Permanent {
                refused.push(ChildFailure {
                    id: spec.id.clone(),
                    node: self.hub.node.clone(),
                    reason: ChildStartError::DurableRequiresPermanent {
                        restart: format!("{:?}", spec.restart).to_lowercase(),
                    },
                });
                continue;
            }
            if let Err(reason) = self.hub.check_kind(&spec) {
                // Never declared: no round could ever start it.
                refused.push(ChildFailure {
                    id: spec.id.clone(),
                    node: self.hub.node.clone(),
                    reason,
                });
                continue;
            }
            if let Err(e) = self.hub.check_mapping(&self.hub.ring(), &opts, &spec.id) {
                refused.push(ChildFailure {
                    id: spec.id.clone(),
                    node: self.hub.node.clone(),
                    reason: ChildStartError::from(e),
                });
                continue;
            }
            // Invalid children and repeats go to the Coordinator undeclared: it refuses them.
            if validate_child(&spec, &opts.metadata).is_ok() && seen.insert(spec.id.clone()) {
                declare.push((spec.clone(), opts.metadata_for(&spec.id)));
            }
            accepted.push(spec);
        }
        if accepted.is_empty() {
            let _ = reply.send(Ok(crate::StartResult {
                awaited: opts.awaitable,
                errors: refused,
                ..Default::default()
            }));
            return;
        }
        // Children neither declared nor running before this start: a reconcile round that sees
        // them declared before the start below reaches them may start them first (likelier
        // when the declare is cut into several frames), and that start is this one's.
        let fresh: BTreeSet<ChildId> = declare
            .iter()
            .map(|(spec, _)| &spec.id)
            .filter(|id| {
                !self.state.list().contains(id)
                    && self
                        .hub
                        .storage
                        .get(id)
                        .is_none_or(|row| row.node_pids.is_empty())
            })
            .cloned()
            .collect();
        let hub = self.hub.clone();
        let me = myself.clone();
        let declared: BTreeSet<ChildId> = declare.iter().map(|(spec, _)| spec.id.clone()).collect();
        let op = DeclaredOp::Declare { children: declare };
        self.mutate(
            myself,
            op,
            Box::new(move |outcome| {
                if let Err(e) = outcome {
                    let _ = reply.send(Err(StartError::of_declared(e)));
                    return;
                }
                let start = DeclaredStart {
                    accepted,
                    declared,
                    fresh,
                    refused,
                };
                tokio::spawn(start_declared(hub, me, start, opts, reply));
            }),
        );
    }

    pub(super) fn stop(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        ids: Vec<ChildId>,
        opts: StopOptions,
        reply: StopReplyPort,
    ) {
        let declared: Vec<ChildId> = ids
            .iter()
            .filter(|id| self.state.list().contains(id))
            .cloned()
            .collect();
        // A parked node does not know what is declared: a stop of a child marked durable
        // could not be recorded, and the child would return once the list is restored.
        let durable_while_parked = self.parked()
            && ids
                .iter()
                .any(|id| self.hub.storage.get(id).is_some_and(|r| r.hub.durable));
        if durable_while_parked {
            let _ = reply.send(Err(StopError::Declared(RecoveryError::DeclaredParked)));
            return;
        }
        // Options the Coordinator would refuse are refused before anything is undeclared.
        if let Err(e) = opts.validate(ids.len(), self.hub.config.default_timeout()) {
            let _ = reply.send(Err(e));
            return;
        }
        if self.hub.has_bug(InjectedBug::StopWithoutUndeclaring) {
            return self.hub.stop_through_coordinator(ids, opts, reply);
        }
        let leader = self.hub.leader();
        let here = leader.as_deref() == Some(self.hub.node.as_str());
        if declared.is_empty() && (here || leader.is_none()) {
            // The leader's own copy is the truth: nothing to undeclare.
            let stamp = self.state.list().stamp();
            self.hub.observe(|| Observation::Authored {
                author: self.hub.node.clone(),
                base: stamp.clone(),
                result: stamp,
                declared: Vec::new(),
                undeclared: Vec::new(),
                untouched: ids.clone(),
                cleared: false,
            });
            // A durable child the list no longer declares may still run (an earlier stop's
            // instance not confirmed stopped): its stop is decided, so what is not confirmed
            // now is pending, not an error.
            let durable = undeclared_by_stop(&self.hub, &[], &ids);
            return forward_undeclared_stop(
                &self.hub,
                ids,
                opts,
                reply,
                StopAfterUndeclare::new(durable),
            );
        }
        // Not the leader: this copy may be behind (a declaration whose broadcast has not
        // arrived yet), so the leader undeclares whichever of these it declares. If it cannot
        // be reached, the stop goes ahead only for children known here and never durable: a
        // durable or unknown one may be declared, and stopping it unrecorded would let the
        // next round bring it back.
        let undeclare = if here { declared.clone() } else { ids.clone() };
        let hub = self.hub.clone();
        let may_be_declared = !declared.is_empty()
            || ids
                .iter()
                .any(|id| self.hub.storage.get(id).is_none_or(|row| row.hub.durable));
        // Read before the removal: a round may stop one of them before the terminate.
        let undeclared = undeclared_by_stop(&self.hub, &declared, &ids);
        // Children this node knows nothing of (no row, not in its copy): a remote leader may
        // have declared them, so whether this stop changed anything for them can only be told
        // when the leader's answer shows that its copy did not move past this one.
        let unknown_here: BTreeSet<ChildId> = if here {
            BTreeSet::new()
        } else {
            ids.iter()
                .filter(|id| !undeclared.contains_key(*id) && self.hub.storage.get(id).is_none())
                .cloned()
                .collect()
        };
        let version_here = self.state.list().version();
        let lie = self.hub.has_bug(InjectedBug::ErrorAfterUndeclaring);
        self.mutate(
            myself,
            DeclaredOp::Undeclare { ids: undeclare },
            Box::new(move |outcome| match outcome {
                Ok(_) if lie => {
                    let (tx, _) = tokio::sync::oneshot::channel();
                    forward_undeclared_stop(&hub, ids, opts, tx.into(), StopAfterUndeclare::new(undeclared));
                    let _ = reply.send(Err(StopError::Declared(RecoveryError::NoLeader {
                        reason: "injected: the removal is committed all the same".into(),
                    })));
                }
                Ok(version) => {
                    let mut after = StopAfterUndeclare::new(undeclared);
                    if version > version_here {
                        after.unsure = unknown_here;
                    }
                    forward_undeclared_stop(&hub, ids, opts, reply, after)
                }
                Err(
                    e @ (RecoveryError::NoLeader { .. }
                    | RecoveryError::OutcomeUnknown { .. }
                    | RecoveryError::HubUnavailable { .. }
                    | RecoveryError::DeclaredParked),
                ) if !may_be_declared => {
                    tracing::debug!(error = %e, "stop of children not declared here; no leader to ask");
                    hub.stop_through_coordinator(ids, opts, reply)
                }
                Err(e) => {
                    let _ = reply.send(Err(StopError::of_declared(e)));
                }
            }),
        );
    }

    pub(super) fn clear(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        reply: RpcReplyPort<Result<u64, RecoveryError>>,
    ) {
        self.mutate(
            myself,
            DeclaredOp::Clear,
            Box::new(move |outcome| {
                let _ = reply.send(outcome);
            }),
        );
    }

    pub(super) fn forget(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        ids: Vec<ChildId>,
        why: &'static str,
    ) {
        tracing::warn!(children = ?ids, why, "undeclaring children");
        self.mutate(
            myself,
            DeclaredOp::Undeclare { ids },
            Box::new(|outcome| {
                if let Err(e) = outcome {
                    tracing::warn!(error = %e, "could not undeclare");
                }
            }),
        );
    }
}
