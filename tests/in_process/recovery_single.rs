//! Durable children and orphan recovery on one node (issue 5, `docs/recovery.md`): durable
//! starts and stops, a restart on the same data directory with a memory registry, first-boot
//! seeding, a lost list (parked, then cleared), a newer format, the `durable` preconditions,
//! `await_normal`, the recovery hooks, and recovery starts paced per round. The remote
//! manifest's cases are in `recovery_manifest.rs`.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::recovery_hub::*;
use common::{durable, wait_until, DEADLINE};
use process_hub::recovery::declared_store::{DECLARED_FILE, SEEDED_MARKER_FILE};
use process_hub::storage::{BackendConfig, StorageError};
use process_hub::{
    AutoRecoveryConfig, ChildId, ChildSpec, ChildStartError, HookEvent, Hub, ProcessHub,
    ProcessScope, RecoveryError, RecoveryState, Restart, SpawnError, StartError, StartOptions,
    StopError, StopOptions,
};

#[tokio::test]
async fn a_durable_start_declares_and_a_stop_undeclares() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = Recorded::default();
    let (hub, join) = spawn(config("r-basic", dir.path()), &recorded).await;
    hub.await_normal(DEADLINE).await.unwrap();
    assert_eq!(hub.recovery_state(), RecoveryState::Normal);
    assert_eq!(hub.declared_children().unwrap().version, 0);

    let result = hub
        .start_children(specs(&["a", "b", "c"]), durable().tag("t"))
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    let view = hub.declared_children().unwrap();
    assert_eq!(view.version, 3, "one version per declared child");
    assert_eq!(declared_ids(&hub), ["a", "b", "c"]);
    assert_eq!(
        view.children[0].metadata.get("tag").map(String::as_str),
        Some("t")
    );
    assert!(!view.parked);
    for id in ["a", "b", "c"] {
        assert!(hub.registry_dump()[&ChildId::from(id)].hub.durable);
    }
    // A plain start is not declared and its row is not durable.
    hub.start_child(ChildSpec::new("plain", "counter"), StartOptions::new())
        .await
        .unwrap();
    assert!(!hub.registry_dump()[&ChildId::from("plain")].hub.durable);
    assert_eq!(hub.declared_children().unwrap().version, 3);

    // A deliberate stop undeclares before it terminates.
    let stopped = hub.stop_child("b", StopOptions::new()).await.unwrap();
    assert_eq!(stopped.stopped.len(), 1);
    assert_eq!(declared_ids(&hub), ["a", "c"]);
    assert_eq!(hub.declared_children().unwrap().version, 4);
    assert!(!runs_here(&hub, "b"));
    // Stopping an undeclared child leaves the list alone.
    hub.stop_child("plain", StopOptions::new()).await.unwrap();
    assert_eq!(hub.declared_children().unwrap().version, 4);
    // Declaring a running child again changes nothing.
    let again = hub
        .start_child(ChildSpec::new("a", "counter"), durable().tag("t"))
        .await
        .unwrap();
    assert!(matches!(
        again.errors[0].reason,
        ChildStartError::AlreadyStarted
    ));
    assert_eq!(hub.declared_children().unwrap().version, 4);

    // A permanent child that crashes is restarted by its supervisor, not by the reconcile;
    // the reconcile's round counters show it found nothing to do.
    wait_until("a quiet later round", || {
        recorded.any(|e| {
            matches!(e, HookEvent::ReconcileRound { stats, parked: false, .. }
                if stats.candidates == 2 && stats.orphans == 0 && stats.started == 0)
        })
    })
    .await;
    stop(hub, join).await;
}

