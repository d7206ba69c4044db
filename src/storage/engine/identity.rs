//! Whether the file a store writes is still the file its path names.
//!
//! An open store writes through its open file, which outlives a removal or a replacement of its
//! path: a data directory deleted (or swapped for another) under a running node would go on
//! taking writes into a file nobody will ever open again, and the node would acknowledge them.
//! So the store remembers the device and inode it opened, and every commit first checks that the
//! path still leads there: if not, the commit is refused ([`WriteFault::Gone`]) and health reports
//! it, until the node is restarted on a directory it can trust.
//!
//! [`WriteFault::Gone`]: crate::storage::WriteFault::Gone

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The identity of a store's file as it was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileIdentity {
    path: PathBuf,
    device: u64,
    inode: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` now.
    pub(crate) fn of(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        Ok(Self {
            path: path.to_owned(),
            device: meta.dev(),
            inode: meta.ino(),
        })
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `Err` with the reason when the path no longer leads to the opened file.
    pub fn check(&self) -> Result<(), String> {
        match std::fs::metadata(&self.path) {
            Ok(meta) if meta.dev() == self.device && meta.ino() == self.inode => Ok(()),
            Ok(_) => Err(format!(
                "{} was replaced by another file while the store had it open",
                self.path.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "{} was removed while the store had it open (was its data directory deleted?)",
                self.path.display()
            )),
            Err(e) => Err(format!("{} cannot be checked: {e}", self.path.display())),
        }
    }
}
