//! The Registry actor: the single writer of this node's registry copy.
//!
//! Writers (the child supervisor, the janitor) send it operations; it turns them into storage
//! mutations against the current rows, submits them in arrival order, and hands each commit to
//! a completion task that awaits commits in the same order. Only after a batch is committed does
//! it fire the registry hooks and events and answer the writer, so "started" always means
//! "recorded" and a disk backend can group-commit concurrent batches into one fsync while the
//! actor's mailbox keeps moving.
//!
//! A commit that fails answers its writer with the error and is noted for health; the actor
//! stays up and probes the disk until writes succeed again ([`faults`]).
//!
//! Readers never come here: they read the storage view directly. Between submit and commit the
//! actor keeps the rows it wrote in an overlay, so a read-modify-write (a restart's new pid)
//! sees its own earlier writes whatever the backend's read-after-submit behaviour. A store that
//! applies a batch within `submit` and cannot fail it (the memory backend,
//! [`crate::storage::Storage::applies_on_submit`]) needs no overlay: each mutation is applied as
//! it is planned, and the turn is reported through the completion task like any commit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod faults;
mod gossip;
pub(crate) mod replica_stops;
mod replication;
mod roles;
pub(crate) mod told_roles;

use super::protocol::{RegistryMsg, RegistryOp, WriteDone};
use super::HubShared;
use crate::cluster::wire::budget::encoded_len;
use crate::cluster::wire::RegistryChange;
use crate::config::SyncStrategy;
use crate::core::reassembly::SyncAssembler;
use crate::core::registry_write::{self, Kept, RowChange, RowWrite, Standing, Told, WriteRules};
use crate::events::HubEvent;
use crate::hooks::{HookEvent, HookKey};
use crate::model::{ChildId, FastHashMap, NodeName, Row};
use crate::storage::write_fault::FaultChange;
use crate::storage::{Commit, Mutation, StorageError};
use crate::telemetry::refusals::Refusal;

/// Overlay slots kept allocated once every staged row is committed (more are given back).
const OVERLAY_KEEP: usize = 1024;

/// What happened to a row, reported after the commit.
pub(super) use crate::core::registry_write::RowEffect as Effect;

/// What one write turn collects: the mutations to submit, the effects to report once they are
/// committed, and the changes of this node's own observations to tell its peers.
pub(super) struct TurnOut {
    seq: u64,
    mutations: Vec<Mutation>,
    effects: Vec<Effect>,
    delta: Vec<RegistryChange>,
}

impl TurnOut {
    fn new(seq: u64, ops: usize) -> Self {
        Self {
            seq,
            mutations: Vec::with_capacity(ops),
            effects: Vec::with_capacity(ops),
            delta: Vec::new(),
        }
    }
}

/// What this node tells its peers, as it travels.
fn wire(told: Told) -> RegistryChange {
    match told {
        Told::Upsert(row) => RegistryChange::Upsert(row),
        Told::Unbind(id) => RegistryChange::Unbind { id },
        Told::Removed { id, hub } => RegistryChange::Removed { id, hub },
    }
}

struct PumpItem {
    seq: u64,
    commit: Option<Commit>,
    effects: Vec<Effect>,
    done: Option<WriteDone>,
}

pub(crate) struct Registry;

