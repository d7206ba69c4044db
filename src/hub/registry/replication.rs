//! Registry replication: how the Registry merges what peers report and reports what it observes.
//!
//! Each node is the only writer of its own observations (its entries in `node_pids`):
//! - every local write turn broadcasts **one** `RegistryDelta` with this node's changed
//!   observations (cut into several frames past the frame budget,
//!   [`crate::cluster::wire::budget`]);
//! - every `sync_interval` it sends a `SyncDigest` of its observations
//!   ([`crate::core::sync_digest`], 24 bytes whatever the registry's size); a receiver whose
//!   copy of them digests alike is in sync, one that differs answers with a `SyncRequest`;
//! - on a peer's `SyncRequest` (a join, a heal, a digest that differed) it sends a `FullSync`
//!   with every row it runs a child of (in `FullSyncPart`s past the frame budget, applied
//!   whole); a receiver upserts them and unbinds the sender from rows the sync does not list,
//!   so a lost delta heals within a sync interval and a round trip;
//! - when a peer is gone for good (grace ran out, or it restarted with a new boot token) its
//!   bindings are reaped; rows left with no binding stay as TTL stubs, so the re-placement pass
//!   still finds their specs and a lookup still answers, and are swept if nobody restarts them.
//!
//! Remote changes go through the same single writer (the Registry actor) as local ones, so
//! hooks, events and the overlay behave alike; they are never re-broadcast. With
//! `sync = gossip` the deltas and syncs travel differently ([`super::gossip`]) and are applied
//! here the same way.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{own_view, RegistryState, TurnOut};
use crate::cluster::wire::budget::{chunk_by_bytes, FRAME_BUDGET_BYTES};
use crate::cluster::wire::{RegistryChange, WireMsg};
use crate::core::registry_write::{self, PeerRemoval};
use crate::core::sync_digest::{self, BindingDigest, Verdict};
use crate::hub::protocol::{ClusterMsg, CoordinatorMsg, RegistryOp, WriteDone};
use crate::hub::shared::HubShared;
use crate::hub::simulation::InjectedBug;
use crate::model::{validate_row, ChildId, NodeName, Row};
use crate::telemetry::refusals::Refusal;

