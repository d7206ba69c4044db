//! The declared store: persist and reload, the format marker, corruption as loss.

use super::*;
use crate::core::boot::{decide_boot, BootDecision, DurableEvidence, ManifestFetch};
use crate::model::{ChildSpec, Metadata};

fn opts() -> DiskOptions {
    DiskOptions::default()
}

fn add(list: &mut DeclaredList, id: &str) -> DeclaredChange {
    list.add(ChildSpec::new(id, "counter"), Metadata::new(), "n1")
        .unwrap()
}

#[test]
fn a_fresh_store_is_missing_and_has_no_marker() {
    let dir = tempfile::tempdir().unwrap();
    let (store, found) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    assert_eq!(found, StoredList::Missing);
    assert!(!store.seeded_marker_present());
    assert_eq!(store.path(), dir.path().join(DECLARED_FILE));
}

#[test]
fn mutations_persist_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let mut list = DeclaredList::new();
    {
        let (store, _) = DeclaredStore::open(dir.path(), &opts()).unwrap();
        for id in ["a", "b", "c"] {
            let change = add(&mut list, id);
            store.save_change(&list, &change).wait().unwrap();
        }
        let change = list.remove(&"b".into(), "n2");
        store.save_change(&list, &change).wait().unwrap();
        let unchanged = list.remove(&"zz".into(), "n2");
        store.save_change(&list, &unchanged).wait().unwrap();
        assert!(store.seeded_marker_present());
        assert_eq!(store.load().unwrap(), Some(list.clone()));
    }
    let (store, found) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    assert_eq!(found, StoredList::Readable(list.clone()));
    assert_eq!(found.to_local(), LocalList::Readable(list.clone()));
    assert_eq!(list.version(), 4);
    assert_eq!(list.last_mutated_by(), Some("n2"));
    assert!(store.seeded_marker_present());

    // An adopted copy replaces the stored one whole.
    let mut adopted = DeclaredList::new();
    for id in ["x", "y"] {
        add(&mut adopted, id);
    }
    let adopted = DeclaredList::from_parts(9, adopted.children().clone(), Some("n3".into()));
    store.save_whole(&adopted).wait().unwrap();
    let change = {
        let mut l = adopted.clone();
        let c = l.clear("op");
        store.save_change(&l, &c).wait().unwrap();
        l
    };
    drop(store);
    let (_, found) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    assert_eq!(found, StoredList::Readable(change));
}

#[test]
fn saves_in_flight_all_land_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    let mut list = DeclaredList::new();
    // Submit many saves before waiting on any: they apply in submission order (and share
    // fsyncs when they queue up behind one another).
    let commits: Vec<Commit> = (0..200)
        .map(|i| {
            let change = add(&mut list, &format!("c{i}"));
            store.save_change(&list, &change)
        })
        .collect();
    for c in commits {
        c.wait().unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.batches_ok, 200);
    assert_eq!(store.load().unwrap().unwrap().len(), 200);
}

#[test]
fn a_newer_format_refuses_to_open_and_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let newer = StoreSpec {
        format_version: DECLARED_FORMAT_VERSION + 1,
        ..DECLARED
    };
    {
        let mut accept = |_: &[u8], _: &[u8]| Ok(());
        Engine::open(dir.path(), newer, &opts(), &mut accept).unwrap();
    }
    let before = std::fs::read(dir.path().join(DECLARED_FILE)).unwrap();
    let err = DeclaredStore::open(dir.path(), &opts())
        .err()
        .expect("refused");
    assert_eq!(
        err,
        StorageError::NewerFormat {
            path: dir.path().join(DECLARED_FILE),
            found: DECLARED_FORMAT_VERSION + 1,
            supported: DECLARED_FORMAT_VERSION,
        }
    );
    assert_eq!(
        std::fs::read(dir.path().join(DECLARED_FILE)).unwrap(),
        before
    );
    assert!(rotated_files(dir.path()).is_empty());
}

