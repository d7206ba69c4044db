//! Durable declared children and orphan recovery: the IO side (seed
//! `persistence-and-recovery.md`, "Declared children and orphan recovery" to the end).
//!
//! The decisions live in the pure core ([`crate::core::declared_list`],
//! [`crate::core::reconcile`], [`crate::core::recovery`], [`crate::core::boot`],
//! [`crate::core::manifest_ship`]); this module does the IO they call for:
//! - [`declared_store`]: each node's durable copy of its adopted list, beside the registry, with
//!   the seeded marker that makes a lost list a loss and not an empty list;
//! - [`manifest`]: the remote manifest (local path, S3) and the task that ships versions to it;
//! - [`elector`]: the pluggable choice of the declared-list leader;
//! - [`state_watch`]: the published recovery state behind `recovery_state` and `await_normal`.
//!
//! See `docs/recovery.md` for the model, the failure modes and the operator's runbook.

pub mod declared_store;
pub mod elector;
pub mod manifest;
pub mod state_watch;