/// First boot: what the rows a disk backend kept become (`core::boot_rows`): this node's
/// bindings from a previous run dropped, plain children's rows removed when the hub does not
/// replay its rows (auto-recovery), rows whose TTL ran out removed (a wall clock set back would
/// revive them), and the children this node ran held for the Coordinator.
async fn open_kept_rows(shared: &Arc<HubShared>) -> Result<(), StorageError> {
    let node = &shared.node;
    let replay = shared.config.recovery_replay();
    let rows = shared.storage.export_all();
    let mut plan = crate::core::boot_rows::plan_boot_rows(&rows, node, replay);
    plan.remove_expired(shared.storage.expired_ids());
    if plan.is_empty() {
        return Ok(());
    }
    let unbind: std::collections::BTreeSet<&ChildId> = plan.unbind.iter().collect();
    let mut batch: Vec<Mutation> = rows
        .into_iter()
        .filter(|row| unbind.contains(&row.spec.id))
        .map(|mut row| {
            row.node_pids.remove(node);
            Mutation::put(row)
        })
        .collect();
    batch.extend(plan.remove.iter().cloned().map(Mutation::Remove));
    tracing::info!(
        unbound = plan.unbind.len(),
        removed = plan.remove.len(),
        replay,
        "rows kept on disk: this node's bindings from a previous run dropped{}",
        if replay {
            ""
        } else {
            ", plain children's rows removed (auto-recovery restores the declared list)"
        }
    );
    shared.storage.submit(batch).wait_async().await?;
    // A node given seeds replays only once it heard a peer (`core::boot_rows`).
    let needs_peer = shared
        .network
        .as_ref()
        .and_then(|n| n.connection())
        .is_some_and(|c| c.connectivity != crate::core::isolation::Connectivity::Alone);
    let hold = crate::core::boot_rows::BootHold::new(
        &plan,
        replay,
        shared.clock.now_ms(),
        shared.config.recovery_replay_wait_ms,
        needs_peer,
    );
    *shared.boot_hold.lock().unwrap_or_else(|e| e.into_inner()) = hold;
    Ok(())
}

pub(crate) struct RegistryArgs {
    pub shared: Arc<HubShared>,
    /// First boot of the hub: drop this node's bindings left by a previous run (its pids died
    /// with it). Not on a restart of the actor, when the node's children still run.
    pub strip_local: bool,
}

pub(crate) struct RegistryState {
    pub(super) shared: Arc<HubShared>,
    seq: u64,
    pub(super) overlay: FastHashMap<ChildId, (u64, Option<Row>)>,
    pub(super) expiries: BTreeMap<ChildId, u64>,
    /// The store applies a batch within `submit` and cannot fail it
    /// ([`crate::storage::Storage::applies_on_submit`]): a write turn's mutations are then
    /// applied one by one as they are planned, and no copy of them waits in the overlay.
    applies_on_submit: bool,
    /// This turn applied mutations already (see `applies_on_submit`).
    applied_this_turn: bool,
    pump: mpsc::UnboundedSender<PumpItem>,
    pump_task: JoinHandle<()>,
    /// Peers' full syncs arriving in parts, applied once complete.
    pub(super) sync_parts: SyncAssembler,
    /// Failed writes waiting for the next probe tick.
    probing: faults::Probing,
    /// This node's gossip stream and the others' (`sync = gossip`; also what a node
    /// receives from gossiping peers whatever its own strategy).
    gossip: gossip::GossipState,
}

impl RegistryState {
    pub(super) fn current(&self, id: &ChildId) -> Option<Row> {
        match self.overlay.get(id) {
            Some((_, row)) => row.clone(),
            None => self.shared.storage.get(id),
        }
    }

    /// The authored version of what [`Self::current`] holds, read from the store without
    /// unpacking the row.
    fn version(&self, id: &ChildId) -> Option<u64> {
        match self.overlay.get(id) {
            Some((_, row)) => row.as_ref().map(|row| row.hub.epoch),
            None => self.shared.storage.version(id),
        }
    }

    /// What [`Self::current`] holds of the row that a start's record keeps: its version and
    /// bindings, read from the store without unpacking the row.
    fn standing(&self, id: &ChildId) -> Option<Standing> {
        match self.overlay.get(id) {
            Some((_, row)) => row.as_ref().map(Standing::of),
            None => self
                .shared
                .storage
                .version_and_bindings(id)
                .map(|(epoch, node_pids)| Standing { epoch, node_pids }),
        }
    }

    /// Records one mutation of the write turn `seq` so that the rest of the turn reads it
    /// back: applied to the store at once when the store applies on submit, otherwise staged
    /// in the overlay (a copy of the row) until the turn's batch is committed.
    pub(super) fn record(&mut self, mutation: Mutation, seq: u64, mutations: &mut Vec<Mutation>) {
        let (id, row) = match &mutation {
            Mutation::Put { row, .. } => (&row.spec.id, Some(row)),
            Mutation::Remove(id) => (id, None),
            Mutation::Clear => {
                mutations.push(mutation);
                return;
            }
        };
        self.expiries.remove(id);
        if self.applies_on_submit {
            self.applied_this_turn = true;
            // A store that applies on submit answers a ready commit that cannot fail.
            drop(self.shared.storage.submit(vec![mutation]));
        } else {
            self.overlay.insert(id.clone(), (seq, row.cloned()));
            mutations.push(mutation);
        }
    }