/// A stored list, then damage: the reopened store reports a loss, never an empty list, and the
/// boot decision parks because the seeded marker survived.
fn assert_loss_parks(dir: &Path) {
    let (store, found) = DeclaredStore::open(dir, &opts()).unwrap();
    assert!(
        matches!(
            found,
            StoredList::Corrupt {
                rotated_to: Some(_)
            }
        ),
        "{found:?}"
    );
    assert!(store.seeded_marker_present());
    let evidence = DurableEvidence {
        seeded_marker: store.seeded_marker_present(),
        durable_rows: 0,
    };
    assert!(matches!(
        decide_boot(found.to_local(), evidence, ManifestFetch::Disabled),
        BootDecision::Park(_)
    ));
    // The fresh store works.
    let mut list = DeclaredList::new();
    let change = add(&mut list, "after");
    store.save_change(&list, &change).wait().unwrap();
    assert_eq!(store.load().unwrap(), Some(list));
}

fn store_one(dir: &Path) {
    let (store, _) = DeclaredStore::open(dir, &opts()).unwrap();
    let mut list = DeclaredList::new();
    let change = add(&mut list, "a");
    store.save_change(&list, &change).wait().unwrap();
}

#[test]
fn a_garbage_file_is_a_loss_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    store_one(dir.path());
    let garbage: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(dir.path().join(DECLARED_FILE), &garbage).unwrap();
    assert_loss_parks(dir.path());
    assert_eq!(rotated_files(dir.path()).len(), 1);
}

#[test]
fn a_truncated_list_file_is_a_loss_with_evidence_never_a_crash() {
    let source = tempfile::tempdir().unwrap();
    {
        let (store, _) = DeclaredStore::open(source.path(), &opts()).unwrap();
        let mut list = DeclaredList::new();
        for i in 0..600 {
            let change = add(&mut list, &format!("child-{i:04}"));
            store.save_change(&list, &change).wait().unwrap();
        }
    }
    let whole = std::fs::read(source.path().join(DECLARED_FILE)).unwrap();
    for cut in crate::storage::engine::tests::truncation_points(whole.len() as u64) {
        let dir = tempfile::tempdir().unwrap();
        store_one(dir.path());
        std::fs::write(dir.path().join(DECLARED_FILE), &whole[..cut as usize]).unwrap();
        assert_loss_parks(dir.path());
        assert_eq!(rotated_files(dir.path()).len(), 1, "cut at {cut}");
    }
}

#[test]
fn an_undecodable_entry_is_a_loss_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    store_one(dir.path());
    {
        let mut accept = |_: &[u8], _: &[u8]| Ok(());
        let engine = Engine::open(dir.path(), DECLARED, &opts(), &mut accept).unwrap();
        let bad = KvOp::Put {
            key: b"cbad".to_vec(),
            value: vec![0xff; 3],
        };
        engine.submit(vec![bad]).wait().unwrap();
    }
    assert_loss_parks(dir.path());
}

#[test]
fn an_inconsistent_list_is_a_loss_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    store_one(dir.path());
    {
        // Remove the child behind the header's back: the count no longer matches.
        let mut accept = |_: &[u8], _: &[u8]| Ok(());
        let engine = Engine::open(dir.path(), DECLARED, &opts(), &mut accept).unwrap();
        engine
            .submit(vec![KvOp::Delete(child_key(&"a".into()))])
            .wait()
            .unwrap();
    }
    assert_loss_parks(dir.path());
}

#[test]
fn a_deleted_list_file_with_its_marker_left_is_a_loss() {
    let dir = tempfile::tempdir().unwrap();
    store_one(dir.path());
    std::fs::remove_file(dir.path().join(DECLARED_FILE)).unwrap();
    std::fs::remove_file(format::lock_path(&dir.path().join(DECLARED_FILE))).unwrap();
    let (store, found) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    assert_eq!(found, StoredList::Missing);
    let evidence = DurableEvidence {
        seeded_marker: store.seeded_marker_present(),
        durable_rows: 0,
    };
    assert!(matches!(
        decide_boot(found.to_local(), evidence, ManifestFetch::Absent),
        BootDecision::Park(_)
    ));
}