#[tokio::test]
async fn durable_needs_a_permanent_child_and_auto_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let (hub, join) = spawn(config("r-pre", dir.path()), &Recorded::default()).await;
    let result = hub
        .start_children(
            vec![
                ChildSpec::new("t", "counter").with_restart(Restart::Transient),
                ChildSpec::new("p", "counter"),
            ],
            durable(),
        )
        .await
        .unwrap();
    assert_eq!(result.started_ids(), vec![ChildId::from("p")]);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].id, ChildId::from("t"));
    assert!(matches!(
        &result.errors[0].reason,
        ChildStartError::DurableRequiresPermanent { restart } if restart == "transient"
    ));
    assert_eq!(declared_ids(&hub), ["p"]);
    assert!(!runs_here(&hub, "t"));
    // A child whose kind does not exist is refused before it is declared.
    let unknown = hub
        .start_child(ChildSpec::new("u", "no_such_kind"), durable())
        .await
        .unwrap();
    assert!(matches!(
        unknown.errors[0].reason,
        ChildStartError::UnknownKind { .. }
    ));
    assert_eq!(declared_ids(&hub), ["p"]);
    stop(hub, join).await;

    // Without auto_recovery there is no list.
    let (plain, _join) = Hub::spawn(
        ProcessHub::new("r-off"),
        process_hub_actors::default_kinds(),
    )
    .await
    .unwrap();
    assert_eq!(plain.recovery_state(), RecoveryState::Normal);
    plain.await_normal(Duration::ZERO).await.unwrap();
    assert!(plain.declared_children().is_none());
    assert_eq!(
        plain
            .start_child(ChildSpec::new("x", "counter"), durable())
            .await
            .unwrap_err(),
        StartError::Declared(RecoveryError::AutoRecoveryDisabled)
    );
    assert_eq!(
        plain.clear_declared().await.unwrap_err(),
        RecoveryError::AutoRecoveryDisabled
    );
    // Stops are unaffected.
    plain
        .start_child(ChildSpec::new("y", "counter"), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(
        plain
            .stop_child("y", StopOptions::new())
            .await
            .unwrap()
            .stopped
            .len(),
        1
    );
    plain.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_restart_on_the_same_data_dir_brings_back_every_declared_child_and_no_stopped_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("r-restart", dir.path());
    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    hub.start_children(specs(&["d1", "d2", "d3", "d4", "gone"]), durable())
        .await
        .unwrap();
    hub.start_child(ChildSpec::new("plain", "counter"), StartOptions::new())
        .await
        .unwrap();
    hub.stop_child("gone", StopOptions::new()).await.unwrap();
    let version = hub.declared_children().unwrap().version;
    assert_eq!(version, 6);
    stop(hub, join).await;

    let recorded = Recorded::default();
    let (hub, join) = spawn(cfg, &recorded).await;
    // The memory registry starts empty: only the declared list knows what to bring back.
    assert_eq!(hub.declared_children().unwrap().version, version);
    hub.await_normal(DEADLINE).await.unwrap();
    for id in ["d1", "d2", "d3", "d4"] {
        assert!(runs_here(&hub, id), "{id} is back");
        assert!(hub.registry_dump()[&ChildId::from(id)].hub.durable);
    }
    assert!(!runs_here(&hub, "gone"), "a stopped child stays stopped");
    assert!(
        !runs_here(&hub, "plain"),
        "an undeclared child is not recovered"
    );
    assert_eq!(hub.process_list(ProcessScope::Local).len(), 4);
    // The hooks of the first round, once each and in order.
    wait_until("post_recovery_replay", || {
        recorded.any(|e| matches!(e, HookEvent::PostRecoveryReplay { .. }))
    })
    .await;
    let events = recorded.0.lock().unwrap().clone();
    let pos = |pred: &dyn Fn(&HookEvent) -> bool| events.iter().position(pred).unwrap();
    let pre = pos(&|e| matches!(e, HookEvent::PreRecoveryReplay { declared: 4, .. }));
    let round = pos(&|e| {
        matches!(e, HookEvent::ReconcileRound { stats, .. }
            if stats.candidates == 4 && stats.orphans == 4 && stats.started == 4)
    });
    let changed = pos(&|e| {
        matches!(
            e,
            HookEvent::RecoveryStateChanged {
                from: RecoveryState::Recovering,
                to: RecoveryState::Normal,
                ..
            }
        )
    });
    let post =
        pos(&|e| matches!(e, HookEvent::PostRecoveryReplay { stats, .. } if stats.started == 4));
    assert!(
        pre < round && round < changed && changed < post,
        "{events:?}"
    );
    assert_eq!(
        recorded.count(|e| matches!(e, HookEvent::RecoveryStateChanged { .. })),
        1
    );
    assert!(!recorded.any(|e| matches!(e, HookEvent::DeclaredParked { .. })));
    stop(hub, join).await;
}