    /// Records what one operation did to one row ([`crate::core::registry_write`]): its write
    /// (staged, a stub's expiry set), its effects and what this node tells its peers.
    pub(super) fn apply(&mut self, change: RowChange, turn: &mut TurnOut) {
        let RowChange {
            write,
            effects,
            told,
        } = change;
        turn.delta.extend(told.map(wire));
        turn.effects.extend(effects);
        let seq = turn.seq;
        match write {
            None => {}
            Some(RowWrite::Put(row)) => self.record(Mutation::put(row), seq, &mut turn.mutations),
            Some(RowWrite::Stub(row, ttl)) => {
                let id = row.spec.id.clone();
                let put = Mutation::Put {
                    row,
                    ttl: Some(ttl),
                };
                self.record(put, seq, &mut turn.mutations);
                self.expiries
                    .insert(id, self.shared.clock.now_ms() + ttl.as_millis() as u64);
            }
            Some(RowWrite::Remove(id)) => {
                self.record(Mutation::Remove(id), seq, &mut turn.mutations)
            }
        }
    }

    /// Plans one operation against the rows as they stand in this turn, and records it.
    fn plan_op(&mut self, op: RegistryOp, turn: &mut TurnOut) {
        let shared = self.shared.clone();
        match op {
            RegistryOp::Merge { from, changes } => self.plan_merge(&from, changes, turn),
            RegistryOp::Sync { from, rows } => {
                // The peer's whole set of observations: everything it had sent is applied.
                shared.sync_lag().in_sync(&from, shared.mono_ms());
                self.plan_sync(&from, rows, turn);
            }
            RegistryOp::Reap { node, ttl } => self.plan_reap(&node, ttl, turn),
            op => {
                if let Some(change) = self.row_change(op) {
                    self.apply(change, turn);
                }
            }
        }
    }

    /// What an operation of this node's own does to its child's row.
    fn row_change(&mut self, op: RegistryOp) -> Option<RowChange> {
        let shared = self.shared.clone();
        let rules = WriteRules {
            local: &shared.node,
            clustered: shared.clustered(),
            stub_ttl: shared.config.stub_ttl(),
        };
        match op {
            RegistryOp::Insert(row) => {
                let current = self.standing(&row.spec.id);
                let is_member = |node: &str| shared.is_member(node);
                Some(registry_write::insert(&rules, current, row, is_member))
            }
            RegistryOp::Reauthor(row) => {
                registry_write::reauthor(&rules, self.current(&row.spec.id), row)
            }
            RegistryOp::SetPid { id, node, pid } => {
                let change = registry_write::set_pid(&rules, self.current(&id), &node, pid);
                if change.is_none() {
                    tracing::debug!(child = %id, "pid update for a child without a row");
                }
                change
            }
            RegistryOp::Release { id, node } => {
                registry_write::release(&rules, self.current(&id), &node)
            }
            RegistryOp::Unbind { id, node } => {
                if let Some(change) = self.unbind_sole(&rules, &id, &node) {
                    return Some(change);
                }
                let current = self.current(&id);
                if let Some(row) = &current {
                    shared.note_replica_stopping(row, &node);
                }
                registry_write::unbind(&rules, current, &node)
            }
            RegistryOp::Announce { id } => {
                Some(registry_write::announce(&rules, self.current(&id).as_ref()))
            }
            RegistryOp::RemoveUnbound { id } => {
                match registry_write::remove_unbound(&rules, self.current(&id)) {
                    Ok(change) => Some(change),
                    Err(Kept::BoundMeanwhile) => {
                        tracing::debug!(child = %id, "stale row bound meanwhile; kept");
                        None
                    }
                    Err(Kept::Absent) => None,
                }
            }
            RegistryOp::PutWithTtl { row, ttl } => Some(RowChange {
                write: Some(RowWrite::Stub(row, ttl)),
                ..RowChange::default()
            }),
            // A peer's changes, planned row by row (`plan_op`).
            RegistryOp::Merge { .. } | RegistryOp::Sync { .. } | RegistryOp::Reap { .. } => None,
        }
    }

