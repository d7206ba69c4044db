//! A hub on a durable registry backend keeps its rows across a restart of the hub and, without
//! auto-recovery (`recovery_replay` on), restarts the children its rows say it ran.

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
        .recovery_replay_wait(std::time::Duration::from_millis(50))
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
    }
    assert_eq!(hub.tag_query("kept").len(), 19);
    // The rows say this node ran the children: it restarts them (the previous run's pids died
    // with it), and not the stopped one.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while hub.process_list(ProcessScope::Local).len() < 19 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the kept children did not run again: {:?}",
            hub.process_list(ProcessScope::Local)
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let running = hub.registry_dump();
    assert_eq!(running.len(), 19);
    assert!(hub.local_child(&"d0".into()).is_some());
    assert!(hub.local_child(&"d19".into()).is_none());
    for (id, row) in &running {
        assert_eq!(row.node_pids.len(), 1, "{id} runs once, here");
        assert!(before[id]
            .node_pids
            .values()
            .all(|old| !row.node_pids.values().any(|new| new == old)));
    }
    // A restart is a write that authors the row.
    let d0 = process_hub::ChildId::from("d0");
    assert!(before[&d0].hub.epoch < running[&d0].hub.epoch);
    hub.shutdown().await.unwrap();
}