#[tokio::test]
async fn the_first_boot_seeds_the_list_from_durable_rows_and_waits_two_rounds_for_unbound_rows() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ProcessHub {
        registry_backend: BackendConfig::Durable { path: None },
        ..config("r-seed", dir.path())
    };
    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    hub.start_children(specs(&["s1", "s2"]), durable())
        .await
        .unwrap();
    stop(hub, join).await;
    // The feature's first boot: durable rows in the registry, no list and no marker.
    let hub_dir = hub_dir(dir.path(), "r-seed");
    std::fs::remove_file(hub_dir.join(DECLARED_FILE)).unwrap();
    std::fs::remove_file(hub_dir.join(SEEDED_MARKER_FILE)).unwrap();

    let recorded = Recorded::default();
    let (hub, join) = spawn(cfg, &recorded).await;
    let view = hub.declared_children().unwrap();
    assert_eq!(view.version, 1, "seeded once, as version 1");
    assert_eq!(declared_ids(&hub), ["s1", "s2"]);
    assert!(hub_dir.join(SEEDED_MARKER_FILE).is_file());
    // The rows are registered but unbound (the previous run's pids died with it): the first
    // round skips them, the next one starts them.
    hub.await_normal(DEADLINE).await.unwrap();
    assert!(
        recorded.any(|e| matches!(e, HookEvent::ReconcileRound { stats, .. }
        if stats.skipped_pending == 2 && stats.started == 0))
    );
    wait_until("both seeded children run", || {
        runs_here(&hub, "s1") && runs_here(&hub, "s2")
    })
    .await;
    wait_until("the second round reports the starts", || {
        recorded.any(|e| {
            matches!(e, HookEvent::ReconcileRound { stats, .. }
            if stats.skipped_pending == 0 && stats.started == 2)
        })
    })
    .await;
    stop(hub, join).await;
}

#[tokio::test]
async fn a_lost_list_parks_until_the_operator_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("r-clear", dir.path());
    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    hub.start_children(specs(&["c1", "c2"]), durable())
        .await
        .unwrap();
    stop(hub, join).await;
    std::fs::remove_file(hub_dir(dir.path(), "r-clear").join(DECLARED_FILE)).unwrap();

    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    assert!(hub.declared_children().unwrap().parked);
    hub.start_child(ChildSpec::new("x", "counter"), StartOptions::new())
        .await
        .unwrap();
    let version = hub.clear_declared().await.unwrap();
    assert_eq!(version, 1, "one version above the lost node's empty copy");
    let view = hub.declared_children().unwrap();
    assert!(!view.parked);
    assert!(view.children.is_empty());
    // Durable starts work again, and survive a restart.
    assert!(hub
        .start_child(ChildSpec::new("c3", "counter"), durable())
        .await
        .unwrap()
        .is_ok());
    stop(hub, join).await;
    let (hub, join) = spawn(cfg, &Recorded::default()).await;
    hub.await_normal(DEADLINE).await.unwrap();
    assert!(runs_here(&hub, "c3"));
    assert!(!runs_here(&hub, "c1"), "cleared children do not return");
    stop(hub, join).await;
}

#[tokio::test]
async fn an_undeclared_durable_child_is_stopped_by_the_next_round() {
    // A stop that crashed between the list removal and the terminate leaves a durable row,
    // undeclared and running; `clear` leaves every running durable child in that state.
    let dir = tempfile::tempdir().unwrap();
    let recorded = Recorded::default();
    let (hub, join) = spawn(config("r-halfway", dir.path()), &recorded).await;
    hub.await_normal(DEADLINE).await.unwrap();
    hub.start_children(specs(&["h1", "h2"]), durable())
        .await
        .unwrap();
    hub.start_child(ChildSpec::new("plain", "counter"), StartOptions::new())
        .await
        .unwrap();
    hub.clear_declared().await.unwrap();
    wait_until("the undeclared durable children are stopped", || {
        !runs_here(&hub, "h1") && !runs_here(&hub, "h2")
    })
    .await;
    assert!(
        runs_here(&hub, "plain"),
        "children never declared are left alone"
    );
    wait_until("the round reports the stops", || {
        recorded.any(|e| {
            matches!(e, HookEvent::ReconcileRound { stats, .. }
            if stats.stopped_undeclared == 2)
        })
    })
    .await;
    stop(hub, join).await;
}