    /// An unbind of the row's only binding, planned from the stored bindings alone (no
    /// unpacked row): on a node that tells no peers, when no staged write of the row waits in
    /// the overlay. (With one binding no other replica is stopping.)
    fn unbind_sole(&self, rules: &WriteRules<'_>, id: &ChildId, node: &str) -> Option<RowChange> {
        if rules.clustered || self.overlay.contains_key(id) {
            return None;
        }
        let (mut bound, mut only_here) = (0usize, false);
        let known = self.shared.storage.each_bound_node(id, &mut |bound_on| {
            bound += 1;
            only_here = bound_on == node;
        });
        if !known || bound != 1 || !only_here {
            return None;
        }
        registry_write::unbind_sole(rules, id.clone(), node)
    }

    /// Peer `node` went down: its unfinished sync and its gossip stream are forgotten.
    fn peer_down(&mut self, node: &NodeName) {
        self.sync_parts.forget(node);
        self.shared.sync_lag().forget(node);
        self.gossip.forget(node);
    }

    /// The sync interval: the digest of this node's observations goes to every peer (pubsub;
    /// their rows only to a peer that asks, [`Self::send_periodic_sync`]), or a gossip round.
    fn sync_tick(&mut self) {
        match self.shared.config.sync {
            SyncStrategy::PubSub => self.send_periodic_sync(None),
            SyncStrategy::Gossip {
                restricted_init, ..
            } => self.gossip_tick(restricted_init),
        }
    }

    /// A part of a peer's full sync: applied once the sync is complete.
    fn on_sync_part(
        &mut self,
        from: NodeName,
        sync_id: u64,
        index: u32,
        total: u32,
        rows: Vec<Row>,
    ) {
        let bytes = encoded_len(&rows);
        match self
            .sync_parts
            .accept(&from, sync_id, index, total, bytes, rows)
        {
            Ok(Some(rows)) => self.apply_peer_sync(from, rows),
            Ok(None) => {}
            Err(refusal) => {
                tracing::warn!(peer = %from, sync_id, %refusal, "full sync part refused; the peer's next sync heals it");
                self.shared.refusals.count(Refusal::Parts);
            }
        }
    }

    /// The write turns up to `upto` are committed: their rows leave the overlay.
    fn committed(&mut self, upto: u64) {
        self.overlay.retain(|_, (seq, _)| *seq > upto);
        if self.overlay.is_empty() && self.overlay.capacity() > OVERLAY_KEEP {
            // A batch of thousands of rows (a delta, a full sync) grew the table to
            // ~250 bytes per slot; a HashMap never shrinks on its own, so without this
            // it would pin that memory on every node for the life of the hub.
            self.overlay = FastHashMap::default();
        }
    }

    /// Removes the stubs whose time is up, in one write turn; returns how many.
    fn sweep_expired(&mut self) -> usize {
        let now = self.shared.clock.now_ms();
        let expired: Vec<ChildId> = self
            .expiries
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        let n = expired.len();
        if n > 0 {
            self.seq += 1;
            let seq = self.seq;
            let mut effects = Vec::with_capacity(n);
            let mut mutations = Vec::with_capacity(n);
            for id in expired {
                effects.push(Effect::Removed { id: id.clone() });
                self.record(Mutation::Remove(id), seq, &mut mutations);
            }
            tracing::debug!(rows = n, "janitor swept expired rows");
            self.submit(mutations, effects, None, seq);
        }
        n
    }

    /// Applies `ops` as one write turn: plans them, broadcasts this node's changed observations
    /// (one delta per turn, whatever the batch size), then submits the mutations. The delta
    /// leaves before the submit so that it leaves before the writer is answered (a reply races
    /// the rest of this turn once the completion task has the commit).
    fn write(&mut self, ops: Vec<RegistryOp>, done: Option<WriteDone>) {
        self.seq += 1;
        let mut turn = TurnOut::new(self.seq, ops.len());
        for op in ops {
            self.plan_op(op, &mut turn);
        }
        self.broadcast_delta(std::mem::take(&mut turn.delta));
        self.submit(turn.mutations, turn.effects, done, turn.seq);
    }

