//! A registry backend of the user's (`tests/in_process/common/fault_map.rs`, a map with group commit and
//! injected faults) through the public API: given to a hub directly, or named in the config and
//! built by its factory with the config's options; concurrent writers sharing one commit; a
//! failed commit refused and then recovered from; a corrupt record skipped and reported; and a
//! whole-cluster outage recovered with every node's registry in it.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use common::cluster::*;
use common::fault_map::{FaultyMapStorage, MapDisk};
use common::{durable, wait_until, DEADLINE};
use process_hub::storage::{BackendConfig, Storage};
use process_hub::{ChildId, ChildSpec, Hub, ProcessHub, StartOptions, StopOptions};

async fn hub_on(disk: &Arc<MapDisk>, hub_id: &str) -> Hub {
    let config = ProcessHub::builder(hub_id)
        .node_name("a@127.0.0.1")
        .build()
        .unwrap();
    let (hub, _) = Hub::builder(config, process_hub_actors::default_kinds())
        .registry_storage(FaultyMapStorage::open(disk.clone()) as Arc<dyn Storage>)
        .spawn()
        .await
        .expect("the hub spawns on the custom backend");
    hub
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_keeps_its_registry_in_a_backend_given_to_it() {
    let disk = MapDisk::new();
    let hub = hub_on(&disk, "custom-direct").await;
    let started = hub
        .start_children(specs("d-", 50), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 50);
    assert_eq!(
        disk.len(),
        50,
        "every started child is on the backend's disk"
    );
    let stop: Vec<ChildId> = (0..10).map(|i| ChildId::from(format!("d-{i}"))).collect();
    hub.stop_children(stop, StopOptions::new()).await.unwrap();
    assert_eq!(disk.len(), 40);
    assert_eq!(hub.registry_dump().len(), 40);

    // Group commit: starts made while the writer is held queue up, and share commits.
    disk.hold(true);
    let (commits, batches) = (
        disk.commits.load(Ordering::SeqCst),
        disk.batches.load(Ordering::SeqCst),
    );
    let starts: Vec<_> = (0..20)
        .map(|i| {
            let hub = hub.clone();
            tokio::spawn(async move {
                hub.start_child(
                    ChildSpec::new(format!("g-{i}"), "counter"),
                    StartOptions::new(),
                )
                .await
            })
        })
        .collect();
    let submitted = disk.submitted.load(Ordering::SeqCst);
    wait_until("several writes queue behind the held writer", || {
        disk.submitted.load(Ordering::SeqCst) >= submitted + 3
    })
    .await;
    disk.hold(false);
    for start in starts {
        let result = start.await.unwrap().unwrap();
        assert!(result.is_ok(), "{result:?}");
    }
    let batches = disk.batches.load(Ordering::SeqCst) - batches;
    let commits = disk.commits.load(Ordering::SeqCst) - commits;
    assert!(batches >= 3, "{batches} batches");
    assert!(
        commits < batches,
        "{batches} batches in {commits} commits: queued writers share one"
    );
    assert_eq!(disk.len(), 60);
    hub.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_names_a_custom_backend_and_its_factory_builds_it() {
    let disks: Arc<Mutex<BTreeMap<String, Arc<MapDisk>>>> = Arc::default();
    let text = "hub_id = \"named\"\nnode_name = \"a@127.0.0.1\"\n\
                registry_backend = { type = \"custom\", name = \"faulty_map\", options = { disk = \"one\", fsync_ms = \"1\" } }\n";
    let config = ProcessHub::from_toml_str(text).unwrap();
    assert_eq!(
        config.registry_backend,
        BackendConfig::Custom {
            name: "faulty_map".into(),
            options: [("disk", "one"), ("fsync_ms", "1")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    );
    // Without its factory the hub does not start, and says which backend is missing.
    let err = Hub::builder(config.clone(), process_hub_actors::default_kinds())
        .spawn()
        .await
        .expect_err("no factory, no hub");
    assert!(err.to_string().contains("faulty_map"), "{err}");
    let (hub, _) = Hub::builder(config.clone(), process_hub_actors::default_kinds())
        .storage_backend("faulty_map", FaultyMapStorage::factory(disks.clone()))
        .spawn()
        .await
        .unwrap();
    hub.start_child(ChildSpec::new("n1", "counter"), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(disks.lock().unwrap()["one"].len(), 1);
    hub.shutdown().await.unwrap();
    // A factory refusing its options stops the spawn with its error.
    let bad = ProcessHub::from_toml_str(&text.replace("fsync_ms = \"1\"", "fsync_ms = \"soon\""))
        .unwrap();
    let err = Hub::builder(bad, process_hub_actors::default_kinds())
        .storage_backend("faulty_map", FaultyMapStorage::factory(disks))
        .spawn()
        .await
        .expect_err("bad options, no hub");
    assert!(err.to_string().contains("fsync_ms"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_is_refused_and_the_hub_writes_again_afterwards() {
    let disk = MapDisk::new();
    let hub = hub_on(&disk, "custom-faults").await;
    disk.fail_next(1);
    let result = hub
        .start_child(ChildSpec::new("f1", "counter"), StartOptions::new())
        .await
        .unwrap();
    assert!(
        !result.is_ok(),
        "a start whose write failed is not acknowledged"
    );
    assert_eq!(disk.len(), 0, "none of the failed batch is on the disk");
    wait_until("the hub writes again", || hub.storage_problems().is_empty()).await;
    let result = hub
        .start_child(ChildSpec::new("f2", "counter"), StartOptions::new())
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert!(disk.ids().contains(&"f2".to_owned()));
    hub.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_record_is_skipped_reported_and_the_rest_read_back() {
    let disk = MapDisk::new();
    let hub = hub_on(&disk, "custom-corrupt").await;
    hub.start_children(specs("k-", 5), StartOptions::new())
        .await
        .unwrap();
    hub.shutdown().await.unwrap();
    disk.corrupt("k-2");
    let store = FaultyMapStorage::open(disk.clone());
    assert_eq!(store.export_all().len(), 4);
    let fault = store.fault().expect("the corrupt record is reported");
    assert!(fault.contains("k-2"), "{fault}");
    let hub = hub_on(&disk, "custom-corrupt").await;
    let problems = hub.storage_problems();
    assert!(
        problems.iter().any(|p| p.contains("k-2")),
        "health reports it: {problems:?}"
    );
    assert!(hub.child_lookup(&ChildId::from("k-3")).is_some());
    hub.shutdown().await.unwrap();
}

/// The recovery test of a whole-cluster outage, with every node's registry in the custom
/// backend (reopened on the same disk when the node restarts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_outage_recovers_over_the_custom_backend() {
    let disks: Arc<Mutex<BTreeMap<String, Arc<MapDisk>>>> = Arc::default();
    let options =
        Options::durable().custom_storage("faulty_map", FaultyMapStorage::factory(disks.clone()));
    let mut d = TestCluster::with_nodes(61, &["a", "b", "c"], options).await;
    let all = specs("w", 24);
    let result = d
        .hub("b")
        .start_children(all.clone(), durable())
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    d.wait_versions(24).await;
    let stopped: Vec<ChildId> = all[..4].iter().map(|s| s.id.clone()).collect();
    d.hub("c")
        .stop_children(stopped.clone(), StopOptions::new())
        .await
        .unwrap();
    d.wait_versions(28).await;
    let declared: BTreeSet<ChildId> = ids(&all[4..]);
    let dead: BTreeSet<ChildId> = stopped.into_iter().collect();
    d.wait_exactly(&declared, &dead, "before the outage").await;
    assert_eq!(disks.lock().unwrap().len(), 3, "one disk per node");

    for name in ["a", "b", "c"] {
        d.crash(name).await;
    }
    for name in ["a", "b", "c"] {
        d.restart(name).await;
    }
    d.wait_members().await;
    for hub in d.hubs.values() {
        hub.await_normal(DEADLINE).await.unwrap();
    }
    d.wait_exactly(&declared, &dead, "after the outage").await;
    assert_eq!(
        disks.lock().unwrap().len(),
        3,
        "each node reopened its own disk"
    );
    stop_all(&d).await;
}
