//! One real `process-hub node` process: it serves the admin API on the hub, refuses bad flags
//! with exit status 2, and exits 0 on SIGTERM, also while a read of its remote manifest hangs;
//! a node whose seed does not listen reports itself isolated and not ready, one without seeds
//! stays ok; its stderr has no colour codes when it is a pipe, and is JSON lines under
//! `--log-format json`. `simulate` runs only in a build with the simulator; another says how to
//! get one.

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::harness::{free_port, wait_for, AdminClient, ClusterOptions, LocalCluster};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn counter(id: &str) -> StartSpec {
    StartSpec::new(id, "counter")
}

#[test]
fn a_node_serves_its_hub_and_exits_zero_on_sigterm() {
    let mut cluster =
        LocalCluster::start(binary(), 1, &ClusterOptions::default(), None).expect("node spawns");
    cluster
        .wait_formed(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[0].log_tail(30)));
    let client = cluster.nodes[0].client();
    let health = client.health().expect("health answers");
    assert_eq!(health.node, "n1@127.0.0.1");
    assert_eq!(health.hub, "demo");
    assert_eq!(health.members, vec!["n1@127.0.0.1".to_owned()]);
    assert_eq!(health.recovery_state, "normal");

    let started = client
        .start(&[counter("a"), counter("b")])
        .expect("start answers");
    assert_eq!(started.started.len(), 2, "{started:?}");
    let listed = client.children().expect("list answers");
    let ids: Vec<&str> = listed.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, vec!["a", "b"]);
    assert_eq!(listed[0].nodes[0].node, "n1@127.0.0.1");
    let err = client.child("ghost").expect_err("unknown id");
    assert_eq!(err.status(), Some(404));
    client.stop("a").expect("stop answers");
    assert_eq!(client.child("a").expect_err("stopped").status(), Some(404));

    let status = cluster.nodes[0]
        .terminate_status(Duration::from_secs(30))
        .expect("the node exits by itself on SIGTERM");
    assert!(status.success(), "exit status {status:?}");
    let log = cluster.nodes[0].log_tail(50);
    assert!(log.contains("ready: node n1@127.0.0.1"), "{log}");
    assert!(log.contains("SIGTERM"), "{log}");
}

