//! Registry backends the hub does not ship: a user's [`Storage`] implementation, given to the
//! hub directly ([`crate::HubBuilder::registry_storage`]) or named in the config
//! (`registry_backend = { type = "custom", name = "...", options = { ... } }`) and built by the
//! factory registered under that name ([`crate::HubBuilder::storage_backend`]).
//!
//! The contract a backend keeps (the hub relies on each point; `tests/in_process/custom_storage.rs` shows
//! one that keeps them while it fails and corrupts on purpose):
//! - `submit` applies each batch atomically and in call order; its [`Commit`](super::Commit)
//!   resolves `Ok` only once the batch is as durable as the backend promises, and an `Err`
//!   means none of the batch is visible. Batches of concurrent writers may share one durable
//!   write (group commit): the hub submits without waiting and awaits commits in order.
//! - reads (`get`, `export_all`, `for_each_row`) see every batch submitted before them once it
//!   is committed, from any thread, and `export_all` is in id order.
//! - a row it cannot read back (a corrupt record) is left out of the reads rather than
//!   returned damaged, and said in `fault()`, which health reports; `probe` writes nothing but
//!   reaches the disk, so the hub learns when writes succeed again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::{Storage, StorageError};

/// What a custom backend's factory is given to open the store of one hub.
#[derive(Debug)]
pub struct CustomBackend<'a> {
    /// The name the config gave (`registry_backend.name`).
    pub name: &'a str,
    /// The config's options for it (`registry_backend.options`), as strings.
    pub options: &'a BTreeMap<String, String>,
    /// The hub's data directory (`data_dir`).
    pub data_dir: &'a Path,
    /// The hub's id.
    pub hub_id: &'a str,
}

/// Opens a custom backend's store for one hub; an `Err` stops the hub's spawn with it.
pub type StorageFactory =
    Arc<dyn Fn(&CustomBackend<'_>) -> Result<Arc<dyn Storage>, StorageError> + Send + Sync>;
