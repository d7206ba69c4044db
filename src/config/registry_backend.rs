//! Which backend a hub keeps its registry copy in (`registry_backend`): configuration, read by
//! [`crate::storage::open_backend`], which opens it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Which backend a hub keeps its registry copy in (the config's `registry_backend`).
///
/// The disk backends default their path to `<data_dir>/process_hub/<hub_id>/`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BackendConfig {
    /// In memory only (default); rebuilt from peers after a restart.
    #[default]
    Memory,
    /// LMDB on disk: reads and writes go to disk; every `Ok` is fsync'd.
    Lmdb {
        /// Directory of the store; `None` for the default under the data dir.
        #[serde(default)]
        path: Option<PathBuf>,
    },
    /// Memory for reads, mirrored synchronously to LMDB; every `Ok` is fsync'd.
    Durable {
        /// Directory of the store; `None` for the default under the data dir.
        #[serde(default)]
        path: Option<PathBuf>,
    },
    /// A backend of the user's, opened by the factory registered under `name`
    /// ([`crate::HubBuilder::storage_backend`]) with these options.
    Custom {
        /// The factory's name.
        name: String,
        /// Its options, as strings.
        #[serde(default)]
        options: std::collections::BTreeMap<String, String>,
    },
}

impl BackendConfig {
    /// The directory a disk backend uses: its configured path, or
    /// `<data_dir>/process_hub/<hub_id>/`. `None` for the memory backend.
    pub fn disk_path(&self, data_dir: &Path, hub_id: &str) -> Option<PathBuf> {
        let default = || data_dir.join("process_hub").join(hub_id);
        match self {
            BackendConfig::Memory | BackendConfig::Custom { .. } => None,
            BackendConfig::Lmdb { path } | BackendConfig::Durable { path } => {
                Some(path.clone().unwrap_or_else(default))
            }
        }
    }
}
