//! The local-path manifest: a JSON file in a directory that lives outside the cluster (a mount,
//! a NAS). Dependency-free.
//!
//! A ship writes a temporary file beside the manifest, fsyncs it, renames it over the manifest
//! and fsyncs the directory: a reader sees the old document or the new one, never a torn one,
//! and an `Ok` survives a power cut. The read-compare-write is serialized within the process
//! (one lock per adapter); across processes it relies on there being one leader at a time, and
//! a partition's second leader can at worst replace a copy of the same version (the higher
//! version still wins at every boot adoption). Use the S3 adapter where two writers are
//! expected.
//!
//! File IO runs on tokio's blocking pool, so a slow mount never stalls the runtime.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::{
    beats_stored, decode, encode, ManifestError, RemoteManifest, ShipOutcome, MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
};
use crate::core::declared::list::DeclaredList;
use crate::storage::engine::format::unique_stamp;

/// How much a fetch reads between two looks at whether it was cancelled.
const READ_CHUNK: usize = 256 * 1024;

/// Sets its flag when dropped.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A manifest kept as `<dir>/declared-manifest.json`.
#[derive(Clone, Debug)]
pub struct LocalPathManifest {
    dir: PathBuf,
    lock: Arc<Mutex<()>>,
}

impl LocalPathManifest {
    /// A manifest in `dir` (created on the first ship).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            lock: Arc::new(Mutex::new(())),
        }
    }

    /// The manifest file.
    pub fn file(&self) -> PathBuf {
        self.dir.join(MANIFEST_NAME)
    }

    fn io_error(&self, what: &str, e: std::io::Error) -> ManifestError {
        ManifestError::Io {
            location: self.location(),
            message: format!("{what}: {e}"),
        }
    }

    /// Reads at most [`MAX_MANIFEST_BYTES`] and one byte more, so a file larger than the limit
    /// (or growing while read) is refused without being held whole.
    fn read(&self) -> Result<Option<DeclaredList>, ManifestError> {
        self.read_unless(&AtomicBool::new(false))
    }

    /// [`Self::read`], in chunks, giving up between two chunks once `cancelled` is set: a fetch
    /// that timed out stops reading (and frees what it read) instead of finishing in the
    /// background. A read blocked inside one system call (a hung mount) ends when that call
    /// returns.
    fn read_unless(&self, cancelled: &AtomicBool) -> Result<Option<DeclaredList>, ManifestError> {
        let mut file = match File::open(self.file()) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_error("read", e)),
        };
        let mut bytes = Vec::new();
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            if cancelled.load(Ordering::Acquire) {
                return Err(self.io_error(
                    "read",
                    std::io::Error::new(ErrorKind::Interrupted, "the fetch was cancelled"),
                ));
            }
            let n = match file.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error("read", e)),
            };
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..n]);
            if bytes.len() as u64 > MAX_MANIFEST_BYTES {
                break; // decode refuses it as too large
            }
        }
        decode(&self.location(), &bytes).map(Some)
    }

    fn ship_blocking(&self, list: &DeclaredList) -> Result<ShipOutcome, ManifestError> {
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let stored = self.read()?;
        if !beats_stored(list, stored.as_ref()) {
            return Ok(ShipOutcome::KeptNewer {
                stored_version: stored.map_or(0, |s| s.version()),
            });
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| self.io_error("create directory", e))?;
        write_atomically(&self.file(), &encode(list)).map_err(|e| self.io_error("write", e))?;
        Ok(ShipOutcome::Stored)
    }
}

/// Temp file, fsync, rename over, fsync the directory.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(".tmp-{}-{}", std::process::id(), unique_stamp()));
    let tmp = PathBuf::from(tmp_name);
    let written = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

impl RemoteManifest for LocalPathManifest {
    fn location(&self) -> String {
        self.file().display().to_string()
    }

    fn fetch(&self) -> BoxFuture<'_, Result<Option<DeclaredList>, ManifestError>> {
        let this = self.clone();
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancelled);
        Box::pin(async move {
            // Dropped with this future (a caller's timeout): the read stops at its next chunk.
            let _cancel_on_drop = CancelOnDrop(cancelled);
            tokio::task::spawn_blocking(move || this.read_unless(&flag))
                .await
                .unwrap_or_else(|e| Err(join_error(&self.location(), e)))
        })
    }

    fn ship<'a>(
        &'a self,
        list: &'a DeclaredList,
    ) -> BoxFuture<'a, Result<ShipOutcome, ManifestError>> {
        let this = self.clone();
        let list = list.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || this.ship_blocking(&list))
                .await
                .unwrap_or_else(|e| Err(join_error(&self.location(), e)))
        })
    }
}

fn join_error(location: &str, e: tokio::task::JoinError) -> ManifestError {
    ManifestError::Io {
        location: location.to_owned(),
        message: format!("the blocking task failed: {e}"),
    }
}
