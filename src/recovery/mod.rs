//! The recovery feature's IO pieces under the names docs/recovery.md gives them, for code that
//! imports them from here. Where they live: the declared store with the rest of the disk
//! (`crate::storage::declared_store`), the remote manifest in [`crate::manifest`], the leader
//! elector with the configuration (`crate::config::elector`). The decisions are in the pure
//! core ([`crate::core::declared::list`], [`crate::core::reconcile`], [`crate::core::recovery`],
//! [`crate::core::boot`]); `docs/recovery.md` has the model and the operator's runbook.

pub use crate::config::elector;
pub use crate::manifest;
pub use crate::storage::declared_store;

/// The published recovery state's error, where `await_normal` callers look for it.
pub mod state_watch {
    pub use crate::types::AwaitNormalTimeout;
}
