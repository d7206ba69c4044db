//! The DeclaredLeader actor: this node's copy of the declared list, and the leader's
//! mutations of it (seed `persistence-and-recovery.md`, "The declared list").
//!
//! Spawned by the HubSupervisor only with `auto_recovery`. It holds the node's adopted copy
//! ([`DeclaredState`]) and its store, and carries out the effects the pure state returns, in
//! their order:
//! - a mutation is **persisted before it is acknowledged**: a durable start is forwarded to the
//!   Coordinator only once the declaration is durable (add before start), a stop of a declared
//!   child only once the removal is durable (remove before terminate); then the new version is
//!   offered to the peers and the manifest shipper, which never delays the command;
//! - without a reachable leader, durable starts and stops of declared children are refused
//!   with `no_leader`; every other request passes through untouched;
//! - at boot it decides with [`decide_boot`]: adopt the local copy or the manifest's, seed
//!   version 1 from durable rows, start empty, or **park** (no mutations, parked rounds, the
//!   `declared_parked` hook) until a real copy arrives or the operator clears.
//!
//! Every stop request passes through here when recovery is on, so a stop is ordered after a
//! durable start of the same child that arrived before it (the list it checks is the one in
//! memory, not the last published one).
//!
//! A write that fails leaves the memory copy ahead of the disk: the actor then fails on purpose
//! and its restart rebuilds the copy from what is durable.
//!
//! After a persisted operation the leader broadcasts a delta (the changed entries), not its
//! whole copy, in version order; a peer applies it only on exactly its base and otherwise
//! fetches the whole copy (`declared_broadcast`). The list's children are a persistent map, so
//! the copy handed to the publish and ship steps is O(1) to take.

use std::collections::BTreeSet;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

#[path = "declared_broadcast.rs"]
mod broadcast;

use self::broadcast::{broadcast_message, Outbox, WholeRequests};
use super::coordinator::{StartReplyPort, StopReplyPort};
use super::declared_forward::{
    forward_start, forward_stop, forward_undeclared_stop, start_declared, undeclared_by_stop,
};
use super::declared_remote::{refusal_error, send_mutate_reply, RemoteMutations};
use super::recovery_shared::{leader, RecoveryShared};
use super::HubShared;
use crate::api::errors::{ChildStartError, RecoveryError, StartError, StopError};
use crate::api::options::{StartOptions, StopOptions};
use crate::api::results::ChildFailure;
use crate::cluster::wire::{DeclaredOp, WireMsg};
use crate::core::boot::{decide_boot, DurableEvidence, ManifestFetch, ParkReason};
use crate::core::declared_delta::ListStamp;
use crate::core::declared_list::{DeclaredChange, DeclaredList};
use crate::core::declared_state::{DeclaredEffect, DeclaredState};
use crate::core::manifest_ship::ShipBackoff;
use crate::hooks::{HookEvent, HookKey};
use crate::model::{ChildId, ChildSpec, NodeName, Restart, RESERVED_METADATA_KEY};
use crate::recovery::declared_store::DeclaredStore;
use crate::recovery::manifest::ManifestShipper;
use crate::storage::{Commit, CommitMode, StorageError};

pub(crate) enum DeclaredMsg {
    /// A start with `durable: true`.
    DurableStart {
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    },
    /// Every stop request while recovery is on.
    Stop {
        ids: Vec<ChildId>,
        opts: StopOptions,
        reply: StopReplyPort,
    },
    /// The operator's `clear`.
    Clear {
        reply: RpcReplyPort<Result<u64, RecoveryError>>,
    },
    /// A copy from a peer (a leader's broadcast, a peer at join) or a later manifest fetch.
    /// `done` is told once the adopted copy (if any) is persisted and published.
    Offer {
        list: DeclaredList,
        done: Option<tokio::sync::oneshot::Sender<()>>,
    },
    /// Undeclare children whose start can never succeed (unknown kind, bad arguments).
    Forget { ids: Vec<ChildId> },
    /// A declared-list message from peer `from` (offer, mutation, mutation reply).
    Wire { from: NodeName, msg: WireMsg },
    /// Peer `node` came up: send it this node's copy (boot adoption on both sides).
    PeerUp { node: NodeName },
    /// Peer `node` went down: mutations waiting on it as the leader fail now.
    PeerDown { node: NodeName },
    /// Ask these peers for their copies (the Reconciler has not heard from them).
    Solicit { nodes: Vec<NodeName> },
    /// A mutation sent to the leader was not answered in time.
    MutateTimeout { request_id: u64 },
    /// A persist failed: rebuild from the disk.
    PersistFailed { message: String },
}

