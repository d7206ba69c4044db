//! Storage that fails, seen from outside with real `process-hub node` processes and real files:
//! a store file truncated after a SIGKILL, two processes on one data directory, a disk that
//! fills up (a real 2 MiB tmpfs) under the declared list and under a disk registry, a filesystem
//! the kernel turns read-only (a real ext4 on a loop device), a data directory removed under a
//! running node, and a hub that gives up.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub::storage::{DiskOptions, LmdbStorage, Storage};
use process_hub_actors::cli::node_settings::BackendChoice;
use process_hub_actors::harness::{free_port, wait_for, AdminClient, ClusterOptions, LocalCluster};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn spec(id: &str, durable: bool) -> StartSpec {
    StartSpec {
        durable,
        ..StartSpec::new(id, "counter")
    }
}

fn recovering(backend: BackendChoice) -> ClusterOptions {
    ClusterOptions {
        hub: "storage".into(),
        backend,
        extra_args: vec![
            "--auto-recovery".into(),
            "--reconcile-grace-ms".into(),
            "500".into(),
            "--reconcile-interval-ms".into(),
            "1000".into(),
        ],
        ..ClusterOptions::default()
    }
}

fn normal(client: &AdminClient) -> Option<()> {
    client
        .health()
        .is_ok_and(|h| h.recovery_state == "normal")
        .then_some(())
}

fn store_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("process_hub").join("storage")
}

fn corrupt_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".corrupt-"))
                .collect()
        })
        .unwrap_or_default()
}

fn ids_of(client: &AdminClient) -> Option<BTreeSet<String>> {
    Some(client.children().ok()?.into_iter().map(|c| c.id).collect())
}

#[test]
fn a_node_restarted_on_truncated_store_files_comes_up_and_rebuilds_from_its_peer() {
    let mut cluster = LocalCluster::start(binary(), 2, &recovering(BackendChoice::Lmdb), None)
        .expect("nodes spawn");
    let (a, b) = (cluster.nodes[0].client(), cluster.nodes[1].client());
    let ready = cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("both nodes normal", DEADLINE, || normal(&a).and(normal(&b))));
    if let Err(e) = ready {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    let ids: BTreeSet<String> = (0..40).map(|i| format!("t-{i:03}")).collect();
    let specs: Vec<StartSpec> = ids.iter().map(|id| spec(id, true)).collect();
    let started = a.start(&specs).expect("start answers");
    assert_eq!(started.started.len(), ids.len(), "{started:?}");
    wait_for("node 2 to hold every row", DEADLINE, || {
        (ids_of(&b)? == ids).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));

    // SIGKILL, then cut both store files to their two meta pages: LMDB would map them and die
    // of SIGBUS on the first read of a page the header names.
    cluster.nodes[1].kill();
    let dir = store_dir(&cluster.nodes[1].data_dir);
    for file in ["registry.lmdb", "declared.lmdb"] {
        let path = dir.join(file);
        assert!(path.exists(), "{}", path.display());
        let status = Command::new("truncate")
            .args(["-s", "8192"])
            .arg(&path)
            .status()
            .expect("truncate runs");
        assert!(status.success());
    }
    cluster.nodes[1].restart().expect("node restarts");
    wait_for(
        "node 2 to answer and rebuild its registry",
        DEADLINE,
        || (ids_of(&b)? == ids).then_some(()),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[1].log_tail(60)));
    assert!(
        cluster.nodes[1].is_running(),
        "{}",
        cluster.nodes[1].log_tail(60)
    );
    let rotated = corrupt_files(&dir);
    assert_eq!(rotated.len(), 2, "{rotated:?}");
    // The declared list comes back from the peer too.
    wait_for("node 2's declared list", DEADLINE, || {
        let listed: BTreeSet<String> = b
            .declared()
            .ok()?
            .children
            .into_iter()
            .map(|c| c.id)
            .collect();
        (listed == ids).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[1].log_tail(60)));
}

