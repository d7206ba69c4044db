//! Partition mode as the Coordinator last published it: whether this node's side of a split has
//! lost quorum (it then runs no child and refuses work), whether membership work is under way
//! (`Hub::is_locked`), and how much work the Coordinator still owes (`Hub::pending_work`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::core::quorum::QuorumTracker;

/// The flags every actor and handle reads without asking the Coordinator.
#[derive(Default)]
pub(crate) struct PartitionFlags {
    partitioned: AtomicBool,
    locked: AtomicBool,
    /// `partitioned || locked` as last announced (`priority_state_updated`).
    announced: AtomicBool,
    pending_work: AtomicUsize,
    /// The Coordinator's quorum tracker as of its last verdict, so that a restarted
    /// Coordinator goes on from it (the losses a dynamic quorum counts, the largest membership
    /// seen) instead of from nothing.
    tracker: Mutex<Option<QuorumTracker>>,
}

impl PartitionFlags {
    /// Whether this node is in partition mode.
    pub fn partitioned(&self) -> bool {
        self.partitioned.load(Ordering::Acquire)
    }

    /// Enters (`true`) or leaves partition mode; returns whether that changed it.
    pub fn set_partitioned(&self, partitioned: bool) -> bool {
        self.partitioned.swap(partitioned, Ordering::AcqRel) != partitioned
    }

    /// Whether membership work (moves of a redistribution pass) is under way.
    pub fn locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    /// Publishes whether membership work is under way.
    pub fn set_locked(&self, locked: bool) {
        self.locked.store(locked, Ordering::Release);
    }

    /// Keeps the Coordinator's tracker for a restarted Coordinator.
    pub fn save_tracker(&self, tracker: &QuorumTracker) {
        *self.tracker.lock().unwrap_or_else(|e| e.into_inner()) = Some(tracker.clone());
    }

    /// The tracker a previous Coordinator kept, if any.
    pub fn saved_tracker(&self) -> Option<QuorumTracker> {
        self.tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Publishes the Coordinator's pending work count.
    pub fn set_pending_work(&self, count: usize) {
        self.pending_work.store(count, Ordering::Release);
    }

    /// The Coordinator's pending work count, as last published.
    pub fn pending_work(&self) -> usize {
        self.pending_work.load(Ordering::Acquire)
    }

    /// Whether the node is locked (partitioned, or membership work under way).
    pub fn is_locked(&self) -> bool {
        self.partitioned() || self.locked()
    }

    /// The lock as it is now, when it changed since the last call (to announce it once).
    pub fn lock_change(&self) -> Option<bool> {
        let now = self.is_locked();
        (self.announced.swap(now, Ordering::AcqRel) != now).then_some(now)
    }
}
