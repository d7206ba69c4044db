//! Why a hub could not be spawned: the API's own error, which wraps those of the layers it
//! spawns the hub from. The request errors live in `crate::types::errors`.

use crate::config::ConfigError;
use crate::storage::StorageError;

/// Why a hub could not be spawned.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The registry backend could not be opened.
    #[error("registry backend: {0}")]
    Storage(#[from] StorageError),
    /// A hub actor could not be spawned.
    #[error("hub actor failed to start: {0}")]
    Actor(String),
    /// A hook given at spawn was rejected.
    #[error(transparent)]
    Hook(#[from] crate::hooks::HookError),
    /// The remote manifest configured in `auto_recovery` cannot be used.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::ManifestError),
    /// A static child (`child_specs`) did not start; the hub was shut down again.
    #[error("static children failed to start: {}", describe(.errors))]
    StaticChildren {
        /// Each failed child with its reason.
        errors: Vec<crate::ChildFailure>,
    },
}

fn describe(errors: &[crate::ChildFailure]) -> String {
    errors
        .iter()
        .map(|e| format!("{} on {}: {}", e.id, e.node, e.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

impl From<crate::hub::declared::recovery_shared::RecoveryOpenError> for SpawnError {
    fn from(e: crate::hub::declared::recovery_shared::RecoveryOpenError) -> Self {
        use crate::hub::declared::recovery_shared::RecoveryOpenError as E;
        match e {
            E::Storage(e) => SpawnError::Storage(e),
            E::Manifest(e) => SpawnError::Manifest(e),
        }
    }
}
