//! Scenarios of the byte-level engine: reopen, marker, corruption, write failures.

use super::*;
use crate::storage::engine::format::{corrupt_path, lock_path};

const SPEC: StoreSpec = StoreSpec {
    file_name: "t.lmdb",
    kind: "test",
    format_version: 3,
};

fn accept() -> impl FnMut(&[u8], &[u8]) -> Result<(), String> {
    |_, _| Ok(())
}

fn open(dir: &Path, options: &DiskOptions) -> Result<Engine, StorageError> {
    Engine::open(dir, SPEC, options, &mut accept())
}

fn put(key: &str, value: &[u8]) -> KvOp {
    KvOp::Put {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
    }
}

fn read(engine: &Engine, key: &str) -> Option<Vec<u8>> {
    engine.get(key.as_bytes(), |v| v.to_vec()).unwrap()
}

fn rotated_files(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".corrupt-"))
        .collect();
    found.sort();
    found
}

/// Writes the marker directly, as a newer release would have.
fn write_marker(dir: &Path, version: u32) {
    let env = open_env(&dir.join(SPEC.file_name), &DiskOptions::default()).unwrap();
    let mut wtxn = env.write_txn().unwrap();
    let meta: Db = env
        .create_database(&mut wtxn, Some(format::META_DB))
        .unwrap();
    meta.put(
        &mut wtxn,
        format::FORMAT_KEY,
        &format::encode_version(version),
    )
    .unwrap();
    wtxn.commit().unwrap();
}

#[test]
fn data_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    engine
        .submit(vec![put("a", b"1"), put("b", b"2")])
        .wait()
        .unwrap();
    engine
        .submit(vec![KvOp::Delete(b"a".to_vec())])
        .wait()
        .unwrap();
    drop(engine);
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    assert_eq!(read(&engine, "a"), None);
    assert_eq!(read(&engine, "b"), Some(b"2".to_vec()));
    engine.submit(vec![KvOp::Clear]).wait().unwrap();
    assert_eq!(read(&engine, "b"), None);
    assert!(dir.path().join("t.lmdb").is_file());
    assert!(lock_path(&dir.path().join("t.lmdb")).is_file());
}

#[test]
fn a_newer_marker_refuses_to_open_and_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), &DiskOptions::default()).unwrap());
    write_marker(dir.path(), 7);
    let err = open(dir.path(), &DiskOptions::default())
        .err()
        .expect("must refuse");
    let file = dir.path().canonicalize().unwrap().join("t.lmdb");
    match &err {
        StorageError::NewerFormat {
            path,
            found,
            supported,
        } => {
            assert_eq!(path.canonicalize().unwrap(), file);
            assert_eq!((*found, *supported), (7, 3));
        }
        other => panic!("unexpected {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("t.lmdb"), "{message}");
    assert!(message.contains('7') && message.contains('3'), "{message}");
    assert!(rotated_files(dir.path()).is_empty());
}

#[test]
fn an_older_marker_opens() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), &DiskOptions::default()).unwrap());
    write_marker(dir.path(), 1);
    assert!(open(dir.path(), &DiskOptions::default()).is_ok());
}

#[test]
fn a_garbage_file_is_rotated_and_replaced_by_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.lmdb");
    let garbage: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&file, &garbage).unwrap();
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    let rotated = rotated_files(dir.path());
    assert_eq!(rotated.len(), 1, "{rotated:?}");
    assert_eq!(std::fs::read(&rotated[0]).unwrap(), garbage);
    let mut n = 0;
    engine.for_each(|_, _| n += 1).unwrap();
    assert_eq!(n, 0);
    engine.submit(vec![put("k", b"v")]).wait().unwrap();
    assert_eq!(read(&engine, "k"), Some(b"v".to_vec()));
}

#[test]
fn an_entry_the_store_rejects_marks_it_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    engine
        .submit(vec![put("good", b"ok"), put("bad", b"??")])
        .wait()
        .unwrap();
    drop(engine);
    let mut strict = |_: &[u8], v: &[u8]| {
        if v == b"ok" {
            Ok(())
        } else {
            Err("undecodable".to_string())
        }
    };
    let engine = Engine::open(dir.path(), SPEC, &DiskOptions::default(), &mut strict).unwrap();
    assert_eq!(read(&engine, "good"), None, "a fresh store is empty");
    assert_eq!(rotated_files(dir.path()).len(), 1);
}

