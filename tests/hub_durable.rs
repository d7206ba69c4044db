//! A hub on a durable registry backend keeps its rows across a restart of the hub.
//!
//! Needs the `durable` backend (built on the storage branch); on a branch without it,
//! `open_backend` refuses the config and this test fails at spawn.

mod common;

use process_hub::storage::BackendConfig;
use process_hub::{ChildSpec, Hub, ProcessHub, ProcessScope, StartOptions, StopOptions};

#[tokio::test]
async fn a_durable_backend_keeps_its_rows_across_a_hub_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = ProcessHub::builder("durable-restart")
        .registry_backend(BackendConfig::Durable {
            path: Some(dir.path().join("registry")),
        })
        .data_dir(dir.path())
        .build()
        .unwrap();

    let (hub, join) = Hub::spawn(config.clone(), process_hub_actors::default_kinds())
        .await
        .expect("durable hub spawns");
    let specs: Vec<_> = (0..20)
        .map(|i| ChildSpec::new(format!("d{i}"), "counter"))
        .collect();
    let result = hub
        .start_children(specs, StartOptions::new().tag("kept"))
        .await
        .unwrap();
    assert_eq!(result.started.len(), 20);
    hub.stop_child("d19", StopOptions::new()).await.unwrap();
    let before = hub.registry_dump();
    assert_eq!(before.len(), 19);
    hub.shutdown().await.unwrap();
    // The store closes when the hub's actors are gone and the last handle is dropped (a
    // handle keeps the read view open); only then can this process open it again.
    drop(hub);
    join.await.unwrap();

    let (hub, _) = Hub::spawn(config, process_hub_actors::default_kinds())
        .await
        .expect("durable hub restarts");
    let after = hub.registry_dump();
    assert_eq!(
        after.len(),
        19,
        "every acknowledged row survives, the stopped one stays gone"
    );
    for (id, row) in &before {
        let kept = &after[id];
        assert_eq!(kept.spec, row.spec);
        assert_eq!(kept.metadata, row.metadata);
        // The previous run's pids died with it: this node's bindings are dropped at boot.
        assert!(kept.node_pids.is_empty());
    }
    assert_eq!(hub.tag_query("kept").len(), 19);
    assert!(hub.process_list(ProcessScope::Local).is_empty());
    // A kept row can be started again, and then runs here.
    let again = hub
        .start_child(
            ChildSpec::new("d0", "counter"),
            StartOptions::new().check_existing(false),
        )
        .await
        .unwrap();
    assert!(again.is_ok());
    assert!(hub.local_child(&"d0".into()).is_some());
    let d0 = process_hub::ChildId::from("d0");
    assert!(after[&d0].hub.epoch < hub.registry_dump()[&d0].hub.epoch);
    hub.shutdown().await.unwrap();
}