/// Numbers this process's full syncs, so a receiver tells the parts of two syncs apart.
static NEXT_SYNC_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl RegistryState {
    /// Every row bound on `node` as this actor sees it (committed rows with the staged overlay
    /// applied), in id order. Only those rows are read whole
    /// ([`crate::storage::Storage::rows_bound_to`]), and a node bound nowhere costs nothing.
    pub(super) fn rows_bound_to(&self, node: &str) -> Vec<Row> {
        let mut rows = self.shared.storage.rows_bound_to(node);
        if !self.overlay.is_empty() {
            rows.retain(|row| !self.overlay.contains_key(&row.spec.id));
        }
        rows.extend(
            self.overlay
                .values()
                .filter_map(|(_, row)| row.as_ref())
                .filter(|row| row.node_pids.contains_key(node))
                .cloned(),
        );
        rows.sort_by(|a, b| a.spec.id.cmp(&b.spec.id));
        rows
    }

    /// Whether a row `from` sent is one the API could have produced; one that is not rejects
    /// itself (logged and counted), never the delta or sync it came in. An invalid row of a
    /// sync counts as not listed: the sender's binding of that id goes, as for any child it
    /// does not report.
    fn valid_from_peer(&self, from: &NodeName, row: &Row) -> bool {
        match validate_row(row) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(peer = %from, %error, "invalid row from a peer dropped");
                self.shared.refusals.count(Refusal::InvalidChild);
                false
            }
        }
    }

    /// Applies peer `from`'s upsert of `row` ([`registry_write::merge_upsert`]).
    /// An upsert that outranks the stored row (a re-placement's, a move's) is merged from the
    /// stored row's version and bindings alone, without unpacking the row it replaces.
    fn merge_upsert(&mut self, from: &NodeName, row: Row, turn: &mut TurnOut) {
        let id = &row.spec.id;
        let stored = self.version(id);
        if stored.is_some() && self.shared.has_bug(InjectedBug::IgnorePeerBindings) {
            return;
        }
        let stub = self.expiries.contains_key(id);
        let standing = stored
            .filter(|&epoch| registry_write::outranks(&row, epoch))
            .and_then(|_| self.standing(id));
        let current = if standing.is_none() && stored.is_some() {
            self.current(id)
        } else {
            None
        };
        let shared = self.shared.clone();
        let gone = |node: &str| shared.is_gone(node);
        let change = match standing {
            Some(standing) => registry_write::merge_outranking(standing, row, from, stub, gone),
            None => registry_write::merge_upsert(current, row, from, stub, gone),
        };
        if let Some(change) = change {
            self.apply(change, turn);
        }
    }

    /// Removes `node`'s binding of `row` ([`registry_write::unbind_row`]).
    fn unbind_row(
        &mut self,
        row: Row,
        node: &NodeName,
        stub_ttl: Option<Duration>,
        turn: &mut TurnOut,
    ) {
        self.apply(registry_write::unbind_row(row, node, stub_ttl), turn);
    }

    pub(super) fn plan_merge(
        &mut self,
        from: &NodeName,
        changes: Vec<RegistryChange>,
        turn: &mut TurnOut,
    ) {
        for change in changes {
            match change {
                RegistryChange::Upsert(row) => {
                    if self.valid_from_peer(from, &row) {
                        self.merge_upsert(from, row, turn)
                    }
                }
                // The sender handed the child over: keep the row (as a stub if nobody else
                // runs it) until its new owner's upsert arrives.
                RegistryChange::Unbind { id } => {
                    if let Some(row) = self.current(&id) {
                        let ttl = self.shared.config.stub_ttl();
                        self.unbind_row(row, from, Some(ttl), turn);
                    }
                }
                // A deliberate stop: the row goes once nobody runs the child.
                RegistryChange::Removed { id, hub } => {
                    let Some(row) = self.current(&id) else {
                        continue;
                    };
                    match registry_write::removed_by_peer(&row, from, &hub) {
                        PeerRemoval::Unbind => {
                            self.shared.note_replica_stopping(&row, from);
                            self.unbind_row(row, from, None, turn);
                        }
                        PeerRemoval::RemoveStub => self.apply(registry_write::removal(id), turn),
                        PeerRemoval::Keep => {}
                    }
                }
            }
        }
    }

    pub(super) fn plan_sync(&mut self, from: &NodeName, rows: Vec<Row>, turn: &mut TurnOut) {
        let rows: Vec<Row> = rows
            .into_iter()
            .filter(|row| self.valid_from_peer(from, row))
            .collect();
        let listed: BTreeSet<ChildId> = rows.iter().map(|r| r.spec.id.clone()).collect();
        let stale: Vec<Row> = self
            .rows_bound_to(from)
            .into_iter()
            .filter(|r| !listed.contains(&r.spec.id))
            .collect();
        if !stale.is_empty() {
            tracing::debug!(peer = %from, rows = stale.len(), "full sync unbinds rows the peer no longer runs");
        }
        for row in stale {
            self.unbind_row(row, from, None, turn);
        }
        for row in rows {
            self.merge_upsert(from, row, turn);
        }
    }

    pub(super) fn plan_reap(&mut self, node: &NodeName, ttl: Duration, turn: &mut TurnOut) {
        // The writes before the reap dropped the node's bindings from the rows they wrote; the
        // reap unbinds the rest, so the writes after it find nothing bound there and the mark
        // goes (the marks stay as few as the nodes between their grace's end and their reap).
        self.shared.set_gone(node, false);
        let bound: Vec<Row> = self.rows_bound_to(node);
        tracing::info!(peer = %node, rows = bound.len(), "reaping the bindings of a node that is gone");
        for row in bound {
            self.unbind_row(row, node, Some(ttl), turn);
        }
    }

    /// Applies peer `from`'s complete observations (one frame or reassembled parts); once
    /// committed, the Coordinator counts `from`'s registry as delivered (`Synced`).
    pub(super) fn apply_peer_sync(&mut self, from: NodeName, rows: Vec<Row>) {
        let hub = self.shared.clone();
        let synced = from.clone();
        let done: WriteDone = Box::new(move |_outcome| {
            if let Some(coordinator) = hub.coordinator() {
                let msg = CoordinatorMsg::Cluster(ClusterMsg::Synced { from: synced });
                let _ = coordinator.cast(msg);
            }
        });
        self.write(vec![RegistryOp::Sync { from, rows }], Some(done));
    }

    /// Broadcasts this node's changed observations of one write turn.
    pub(super) fn broadcast_delta(&mut self, delta: Vec<RegistryChange>) {
        if delta.is_empty() {
            return;
        }
        if self.gossips() {
            return self.gossip_delta(delta);
        }
        let Some(transport) = self.shared.transport() else {
            return;
        };
        for changes in chunk_by_bytes(delta, FRAME_BUDGET_BYTES) {
            let msg = WireMsg::RegistryDelta { changes };
            log_send(
                transport.broadcast(&msg),
                "registry delta not sent; the next full sync heals it",
            );
        }
    }

    /// Every row this node runs a child of, as it reports it (its own observation only): what
    /// a full sync of either strategy carries.
    pub(super) fn own_rows(&self) -> Vec<Row> {
        let local = &self.shared.node;
        self.rows_bound_to(local)
            .iter()
            .map(|r| own_view(r, local))
            .collect()
    }

    /// The periodic sync to `to` (every peer with `None`): the digest of this node's own
    /// observations, which a peer answers with a `SyncRequest` only if its copy differs; the
    /// whole rows when the store keeps no digest.
    pub(super) fn send_periodic_sync(&self, to: Option<&NodeName>) {
        let Some(digest) = self.shared.storage.binding_digest(&self.shared.node) else {
            return self.send_full_sync(to);
        };
        let Some(transport) = self.shared.transport() else {
            return;
        };
        let msg = WireMsg::SyncDigest {
            count: digest.count,
            digest: digest.sum_words(),
        };
        let outcome = match to {
            Some(peer) => transport.send(peer, &msg).map(|()| Vec::new()),
            None => transport.broadcast(&msg),
        };
        log_send(outcome, "sync digest not sent");
    }

    /// Peer `from`'s digest of its own observations, against this node's copy of them: a match
    /// proves everything `from` had sent is applied here, as a full sync applied does (the
    /// sync lag's proof, and the Coordinator counts `from`'s registry as delivered: `Synced`,
    /// which the reconcile rounds of durable children follow); a difference asks `from` for
    /// its full sync, which heals it.
    pub(super) fn on_peer_digest(&mut self, from: NodeName, theirs: BindingDigest) {
        let mine = self.shared.storage.binding_digest(&from);
        match sync_digest::compare(mine, theirs) {
            Verdict::InSync => {
                let now = self.shared.mono_ms();
                self.shared.sync_lag().in_sync(&from, now);
                if let Some(coordinator) = self.shared.coordinator() {
                    let msg = CoordinatorMsg::Cluster(ClusterMsg::Synced { from });
                    let _ = coordinator.cast(msg);
                }
            }
            Verdict::AskFullSync => {
                tracing::debug!(peer = %from, theirs = theirs.count, mine = mine.map(|d| d.count), "sync digest differs: asking for the peer's full sync");
                let Some(transport) = self.shared.transport() else {
                    return;
                };
                if let Err(error) = transport.send(&from, &WireMsg::SyncRequest) {
                    tracing::debug!(peer = %from, %error, "sync request not sent; the next digest asks again");
                }
            }
        }
    }

    /// Sends every row this node runs a child of (its own observations) as a `FullSync`.
    pub(super) fn send_full_sync(&self, to: Option<&NodeName>) {
        if self.gossips() {
            return self.send_gossip_sync(to);
        }
        let Some(transport) = self.shared.transport() else {
            return;
        };
        let mut parts = chunk_by_bytes(self.own_rows(), FRAME_BUDGET_BYTES);
        let messages = if parts.len() <= 1 {
            vec![WireMsg::FullSync {
                rows: parts.pop().unwrap_or_default(),
            }]
        } else {
            let sync_id = NEXT_SYNC_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let total = parts.len() as u32;
            parts
                .into_iter()
                .zip(0..)
                .map(|(rows, index)| WireMsg::FullSyncPart {
                    sync_id,
                    index,
                    total,
                    rows,
                })
                .collect()
        };
        for msg in &messages {
            let outcome = match to {
                Some(peer) => transport.send(peer, msg).map(|()| Vec::new()),
                None => transport.broadcast(msg),
            };
            log_send(outcome, "full sync not sent");
        }
    }
}