#[test]
fn a_store_of_another_kind_is_refused_not_rotated() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), &DiskOptions::default()).unwrap());
    let other = StoreSpec {
        kind: "other",
        ..SPEC
    };
    let err = Engine::open(dir.path(), other, &DiskOptions::default(), &mut accept())
        .err()
        .expect("must refuse");
    assert!(matches!(err, StorageError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("test"), "{err}");
    assert!(rotated_files(dir.path()).is_empty());
}

#[test]
fn opening_twice_in_one_process_is_an_error_not_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path(), &DiskOptions::default()).unwrap();
    first.submit(vec![put("k", b"v")]).wait().unwrap();
    let err = open(dir.path(), &DiskOptions::default())
        .err()
        .expect("must refuse");
    assert!(matches!(err, StorageError::Open { .. }), "{err:?}");
    assert!(rotated_files(dir.path()).is_empty());
    assert_eq!(read(&first, "k"), Some(b"v".to_vec()));
}

#[test]
fn a_write_that_does_not_fit_fails_and_the_store_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let options = DiskOptions {
        map_size: 256 * 1024,
        max_map_size: Some(256 * 1024),
        ..DiskOptions::default()
    };
    let engine = open(dir.path(), &options).unwrap();
    engine.submit(vec![put("small", b"1")]).wait().unwrap();
    let huge = vec![7u8; 1024 * 1024];
    let err = engine
        .submit(vec![put("other", b"2"), put("huge", &huge)])
        .wait()
        .unwrap_err();
    assert!(matches!(err, StorageError::Write { .. }), "{err:?}");
    assert_eq!(read(&engine, "huge"), None);
    assert_eq!(
        read(&engine, "other"),
        None,
        "a failed batch writes nothing"
    );
    engine.submit(vec![put("after", b"3")]).wait().unwrap();
    assert_eq!(read(&engine, "after"), Some(b"3".to_vec()));
    assert_eq!(read(&engine, "small"), Some(b"1".to_vec()));
    let stats = engine.stats();
    assert_eq!((stats.batches_ok, stats.batches_failed), (2, 1));
}

#[test]
fn a_full_map_grows_and_the_write_lands() {
    let dir = tempfile::tempdir().unwrap();
    let options = DiskOptions {
        map_size: 256 * 1024,
        ..DiskOptions::default()
    };
    let engine = open(dir.path(), &options).unwrap();
    // Readers on other threads must never see the map move under them.
    let engine = std::sync::Arc::new(engine);
    let reader = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            for _ in 0..2000 {
                engine.for_each(|_, _| {}).unwrap();
            }
        })
    };
    for i in 0..8 {
        let huge = vec![i as u8; 1024 * 1024];
        engine
            .submit(vec![put(&format!("huge-{i}"), &huge)])
            .wait()
            .unwrap();
    }
    reader.join().unwrap();
    assert!(engine.env.info().map_size >= 8 * 1024 * 1024);
    drop(engine);
    // Reopened at the configured size: LMDB takes the size the file needs.
    let engine = open(dir.path(), &options).unwrap();
    assert_eq!(read(&engine, "huge-7"), Some(vec![7u8; 1024 * 1024]));
}

#[test]
fn a_removed_store_file_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    engine.submit(vec![put("a", b"1")]).wait().unwrap();
    std::fs::remove_file(dir.path().join(SPEC.file_name)).unwrap();
    let err = engine.submit(vec![put("b", b"2")]).wait().unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::Write {
                fault: WriteFault::Gone,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(engine.identity().check().is_err());
}

#[test]
fn rotation_names_never_collide() {
    let a = corrupt_path(Path::new("/x/t.lmdb"), format::unique_stamp());
    let b = corrupt_path(Path::new("/x/t.lmdb"), format::unique_stamp());
    assert_ne!(a, b);
}

