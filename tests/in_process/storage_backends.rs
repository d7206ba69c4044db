//! The disk backends as a hub sees them: switching between `lmdb` and `durable` on one path,
//! TTL filtering, rollback of failed writes, corruption on open, and group commit batching.

use std::sync::Arc;
use std::time::Duration;

use process_hub::model::{ChildSpec, Metadata, Row};
use process_hub::storage::{
    open_backend, BackendConfig, DiskOptions, DurableStorage, LmdbStorage, MemoryStorage, Mutation,
    Storage, StorageError, REGISTRY_FILE, REGISTRY_FORMAT_VERSION,
};

fn row(id: &str) -> Row {
    Row::authored(
        ChildSpec::new(id, "counter"),
        Metadata::new(),
        "a@h",
        1,
        true,
    )
    .unwrap()
}

fn tagged(id: &str, tag: &str) -> Row {
    let mut metadata = Metadata::new();
    metadata.insert("tag".into(), tag.into());
    Row::authored(ChildSpec::new(id, "counter"), metadata, "a@h", 1, true).unwrap()
}

/// A row too large for a tiny map: writing it fails with a real LMDB "map full".
fn huge(id: &str) -> Row {
    let mut metadata = Metadata::new();
    metadata.insert("blob".into(), "x".repeat(2 * 1024 * 1024));
    Row::authored(ChildSpec::new(id, "counter"), metadata, "a@h", 1, true).unwrap()
}

fn tiny_map() -> DiskOptions {
    DiskOptions {
        map_size: 512 * 1024,
        max_map_size: Some(512 * 1024),
        ..DiskOptions::default()
    }
}

fn ids(storage: &dyn Storage) -> Vec<String> {
    let mut ids: Vec<String> = storage
        .export_all()
        .into_iter()
        .map(|r| r.spec.id.to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn switching_between_lmdb_and_durable_keeps_the_data() {
    let data_dir = tempfile::tempdir().unwrap();
    let lmdb = BackendConfig::Lmdb { path: None };
    let durable = BackendConfig::Durable { path: None };

    let store = open_backend(&lmdb, data_dir.path(), "hub1").unwrap();
    assert_eq!(store.name(), "lmdb");
    store.insert(row("a")).unwrap();
    store.insert(row("b")).unwrap();
    drop(store);
    assert!(data_dir
        .path()
        .join("process_hub/hub1")
        .join(REGISTRY_FILE)
        .is_file());

    let store = open_backend(&durable, data_dir.path(), "hub1").unwrap();
    assert_eq!(store.name(), "durable");
    assert_eq!(ids(&*store), ["a", "b"]);
    store.remove(&"a".into()).unwrap();
    store.insert(tagged("c", "x")).unwrap();
    drop(store);

    let store = open_backend(&lmdb, data_dir.path(), "hub1").unwrap();
    assert_eq!(ids(&*store), ["b", "c"]);
    assert_eq!(store.get(&"c".into()).unwrap().tag(), Some("x"));
    store.clear_all().unwrap();
    drop(store);

    let store = open_backend(&durable, data_dir.path(), "hub1").unwrap();
    assert!(store.is_empty());
    // Another hub id is another store.
    let other = open_backend(&durable, data_dir.path(), "hub2").unwrap();
    other.insert(row("z")).unwrap();
    assert!(store.is_empty());
}

#[test]
fn rows_past_their_ttl_are_invisible_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let batch = vec![
        Mutation::Put {
            row: row("gone"),
            ttl: Some(Duration::ZERO),
        },
        Mutation::Put {
            row: row("stays"),
            ttl: Some(Duration::from_secs(3600)),
        },
        Mutation::put(row("forever")),
    ];
    let check = |store: &dyn Storage| {
        assert!(store.get(&"gone".into()).is_none(), "{}", store.name());
        assert!(!store.contains(&"gone".into()), "{}", store.name());
        assert!(store.get(&"stays".into()).is_some(), "{}", store.name());
        assert_eq!(store.len(), 2, "{}", store.name());
        assert_eq!(ids(store), ["forever", "stays"], "{}", store.name());
        // The walk without a copy (summaries, listing pages) sees the same live rows.
        let mut visited = Vec::new();
        store.for_each_row(&mut |r| visited.push(r.spec.id.to_string()));
        visited.sort();
        assert_eq!(visited, ["forever", "stays"], "{}", store.name());
    };
    let memory = MemoryStorage::new();
    memory.apply(batch.clone()).unwrap();
    check(&memory);
    let durable = DurableStorage::open(dir.path(), &DiskOptions::default()).unwrap();
    durable.apply(batch).unwrap();
    check(&durable);
    drop(durable);
    // The expiry is stored: lmdb reads it, and durable replays it into memory.
    let lmdb = LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap();
    check(&lmdb);
    drop(lmdb);
    check(&DurableStorage::open(dir.path(), &DiskOptions::default()).unwrap());
}

#[test]
fn a_failed_disk_write_rolls_the_memory_write_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = DurableStorage::open(dir.path(), &tiny_map()).unwrap();
    store.insert(tagged("a", "old")).unwrap();

    // Replacing an existing row and adding a new one in one batch that cannot reach the disk.
    let mut replacement = huge("a");
    replacement.metadata.insert("tag".into(), "new".into());
    let err = store
        .apply(vec![
            Mutation::put(row("fresh")),
            Mutation::put(replacement),
        ])
        .unwrap_err();
    assert!(matches!(err, StorageError::Write { .. }), "{err:?}");
    assert_eq!(store.get(&"a".into()).unwrap().tag(), Some("old"));
    assert!(store.get(&"fresh".into()).is_none());
    assert_eq!(store.len(), 1);

    // A failed removal and a failed clear come back too.
    let err = store
        .apply(vec![Mutation::Remove("a".into()), Mutation::put(huge("h"))])
        .unwrap_err();
    assert!(matches!(err, StorageError::Write { .. }), "{err:?}");
    assert!(store.contains(&"a".into()));
    let err = store
        .apply(vec![Mutation::Clear, Mutation::put(huge("h"))])
        .unwrap_err();
    assert!(matches!(err, StorageError::Write { .. }), "{err:?}");
    assert_eq!(ids(&store), ["a"]);

    // The store stays usable, and memory matches the disk.
    store.insert(row("b")).unwrap();
    drop(store);
    let reopened = LmdbStorage::open(dir.path(), &tiny_map()).unwrap();
    assert_eq!(ids(&reopened), ["a", "b"]);
    assert_eq!(reopened.get(&"a".into()).unwrap().tag(), Some("old"));
}

