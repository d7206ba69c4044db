//! A disk that fails under the DeclaredLeader: the leader stays up, refuses what needs a write,
//! and takes writes again once the disk does. A child module of the DeclaredLeader (`super`).
//!
//! A failed write leaves the copy in memory (and the store's idea of what is on disk) ahead of
//! the disk. Restarting the actor would rebuild both, but a disk that keeps failing would fail
//! every restart, and a few restarts within seconds exceed the hub's restart budget: the whole
//! hub, with every child, would stop over a full disk. So the leader instead:
//! 1. refuses every operation that would write (mutations with a typed storage error, offers and
//!    deltas silently: peers send them again) from the failure on;
//! 2. once every operation started before the failure has finished, rebuilds its copy from the
//!    disk, exactly as a restart would; but when the disk holds this node's own writes beyond
//!    the copy it stands behind (writes queued behind the failed one, applied once the disk
//!    took writes again, whose callers were refused with the earlier failure), it writes that
//!    copy (its last acknowledged mutation, or a leader's copy it adopted since) back over them
//!    as a new version, so every refusal stays true;
//! 3. while no write has succeeded since, probes the disk with a harmless write (the header it
//!    already holds) every [`PROBE_INTERVAL`], so that health turns back to `ok` once space
//!    returns even when no request comes; once a write succeeds it asks its peers for their
//!    copies (the offers and deltas it ignored). It does not ask while the disk fails: adopting
//!    an answer needs a write, whose failure would start the cycle again at once.
//!
//! Health reports the failure (`RecoveryShared::storage_problems`) until a write succeeds.

use std::time::Duration;

use ractor::ActorRef;

use super::persist::AfterPersist;
use super::DeclaredLeaderState;
use crate::core::boot::{BootDecision, CopySource, DurableEvidence, ParkReason};
use crate::core::declared::list::DeclaredList;
use crate::core::declared::state::DeclaredState;
use crate::hub::protocol::DeclaredMsg;
use crate::hub::simulation::Observation;
use crate::storage::declared_store::Resynced;
use crate::storage::StorageError;
use crate::types::RecoveryError;