impl ractor::Message for DeclaredMsg {}

pub(crate) struct DeclaredLeader;

pub(crate) struct DeclaredLeaderState {
    hub: Arc<HubShared>,
    recovery: Arc<RecoveryShared>,
    state: DeclaredState,
    store: DeclaredStore,
    shipper: Option<Arc<ManifestShipper>>,
    /// Mutations sent to a remote leader, waiting for its reply.
    remote: RemoteMutations,
    /// The leader's broadcasts, sent in version order.
    outbox: Arc<Outbox>,
    /// Peers asked for their whole copy after a delta this copy could not apply.
    whole_requests: WholeRequests,
}

/// What a mutation's caller does once the list answered: the version after it, or why not.
pub(crate) type Then = Box<dyn FnOnce(Result<u64, RecoveryError>) + Send>;

/// What the effects of one or more mutations left to do after the persists.
#[derive(Default)]
struct AfterPersist {
    commits: Vec<Commit>,
    /// Changes not submitted yet: one operation's changes (a batch of durable starts) share one
    /// commit and one header write instead of one each.
    changes: Vec<DeclaredChange>,
    /// Every change of the operation, in order (the broadcast delta's content).
    sent: Vec<DeclaredChange>,
    /// The copy's stamp before the operation (a leader's mutation not made while parked): the
    /// broadcast is then a delta from it.
    base: Option<ListStamp>,
    broadcast: bool,
    ship: bool,
}

/// The persist of a mutation failed: it was not acknowledged.
#[derive(Debug, thiserror::Error)]
#[error("declared list write failed: {0}; rebuilding the copy from the disk")]
struct PersistFailed(String);

fn fire_parked(hub: &HubShared, reason: &ParkReason) {
    tracing::error!(
        hub = %hub.config.hub_id,
        corrupt = reason.corrupt,
        seeded_marker = reason.evidence.seeded_marker,
        durable_rows = reason.evidence.durable_rows,
        manifest_error = ?reason.manifest_error,
        "the declared list is lost on this node: reconcile PARKED (no starts, no stops) until a \
         copy is restored or an operator clears it"
    );
    hub.hooks
        .fire(HookKey::DeclaredParked, || HookEvent::DeclaredParked {
            node: hub.node.clone(),
            corrupt: reason.corrupt,
            seeded_marker: reason.evidence.seeded_marker,
            durable_rows: reason.evidence.durable_rows,
            manifest_error: reason.manifest_error.clone(),
        });
}

impl DeclaredLeaderState {
    fn parked(&self) -> bool {
        self.state.parked().is_some()
    }

    /// Carries out the effects that need no waiting and collects the persists.
    fn apply(&mut self, effects: Vec<DeclaredEffect>, after: &mut AfterPersist) {
        for effect in effects {
            match effect {
                DeclaredEffect::PersistChange(change) => {
                    after.sent.push(change.clone());
                    after.changes.push(change);
                }
                DeclaredEffect::PersistWhole => {
                    self.submit_changes(after);
                    after.commits.push(self.store.save_whole(self.state.list()))
                }
                // The caller is answered by the task that awaits the persists.
                DeclaredEffect::Acknowledge => {}
                DeclaredEffect::Broadcast => after.broadcast = true,
                DeclaredEffect::Ship => after.ship = true,
                DeclaredEffect::FireTiebreak(t) => {
                    tracing::warn!(version = t.version, winner = ?t.winner, loser = ?t.loser,
                        "declared list tie resolved to the lowest mutating node");
                    let node = self.hub.node.clone();
                    self.hub.hooks.fire(HookKey::DeclaredTiebreak, || {
                        HookEvent::DeclaredTiebreak {
                            node,
                            version: t.version,
                            winner: t.winner.clone(),
                            loser: t.loser.clone(),
                        }
                    });
                }
                DeclaredEffect::FireParked(reason) => fire_parked(&self.hub, &reason),
                DeclaredEffect::Unparked => tracing::warn!(
                    hub = %self.hub.config.hub_id,
                    version = self.state.list().version(),
                    "the declared list is restored; reconcile unparked"
                ),
            }
        }
    }