#[test]
fn bad_flags_are_refused_with_status_2_and_a_message_naming_the_flag() {
    for (args, needle) in [
        (vec!["node", "--hub", "h", "--name", "a"], "--listen"),
        (
            vec![
                "node",
                "--hub",
                "h",
                "--name",
                "a b",
                "--listen",
                "127.0.0.1:1",
            ],
            "--name",
        ),
        (
            vec!["node", "--hub", "h", "--name", "a", "--listen", "nowhere"],
            "--listen",
        ),
        (
            vec![
                "node",
                "--hub",
                "h",
                "--name",
                "a",
                "--listen",
                "127.0.0.1:1",
                "--backend",
                "paper",
            ],
            "--backend",
        ),
        (
            vec![
                "node",
                "--hub",
                "h",
                "--name",
                "a",
                "--listen",
                "127.0.0.1:1",
                "--discovery",
                "peers.svc:4000",
            ],
            "--discovery: \"peers.svc:4000\" is not dns:NAME[:PORT] or dns-srv:NAME",
        ),
        (
            vec![
                "node",
                "--hub",
                "h",
                "--name",
                "node-{pod}",
                "--listen",
                "127.0.0.1:1",
            ],
            "--name",
        ),
    ] {
        let out = Command::new(binary()).args(&args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `simulate` exists only in a build with the `sim` feature; without it the binary says so,
/// and how to get one, with status 2.
#[test]
fn simulate_runs_only_in_a_build_with_the_simulator() {
    let out = Command::new(binary())
        .args(["simulate", "--seeds", "1", "--jobs", "1", "--json"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if cfg!(feature = "sim") {
        assert!(out.status.success(), "{stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        let report: serde_json::Value = serde_json::from_str(last).expect("a JSON last line");
        assert_eq!(report["seeds"], 1, "{report}");
    } else {
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        for needle in ["no simulator", "bash scripts/simulate.sh", "--features sim"] {
            assert!(stderr.contains(needle), "{needle:?} in {stderr}");
        }
    }
}

#[test]
fn the_admin_port_taken_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin = taken.local_addr().unwrap().to_string();
    let listen = format!(
        "127.0.0.1:{}",
        process_hub_actors::harness::free_port().unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(binary())
        .args(["node", "--hub", "h", "--name", "a", "--listen", &listen])
        .args(["--admin", &admin, "--cookie", "c", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("admin API on"), "{stderr}");
    drop(taken);
}

#[test]
fn a_node_whose_manifest_never_answers_still_boots_and_exits_on_sigterm() {
    // The manifest file is a FIFO nobody writes: every read of it (the boot's fetch, each ship)
    // blocks in a thread the node cannot cancel.
    let manifest_dir = tempfile::tempdir().unwrap();
    let fifo = manifest_dir.path().join("declared-manifest.json");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let options = ClusterOptions {
        extra_args: vec![
            "--auto-recovery".into(),
            "--remote-manifest".into(),
            manifest_dir.path().display().to_string(),
        ],
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 1, &options, None).expect("node spawns");
    // The boot's fetch gives up after the hub's default timeout (10 s).
    cluster
        .wait_formed(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[0].log_tail(30)));
    let client = cluster.nodes[0].client();
    let started = client
        .start(&[StartSpec {
            durable: true,
            nodes: None,
            guided_fallback: false,
            ..counter("d")
        }])
        .expect("a durable start answers while its ship hangs");
    assert_eq!(started.started.len(), 1, "{started:?}");
    let status = cluster.nodes[0].terminate_status(Duration::from_secs(30));
    // Let the blocked reads go (the process is gone, or this frees it).
    let _ = std::fs::remove_file(&fifo);
    let status = status.expect("the node exits on SIGTERM although a manifest read hangs");
    assert!(status.success(), "exit status {status:?}");
}

/// A node started with `extra` flags, its stderr a pipe read to the end by a thread.
struct PipedNode {
    child: Child,
    admin: SocketAddr,
    stderr: std::thread::JoinHandle<String>,
    _data: tempfile::TempDir,
}

impl PipedNode {
    fn start(name: &str, extra: &[&str]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let listen = format!("127.0.0.1:{}", free_port().unwrap());
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
        let mut child = Command::new(binary())
            .args(["node", "--hub", "h", "--name", name, "--listen", &listen])
            .args(["--admin", &admin.to_string(), "--cookie", "c", "--data-dir"])
            .arg(data.path())
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node spawns");
        let mut pipe = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        });
        Self {
            child,
            admin,
            stderr,
            _data: data,
        }
    }

    fn client(&self) -> AdminClient {
        AdminClient::new(self.admin)
    }

    /// SIGTERM, wait for the exit, and return everything the node wrote to stderr.
    fn stop(mut self) -> String {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let exited = wait_for(
            "the node to exit on SIGTERM",
            Duration::from_secs(30),
            || self.child.try_wait().ok().flatten(),
        );
        if exited.is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.stderr.join().expect("stderr reader")
    }
}

#[test]
fn a_node_whose_seed_does_not_listen_is_isolated_and_one_without_seeds_stays_ok() {
    const DEADLINE: Duration = Duration::from_secs(60);
    // A port nobody listens on (free a moment ago).
    let closed = format!("127.0.0.1:{}", free_port().unwrap());
    let lonely = PipedNode::start("lonely", &["--join", &closed, "--isolated-after-ms", "300"]);
    let single = PipedNode::start("single", &["--log-format", "json"]);

    let health = wait_for("the node with a dead seed to be isolated", DEADLINE, || {
        let h = lonely.client().health().ok()?;
        let no_route = h
            .unreached_seeds
            .iter()
            .any(|u| u.seed == closed && u.reason == "no_route" && !u.detail.is_empty());
        no_route.then_some(h)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(health.status, "isolated", "{health:?}");
    assert!(health.isolated);
    assert_eq!(
        health.peer_auth_failures, 0,
        "nobody refused it: {health:?}"
    );
    let not_ready = lonely.client().ready().expect_err("isolated is not ready");
    assert_eq!(not_ready.status(), Some(503), "{not_ready}");

    // A deliberate single node (no seeds) is never isolated, whatever the wait.
    let health = wait_for("the single node to answer", DEADLINE, || {
        single.client().ready().ok()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(health.status, "ok");
    assert!(!health.isolated);
    assert!(health.unreached_seeds.is_empty());

    let text = lonely.stop();
    assert!(text.contains("ready: node lonely@"), "{text}");
    assert!(
        !text.contains("\x1b["),
        "colour codes in stderr to a pipe:\n{text}"
    );
    let json = single.stop();
    let mut lines = 0;
    for line in json.lines() {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\n{json}"));
        assert!(event.get("level").is_some(), "{line}");
        lines += 1;
    }
    assert!(lines > 0, "no log line at all");
    assert!(
        json.contains("ready: node single@"),
        "status lines are events too:\n{json}"
    );
    assert!(!json.contains("\x1b["), "{json}");
}