#[test]
fn a_rollback_never_undoes_a_later_successful_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = DurableStorage::open(dir.path(), &tiny_map()).unwrap();
    store.insert(tagged("k", "v0")).unwrap();
    // In flight together: a failing write of k, then a successful one, then a failing one.
    let failing = store.submit(vec![Mutation::put(huge("k"))]);
    let later = store.submit(vec![Mutation::put(tagged("k", "v2"))]);
    let failing_again = store.submit(vec![Mutation::put(huge("k"))]);
    assert!(failing.wait().is_err());
    later.wait().unwrap();
    assert!(failing_again.wait().is_err());
    assert_eq!(store.get(&"k".into()).unwrap().tag(), Some("v2"));

    // A failing write followed by a successful removal: the key stays removed.
    let failing = store.submit(vec![Mutation::put(huge("k"))]);
    let removal = store.submit(vec![Mutation::Remove("k".into())]);
    assert!(failing.wait().is_err());
    removal.wait().unwrap();
    assert!(store.get(&"k".into()).is_none());
    drop(store);
    let reopened = LmdbStorage::open(dir.path(), &tiny_map()).unwrap();
    assert!(reopened.is_empty());
}

#[test]
fn lmdb_reports_write_errors_and_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let store = LmdbStorage::open(dir.path(), &tiny_map()).unwrap();
    store.insert(row("a")).unwrap();
    let err = store.insert(huge("h")).unwrap_err();
    assert!(matches!(err, StorageError::Write { .. }), "{err:?}");
    assert!(err.to_string().contains(REGISTRY_FILE), "{err}");
    store.insert(row("b")).unwrap();
    assert_eq!(ids(&store), ["a", "b"]);
}

#[test]
fn a_garbage_registry_file_is_rotated_and_the_hub_starts_empty() {
    for backend in ["lmdb", "durable"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(REGISTRY_FILE),
            b"definitely not an lmdb file",
        )
        .unwrap();
        let store: Arc<dyn Storage> = match backend {
            "lmdb" => Arc::new(LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap()),
            _ => Arc::new(DurableStorage::open(dir.path(), &DiskOptions::default()).unwrap()),
        };
        assert!(store.is_empty());
        let rotated: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("registry.lmdb.corrupt-"))
            .collect();
        assert_eq!(rotated.len(), 1, "{backend}: {rotated:?}");
        store.insert(row("a")).unwrap();
        assert!(store.contains(&"a".into()));
    }
}