#[tokio::test]
async fn a_declared_list_of_a_newer_release_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("r-newer", dir.path());
    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    hub.start_child(ChildSpec::new("n1", "counter"), durable())
        .await
        .unwrap();
    stop(hub, join).await;
    let file = hub_dir(dir.path(), "r-newer").join(DECLARED_FILE);
    write_format_marker(&file, 2);
    let Err(err) = Hub::spawn(cfg, process_hub_actors::default_kinds()).await else {
        panic!("a newer list refuses to open");
    };
    assert!(
        matches!(
            err,
            SpawnError::Storage(StorageError::NewerFormat {
                found: 2,
                supported: 1,
                ..
            })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_stop_of_a_declared_child_is_refused_while_parked() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ProcessHub {
        registry_backend: BackendConfig::Durable { path: None },
        ..config("r-parked-stop", dir.path())
    };
    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    hub.start_child(ChildSpec::new("p1", "counter"), durable())
        .await
        .unwrap();
    stop(hub, join).await;
    std::fs::remove_file(hub_dir(dir.path(), "r-parked-stop").join(DECLARED_FILE)).unwrap();
    let (hub, join) = spawn(cfg, &Recorded::default()).await;
    assert!(hub.declared_children().unwrap().parked);
    assert_eq!(
        hub.stop_child("p1", StopOptions::new()).await.unwrap_err(),
        StopError::Declared(RecoveryError::DeclaredParked)
    );
    stop(hub, join).await;
}

/// Rewrites the format version in a store's marker, as a newer release would have written it.
fn write_format_marker(file: &Path, version: u32) {
    use heed::types::Bytes;
    let mut options = heed::EnvOpenOptions::new().read_txn_without_tls();
    options.map_size(1 << 30).max_dbs(4);
    // SAFETY: the store is closed (its hub was shut down and joined); NO_SUB_DIR only selects
    // the single-file layout the store uses.
    let env = unsafe {
        options.flags(heed::EnvFlags::NO_SUB_DIR);
        options.open(file).unwrap()
    };
    let mut wtxn = env.write_txn().unwrap();
    let meta: heed::Database<Bytes, Bytes> = env
        .open_database(&wtxn, Some("meta"))
        .unwrap()
        .expect("the store has a marker");
    meta.put(&mut wtxn, b"format", &version.to_be_bytes())
        .unwrap();
    wtxn.commit().unwrap();
}

#[tokio::test]
async fn a_cold_start_is_paced_by_the_per_round_start_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..30).map(|i| format!("p{i:02}")).collect();
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (hub, join) = spawn(config("r-paced", dir.path()), &Recorded::default()).await;
    hub.start_children(specs(&names), durable()).await.unwrap();
    stop(hub, join).await;

    // The memory registry comes back empty: all 30 are orphans, 10 a round at most.
    let cfg = ProcessHub {
        auto_recovery: Some(AutoRecoveryConfig {
            start_budget: process_hub::StartBudget {
                max_starts_per_round: Some(10),
                ..Default::default()
            },
            ..recovery()
        }),
        ..config("r-paced", dir.path())
    };
    let recorded = Recorded::default();
    let (hub, join) = spawn(cfg, &recorded).await;
    wait_until("all 30 run again", || {
        names.iter().all(|id| runs_here(&hub, id))
    })
    .await;
    let started: Vec<usize> = recorded
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            HookEvent::ReconcileRound { stats, .. } if stats.started > 0 => Some(stats.started),
            _ => None,
        })
        .collect();
    assert_eq!(started, [10, 10, 10], "starts per round");
    stop(hub, join).await;
}