#[test]
fn a_second_process_on_the_same_data_directory_exits_1_naming_the_directory_and_the_holder() {
    let mut cluster = LocalCluster::start(binary(), 1, &recovering(BackendChoice::Lmdb), None)
        .expect("node spawns");
    let client = cluster.nodes[0].client();
    cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("the node normal", DEADLINE, || normal(&client)))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    client.start(&[spec("kept", true)]).expect("start answers");
    let holder = cluster.nodes[0].pid().expect("running");
    let data_dir = cluster.nodes[0].data_dir.clone();
    let out = Command::new(binary())
        .args([
            "node",
            "--hub",
            "storage",
            "--name",
            "intruder",
            "--backend",
            "lmdb",
        ])
        .args(["--auto-recovery", "--cookie", "process-hub-demo"])
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port().unwrap()))
        .arg("--admin")
        .arg(format!("127.0.0.1:{}", free_port().unwrap()))
        .arg("--data-dir")
        .arg(&data_dir)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&data_dir.display().to_string()), "{stderr}");
    assert!(stderr.contains(&format!("pid {holder}")), "{stderr}");
    // The first node was not disturbed.
    assert!(client.child("kept").is_ok());
    assert_eq!(client.health().expect("health").status, "ok");
}

/// A 2 MiB tmpfs mounted for one test, unmounted when dropped.
/// A fault this test cannot set up here (no root, no loop devices): the test fails when `CI` is
/// set, so that a CI run never goes green without the fault, and is skipped with a note
/// elsewhere (a developer's machine without root).
fn fault_setup_unavailable(what: &str, error: &dyn std::fmt::Display) {
    if std::env::var_os("CI").is_some() {
        panic!("cannot mount {what}, and CI is set, so this test may not skip: {error}");
    }
    eprintln!("SKIPPED (CI is not set): cannot mount {what}: {error}");
}

struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// Writes a file until the disk is full.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.dir.join("filler");
        let mut file = std::fs::File::create(&path).expect("filler");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

#[test]
fn a_full_disk_refuses_durable_starts_with_507_and_everything_else_keeps_working() {
    let workdir = tempfile::Builder::new()
        .prefix("process-hub-full-")
        .tempdir()
        .unwrap();
    // The harness puts node n1's data directory at <workdir>/n1: mount the small disk there.
    let disk = match SmallDisk::mount(&workdir.path().join("n1")) {
        Ok(disk) => disk,
        Err(e) => {
            fault_setup_unavailable("a tmpfs (needs root)", &e);
            return;
        }
    };
    let mut cluster = LocalCluster::start(
        binary(),
        1,
        &recovering(BackendChoice::Memory),
        Some(workdir.path().to_owned()),
    )
    .expect("node spawns");
    let client = cluster.nodes[0].client();
    cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("the node normal", DEADLINE, || normal(&client)))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let mut acknowledged = BTreeSet::new();
    client
        .start(&[spec("before", true)])
        .expect("start answers");
    acknowledged.insert("before".to_owned());

    let filler = disk.fill();
    // Each durable start needs new pages; the first that does not fit is refused with 507.
    let mut refused = None;
    for i in 0..50 {
        let id = format!("full-{i:02}");
        let mut request = spec(&id, true);
        request.metadata = Some([("pad".to_owned(), "x".repeat(20_000))].into());
        match client.start(&[request]) {
            Ok(r) if r.started.len() == 1 => {
                acknowledged.insert(id);
            }
            Ok(r) => panic!("{r:?}"),
            Err(e) => {
                assert_eq!(e.status(), Some(507), "{e}");
                assert!(e.to_string().contains("insufficient_storage"), "{e}");
                refused = Some(id);
                break;
            }
        }
    }
    let refused = refused.expect("a full disk refuses a durable start");
    let health = client
        .health()
        .expect("health answers while the disk is full");
    assert_eq!(health.status, "degraded", "{health:?}");
    assert!(
        health.problems.iter().any(|p| p.contains("declared list")),
        "{health:?}"
    );
    // Everything that needs no write keeps working, and the node stays up.
    client
        .start(&[spec("plain", false)])
        .expect("a plain start works");
    assert!(client.child("before").is_ok());
    assert!(client.declared().is_ok());
    assert!(
        cluster.nodes[0].is_running(),
        "{}",
        cluster.nodes[0].log_tail(40)
    );

    std::fs::remove_file(filler).unwrap();
    wait_for("health ok once space returns", DEADLINE, || {
        (client.health().ok()?.status == "ok").then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[0].log_tail(40)));
    let again = client
        .start(&[spec(&refused, true)])
        .expect("the refused start now works");
    assert_eq!(again.started.len(), 1, "{again:?}");
    acknowledged.insert(refused);

    // Nothing acknowledged is lost: after a restart the declared list holds every one.
    cluster.nodes[0].restart().expect("node restarts");
    wait_for(
        "every acknowledged child declared after the restart",
        DEADLINE,
        || {
            let listed: BTreeSet<String> = client
                .declared()
                .ok()?
                .children
                .into_iter()
                .map(|c| c.id)
                .collect();
            (listed == acknowledged).then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[0].log_tail(60)));
    cluster.nodes[0].kill();
    drop(cluster);
    drop(disk);
}