    fn submit(
        &mut self,
        mutations: Vec<Mutation>,
        effects: Vec<Effect>,
        done: Option<WriteDone>,
        seq: u64,
    ) {
        let applied = std::mem::take(&mut self.applied_this_turn);
        let commit = if !mutations.is_empty() {
            Some(self.shared.storage.submit(mutations))
        } else {
            // Mutations applied as they were planned are reported like a batch: the
            // generation moves and the effects fire after it.
            applied.then(|| Commit::ready(Ok(())))
        };
        self.enqueue(commit, effects, done, seq);
    }

    /// Hands a commit to the completion task, which reports it in submission order.
    fn enqueue(
        &mut self,
        commit: Option<Commit>,
        effects: Vec<Effect>,
        done: Option<WriteDone>,
        seq: u64,
    ) {
        let item = PumpItem {
            seq,
            commit,
            effects,
            done,
        };
        if let Err(mpsc::error::SendError(item)) = self.pump.send(item) {
            if let Some(done) = item.done {
                done(Err(StorageError::Closed));
            }
        }
    }
}

pub(super) use crate::core::registry_write::own_view;

/// A replica starting or stopping anywhere may change the role of this node's one.
fn tell_role_changes(shared: &HubShared, effects: &[Effect]) {
    if !shared.signals_roles() {
        return;
    }
    let changed: Vec<ChildId> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Bound { id, .. } | Effect::Unbound { id, .. } => Some(id),
            _ => None,
        })
        .filter(|id| shared.local_children.contains_key(*id))
        .cloned()
        .collect();
    if !changed.is_empty() {
        shared.tell_roles(Some(changed));
    }
}

fn fire_effects(shared: &HubShared, effects: Vec<Effect>) {
    tell_role_changes(shared, &effects);
    for effect in &effects {
        match effect {
            Effect::Removed { id }
            | Effect::Bound {
                id, new_row: true, ..
            } => shared.forget_replica_stop(id),
            _ => {}
        }
    }
    let hooks = &shared.hooks;
    let events = &shared.events;
    for effect in effects {
        match effect {
            Effect::Bound {
                id,
                node,
                pid,
                new_row,
            } => {
                hooks.fire(HookKey::RegistryPidInsert, || {
                    HookEvent::RegistryPidInsert {
                        id: id.clone(),
                        node: node.clone(),
                        pid,
                    }
                });
                if new_row {
                    events.publish(|| HubEvent::RegistryInserted { id });
                }
            }
            Effect::PidUpdated { id, node, old, new } => {
                hooks.fire(HookKey::ChildProcessPidUpdate, || {
                    HookEvent::ChildProcessPidUpdate {
                        id: id.clone(),
                        node: node.clone(),
                        old_pid: old,
                        new_pid: new,
                    }
                });
                hooks.fire(HookKey::RegistryPidInsert, || {
                    HookEvent::RegistryPidInsert { id, node, pid: new }
                });
            }
            Effect::Unbound { id, node } => {
                hooks.fire(HookKey::RegistryPidRemove, || {
                    HookEvent::RegistryPidRemove { id, node }
                });
            }
            Effect::Removed { id } => events.publish(|| HubEvent::RegistryRemoved { id }),
        }
    }
}

/// Records a commit's outcome for health, logging once when writes start to fail and once when
/// they succeed again. A row that does not encode says nothing about the disk.
fn note_outcome(shared: &HubShared, outcome: Result<(), &StorageError>) {
    if let Err(e @ StorageError::Codec { .. }) = outcome {
        tracing::warn!(error = %e, "registry write refused");
        return;
    }
    match (shared.registry_fault.note(outcome), outcome) {
        (FaultChange::Failing, Err(e)) => tracing::error!(hub = %shared.config.hub_id, error = %e,
            "registry write failed: requests that need a registry write are refused until the disk takes writes again"),
        (FaultChange::Recovered, _) => {
            tracing::warn!(hub = %shared.config.hub_id, "registry writes succeed again")
        }
        (_, Err(e)) => tracing::warn!(error = %e, "registry write failed"),
        _ => {}
    }
}

