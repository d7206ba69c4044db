//! The remote manifest on one node (issue 5, `docs/recovery.md`): a lost list parked until the
//! manifest answers, then restored from it; a failing manifest (commands unaffected, its hook
//! fired); a manifest that never answers (neither the boot nor durable commands wait for it).

use crate::common;

use std::path::PathBuf;

use common::recovery_hub::*;
use common::{durable, wait_until, DEADLINE};
use process_hub::recovery::declared_store::DECLARED_FILE;
use process_hub::{
    AutoRecoveryConfig, ChildSpec, HookEvent, ManifestLocation, ProcessHub, RecoveryError,
    StartError, StartOptions, StopOptions,
};

#[tokio::test]
async fn a_lost_list_parks_until_the_manifest_answers() {
    let dir = tempfile::tempdir().unwrap();
    let manifest_dir = dir.path().join("off-cluster");
    let away = dir.path().join("off-cluster-away");
    std::fs::create_dir_all(&manifest_dir).unwrap();
    let cfg = ProcessHub {
        auto_recovery: Some(AutoRecoveryConfig {
            remote_manifest: Some(ManifestLocation::LocalPath {
                path: manifest_dir.clone(),
            }),
            ..recovery()
        }),
        ..config("r-park", dir.path())
    };
    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    hub.start_children(specs(&["m1", "m2"]), durable())
        .await
        .unwrap();
    let manifest_file = manifest_dir.join("declared-manifest.json");
    wait_until("the manifest holds version 2", || {
        std::fs::read(&manifest_file)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["version"] == 2)
    })
    .await;
    stop(hub, join).await;

    // The list file is lost (its marker survives) and the manifest is unreachable.
    std::fs::remove_file(hub_dir(dir.path(), "r-park").join(DECLARED_FILE)).unwrap();
    std::fs::rename(&manifest_dir, &away).unwrap();
    let recorded = Recorded::default();
    let (hub, join) = spawn(cfg, &recorded).await;
    assert!(hub.declared_children().unwrap().parked);
    assert!(recorded.any(|e| matches!(
        e,
        HookEvent::DeclaredParked {
            corrupt: false,
            seeded_marker: true,
            ..
        }
    )));
    // Parked: mutations are refused, rounds do nothing, yet the hub reaches normal.
    assert_eq!(
        hub.start_child(ChildSpec::new("new", "counter"), durable())
            .await
            .unwrap_err(),
        StartError::Declared(RecoveryError::DeclaredParked)
    );
    hub.await_normal(DEADLINE).await.unwrap();
    assert!(recorded.any(|e| matches!(e, HookEvent::ReconcileRound { parked: true, .. })));
    assert!(!runs_here(&hub, "m1"));
    // Plain starts keep working.
    assert!(hub
        .start_child(ChildSpec::new("plain", "counter"), StartOptions::new())
        .await
        .unwrap()
        .is_ok());

    // The manifest is back: a later round restores the list and the children.
    std::fs::rename(&away, &manifest_dir).unwrap();
    wait_until("the declared children are restored", || {
        runs_here(&hub, "m1") && runs_here(&hub, "m2")
    })
    .await;
    let view = hub.declared_children().unwrap();
    assert!(!view.parked);
    assert_eq!(view.version, 2);
    stop(hub, join).await;
}

#[tokio::test]
async fn the_shipper_is_an_actor_of_the_hub_restarted_like_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let manifest_dir = dir.path().join("off-cluster");
    std::fs::create_dir_all(&manifest_dir).unwrap();
    let cfg = with_manifest(
        "r-shipper",
        dir.path(),
        ManifestLocation::LocalPath {
            path: manifest_dir.clone(),
        },
    );
    let (hub, join) = spawn(cfg, &Recorded::default()).await;
    let (_, mut events) = hub.subscribe_channel();
    let shipper = || {
        hub.actor()
            .get_children()
            .into_iter()
            .find(|c| c.is_message_type_of::<process_hub::manifest::ShipperMsg>() == Some(true))
    };
    let first = shipper().expect("the shipper runs under the hub's root");
    first.kill();
    common::wait_event(&mut events, "the shipper restarted", |e| {
        matches!(e, process_hub::HubEvent::HubActorRestarted { actor } if actor == "manifest_shipper")
    })
    .await;
    let second = shipper().expect("a new shipper runs");
    assert_ne!(first.get_id(), second.get_id());
    // The new one ships what the leader offers.
    hub.start_children(specs(&["s1"]), durable()).await.unwrap();
    let version = hub.declared_children().unwrap().version;
    let manifest_file = manifest_dir.join("declared-manifest.json");
    wait_until("the manifest holds the new version", || {
        std::fs::read(&manifest_file)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["version"] == version)
    })
    .await;
    stop(hub, join).await;
}