#[test]
fn a_data_directory_removed_under_a_running_node_refuses_writes_and_health_says_so() {
    let mut cluster = LocalCluster::start(binary(), 1, &recovering(BackendChoice::Lmdb), None)
        .expect("node spawns");
    let client = cluster.nodes[0].client();
    cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("the node normal", DEADLINE, || normal(&client)))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    client
        .start(&[spec("before", true)])
        .expect("start answers");
    std::fs::remove_dir_all(store_dir(&cluster.nodes[0].data_dir)).unwrap();

    let health = client.health().expect("health answers");
    assert_eq!(health.status, "degraded", "{health:?}");
    assert!(
        health.problems.iter().any(|p| p.contains("removed")),
        "{health:?}"
    );
    let err = client
        .start(&[spec("after", true)])
        .expect_err("a durable start needs a write the store cannot make");
    assert_eq!(err.status(), Some(503), "{err}");
    assert!(err.to_string().contains("storage_failed"), "{err}");
    // A plain start needs a registry write, which the removed registry file cannot take.
    let err = client
        .start_one(&spec("plain-after", false))
        .expect_err("a plain start needs a registry write");
    assert_eq!(err.status(), Some(503), "{err}");
    assert!(err.to_string().contains("storage_failed"), "{err}");
    assert!(
        client.child("plain-after").is_err(),
        "a refused start leaves no row"
    );
    let health = client.health().expect("health answers");
    assert!(
        health.problems.iter().any(|p| p.starts_with("registry:")),
        "{health:?}"
    );
    assert!(client.child("before").is_ok(), "reads keep working");
    assert!(
        cluster.nodes[0].is_running(),
        "{}",
        cluster.nodes[0].log_tail(40)
    );
}