/// Awaits commits in submission order, then reports them.
async fn pump(
    shared: Arc<HubShared>,
    registry: ActorRef<RegistryMsg>,
    mut rx: mpsc::UnboundedReceiver<PumpItem>,
) {
    while let Some(item) = rx.recv().await {
        let outcome = match item.commit {
            Some(commit) => {
                let outcome = commit.wait_async().await;
                // Failed or not, counted: a reader must not take a failed batch for no write.
                shared
                    .registry_generation
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                note_outcome(&shared, outcome.as_ref().map(|_| ()));
                outcome
            }
            None => Ok(()),
        };
        let failed = outcome.is_err();
        if outcome.is_ok() {
            fire_effects(&shared, item.effects);
        }
        if let Some(done) = item.done {
            done(outcome);
        }
        let _ = registry.cast(RegistryMsg::Committed { upto: item.seq });
        if failed {
            // After `Committed`, so the resync it leads to sees the overlay without the batch.
            let _ = registry.cast(RegistryMsg::WriteFailed);
        }
    }
}

impl Actor for Registry {
    type Msg = RegistryMsg;
    type State = RegistryState;
    type Arguments = RegistryArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: RegistryArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let shared = args.shared;
        // What a predecessor's mailbox held is gone, not waiting.
        shared.sync_lag().registry_restarted();
        if args.strip_local {
            open_kept_rows(&shared).await?;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let pump_task = tokio::spawn(pump(shared.clone(), myself.clone(), rx));
        let (shared_now, shared_node) = (shared.clock.now_ms(), shared.node.clone());
        let shared_applies = shared.storage.applies_on_submit();
        Ok(RegistryState {
            shared,
            seq: 0,
            overlay: FastHashMap::default(),
            expiries: BTreeMap::new(),
            applies_on_submit: shared_applies,
            applied_this_turn: false,
            pump: tx,
            pump_task,
            sync_parts: SyncAssembler::new(),
            probing: faults::Probing::default(),
            gossip: gossip::GossipState::new(shared_now, &shared_node),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Let in-flight commits finish and answer their writers before the task goes away.
        let (tx, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut state.pump, tx));
        let task = std::mem::replace(&mut state.pump_task, tokio::spawn(async {}));
        let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let stream_sender = msg.stream_sender().cloned();
        match msg {
            RegistryMsg::Write { ops, done } => state.write(ops, done),
            RegistryMsg::Merge { from, changes } => {
                state.write(vec![RegistryOp::Merge { from, changes }], None)
            }
            RegistryMsg::PeerSync { from, rows } => state.apply_peer_sync(from, rows),
            RegistryMsg::PeerSyncPart {
                from,
                sync_id,
                index,
                total,
                rows,
            } => state.on_sync_part(from, sync_id, index, total, rows),
            RegistryMsg::PeerDigest { from, digest } => state.on_peer_digest(from, digest),
            RegistryMsg::PeerDown { node } => state.peer_down(&node),
            RegistryMsg::SyncTick => state.sync_tick(),
            RegistryMsg::GossipDelta {
                from,
                origin,
                epoch,
                seq,
                changes,
                relay_to,
            } => state.on_gossip_delta(from, origin, epoch, seq, changes, relay_to),
            RegistryMsg::GossipSync {
                from,
                epoch,
                seq,
                sync_id,
                index,
                total,
                rows,
            } => state.on_gossip_sync(from, epoch, seq, sync_id, index, total, rows),
            RegistryMsg::GossipRound {
                initiator,
                round,
                heads,
                route,
                spreading,
            } => state.on_gossip_round(initiator, round, heads, route, spreading),
            RegistryMsg::Committed { upto } => state.committed(upto),
            RegistryMsg::SweepExpired { reply } => {
                let n = state.sweep_expired();
                if let Some(reply) = reply {
                    let _ = reply.send(n);
                }
            }
            RegistryMsg::SendFullSync { to } => state.send_full_sync(to.as_ref()),
            RegistryMsg::WriteFailed => state.write_failed(&myself),
            RegistryMsg::Probe => state.probe(),
        }
        if let Some(peer) = stream_sender {
            state.shared.sync_lag().handled(&peer);
        }
        Ok(())
    }
}
