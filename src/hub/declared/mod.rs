//! The DeclaredLeader actor: this node's copy of the declared list, and the leader's
//! mutations of it (docs/recovery.md, "The declared list").
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
//! A write that fails leaves the memory copy ahead of the disk: the actor then refuses writes,
//! rebuilds the copy from what is durable once the operations under way have finished, and
//! takes writes again; it never fails over a disk (`degraded`).
//!
//! After a persisted operation the leader broadcasts a delta (the changed entries), not its
//! whole copy, in version order; a peer applies it only on exactly its base and otherwise
//! fetches the whole copy (`broadcast`). Nodes that meet exchange their copies' summaries first
//! (`core::declared::summary`), and a whole copy travels only where they differ. The list's children are a persistent map, so
//! the copy handed to the publish and ship steps is O(1) to take.
//!
//! This file holds the actor, its messages, boot and the copies exchanged with peers; the
//! child modules hold the mutations (`mutation`), what follows them until they are durable
//! (`persist`) and the ordered delta broadcast (`broadcast`). What the recovery actors and the
//! handles share (the list as last persisted, the peers' announced versions, the store opened
//! at spawn) is [`recovery_shared`], a leaf `HubShared` holds.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

mod broadcast;
mod degraded;
mod forward;
mod mutation;
mod persist;
pub(crate) mod recovery_shared;
mod remote;
mod settled;

use self::broadcast::{AnnouncedAhead, Outbox, WholeRequests};
use self::persist::{AfterPersist, LastPersist};
use self::remote::RemoteMutations;
use super::protocol::DeclaredMsg;
use super::HubShared;
use crate::cluster::wire::budget::encoded_len;
use crate::cluster::wire::WireMsg;
use crate::core::boot::{decide_boot, BootDecision, CopySource, DurableEvidence, ManifestFetch};
use crate::core::declared::list::{check_version, DeclaredChild, DeclaredChildren, DeclaredList};
use crate::core::declared::state::DeclaredState;
use crate::core::declared::summary::{weigh_summary, CopySummary, SummaryVerdict};
use crate::core::reassembly::PartAssembler;
use crate::hub::simulation::InjectedBug;
use crate::manifest::{fetch_within, ManifestShipper};
use crate::model::NodeName;
use crate::storage::declared_store::DeclaredStore;
use crate::storage::StorageError;
use crate::telemetry::refusals::Refusal;
use crate::types::RecoveryError;
use recovery_shared::RecoveryShared;
use settled::Settled;

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
    /// Peers that announced a copy ahead of this one, waiting for their deltas.
    announced_ahead: AnnouncedAhead,
    /// Peers' offers sent in parts, until each is whole.
    offer_parts: PartAssembler<DeclaredChild>,
    /// The latest operation's persist (see `persist::finish`).
    last_persist: Option<LastPersist>,
    /// This actor's incarnation in the published snapshot (see `RecoveryShared::publish`).
    incarnation: u64,
    /// A write failed and the copy is not rebuilt yet: every write is refused (`degraded`).
    fault: Option<StorageError>,
    /// The latest copy this node stands behind: a leader's decision it adopted (a peer's copy
    /// or delta), or one of its own whose write succeeded with every write before it (the only
    /// ones whose callers were told so). A rebuild compares the disk with it (`degraded`).
    settled: Arc<Settled>,
    /// When the settled copy was last written over unacknowledged writes (`degraded`).
    restore_tried_at: Option<tokio::time::Instant>,
}

/// What a mutation's caller does once the list answered: the version after it, or why not.
pub(crate) type Then = Box<dyn FnOnce(Result<u64, RecoveryError>) + Send>;

impl DeclaredLeaderState {
    fn parked(&self) -> bool {
        self.state.parked().is_some()
    }