/// A node on a small disk with a disk registry (`lmdb` or `durable`), no auto-recovery: plain
/// starts need a registry write; the first that does not fit is refused with 507, the node keeps
/// answering, health says `degraded` until a write succeeds, and every acknowledged start is in
/// the registry file afterwards.
fn a_full_disk_under_the_registry(backend: BackendChoice) {
    let workdir = tempfile::Builder::new()
        .prefix("process-hub-full-registry-")
        .tempdir()
        .unwrap();
    let disk = match SmallDisk::mount(&workdir.path().join("n1")) {
        Ok(disk) => disk,
        Err(e) => {
            fault_setup_unavailable("a tmpfs (needs root)", &e);
            return;
        }
    };
    let options = ClusterOptions {
        hub: "storage".into(),
        backend,
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 1, &options, Some(workdir.path().to_owned()))
        .expect("node spawns");
    let client = cluster.nodes[0].client();
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let mut acknowledged = BTreeSet::new();
    let started = client.start(&[spec("before", false)]).expect("start");
    assert_eq!(started.started.len(), 1, "{started:?}");
    acknowledged.insert("before".to_owned());

    let filler = disk.fill();
    let mut refused = None;
    for i in 0..50 {
        let id = format!("full-{i:02}");
        let mut request = spec(&id, false);
        request.metadata = Some([("pad".to_owned(), "x".repeat(20_000))].into());
        match client.start_one(&request) {
            Ok(r) if r.started.len() == 1 => {
                acknowledged.insert(id);
            }
            Ok(r) => panic!("{r:?}"),
            Err(e) => {
                assert_eq!(e.status(), Some(507), "{e}");
                assert!(e.to_string().contains("insufficient_storage"), "{e}");
                refused = Some(id);
                break;
            }
        }
    }
    let refused = refused.expect("a full disk refuses a plain start");
    // In a request of several specs the refusal is the child's error entry.
    let mut request = spec(&refused, false);
    request.metadata = Some([("pad".to_owned(), "x".repeat(20_000))].into());
    let answer = client.start(&[request]).expect("a batch answers 200");
    assert!(answer.started.is_empty(), "{answer:?}");
    assert_eq!(answer.errors[0].code, "insufficient_storage", "{answer:?}");
    let health = client
        .health()
        .expect("health answers while the disk is full");
    assert_eq!(health.status, "degraded", "{health:?}");
    assert!(
        health
            .problems
            .iter()
            .any(|p| p.starts_with("registry:") && p.contains("No space")),
        "{health:?}"
    );
    // The refused child was stopped again and left no row; the rest keeps working.
    assert!(
        client.child(&refused).is_err(),
        "a refused start leaves no row"
    );
    assert!(client.child("before").is_ok());
    assert!(client.children().is_ok());
    assert!(
        cluster.nodes[0].is_running(),
        "{}",
        cluster.nodes[0].log_tail(40)
    );

    std::fs::remove_file(filler).unwrap();
    wait_for("health ok once space returns", DEADLINE, || {
        (client.health().ok()?.status == "ok").then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[0].log_tail(40)));
    let again = client
        .start(&[spec(&refused, false)])
        .expect("the refused start now works");
    assert_eq!(again.started.len(), 1, "{again:?}");
    acknowledged.insert(refused);

    // Nothing acknowledged is lost: every acknowledged start is in the registry file, bound to
    // the node, after a SIGKILL.
    let node_name = cluster.nodes[0].node_name.clone();
    cluster.nodes[0].kill();
    let store = LmdbStorage::open(
        &store_dir(&cluster.nodes[0].data_dir),
        &DiskOptions::default(),
    )
    .expect("the registry file opens");
    let recorded: BTreeSet<String> = store
        .export_all()
        .into_iter()
        .filter(|row| row.node_pids.contains_key(&node_name))
        .map(|row| row.spec.id.to_string())
        .collect();
    assert_eq!(recorded, acknowledged);
    drop(store);
    drop(cluster);
    drop(disk);
}

#[test]
fn a_full_disk_refuses_plain_starts_with_507_under_an_lmdb_registry_and_loses_nothing() {
    a_full_disk_under_the_registry(BackendChoice::Lmdb);
}

#[test]
fn a_full_disk_refuses_plain_starts_with_507_under_a_durable_registry_and_loses_nothing() {
    a_full_disk_under_the_registry(BackendChoice::Durable);
}

/// A 16 MiB ext4 filesystem on a loop device, mounted `errors=remount-ro` for one test, so that
/// an error of the filesystem makes the kernel turn it read-only under the running node, as a
/// failing disk does. Unmounted when dropped.
struct Ext4Disk {
    dir: PathBuf,
}

impl Ext4Disk {
    fn mount(dir: &Path, image: &Path) -> Result<Self, String> {
        let run = |cmd: &mut Command| -> Result<(), String> {
            let out = cmd.output().map_err(|e| e.to_string())?;
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        };
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        run(Command::new("truncate").args(["-s", "16M"]).arg(image))?;
        run(Command::new("mkfs.ext4").arg("-q").arg(image))?;
        run(Command::new("mount")
            .args(["-o", "loop,errors=remount-ro"])
            .arg(image)
            .arg(dir))?;
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// Reports an error of the filesystem to the kernel, which then refuses every write to it
    /// (`EROFS`), as after a failed write of the device.
    fn fail(&self) -> Result<(), String> {
        let mounts = std::fs::read_to_string("/proc/mounts").map_err(|e| e.to_string())?;
        let dir = self.dir.canonicalize().map_err(|e| e.to_string())?;
        let device = mounts
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(' ');
                Some((fields.next()?, fields.next()?))
            })
            .find(|(_, at)| Path::new(at) == dir)
            .map(|(device, _)| device.trim_start_matches("/dev/").to_owned())
            .ok_or_else(|| format!("{} is not in /proc/mounts", dir.display()))?;
        std::fs::write(format!("/sys/fs/ext4/{device}/trigger_fs_error"), "1")
            .map_err(|e| e.to_string())
    }
}

