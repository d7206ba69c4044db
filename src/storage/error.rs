//! Why a storage operation failed: its own file, so the disk engine can name it without
//! importing the module that opens the backends over the engine.

use serde::{Deserialize, Serialize};

/// Why a storage operation failed. Cloneable because one failed group commit answers many
/// waiters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// The store was written by a newer release; opening it could lose data it understands and
    /// we do not.
    #[error(
        "store {path} has format version {found}, newer than the {supported} this release supports"
    )]
    NewerFormat {
        /// The store's path.
        path: std::path::PathBuf,
        /// The version found in the store's marker.
        found: u32,
        /// The newest version this release reads.
        supported: u32,
    },
    /// The store could not be opened or created (and could not be rotated aside).
    #[error("cannot open store {path}: {message}")]
    Open {
        /// The store's path.
        path: std::path::PathBuf,
        /// The underlying error.
        message: String,
    },
    /// A write did not reach the disk (disk full, permissions, I/O error). Nothing of the
    /// failed mutation is visible afterwards.
    #[error("write to store {path} failed: {message}")]
    Write {
        /// The store's path.
        path: std::path::PathBuf,
        /// The underlying error.
        message: String,
        /// What kind of failure it is, for callers that answer each differently (an HTTP 507
        /// for a full disk).
        fault: WriteFault,
    },
    /// A row could not be encoded or decoded.
    #[error("cannot encode or decode row {id}: {message}")]
    Codec {
        /// The row's child id.
        id: String,
        /// The codec's error.
        message: String,
    },
    /// The backend has shut down (its writer is gone).
    #[error("store is closed")]
    Closed,
    /// An error from a user-supplied backend.
    #[error("storage backend error: {0}")]
    Backend(String),
}

/// Why a write did not reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteFault {
    /// The filesystem is full (`ENOSPC`, `EDQUOT`): writes succeed again once space returns.
    NoSpace,
    /// The filesystem or the file is read-only, or the process may not write it.
    ReadOnly,
    /// The store's file was removed or replaced under the running store: nothing written now
    /// would be found after a restart.
    Gone,
    /// Any other failure (an I/O error of the device, a value LMDB refuses).
    Io,
}

impl WriteFault {
    /// The fault of an OS error.
    pub fn of_os_error(e: &std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(code) if code == nix::libc::ENOSPC || code == nix::libc::EDQUOT => Self::NoSpace,
            Some(code)
                if code == nix::libc::EROFS
                    || code == nix::libc::EACCES
                    || code == nix::libc::EPERM =>
            {
                Self::ReadOnly
            }
            _ => Self::Io,
        }
    }
}

impl StorageError {
    /// Whether this is a write refused for lack of space.
    pub fn is_no_space(&self) -> bool {
        matches!(
            self,
            StorageError::Write {
                fault: WriteFault::NoSpace,
                ..
            }
        )
    }
}
