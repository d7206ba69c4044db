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
    /// The reachability resolution set this node aside (`core::reachability`): it runs no
    /// child and refuses work, as in partition mode, until it is fully connected again.
    set_aside: AtomicBool,
    /// Members this node reaches only through others (indirectly connected), as last decided.
    indirect: Mutex<Vec<crate::model::NodeName>>,
    /// The last reachability incarnation a Coordinator of this hub took.
    incarnation: std::sync::atomic::AtomicU64,
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
    /// Whether this node runs no child and refuses work: its side has no quorum, or the
    /// reachability resolution set it aside.
    pub fn partitioned(&self) -> bool {
        self.quorum_lost() || self.set_aside()
    }

    /// Whether this node's side has no quorum (partition mode proper).
    pub fn quorum_lost(&self) -> bool {
        self.partitioned.load(Ordering::Acquire)
    }

    /// Enters (`true`) or leaves partition mode; returns whether that changed it.
    pub fn set_partitioned(&self, partitioned: bool) -> bool {
        self.partitioned.swap(partitioned, Ordering::AcqRel) != partitioned
    }

    /// Whether the reachability resolution set this node aside.
    pub fn set_aside(&self) -> bool {
        self.set_aside.load(Ordering::Acquire)
    }

    /// Sets or clears the set-aside state; returns whether that changed it.
    pub fn set_set_aside(&self, aside: bool) -> bool {
        self.set_aside.swap(aside, Ordering::AcqRel) != aside
    }

    /// A reachability incarnation for a Coordinator that opens the hub's endpoint: the wall
    /// clock's `now_ms`, or one more than the previous Coordinator's if the clock went back,
    /// so a restarted Coordinator's records always win over its predecessor's.
    pub fn next_incarnation(&self, now_ms: u64) -> u64 {
        let mut taken = now_ms;
        let _ = self
            .incarnation
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |prev| {
                taken = now_ms.max(prev.saturating_add(1));
                Some(taken)
            });
        taken
    }

    /// Members reached only through others, as last decided.
    pub fn indirect(&self) -> Vec<crate::model::NodeName> {
        self.indirect
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Publishes the members reached only through others.
    pub fn set_indirect(&self, nodes: Vec<crate::model::NodeName>) {
        *self.indirect.lock().unwrap_or_else(|e| e.into_inner()) = nodes;
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