    fn offer(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        list: DeclaredList,
        from: Option<NodeName>,
        done: Option<tokio::sync::oneshot::Sender<()>>,
    ) {
        let recovery = self.recovery.clone();
        let is_leader = self.hub.is_leader();
        let effects = if self.hub.has_bug(InjectedBug::AdoptOlderCopies)
            && list.version() < self.state.list().version()
            && !self.parked()
        {
            let decision = BootDecision::Adopt {
                list: list.clone(),
                source: CopySource::Peer,
                tiebreak: None,
            };
            let (state, effects) = DeclaredState::boot(&self.hub.node, decision, []);
            self.state = state;
            effects
        } else {
            self.state.offer(&list, is_leader)
        };
        if self.state.list().stamp() == list.stamp() {
            // The peer's copy, adopted: a leader decided it.
            self.settled.settle(&self.hub.node, self.state.list());
        }
        let mut after = AfterPersist::default();
        self.apply(effects, &mut after);
        self.finish(myself, after, move |outcome| {
            // Weighed only once what it changed is durable (a failed write rebuilds the copy
            // from the disk, which still lacks it).
            if let (Some(from), true) = (from, outcome.is_ok()) {
                recovery.heard_offer(from);
            }
            if let Some(done) = done {
                let _ = done.send(());
            }
        });
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
            WireMsg::DeclaredOfferPart {
                offer_id,
                index,
                total,
                version,
                last_mutated_by,
                reply,
                children,
            } => {
                let bytes = encoded_len(&children);
                match self
                    .offer_parts
                    .accept(&from, offer_id, index, total, bytes, children)
                {
                    Ok(Some(children)) => {
                        let children: DeclaredChildren = children
                            .into_iter()
                            .map(|c| (c.spec.id.clone(), c))
                            .collect();
                        let list = DeclaredList::from_parts(version, children, last_mutated_by);
                        self.on_wire(myself, from, WireMsg::DeclaredOffer { list, reply });
                    }
                    Ok(None) => {}
                    Err(refusal) => {
                        tracing::warn!(peer = %from, offer_id, %refusal, "declared offer part refused");
                        self.hub.refusals.count(Refusal::Parts);
                    }
                }
            }
            WireMsg::DeclaredSummary { summary, reply } => {
                self.weigh_summary(myself, from, summary, reply)
            }
            WireMsg::DeclaredDelta { delta } => self.receive_delta(myself, from, delta),
            WireMsg::DeclaredMutate {
                request_id,
                reply_to,
                op,
            } => {
                let hub = self.hub.clone();
                let answer: Then =
                    Box::new(move |result| hub.reply_mutation(&reply_to, request_id, result));
                match self.hub.leader() {
                    // A leader without quorum takes no mutation (an asymmetric split can
                    // still let a majority node reach it): the majority's list decides.
                    _ if self.hub.partition.partitioned() => answer(Err(RecoveryError::NoLeader {
                        reason: format!(
                            "{} is partitioned: its side of the cluster has no quorum",
                            self.hub.node
                        ),
                    })),
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
                .answered(request_id.0, result.map_err(Into::into)),
            WireMsg::DeclaredVersionQuery => {
                let (Some(msg), Some(transport)) =
                    (self.recovery.announcement(), self.hub.transport())
                else {
                    return;
                };
                if let Err(e) = transport.send(&from, &msg) {
                    tracing::debug!(peer = %from, error = %e, "declared version not answered");
                }
            }
            other => {
                tracing::debug!(peer = %from, kind = other.kind(), "not a declared-list message")
            }
        }
    }

    /// Sends this node's persisted copy to `node`; `reply` asks for the peer's copy back.
    fn send_copy(&self, node: &NodeName, reply: bool) {
        // The copy as persisted, not the one in memory: a mutation not yet durable (it may
        // never be, and its caller may be told it failed) must not reach a peer, where it could
        // outrank a mutation acknowledged after it.
        let persisted = self.recovery.snapshot();
        if persisted.parked && !reply {
            // A parked node's copy means nothing; it still asks for the peer's.
            return;
        }
        if let Some(transport) = self.hub.transport() {
            for offer in broadcast::offer_messages(&persisted.list, reply) {
                if let Err(e) = transport.send(node, &offer) {
                    tracing::debug!(peer = %node, error = %e, "declared list not offered");
                    break;
                }
            }
        }
    }

    /// Sends this node's persisted copy in brief to `node` (`core::declared::summary`); `reply`
    /// asks for the peer's summary back. A parked node's copy means nothing: it sends its
    /// whole copy instead, to be answered with the peer's.
    fn send_summary(&self, node: &NodeName, reply: bool) {
        let persisted = self.recovery.snapshot();
        if persisted.parked {
            if reply {
                self.send_copy(node, true);
            }
            return;
        }
        let Some(transport) = self.hub.transport() else {
            return;
        };
        let msg = WireMsg::DeclaredSummary {
            summary: CopySummary::of(&persisted.list),
            reply,
        };
        if let Err(e) = transport.send(node, &msg) {
            tracing::debug!(peer = %node, error = %e, "declared summary not sent");
        }
    }

    /// A peer's copy in brief: weighed here without the copy when the stamps say enough, else
    /// the whole copy travels where it is needed (see `core::declared::summary`).
    fn weigh_summary(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        from: NodeName,
        summary: CopySummary,
        reply: bool,
    ) {
        // A version no copy could reach is not answered: answering would only draw a copy that
        // is refused when it arrives.
        if let Err(refused) = check_version(self.state.list().version(), summary.version) {
            tracing::warn!(peer = %from, %refused, "declared summary refused: implausible version");
            self.hub.refusals.count(Refusal::ImplausibleVersion);
            return;
        }
        if self.parked() {
            // Only a whole copy restores a parked one.
            self.send_copy(&from, true);
            return;
        }
        match weigh_summary(self.state.list(), &summary) {
            SummaryVerdict::Same => {
                if reply {
                    self.send_summary(&from, false);
                }
                self.weighed_unchanged(myself, from);
            }
            SummaryVerdict::MineNewer => {
                self.send_copy(&from, false);
                self.weighed_unchanged(myself, from);
            }
            // The peer then finds this copy older and sends its own.
            SummaryVerdict::TheirsNewer => self.send_summary(&from, true),
            SummaryVerdict::Conflict => self.send_copy(&from, true),
        }
    }

    /// `from`'s copy would change nothing here: it counts as weighed once the operations
    /// before it are durable, as an offer that changed nothing does.
    fn weighed_unchanged(&mut self, myself: &ActorRef<DeclaredMsg>, from: NodeName) {
        self.weighed_once_durable(myself, AfterPersist::default(), from);
    }

    /// Finishes an operation after which this copy holds what `from`'s does: `from` counts as
    /// weighed once that is durable (a failed write rebuilds the copy from the disk).
    fn weighed_once_durable(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        after: AfterPersist,
        from: NodeName,
    ) {
        let recovery = self.recovery.clone();
        self.finish(myself, after, move |outcome| {
            if outcome.is_ok() {
                recovery.heard_offer(from);
            }
        });
    }

    /// Peer `node` came up (a new incarnation, maybe with another copy): until its copy is
    /// weighed again this node may be behind, so rounds are parked; ask for its summary.
    fn peer_up(&self, node: &NodeName) {
        self.recovery.forget_offer(node);
        self.send_summary(node, true);
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
        myself: ActorRef<Self::Msg>,
        args: DeclaredLeaderArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let DeclaredLeaderArgs { hub, recovery } = args;
        let (store, found) = recovery.take_or_reopen_store().await?;
        store.label_metrics(&hub.config.hub_id, &hub.node);
        let fetched = match &recovery.manifest {
            None => ManifestFetch::Disabled,
            Some(manifest) => {
                match fetch_within(manifest.as_ref(), hub.config.default_timeout()).await {
                    Ok(Some(list)) => ManifestFetch::Found(list),
                    Ok(None) => ManifestFetch::Absent,
                    Err(e) => {
                        tracing::error!(error = %e, "remote manifest fetch failed at boot");
                        ManifestFetch::Failed(e.to_string())
                    }
                }
            }
        };
        let rows = hub.storage.export_all();
        let evidence = DurableEvidence {
            seeded_marker: store.seeded_marker_present(),
            durable_rows: rows.iter().filter(|r| r.hub.durable).count(),
        };
        let decision = decide_boot(found.to_local(), evidence, fetched);
        tracing::info!(hub = %hub.config.hub_id, %found, ?evidence, decision = ?decision_name(&decision), "declared list boot");
        let (state, effects) = DeclaredState::boot(&hub.node, decision, rows.iter());
        // The queue of the shipper the HubSupervisor runs (its actor may be restarting: the
        // offers wait in the queue).
        let shipper = recovery.shipper.clone().map(Arc::new);
        let mut leader_state = DeclaredLeaderState {
            hub: hub.clone(),
            recovery: recovery.clone(),
            state,
            store,
            shipper,
            remote: RemoteMutations::default(),
            outbox: Outbox::for_hub(hub.clone()),
            whole_requests: WholeRequests::default(),
            announced_ahead: AnnouncedAhead::default(),
            offer_parts: PartAssembler::new(),
            last_persist: None,
            incarnation: 0,
            fault: None,
            settled: Arc::default(),
            restore_tried_at: None,
        };
        let mut after = AfterPersist::default();
        leader_state.apply(effects, &mut after);
        leader_state.submit_changes(&mut after);
        // A boot write that fails (a full disk) does not fail the actor: a restart would fail
        // the same way until the HubSupervisor gives up on the hub. The leader starts degraded
        // instead, refusing mutations until the copy is rebuilt from the disk.
        let mut boot_write = Ok(());
        for commit in after.commits {
            if let Err(e) = commit.wait_async().await {
                boot_write = Err(e);
            }
        }
        // What the boot decided (a local, peer's or manifest's copy) stands, written or not.
        let list = leader_state.state.list().clone();
        leader_state.settled.reset(&hub.node, Some(&list));
        if let Err(error) = boot_write {
            leader_state.persist_failed(&myself, error);
        }
        let (incarnation, change) = recovery.reset(&list, leader_state.parked());
        leader_state.incarnation = incarnation;
        change.report(&hub.node, &hub.events);
        recovery.set_store_identity(leader_state.store.identity());
        let is_leader = hub.is_leader();
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
        if state.refusing().is_some() {
            match msg {
                // Peers send their copies again once the copy is rebuilt (it asks for them).
                DeclaredMsg::Offer { done, .. } => {
                    if let Some(done) = done {
                        let _ = done.send(());
                    }
                    return Ok(());
                }
                DeclaredMsg::Wire {
                    msg: WireMsg::DeclaredOffer { .. } | WireMsg::DeclaredDelta { .. },
                    ..
                }
                | DeclaredMsg::Forget { .. } => return Ok(()),
                msg => return self.dispatch(&myself, msg, state),
            }
        }
        self.dispatch(&myself, msg, state)
    }
}

impl DeclaredLeader {
    fn dispatch(
        &self,
        myself: &ActorRef<DeclaredMsg>,
        msg: DeclaredMsg,
        state: &mut DeclaredLeaderState,
    ) -> Result<(), ActorProcessingErr> {
        let myself = myself.clone();
        match msg {
            DeclaredMsg::DurableStart { specs, opts, reply } => {
                state.durable_start(&myself, specs, opts, reply)
            }
            DeclaredMsg::Stop { ids, opts, reply } => state.stop(&myself, ids, opts, reply),
            DeclaredMsg::Clear { reply } => state.clear(&myself, reply),
            DeclaredMsg::Offer { list, done } => state.offer(&myself, list, None, done),
            DeclaredMsg::Forget { ids, why } => state.forget(&myself, ids, why),
            DeclaredMsg::Wire { from, msg } => state.on_wire(&myself, from, msg),
            DeclaredMsg::PeerUp { node } => state.peer_up(&node),
            DeclaredMsg::PeerDown { node } => {
                state.offer_parts.forget(&node);
                state.announced_ahead.forget(&node);
                state.remote.node_down(&node)
            }
            DeclaredMsg::Solicit { nodes } => {
                for node in nodes {
                    state.send_summary(&node, true);
                }
            }
            DeclaredMsg::Announced { from } => state.announced(&myself, from),
            DeclaredMsg::AnnouncedCheck { from } => state.check_announced(&myself, from),
            DeclaredMsg::MutateTimeout { request_id } => state.remote.timed_out(request_id),
            DeclaredMsg::PersistFailed { error } => state.persist_failed(&myself, error),
            DeclaredMsg::Rebuild => state.rebuild(&myself),
            DeclaredMsg::Probe => state.probe(&myself),
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