impl Drop for Ext4Disk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

#[test]
fn a_filesystem_turned_read_only_under_a_running_node_refuses_writes_with_503() {
    let workdir = tempfile::Builder::new()
        .prefix("process-hub-ro-")
        .tempdir()
        .unwrap();
    let disk = match Ext4Disk::mount(&workdir.path().join("n1"), &workdir.path().join("ext4.img")) {
        Ok(disk) => disk,
        Err(e) => {
            fault_setup_unavailable("an ext4 loop device (needs root and loop devices)", &e);
            return;
        }
    };
    let mut cluster = LocalCluster::start(
        binary(),
        1,
        &recovering(BackendChoice::Lmdb),
        Some(workdir.path().to_owned()),
    )
    .expect("node spawns");
    let client = cluster.nodes[0].client();
    cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("the node normal", DEADLINE, || normal(&client)))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    client
        .start(&[spec("before", true), spec("plain-before", false)])
        .expect("start answers");

    disk.fail().expect("the filesystem error is reported");
    for (id, durable) in [("durable-after", true), ("plain-after", false)] {
        let err = client
            .start_one(&spec(id, durable))
            .expect_err("a start needs a write the filesystem refuses");
        assert_eq!(err.status(), Some(503), "{id}: {err}");
        assert!(err.to_string().contains("storage_failed"), "{id}: {err}");
        assert!(
            client.child(id).is_err(),
            "{id}: a refused start leaves no row"
        );
    }
    let health = client.health().expect("health answers");
    assert_eq!(health.status, "degraded", "{health:?}");
    assert!(
        health.problems.iter().any(|p| p.contains("Read-only")),
        "{health:?}"
    );
    // A stop needs a write too: the child is stopped, its row stays, the request says so.
    let err = client
        .stop("plain-before")
        .expect_err("a stop needs a registry write");
    assert_eq!(err.status(), Some(503), "{err}");
    assert!(err.to_string().contains("storage_failed"), "{err}");
    // Everything that needs no write keeps working, and the hub stays up.
    assert!(client.child("before").is_ok());
    assert!(client.child("plain-before").is_ok());
    assert!(client.declared().is_ok());
    assert!(
        cluster.nodes[0].is_running(),
        "{}",
        cluster.nodes[0].log_tail(40)
    );
    cluster.nodes[0].kill();
    drop(cluster);
    drop(disk);
}

#[test]
fn a_node_whose_hub_stops_for_good_exits_non_zero() {
    // One child restart per hour and one hub actor restart: a child that cannot stay up
    // escalates twice and the hub gives up, whatever the machine's speed.
    let options = ClusterOptions {
        hub: "giving-up".into(),
        extra_args: [
            "--max-restarts",
            "1",
            "--max-seconds",
            "3600",
            "--hub-max-restarts",
            "1",
        ]
        .map(String::from)
        .to_vec(),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 1, &options, None).expect("node spawns");
    let client = cluster.nodes[0].client();
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let mut failing = spec("cannot-stay-up", false);
    failing.kind = "crasher".into();
    failing.args = Some(serde_json::json!({ "fail_after_ms": 20 }));
    let started = client.start(&[failing]).expect("start answers");
    assert_eq!(started.started.len(), 1, "{started:?}");

    let status = wait_for("the process to exit", DEADLINE, || {
        cluster.nodes[0].exit_status()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[0].log_tail(60)));
    assert_eq!(status.code(), Some(1), "{}", cluster.nodes[0].log_tail(60));
    assert!(
        cluster.nodes[0]
            .log_tail(60)
            .contains("stopped unexpectedly"),
        "{}",
        cluster.nodes[0].log_tail(60)
    );
}