#[test]
fn the_store_lives_in_the_hub_directory() {
    assert_eq!(
        DeclaredStore::dir_for(Path::new("/var/lib/app"), "h1"),
        PathBuf::from("/var/lib/app/process_hub/h1")
    );
}

#[test]
fn whole_saves_write_the_difference_and_reload_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let list_of = |version: u64, ids: &[(&str, &str)]| {
        let children = ids
            .iter()
            .map(|(id, kind)| {
                (
                    ChildId::from(*id),
                    DeclaredChild {
                        spec: ChildSpec::new(*id, *kind),
                        metadata: Metadata::new(),
                    },
                )
            })
            .collect::<crate::core::declared::list::DeclaredChildren>();
        DeclaredList::from_parts(version, children, Some("n1".into()))
    };
    let first = list_of(3, &[("a", "counter"), ("b", "counter"), ("c", "counter")]);
    // b removed, c's spec replaced, d added.
    let second = list_of(5, &[("a", "counter"), ("c", "ticker"), ("d", "counter")]);
    {
        let (store, _) = DeclaredStore::open(dir.path(), &opts()).unwrap();
        store.save_whole(&first).wait().unwrap();
        // b deleted, c and d put: not a write per child.
        let (removed, changed) = difference(first.children(), &second);
        assert_eq!(removed, [ChildId::from("b")]);
        let changed: Vec<&str> = changed.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(changed, ["c", "d"]);
        store.save_whole(&second).wait().unwrap();
        assert_eq!(store.load().unwrap(), Some(second.clone()));
    }
    // After a reopen the store compares with what it found on disk.
    let (store, found) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    assert_eq!(found, StoredList::Readable(second.clone()));
    let mut third = second.clone();
    let change = add(&mut third, "e");
    store.save_change(&third, &change).wait().unwrap();
    let fourth = list_of(9, &[("e", "counter")]);
    store.save_whole(&fourth).wait().unwrap();
    assert_eq!(store.load().unwrap(), Some(fourth));
}

#[test]
fn one_commit_persists_a_batch_of_changes_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    let mut list = DeclaredList::new();
    let mut changes = Vec::new();
    for id in ["a", "b", "c"] {
        changes.push(add(&mut list, id));
    }
    changes.push(list.remove(&"b".into(), "n1"));
    changes.push(list.remove(&"zz".into(), "n1"));
    let commits_before = store.stats().commits;
    store.save_changes(&list, &changes).wait().unwrap();
    assert_eq!(store.stats().commits - commits_before, 1);
    assert_eq!(store.load().unwrap(), Some(list.clone()));
    // A clear and a re-add within one batch leave just the re-added child.
    let mut changes = vec![list.clear("n1")];
    changes.push(add(&mut list, "a"));
    store.save_changes(&list, &changes).wait().unwrap();
    drop(store);
    let (_, found) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    assert_eq!(found, StoredList::Readable(list));
}

/// A failed write followed by one that succeeds can leave a header without all of its
/// children: resync reports the store torn, and the next save rewrites the whole list.
#[test]
fn a_torn_store_is_reported_and_the_next_save_rewrites_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = DeclaredStore::open(dir.path(), &opts()).unwrap();
    let mut list = DeclaredList::new();
    for id in ["a", "b", "c"] {
        let change = add(&mut list, id);
        store.save_change(&list, &change).wait().unwrap();
    }
    // What a lost write leaves: the header counts a child the disk does not hold.
    store
        .submit(vec![KvOp::Delete(child_key(&"b".into()))], list.version())
        .wait()
        .unwrap();
    match store.resync().unwrap() {
        Resynced::Torn { reason } => assert!(reason.contains("header counts 3"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // A change saved now (a mutation) cannot be a diff: the whole list is written.
    let change = add(&mut list, "d");
    store.save_change(&list, &change).wait().unwrap();
    assert_eq!(store.load().unwrap(), Some(list.clone()));
    match store.resync().unwrap() {
        Resynced::List(Some(loaded)) => assert_eq!(loaded, list),
        other => panic!("{other:?}"),
    }
}
