//! The declared list's pure home: every decision about the list of children that shall exist,
//! one concept per file (docs/recovery.md, "The model"). The DeclaredLeader actor
//! (`hub/declared/`) holds the state and carries out the effects it returns; the store
//! (`storage/declared_store.rs`) and the wire (`cluster/wire/declared.rs`) move the types
//! defined here and decide nothing.
//!
//! - [`list`]: the versioned list itself, its precedence between copies, the view a handle reads;
//! - [`delta`]: the changed entries a leader broadcasts instead of its whole copy;
//! - [`summary`]: a copy in brief (stamp and digest), exchanged before whole copies;
//! - [`state`]: one node's adopted copy, parking, and the ordered effects of each event.
//!
//! Boot adoption (`core::boot`) and the reconcile rounds (`core::reconcile`, `core::recovery`)
//! read the list from here.

pub mod delta;
pub mod list;
pub mod state;
pub mod summary;
