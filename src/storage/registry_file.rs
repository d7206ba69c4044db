//! The registry's on-disk format, shared by the `lmdb` and `durable` backends so that a hub can
//! switch between them on the same path and keep its data.
//!
//! The registry is the store `registry.lmdb` in the store directory (an LMDB environment kept as
//! one file, with LMDB's `registry.lmdb-lock` beside it). Each entry is keyed by the child id's
//! UTF-8 bytes and holds a bincode-encoded [`StoredRow`]: the row plus its optional expiry. The
//! marker says `registry`, format version [`REGISTRY_FORMAT_VERSION`].

use std::path::Path;

use serde::Serialize;

use super::engine::{DiskOptions, Engine, KvOp, StoreSpec};
use super::{Mutation, StorageError, StoredRow};
use crate::model::Row;

/// The registry's file name inside the store directory.
pub const REGISTRY_FILE: &str = "registry.lmdb";

/// The newest registry format this release reads and writes. A store marked with a higher
/// version refuses to open with [`StorageError::NewerFormat`].
pub const REGISTRY_FORMAT_VERSION: u32 = 1;

pub(crate) const REGISTRY: StoreSpec = StoreSpec {
    file_name: REGISTRY_FILE,
    kind: "registry",
    format_version: REGISTRY_FORMAT_VERSION,
};

/// Encodes like [`StoredRow`] without cloning the row.
#[derive(Serialize)]
struct StoredRowRef<'a> {
    row: &'a Row,
    expires_at_ms: Option<u64>,
}

/// Opens the registry store in `dir`, checking that every entry decodes (a store with an
/// undecodable row is treated as corrupt and rotated aside).
pub(crate) fn open_registry(dir: &Path, options: &DiskOptions) -> Result<Engine, StorageError> {
    let mut validate = |key: &[u8], value: &[u8]| -> Result<(), String> {
        let stored = decode(value).map_err(|e| e.to_string())?;
        if stored.row.spec.id.as_str().as_bytes() == key {
            Ok(())
        } else {
            Err(format!(
                "entry {:?} holds row {}",
                String::from_utf8_lossy(key),
                stored.row.spec.id
            ))
        }
    };
    Engine::open(dir, REGISTRY, options, &mut validate)
}

/// Decodes a stored entry.
pub(crate) fn decode(value: &[u8]) -> Result<StoredRow, bincode::Error> {
    bincode::deserialize(value)
}

/// The expiry of a put with this TTL, submitted at `now`.
pub(crate) fn expiry(now: u64, ttl: Option<std::time::Duration>) -> Option<u64> {
    ttl.map(|ttl| now.saturating_add(ttl.as_millis().min(u64::MAX as u128) as u64))
}

/// Encodes one row with its expiry as a put.
pub(crate) fn encode_put(row: &Row, expires_at_ms: Option<u64>) -> Result<KvOp, StorageError> {
    let value = bincode::serialize(&StoredRowRef { row, expires_at_ms }).map_err(|e| {
        StorageError::Codec {
            id: row.spec.id.to_string(),
            message: e.to_string(),
        }
    })?;
    Ok(KvOp::Put {
        key: row.spec.id.as_str().as_bytes().to_vec(),
        value,
    })
}

/// Encodes a batch of mutations (TTLs are turned into expiries counted from `now`, in
/// milliseconds since the Unix epoch).
pub(crate) fn encode_batch(batch: &[Mutation], now: u64) -> Result<Vec<KvOp>, StorageError> {
    batch
        .iter()
        .map(|m| match m {
            Mutation::Put { row, ttl } => encode_put(row, expiry(now, *ttl)),
            Mutation::Remove(id) => Ok(KvOp::Delete(id.as_str().as_bytes().to_vec())),
            Mutation::Clear => Ok(KvOp::Clear),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};
    use crate::storage::{LmdbStorage, Storage};

    fn row(id: &str) -> Row {
        Row::authored(ChildSpec::new(id, "k"), Metadata::new(), "n@h", 0, false).unwrap()
    }

    #[test]
    fn a_registry_with_an_undecodable_row_is_rotated() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut accept = |_: &[u8], _: &[u8]| Ok(());
            let engine =
                Engine::open(dir.path(), REGISTRY, &DiskOptions::default(), &mut accept).unwrap();
            let good = encode_put(&row("good"), None).unwrap();
            let bad = KvOp::Put {
                key: b"bad".to_vec(),
                value: vec![0xff; 3],
            };
            engine.submit(vec![good, bad]).wait().unwrap();
        }
        let store = LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap();
        assert!(store.is_empty());
        let rotated = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("registry.lmdb.corrupt-")
            })
            .count();
        assert_eq!(rotated, 1);
        store.insert(row("after")).unwrap();
        assert!(store.contains(&"after".into()));
    }

    #[test]
    fn a_row_under_the_wrong_key_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut accept = |_: &[u8], _: &[u8]| Ok(());
            let engine =
                Engine::open(dir.path(), REGISTRY, &DiskOptions::default(), &mut accept).unwrap();
            let KvOp::Put { value, .. } = encode_put(&row("a"), None).unwrap() else {
                unreachable!("encode_put returns a put")
            };
            let misplaced = KvOp::Put {
                key: b"b".to_vec(),
                value,
            };
            engine.submit(vec![misplaced]).wait().unwrap();
        }
        let store = LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap();
        assert!(store.is_empty());
    }

    #[test]
    fn the_stored_form_is_a_stored_row() {
        let KvOp::Put { key, value } = encode_put(&row("x"), Some(5)).unwrap() else {
            unreachable!("encode_put returns a put")
        };
        assert_eq!(key, b"x");
        let stored = decode(&value).unwrap();
        assert_eq!(stored.row, row("x"));
        assert_eq!(stored.expires_at_ms, Some(5));
    }
}