    /// Awaits the persists in order, publishes the list, then runs `then` with the outcome and
    /// (on success) broadcasts and ships. Never blocks the actor.
    /// Submits the changes collected so far as one commit (against the list as it is now, so a
    /// child added then removed within one operation is just removed).
    /// With one fsync per mutation (the benchmark baseline's `DeclaredCommit::PerMutation`)
    /// each change keeps its own commit.
    fn submit_changes(&self, after: &mut AfterPersist) {
        if after.changes.is_empty() {
            return;
        }
        let changes = std::mem::take(&mut after.changes);
        let list = self.state.list();
        if self.recovery.disk_options().commit_mode == CommitMode::PerOperation {
            for change in &changes {
                after.commits.push(self.store.save_change(list, change));
            }
        } else {
            after.commits.push(self.store.save_changes(list, &changes));
        }
    }

    fn finish(
        &self,
        myself: &ActorRef<DeclaredMsg>,
        mut after: AfterPersist,
        then: impl FnOnce(Result<(), StorageError>) + Send + 'static,
    ) {
        self.submit_changes(&mut after);
        // O(1): the children are a persistent map shared with the actor's copy.
        let list = self.state.list().clone();
        let broadcast = after.broadcast.then(|| {
            let msg = broadcast_message(&mut after, &list);
            (self.outbox.ticket(), msg)
        });
        let parked = self.parked();
        let recovery = self.recovery.clone();
        let shipper = self.shipper.clone();
        let myself = myself.clone();
        tokio::spawn(async move {
            let mut outcome = Ok(());
            for commit in after.commits {
                if let Err(e) = commit.wait_async().await {
                    outcome = Err(e);
                }
            }
            if let Err(e) = &outcome {
                let _ = myself.cast(DeclaredMsg::PersistFailed {
                    message: e.to_string(),
                });
                // Dropping the broadcast's ticket unsent lets the later ones leave.
                drop(broadcast);
                then(outcome);
                return;
            }
            recovery.publish(&list, parked);
            then(Ok(()));
            if let Some((ticket, msg)) = broadcast {
                ticket.send(msg);
            }
            if after.ship {
                if let Some(shipper) = shipper {
                    shipper.offer(&list);
                }
            }
        });
    }

    /// Applies `op` here, this node being the leader: persists it, then `then` gets the new
    /// version (broadcast and ship follow). A parked node refuses everything but `Clear`.
    pub(crate) fn mutate_here(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        op: DeclaredOp,
        then: Then,
    ) {
        if self.parked() && op != DeclaredOp::Clear {
            return then(Err(RecoveryError::DeclaredParked));
        }
        let mut after = AfterPersist {
            // A parked copy means nothing: its clear is broadcast whole.
            base: (!self.parked()).then(|| self.state.list().stamp()),
            ..AfterPersist::default()
        };
        match op {
            DeclaredOp::Declare { children } => {
                for (spec, metadata) in children {
                    match self.state.declare(spec.clone(), metadata) {
                        Ok(effects) => self.apply(effects, &mut after),
                        Err(e) => tracing::error!(child = %spec.id, error = %e, "cannot declare"),
                    }
                }
            }
            DeclaredOp::Undeclare { ids } => {
                for id in ids {
                    match self.state.undeclare(&id) {
                        Ok(effects) => self.apply(effects, &mut after),
                        Err(e) => tracing::error!(child = %id, error = %e, "cannot undeclare"),
                    }
                }
            }
            DeclaredOp::Clear => {
                let effects = self.state.clear();
                tracing::warn!(hub = %self.hub.config.hub_id, version = self.state.list().version(),
                    "declared list cleared by the operator");
                self.apply(effects, &mut after);
            }
        }
        let version = self.state.list().version();
        self.finish(myself, after, move |outcome| {
            then(
                outcome
                    .map(|()| version)
                    .map_err(|e| RecoveryError::Storage {
                        message: e.to_string(),
                    }),
            )
        });
    }

    /// Applies `op` through the leader: here when this node leads, else over the wire; `then`
    /// runs once the leader persisted it (or refused, or could not be reached: `no_leader`).
    fn mutate(&mut self, myself: &ActorRef<DeclaredMsg>, op: DeclaredOp, then: Then) {
        match leader(&self.hub) {
            None => then(Err(RecoveryError::NoLeader {
                reason: "the hub has no members".into(),
            })),
            Some(l) if l == self.hub.node => self.mutate_here(myself, op, then),
            Some(l) => self.remote.send(&self.hub, myself, &l, op, then),
        }
    }

