//! Partition mode as the Coordinator last published it: whether this node's side of a split has
//! lost quorum (it then runs no child and refuses work), and whether membership work is under
//! way (`Hub::is_locked`).

use std::sync::atomic::{AtomicBool, Ordering};

/// The flags every actor and handle reads without asking the Coordinator.
#[derive(Default)]
pub(crate) struct PartitionFlags {
    partitioned: AtomicBool,
    locked: AtomicBool,
    /// `partitioned || locked` as last announced (`priority_state_updated`).
    announced: AtomicBool,
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