#[test]
fn a_truncated_registry_file_is_rotated_and_the_hub_starts_empty() {
    let source = tempfile::tempdir().unwrap();
    {
        let store = LmdbStorage::open(source.path(), &DiskOptions::default()).unwrap();
        for i in 0..1500 {
            store.insert(row(&format!("child-{i:05}"))).unwrap();
        }
    }
    let whole = std::fs::read(source.path().join(REGISTRY_FILE)).unwrap();
    // Nothing left, less than a meta page, one meta page, both (`truncate -s 8192` after a
    // SIGKILL), one data page more, half the file.
    let len = whole.len();
    for cut in [0, 100, 4096, 8192, 12288, len / 2] {
        for backend in ["lmdb", "durable"] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(REGISTRY_FILE), &whole[..cut]).unwrap();
            // LMDB maps the file: without the check before the map, this open dies of SIGBUS.
            let store: Arc<dyn Storage> = match backend {
                "lmdb" => Arc::new(LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap()),
                _ => Arc::new(DurableStorage::open(dir.path(), &DiskOptions::default()).unwrap()),
            };
            assert!(store.is_empty(), "{backend}, cut at {cut}");
            let rotated: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("registry.lmdb.corrupt-"))
                .collect();
            assert_eq!(rotated.len(), 1, "{backend}, cut at {cut}: {rotated:?}");
            store.insert(row("a")).unwrap();
            assert!(store.contains(&"a".into()));
        }
    }
}

#[test]
fn concurrent_writers_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap());
    let (writers, per_writer) = (64, 20);
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..per_writer {
                    store.insert(row(&format!("w{w}-{i}"))).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = store.commit_stats();
    let ops = (writers * per_writer) as u64;
    assert_eq!(stats.batches_ok, ops);
    assert_eq!(store.len(), ops as usize);
    // 64 writers blocked on their own fsync queue up behind each other: fewer commits than
    // writes, however fast the disk.
    assert!(
        stats.commits < ops,
        "{} commits for {ops} writes",
        stats.commits
    );
}

#[test]
fn writes_kept_in_flight_share_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap();
    // One submitter keeping many writes in flight (as the Registry actor does): they queue up
    // behind the first commit and go to disk together, yet each commit answers only when its
    // batch is durable.
    let commits: Vec<_> = (0..1000)
        .map(|i| store.submit(vec![Mutation::put(row(&format!("r{i}")))]))
        .collect();
    for commit in commits {
        commit.wait().unwrap();
    }
    let stats = store.commit_stats();
    assert_eq!(stats.batches_ok, 1000);
    assert!(stats.commits * 10 <= 1000, "{} commits", stats.commits);
    drop(store);
    let reopened = LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap();
    assert_eq!(reopened.len(), 1000);
}

#[test]
fn a_registry_from_a_newer_release_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    drop(LmdbStorage::open(dir.path(), &DiskOptions::default()).unwrap());
    // Stamp the marker as a newer release would (meta database, key "format", big-endian u32).
    let file = dir.path().join(REGISTRY_FILE);
    {
        let newer = REGISTRY_FORMAT_VERSION + 1;
        let mut options = heed::EnvOpenOptions::new();
        options.max_dbs(4);
        // SAFETY: a plain open of a closed store, with no durability-weakening flags.
        let env = unsafe {
            options.flags(heed::EnvFlags::NO_SUB_DIR);
            options.open(&file).unwrap()
        };
        let mut wtxn = env.write_txn().unwrap();
        let meta: heed::Database<heed::types::Bytes, heed::types::Bytes> =
            env.create_database(&mut wtxn, Some("meta")).unwrap();
        meta.put(&mut wtxn, b"format", &newer.to_be_bytes())
            .unwrap();
        wtxn.commit().unwrap();
    }
    let refusals = [
        LmdbStorage::open(dir.path(), &DiskOptions::default()).err(),
        DurableStorage::open(dir.path(), &DiskOptions::default()).err(),
    ];
    for err in refusals {
        let err = err.expect("a newer store must not open");
        let StorageError::NewerFormat {
            path,
            found,
            supported,
        } = &err
        else {
            panic!("unexpected {err:?}");
        };
        assert!(path.ends_with(REGISTRY_FILE), "{path:?}");
        assert_eq!((*found, *supported), (2, 1));
        let message = err.to_string();
        assert!(message.contains("registry.lmdb"), "{message}");
        assert!(
            message.contains("version 2") && message.contains("the 1 "),
            "{message}"
        );
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("corrupt")), "{names:?}");
}

#[test]
fn a_lone_writer_gets_one_commit_per_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = DurableStorage::open(dir.path(), &DiskOptions::default()).unwrap();
    for i in 0..20 {
        store.insert(row(&format!("r{i}"))).unwrap();
    }
    let stats = store.commit_stats();
    assert_eq!((stats.commits, stats.batches_ok), (20, 20));
}