    fn durable_start(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    ) {
        if specs.is_empty() || opts.metadata.contains_key(RESERVED_METADATA_KEY) {
            // The Coordinator's validation answers these.
            return forward_start(&self.hub, specs, opts, reply);
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
            // Invalid ids and repeats go to the Coordinator undeclared: it refuses them.
            if ChildId::parse(spec.id.as_str()).is_ok() && seen.insert(spec.id.clone()) {
                declare.push((spec.clone(), opts.metadata.clone()));
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
        let hub = self.hub.clone();
        let me = myself.clone();
        let op = DeclaredOp::Declare { children: declare };
        self.mutate(
            myself,
            op,
            Box::new(move |outcome| {
                if let Err(e) = outcome {
                    let _ = reply.send(Err(StartError::Declared(e)));
                    return;
                }
                tokio::spawn(start_declared(hub, me, accepted, opts, refused, reply));
            }),
        );
    }

    fn stop(
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
        let leader = leader(&self.hub);
        let here = leader.as_deref() == Some(self.hub.node.as_str());
        if declared.is_empty() && (here || leader.is_none()) {
            // The leader's own copy is the truth: nothing to undeclare.
            return forward_stop(&self.hub, ids, opts, reply);
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
        self.mutate(
            myself,
            DeclaredOp::Undeclare { ids: undeclare },
            Box::new(move |outcome| match outcome {
                Ok(_) => forward_undeclared_stop(&hub, ids, opts, reply, undeclared),
                Err(
                    e @ (RecoveryError::NoLeader { .. }
                    | RecoveryError::HubUnavailable { .. }
                    | RecoveryError::DeclaredParked),
                ) if !may_be_declared => {
                    tracing::debug!(error = %e, "stop of children not declared here; no leader to ask");
                    forward_stop(&hub, ids, opts, reply)
                }
                Err(e) => {
                    let _ = reply.send(Err(StopError::Declared(e)));
                }
            }),
        );
    }

    fn clear(
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

    fn offer(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        list: DeclaredList,
        from: Option<NodeName>,
        done: Option<tokio::sync::oneshot::Sender<()>>,
    ) {
        let recovery = self.recovery.clone();
        let is_leader = leader(&self.hub).as_deref() == Some(self.hub.node.as_str());
        let effects = self.state.offer(&list, is_leader);
        let mut after = AfterPersist::default();
        self.apply(effects, &mut after);
        self.finish(myself, after, move |_| {
            if let Some(from) = from {
                recovery.heard_offer(from);
            }
            if let Some(done) = done {
                let _ = done.send(());
            }
        });
    }

    fn forget(&mut self, myself: &ActorRef<DeclaredMsg>, ids: Vec<ChildId>) {
        tracing::warn!(children = ?ids, "undeclaring children whose start can never succeed");
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

    fn on_wire(&mut self, myself: &ActorRef<DeclaredMsg>, from: NodeName, msg: WireMsg) {
        match msg {
            WireMsg::DeclaredOffer { list, reply } => {
                if reply {
                    self.send_copy(&from, false);
                }
                self.whole_requests.arrived(&from);
                self.offer(myself, list, Some(from), None)
            }
            WireMsg::DeclaredDelta { delta } => self.receive_delta(myself, from, delta),
            WireMsg::DeclaredMutate {
                request_id,
                reply_to,
                op,
            } => {
                let hub = self.hub.clone();
                let answer: Then =
                    Box::new(move |result| send_mutate_reply(&hub, &reply_to, request_id, result));
                match leader(&self.hub) {
                    Some(l) if l == self.hub.node => self.mutate_here(myself, op, answer),
                    other => answer(Err(RecoveryError::NoLeader {
                        reason: format!(
                            "{} is not the leader (it takes {} for it)",
                            self.hub.node,
                            other.unwrap_or_default()
                        ),
                    })),
                }
            }
            WireMsg::DeclaredMutateReply { request_id, result } => self
                .remote
                .answered(request_id.0, result.map_err(refusal_error)),
            other => {
                tracing::debug!(peer = %from, kind = other.kind(), "not a declared-list message")
            }
        }
    }

    /// Sends this node's copy to `node`; `reply` asks for the peer's copy back.
    fn send_copy(&self, node: &NodeName, reply: bool) {
        if self.parked() {
            // A parked node's copy means nothing; it still asks for the peer's.
            if !reply {
                return;
            }
        }
        if let Some(transport) = self.hub.transport() {
            let offer = WireMsg::DeclaredOffer {
                list: self.state.list().clone(),
                reply,
            };
            if let Err(e) = transport.send(node, &offer) {
                tracing::debug!(peer = %node, error = %e, "declared list not offered");
            }
        }
    }

    /// Peer `node` came up (a new incarnation, maybe with another copy): until it offers its
    /// copy again this node may be behind, so rounds are parked; ask for it.
    fn peer_up(&self, node: &NodeName) {
        self.recovery.forget_offer(node);
        self.send_copy(node, true);
    }
}

pub(crate) struct DeclaredLeaderArgs {
    pub hub: Arc<HubShared>,
    pub recovery: Arc<RecoveryShared>,
}

impl Actor for DeclaredLeader {
    type Msg = DeclaredMsg;
    type State = DeclaredLeaderState;
    type Arguments = DeclaredLeaderArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: DeclaredLeaderArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let DeclaredLeaderArgs { hub, recovery } = args;
        let (store, found) = match recovery.take_boot_store() {
            Some(opened) => opened,
            None => DeclaredStore::open(&recovery.dir, &recovery.disk_options())?,
        };
        let fetched = match &recovery.manifest {
            None => ManifestFetch::Disabled,
            Some(manifest) => match manifest.fetch().await {
                Ok(Some(list)) => ManifestFetch::Found(list),
                Ok(None) => ManifestFetch::Absent,
                Err(e) => {
                    tracing::error!(error = %e, "remote manifest fetch failed at boot");
                    ManifestFetch::Failed(e.to_string())
                }
            },
        };
        let rows = hub.storage.export_all();
        let evidence = DurableEvidence {
            seeded_marker: store.seeded_marker_present(),
            durable_rows: rows.iter().filter(|r| r.hub.durable).count(),
        };
        let decision = decide_boot(found.to_local(), evidence, fetched);
        tracing::info!(hub = %hub.config.hub_id, ?found, ?evidence, decision = ?decision_name(&decision), "declared list boot");
        let (state, effects) = DeclaredState::boot(&hub.node, decision, rows.iter());
        let shipper = recovery.manifest.clone().map(|manifest| {
            let hub = hub.clone();
            Arc::new(ManifestShipper::spawn(
                manifest,
                ShipBackoff::default(),
                move |failure| {
                    hub.hooks.fire(HookKey::ManifestShipFailed, || {
                        HookEvent::ManifestShipFailed {
                            node: hub.node.clone(),
                            version: failure.version,
                            failures: failure.failures,
                            retry_in_ms: failure.retry_in_ms,
                            location: failure.location.clone(),
                            error: failure.error.to_string(),
                        }
                    })
                },
            ))
        });
        let mut leader_state = DeclaredLeaderState {
            hub: hub.clone(),
            recovery: recovery.clone(),
            state,
            store,
            shipper,
            remote: RemoteMutations::default(),
            outbox: Outbox::for_hub(hub.clone()),
            whole_requests: WholeRequests::default(),
        };
        let mut after = AfterPersist::default();
        leader_state.apply(effects, &mut after);
        leader_state.submit_changes(&mut after);
        for commit in after.commits {
            commit.wait_async().await?;
        }
        let list = leader_state.state.list().clone();
        recovery.publish(&list, leader_state.parked());
        let is_leader = leader(&hub).as_deref() == Some(hub.node.as_str());
        if let (true, Some(shipper)) = (is_leader && list.version() > 0, &leader_state.shipper) {
            // The manifest catches up with what this node holds (a ship never lowers it).
            shipper.offer(&list);
        }
        Ok(leader_state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DeclaredMsg::DurableStart { specs, opts, reply } => {
                state.durable_start(&myself, specs, opts, reply)
            }
            DeclaredMsg::Stop { ids, opts, reply } => state.stop(&myself, ids, opts, reply),
            DeclaredMsg::Clear { reply } => state.clear(&myself, reply),
            DeclaredMsg::Offer { list, done } => state.offer(&myself, list, None, done),
            DeclaredMsg::Forget { ids } => state.forget(&myself, ids),
            DeclaredMsg::Wire { from, msg } => state.on_wire(&myself, from, msg),
            DeclaredMsg::PeerUp { node } => state.peer_up(&node),
            DeclaredMsg::PeerDown { node } => state.remote.node_down(&node),
            DeclaredMsg::Solicit { nodes } => {
                for node in nodes {
                    state.send_copy(&node, true);
                }
            }
            DeclaredMsg::MutateTimeout { request_id } => state.remote.timed_out(request_id),
            DeclaredMsg::PersistFailed { message } => {
                return Err(Box::new(PersistFailed(message)));
            }
        }
        Ok(())
    }
}

fn decision_name(decision: &crate::core::boot::BootDecision) -> String {
    use crate::core::boot::BootDecision;
    match decision {
        BootDecision::Adopt { list, source, .. } => {
            format!("adopt v{} from {source:?}", list.version())
        }
        BootDecision::SeedFromRows => "seed v1 from durable rows".into(),
        BootDecision::Park(_) => "park".into(),
        BootDecision::StartEmpty => "start empty".into(),
    }
}
