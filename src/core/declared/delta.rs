//! Declared-list deltas: what the leader broadcasts after a mutation instead of its whole copy.
//!
//! A mutation (or one operation's batch of them) changes a few entries, but the list may hold
//! tens of thousands: sending, decoding, comparing and diffing the whole copy per mutation made
//! every stop cost O(list size) on every node. A [`DeclaredDelta`] carries only the changed
//! entries, between two [`ListStamp`]s: the leader's copy before the operation (`base`) and
//! after it (`target`).
//!
//! A receiver applies a delta only when its own copy is **exactly** the base: same version,
//! same last mutator and same content digest. The digest matters because a stamp alone does not
//! always identify content: a node that lost its disk (or restarted after a failed write) can
//! author a second, different copy of a version it authored before. The result is checked
//! against the target's digest too, so a receiver never adopts a list it cannot prove equal to
//! the sender's. When it cannot apply a delta whose result would win over its copy
//! ([`DeltaOutcome::NeedWhole`]) it asks the sender for its whole copy (the `DeclaredOffer`
//! path); the periodic `DeclaredVersion` announcements heal a delta that never arrived.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::core::declared::list::{announced_ahead, DeclaredChange, DeclaredChild, DeclaredList};
use crate::model::{ChildId, NodeName};

/// What identifies one copy of the list for a delta: its version, last mutator and content
/// digest ([`DeclaredList::digest`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListStamp {
    /// The copy's version.
    pub version: u64,
    /// The node that authored its latest mutation.
    pub last_mutated_by: Option<NodeName>,
    /// The digest of its children.
    pub digest: u64,
}

/// One entry-level change of a delta, applied in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeltaChange {
    /// The entry as it is in the target (added or replaced).
    Put(DeclaredChild),
    /// The entry is gone.
    Removed(ChildId),
    /// Every entry is gone (the operator's clear).
    Cleared,
}

/// The changes that turn the copy stamped `base` into the copy stamped `target`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredDelta {
    /// The copy the changes apply to.
    pub base: ListStamp,
    /// The copy they make.
    pub target: ListStamp,
    /// The changes, in order.
    pub changes: Vec<DeltaChange>,
}

/// What a receiver did with a delta.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeltaOutcome {
    /// The copy was the base and is now the target; these are the changes to persist.
    Applied(Vec<DeclaredChange>),
    /// The copy already is the target, or ranks above it: nothing to do.
    Ignored,
    /// The copy is not the base (or the result did not match the target) and the target would
    /// win over it: only the sender's whole copy can bring it up to date.
    NeedWhole,
}

impl DeclaredList {
    /// This copy's stamp (version, last mutator, digest).
    pub fn stamp(&self) -> ListStamp {
        ListStamp {
            version: self.version(),
            last_mutated_by: self.last_mutated_by().map(str::to_owned),
            digest: self.digest(),
        }
    }

    /// Applies `delta` if this copy is exactly its base (see the module doc); otherwise leaves
    /// the copy untouched. O(size of the delta).
    pub fn apply_delta(&mut self, delta: &DeclaredDelta) -> DeltaOutcome {
        let mine = self.stamp();
        if mine == delta.target {
            return DeltaOutcome::Ignored;
        }
        if mine == delta.base {
            let mut next = self.clone();
            let changes = next.apply_changes(&delta.changes);
            next.set_stamp(delta.target.version, delta.target.last_mutated_by.clone());
            if next.digest() != delta.target.digest {
                tracing::warn!(
                    version = delta.target.version,
                    "a declared delta did not yield the sender's content; fetching its copy"
                );
                return DeltaOutcome::NeedWhole;
            }
            *self = next;
            return DeltaOutcome::Applied(changes);
        }
        let same_stamp = mine.version == delta.target.version
            && mine.last_mutated_by == delta.target.last_mutated_by;
        // Same stamp, other content (a lost disk): only the whole copies can settle it.
        if same_stamp
            || announced_ahead(
                self,
                delta.target.version,
                delta.target.last_mutated_by.as_deref(),
            )
        {
            DeltaOutcome::NeedWhole
        } else {
            DeltaOutcome::Ignored
        }
    }

    fn apply_changes(&mut self, changes: &[DeltaChange]) -> Vec<DeclaredChange> {
        let mut applied = Vec::with_capacity(changes.len());
        for change in changes {
            match change {
                DeltaChange::Put(child) => {
                    applied.push(DeclaredChange::Put(child.spec.id.clone()));
                    self.put_entry(child.clone());
                }
                DeltaChange::Removed(id) => {
                    if self.remove_entry(id) {
                        applied.push(DeclaredChange::Removed(id.clone()));
                    }
                }
                DeltaChange::Cleared => {
                    self.clear_entries();
                    applied.push(DeclaredChange::Cleared);
                }
            }
        }
        applied
    }
}

impl DeclaredDelta {
    /// The delta from the copy stamped `base` to `after`, given the changes the mutations made
    /// in order (a `Put` carries the entry as it is in `after`; one removed again later in the
    /// same operation is left to its removal). `None` when `after` is not newer than the base:
    /// nothing to send.
    pub fn between(
        base: ListStamp,
        after: &DeclaredList,
        changes: &[DeclaredChange],
    ) -> Option<Self> {
        if after.version().cmp(&base.version) != Ordering::Greater {
            return None;
        }
        let changes = changes
            .iter()
            .filter_map(|change| match change {
                DeclaredChange::Put(id) => after.get(id).cloned().map(DeltaChange::Put),
                DeclaredChange::Removed(id) => Some(DeltaChange::Removed(id.clone())),
                DeclaredChange::Cleared => Some(DeltaChange::Cleared),
                DeclaredChange::Unchanged => None,
            })
            .collect();
        Some(Self {
            base,
            target: after.stamp(),
            changes,
        })
    }
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;