#[test]
fn every_commit_mode_opens_with_synchronous_commits() {
    // An `Ok` means on disk only because LMDB syncs a commit's pages and meta page before the
    // commit returns: none of the flags that defer or skip those syncs may ever be set.
    let weakening = EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC | EnvFlags::MAP_ASYNC;
    for commit_mode in [CommitMode::Group, CommitMode::PerOperation] {
        let dir = tempfile::tempdir().unwrap();
        let options = DiskOptions {
            commit_mode,
            ..DiskOptions::default()
        };
        let engine = open(dir.path(), &options).unwrap();
        let flags = engine.env.get_flags().unwrap();
        assert_eq!(flags & weakening.bits(), 0, "{commit_mode:?}: {flags:#x}");
        assert_eq!(flags & EnvFlags::WRITE_MAP.bits(), 0, "{commit_mode:?}");
        assert_ne!(flags & EnvFlags::NO_SUB_DIR.bits(), 0, "{commit_mode:?}");
    }
}

/// Where a store file is cut in the truncation scenarios: nothing left, less than a meta page,
/// one meta page, both meta pages (the SIGKILL-then-`truncate -s 8192` case), one data page
/// more, and half the file.
pub(crate) fn truncation_points(len: u64) -> [u64; 6] {
    [0, 100, 4096, 8192, 12288, len / 2]
}

#[test]
fn a_truncated_store_is_rotated_before_it_is_mapped() {
    let source = tempfile::tempdir().unwrap();
    {
        let engine = open(source.path(), &DiskOptions::default()).unwrap();
        let small: Vec<KvOp> = (0..2000)
            .map(|i| put(&format!("key-{i:05}"), &[i as u8; 300]))
            .collect();
        engine.submit(small).wait().unwrap();
        // Values too large for a leaf live in overflow pages, which the check follows too.
        let large: Vec<KvOp> = (0..8)
            .map(|i| put(&format!("large-{i}"), &vec![i as u8; 20_000]))
            .collect();
        engine.submit(large).wait().unwrap();
    }
    let whole = std::fs::read(source.path().join(SPEC.file_name)).unwrap();
    assert!(whole.len() > 64 * 1024, "{}", whole.len());
    for cut in truncation_points(whole.len() as u64) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(SPEC.file_name);
        std::fs::write(&file, &whole[..cut as usize]).unwrap();
        // Without the check, LMDB maps the file and the first read of a missing page is SIGBUS.
        let engine = open(dir.path(), &DiskOptions::default()).unwrap();
        let rotated = rotated_files(dir.path());
        assert_eq!(rotated.len(), 1, "cut at {cut}: {rotated:?}");
        assert_eq!(std::fs::metadata(&rotated[0]).unwrap().len(), cut);
        let mut n = 0;
        engine.for_each(|_, _| n += 1).unwrap();
        assert_eq!(n, 0, "cut at {cut}: the fresh store is empty");
        engine.submit(vec![put("k", b"v")]).wait().unwrap();
        assert_eq!(read(&engine, "k"), Some(b"v".to_vec()));
    }
}

#[test]
fn an_intact_store_passes_the_check_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = open(dir.path(), &DiskOptions::default()).unwrap();
        for round in 0..20u8 {
            // Rewrites and deletes leave free pages behind, as a long-lived store has.
            let ops: Vec<KvOp> = (0..200)
                .map(|i| put(&format!("key-{i:04}"), &[round; 500]))
                .chain((0..50).map(|i| KvOp::Delete(format!("key-{:04}", i * 4).into_bytes())))
                .collect();
            engine.submit(ops).wait().unwrap();
        }
    }
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    assert!(rotated_files(dir.path()).is_empty());
    assert_eq!(read(&engine, "key-0001"), Some(vec![19u8; 500]));
}

#[test]
fn a_touch_commits_a_transaction_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    engine.submit(vec![put("a", b"1")]).wait().unwrap();
    let before = engine.env.info().last_txn_id;
    engine.submit(vec![KvOp::Touch]).wait().unwrap();
    // LMDB skips the commit of a transaction that dirtied no page: a touch must dirty one, or
    // it would tell nothing about the disk.
    assert!(engine.env.info().last_txn_id > before);
    assert_eq!(read(&engine, "a"), Some(b"1".to_vec()));
    drop(engine);
    let engine = open(dir.path(), &DiskOptions::default()).unwrap();
    assert_eq!(read(&engine, "a"), Some(b"1".to_vec()));
    assert!(rotated_files(dir.path()).is_empty());
}
