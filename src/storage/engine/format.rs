//! What makes a file one of our stores, and what happens to a file that is not.
//!
//! Every store carries a marker in its `meta` database: the format version it was written in
//! and the kind of store it is (`registry`, later `declared`). A release refuses to open a store
//! whose version is newer than it understands, because rewriting it could silently drop what the
//! newer release recorded. A store that cannot be read at all is not fixed in place: it is renamed
//! aside to `<file>.corrupt-<stamp>` (kept for forensics) and replaced by an empty store, so the
//! node starts empty and rebuilds from its peers instead of refusing to start.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The key of the format version (a big-endian `u32`) in the `meta` database.
pub(crate) const FORMAT_KEY: &[u8] = b"format";
/// The key of the store's kind (UTF-8 text) in the `meta` database.
pub(crate) const KIND_KEY: &[u8] = b"kind";
/// The database holding the marker.
pub(crate) const META_DB: &str = "meta";
/// The database holding the store's entries.
pub(crate) const DATA_DB: &str = "data";

/// Encodes a format version for the marker.
pub(crate) fn encode_version(version: u32) -> [u8; 4] {
    version.to_be_bytes()
}

/// Decodes a marker's format version; `None` if it is not a marker we could have written.
pub(crate) fn decode_version(bytes: &[u8]) -> Option<u32> {
    <[u8; 4]>::try_from(bytes).ok().map(u32::from_be_bytes)
}

/// How a store's marker compares with what this release supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MarkerCheck {
    /// Readable by this release.
    Supported,
    /// Written by a newer release: refuse to open.
    Newer { found: u32 },
    /// Not a marker of ours: the store is corrupt.
    Garbled,
    /// A valid store of another kind (a registry opened as a declared list, say).
    OtherKind { found: String },
}

/// Decides whether a store with this marker may be opened. Pure, so every case is a unit test.
pub(crate) fn check_marker(
    version: Option<&[u8]>,
    kind: Option<&[u8]>,
    expected_kind: &str,
    supported: u32,
) -> MarkerCheck {
    let Some(found) = version.and_then(decode_version) else {
        return MarkerCheck::Garbled;
    };
    if found > supported {
        return MarkerCheck::Newer { found };
    }
    match kind.map(std::str::from_utf8) {
        Some(Ok(kind)) if kind == expected_kind => MarkerCheck::Supported,
        Some(Ok(kind)) => MarkerCheck::OtherKind {
            found: kind.to_owned(),
        },
        _ => MarkerCheck::Garbled,
    }
}

/// A stamp that strictly increases on every call in this process and follows the wall clock in
/// nanoseconds, so rotated files sort by age and two rotations never collide (the seed's
/// `system_monotonic`).
pub(crate) fn unique_stamp() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// The name a corrupt store is moved to: `<file>.corrupt-<stamp>`, beside the original.
pub(crate) fn corrupt_path(path: &Path, stamp: u64) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".corrupt-{stamp}"));
    PathBuf::from(name)
}

/// LMDB's lock file for a store opened as a single file (`NO_SUB_DIR`).
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

/// Moves a corrupt store aside and returns where it went. The lock file is removed too: it only
/// describes the environment being replaced.
pub(crate) fn rotate_aside(path: &Path) -> std::io::Result<PathBuf> {
    let mut target = corrupt_path(path, unique_stamp());
    while target.exists() {
        target = corrupt_path(path, unique_stamp());
    }
    std::fs::rename(path, &target)?;
    match std::fs::remove_file(lock_path(path)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_decisions() {
        let v1 = encode_version(1);
        let v2 = encode_version(2);
        assert_eq!(
            check_marker(Some(&v1), Some(b"registry"), "registry", 1),
            MarkerCheck::Supported
        );
        assert_eq!(
            check_marker(Some(&v2), Some(b"registry"), "registry", 1),
            MarkerCheck::Newer { found: 2 }
        );
        assert_eq!(
            check_marker(Some(b"xx"), Some(b"registry"), "registry", 1),
            MarkerCheck::Garbled
        );
        assert_eq!(
            check_marker(None, None, "registry", 1),
            MarkerCheck::Garbled
        );
        assert_eq!(
            check_marker(Some(&v1), Some(b"declared"), "registry", 1),
            MarkerCheck::OtherKind {
                found: "declared".into()
            }
        );
        assert_eq!(
            check_marker(Some(&v1), Some(&[0xff, 0xfe]), "registry", 1),
            MarkerCheck::Garbled
        );
    }

    #[test]
    fn stamps_never_repeat() {
        let mut last = 0;
        for _ in 0..10_000 {
            let s = unique_stamp();
            assert!(s > last);
            last = s;
        }
    }

    #[test]
    fn corrupt_name_is_beside_the_file() {
        let p = corrupt_path(Path::new("/d/registry.lmdb"), 42);
        assert_eq!(p, PathBuf::from("/d/registry.lmdb.corrupt-42"));
        assert_eq!(
            lock_path(Path::new("/d/registry.lmdb")),
            PathBuf::from("/d/registry.lmdb-lock")
        );
    }
}