/// How long after a failed write (or a rebuild that could not read the disk) the leader tries
/// again.
pub(super) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The refusal a caller gets for a write the disk did not take: `NoSpace` for a full disk (the
/// admin API's 507), `Storage` otherwise.
pub(super) fn refusal(error: &StorageError) -> RecoveryError {
    if error.is_no_space() {
        RecoveryError::NoSpace {
            message: error.to_string(),
        }
    } else {
        RecoveryError::Storage {
            message: error.to_string(),
        }
    }
}

impl DeclaredLeaderState {
    /// Whether a write failed and the copy is not rebuilt yet (every write is refused).
    pub(super) fn refusing(&self) -> Option<&StorageError> {
        self.fault.as_ref()
    }

    /// A persist failed: refuse writes from now on, and rebuild once the operations already
    /// under way have finished.
    pub(super) fn persist_failed(&mut self, myself: &ActorRef<DeclaredMsg>, error: StorageError) {
        tracing::error!(hub = %self.hub.config.hub_id, %error,
            "declared list write failed: refusing mutations until the copy is rebuilt from the disk");
        self.recovery.note_write(Err(&error));
        if self.fault.is_some() {
            // A rebuild is already on its way.
            return;
        }
        self.fault = Some(error);
        let earlier = self.last_persist.clone();
        let myself = myself.clone();
        tokio::spawn(async move {
            if let Some(earlier) = earlier {
                earlier.await;
            }
            let _ = myself.cast(DeclaredMsg::Rebuild);
        });
    }

    /// Rebuilds the copy from the disk, as a restarted actor would, then takes operations again.
    pub(super) fn rebuild(&mut self, myself: &ActorRef<DeclaredMsg>) {
        let loaded = match self.store.resync() {
            Ok(Resynced::List(loaded)) => loaded,
            Ok(Resynced::Torn { reason }) => {
                // A write failed while later ones succeeded: the disk holds no list this node
                // ever acknowledged. None of what followed the failure was acknowledged either
                // (see `finish`), and the peers (or the manifest) hold every acknowledged
                // version: park until one of their copies is adopted, as after a lost disk.
                tracing::error!(hub = %self.hub.config.hub_id, %reason,
                    "declared list on disk is torn after failed writes; parked until a peer's copy is adopted");
                return self.rebuilt(
                    myself,
                    BootDecision::Park(ParkReason {
                        corrupt: true,
                        evidence: DurableEvidence {
                            seeded_marker: self.store.seeded_marker_present(),
                            durable_rows: 0,
                        },
                        manifest_error: None,
                    }),
                );
            }
            Err(e) => {
                tracing::error!(hub = %self.hub.config.hub_id, error = %e,
                    "declared list cannot be read back; trying again");
                myself.send_after(PROBE_INTERVAL, || DeclaredMsg::Rebuild);
                return;
            }
        };
        if let Some(settled) = self.settled.to_restore(&self.hub.node, loaded.as_ref()) {
            let disk_version = loaded.as_ref().map_or(0, DeclaredList::version);
            return self.restore_settled(myself, settled, disk_version);
        }
        self.settled.reset(&self.hub.node, loaded.as_ref());
        let was_parked = self.recovery.snapshot().parked;
        let decision = match loaded {
            Some(list) => BootDecision::Adopt {
                list,
                source: CopySource::Local,
                tiebreak: None,
            },
            None if was_parked => BootDecision::Park(ParkReason {
                corrupt: false,
                evidence: DurableEvidence {
                    seeded_marker: self.store.seeded_marker_present(),
                    durable_rows: 0,
                },
                manifest_error: None,
            }),
            None => BootDecision::StartEmpty,
        };
        self.rebuilt(myself, decision);
    }

    /// Takes the rebuilt copy (or park) and operations again.
    fn rebuilt(&mut self, myself: &ActorRef<DeclaredMsg>, decision: BootDecision) {
        // A local copy needs no write, and a park that held before was already announced.
        let (state, _effects) = DeclaredState::boot(&self.hub.node, decision, []);
        self.state = state;
        self.last_persist = None;
        self.fault = None;
        let (incarnation, change) = self.recovery.reset(self.state.list(), self.parked());
        self.incarnation = incarnation;
        change.report(&self.hub.node, &self.hub.events);
        tracing::warn!(hub = %self.hub.config.hub_id, version = self.state.list().version(),
            "declared list rebuilt from the disk; mutations are taken again");
        // Offers and deltas were ignored meanwhile: ask for the peers' copies again, once the
        // disk takes writes (adopting a newer copy needs one). Asking while it still fails
        // would make every answer fail a write and rebuild again at once: a busy loop with
        // the peers for as long as the disk is full.
        if self.recovery.write_fault().is_some() {
            myself.send_after(PROBE_INTERVAL, || DeclaredMsg::Probe);
        } else {
            self.solicit_peers();
        }
    }

    /// Writes the settled copy over the disk's copy of this node's own that no caller was told
    /// took effect (`settled`), as a new version of this node's (above the disk's and above the
    /// copy in memory, so that a peer that fetched an unacknowledged copy from this node's
    /// memory takes it too), and takes operations again. The settled copy is what the node
    /// publishes meanwhile; the new version is published once written. Every caller of the writes
    /// it undoes was answered with an error, which stays true. While the disk keeps failing,
    /// the write is tried once per [`PROBE_INTERVAL`], refusing operations in between.
    fn restore_settled(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        settled: DeclaredList,
        disk_version: u64,
    ) {
        let now = tokio::time::Instant::now();
        if let Some(wait) = self
            .restore_tried_at
            .map(|at| PROBE_INTERVAL.saturating_sub(now.duration_since(at)))
            .filter(|wait| !wait.is_zero())
        {
            myself.send_after(wait, || DeclaredMsg::Rebuild);
            return;
        }
        self.restore_tried_at = Some(now);
        let highest = disk_version
            .max(settled.version())
            .max(self.state.list().version());
        let restored = DeclaredList::from_parts(
            highest + 1,
            settled.children().clone(),
            Some(self.hub.node.clone()),
        );
        tracing::warn!(hub = %self.hub.config.hub_id, disk_version,
            settled_version = settled.version(), version = restored.version(),
            "the disk holds declared-list writes whose callers were told they failed; the settled copy is written over them");
        self.rebuilt(
            myself,
            BootDecision::Adopt {
                list: settled.clone(),
                source: CopySource::Local,
                tiebreak: None,
            },
        );
        let adopt = BootDecision::Adopt {
            list: restored.clone(),
            source: CopySource::Local,
            tiebreak: None,
        };
        self.state = DeclaredState::boot(&self.hub.node, adopt, []).0;
        let mut after = AfterPersist::default();
        after.commits.push(self.store.save_whole(&restored));
        after.broadcast = true;
        let hub = self.hub.clone();
        let (base, result) = (settled.stamp(), restored.stamp());
        self.finish(myself, after, move |outcome| {
            if outcome.is_ok() {
                hub.observe(|| Observation::Authored {
                    author: hub.node.clone(),
                    base,
                    result,
                    declared: Vec::new(),
                    undeclared: Vec::new(),
                    untouched: Vec::new(),
                    cleared: false,
                });
            }
        });
    }

    fn solicit_peers(&mut self) {
        for peer in self.hub.peers() {
            self.send_copy(&peer, true);
        }
    }

    /// Writes the header the store already holds; success clears the fault health reports.
    pub(super) fn probe(&mut self, myself: &ActorRef<DeclaredMsg>) {
        // A parked node has no list on disk, and writing its empty copy would turn "lost" into
        // "empty": it waits for the operator's clear or a peer's copy instead.
        if self.fault.is_some() || self.recovery.write_fault().is_none() || self.parked() {
            return;
        }
        let mut after = AfterPersist::default();
        after.commits.push(self.store.save_whole(self.state.list()));
        let me = myself.clone();
        let peers = self.hub.peers();
        self.finish(myself, after, move |outcome| {
            // The disk takes writes again: the peers' copies ignored meanwhile can be adopted.
            if outcome.is_ok() && !peers.is_empty() {
                let _ = me.cast(DeclaredMsg::Solicit { nodes: peers });
            }
        });
    }
}