/// Logs what a send or broadcast of registry replication could not deliver: a peer it did not
/// reach at debug (the next full sync heals it), a frame that could not be sent at all at warn.
pub(super) fn log_send(
    outcome: Result<
        Vec<(NodeName, crate::cluster::transport::TransportError)>,
        crate::cluster::transport::TransportError,
    >,
    what: &str,
) {
    match outcome {
        Ok(failures) => {
            for (peer, error) in failures {
                tracing::debug!(peer = %peer, error = %error, "{what}");
            }
        }
        Err(error) => tracing::warn!(error = %error, "{what}"),
    }
}

/// Replicas being stopped on purpose ([`super::replica_stops`]): noted by the Registry as it
/// unbinds them, read by redistribution.
impl HubShared {
    /// Notes that `node`'s replica of `row` is being stopped on purpose, if others still run.
    pub(crate) fn note_replica_stopping(&self, row: &Row, node: &str) {
        if self.config.replication_factor <= 1 {
            return;
        }
        if row.node_pids.keys().any(|n| n != node) {
            self.replica_stops
                .0
                .insert(row.spec.id.clone(), self.mono_ms());
        }
    }

    /// The child's row is gone or it was started anew: its stop is over.
    pub(crate) fn forget_replica_stop(&self, id: &ChildId) {
        if !self.replica_stops.0.is_empty() {
            self.replica_stops.0.remove(id);
        }
    }

    /// The children redistribution must not re-create now (their stop is under way).
    pub(crate) fn replicas_stopping(&self) -> Vec<ChildId> {
        let stop_timeout = match self.config.default_timeout() {
            t if t.is_zero() => std::time::Duration::from_secs(10),
            t => t,
        };
        let ttl = stop_timeout.min(self.config.stub_ttl()).as_millis() as u64;
        let now = self.mono_ms();
        self.replica_stops
            .0
            .retain(|_, seen| now.saturating_sub(*seen) < ttl);
        self.replica_stops
            .0
            .iter()
            .map(|e| e.key().clone())
            .collect()
    }
}