#[tokio::test]
async fn a_failing_manifest_fires_its_hook_and_durable_commands_still_succeed() {
    let dir = tempfile::tempdir().unwrap();
    // The manifest's directory would be inside a regular file: every write fails.
    let blocker = dir.path().join("not-a-directory");
    std::fs::write(&blocker, b"x").unwrap();
    let location = ManifestLocation::LocalPath {
        path: blocker.join("manifest"),
    };
    let recorded = Recorded::default();
    let (hub, join) = spawn(
        with_manifest("r-ship-fail", dir.path(), location),
        &recorded,
    )
    .await;
    for id in ["s1", "s2", "s3"] {
        assert!(hub
            .start_child(ChildSpec::new(id, "counter"), durable())
            .await
            .unwrap()
            .is_ok());
    }
    hub.stop_child("s2", StopOptions::new()).await.unwrap();
    assert_eq!(declared_ids(&hub), ["s1", "s3"]);
    wait_until("manifest_ship_failed fires", || {
        recorded.any(|e| {
            matches!(e, HookEvent::ManifestShipFailed { failures, location, .. }
                if *failures >= 1 && location.contains("not-a-directory"))
        })
    })
    .await;
    stop(hub, join).await;
}

/// A FIFO standing in for the manifest file: every read of it blocks until a writer opens it.
/// Dropping this opens it for writing (waking every blocked reader, which then reads `bytes`
/// or nothing) and removes it, so the blocking threads end and the runtime can shut down.
struct HangingManifest {
    path: PathBuf,
}

impl HangingManifest {
    fn new(path: PathBuf) -> Self {
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        Self { path }
    }

    /// Whether a reader is blocked on it: a non-blocking open for writing fails (ENXIO) when no
    /// reader has the FIFO open. Opening it wakes them; they read `bytes` and the end.
    fn release(&self, bytes: &[u8]) -> bool {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&self.path);
        let _ = std::fs::remove_file(&self.path);
        match writer {
            Ok(mut w) => {
                let _ = w.write_all(bytes);
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for HangingManifest {
    fn drop(&mut self) {
        self.release(b"");
    }
}

#[tokio::test]
async fn a_manifest_that_never_answers_holds_up_neither_the_boot_nor_durable_commands() {
    let dir = tempfile::tempdir().unwrap();
    let manifest_dir = dir.path().join("off-cluster");
    std::fs::create_dir_all(&manifest_dir).unwrap();
    let hanging = HangingManifest::new(manifest_dir.join("declared-manifest.json"));
    let cfg = ProcessHub {
        // The boot's manifest read gives up after the hub's default timeout.
        default_timeout_ms: 500,
        ..with_manifest(
            "r-ship-hang",
            dir.path(),
            ManifestLocation::LocalPath {
                path: manifest_dir.clone(),
            },
        )
    };
    let recorded = Recorded::default();
    let (hub, join) = tokio::time::timeout(DEADLINE, spawn(cfg, &recorded))
        .await
        .expect("the hub boots although the manifest never answers");
    let commands = tokio::time::timeout(DEADLINE, async {
        for id in ["h1", "h2", "h3"] {
            hub.start_child(ChildSpec::new(id, "counter"), durable())
                .await
                .unwrap();
        }
        hub.stop_child("h1", StopOptions::new()).await.unwrap();
    })
    .await;
    assert!(commands.is_ok(), "durable commands waited for the manifest");
    assert_eq!(declared_ids(&hub), ["h2", "h3"]);
    hub.await_normal(DEADLINE).await.unwrap();
    // A ship was stuck reading the manifest all along; garbage ends it with a failure, which
    // the hook reports, and the next attempt, with the FIFO gone, ships the list.
    assert!(
        hanging.release(b"not a manifest"),
        "no ship was waiting on the manifest"
    );
    wait_until("manifest_ship_failed fires", || {
        recorded.any(|e| matches!(e, HookEvent::ManifestShipFailed { .. }))
    })
    .await;
    stop(hub, join).await;
}

/// A fetch that gives up stops reading: its reader closes the file, which a writer feeding the
/// manifest slowly (a FIFO here) sees as a broken pipe. A read that went on in the background
/// would keep draining the FIFO instead.
#[tokio::test]
async fn a_local_fetch_that_times_out_stops_reading() {
    use process_hub::manifest::{fetch_within, LocalPathManifest, ManifestError};
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    let dir = tempfile::tempdir().unwrap();
    let manifest = LocalPathManifest::new(dir.path());
    nix::unistd::mkfifo(&manifest.file(), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let path = manifest.file();
    let fetch = tokio::spawn(async move {
        fetch_within(&manifest, std::time::Duration::from_millis(300)).await
    });
    // The reader opens the FIFO; a non-blocking open for writing succeeds once it has.
    let mut writer = None;
    wait_until("the fetch opens the manifest", || {
        writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&path)
            .ok();
        writer.is_some()
    })
    .await;
    let mut writer = writer.unwrap();
    writer.write_all(b"{\"version\":").unwrap();
    let outcome = tokio::time::timeout(DEADLINE, fetch)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(outcome, Err(ManifestError::TimedOut { .. })),
        "{outcome:?}"
    );
    // Wake the reader once more: it sees the cancellation and closes the FIFO.
    let _ = writer.write_all(b"1");
    wait_until("the abandoned read closes the manifest", || {
        writer
            .write_all(b" ")
            .is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
    .await;
}
