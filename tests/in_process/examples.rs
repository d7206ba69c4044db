//! Every example runs to the end: it exits 0 and prints the lines that show it did what its
//! doc says. The examples are what a new user copies first, so they are part of the suite.
//!
//! The binaries are those cargo builds for `--examples` beside this test's own binary
//! (`target/<profile>/examples/<name>-<hash>`), found from cargo's report of the build.
//! `scripts/test.sh` has built them before the tests run; a focused run
//! (`cargo test -p process_hub --test in_process examples::`) builds them first through the
//! same cargo.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Longer than any example takes; only a hung example reaches it.
const HANG: Duration = Duration::from_secs(300);

/// `target/<profile>`, from this test binary's path (`target/<profile>/deps/in_process-<hash>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The cargo features of the run's test build, which `scripts/test.sh` names: the examples are
/// built with the same, so the build it made is reused instead of made again without them.
const FEATURES_VAR: &str = "PROCESS_HUB_TEST_FEATURES";

/// Builds the workspace's examples once per run (a no-op when they are fresh) and returns where
/// cargo put each one, by name. Built as programs (`cargo build`, not `cargo test --examples`,
/// which would build each as a test harness) under the `test` profile, so the library the test
/// build made is reused rather than built again. The paths come from cargo's own report, never
/// from a guess that an older build may have left a stale binary behind.
fn examples() -> &'static HashMap<String, PathBuf> {
    static BUILT: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .args([
                "build",
                "--workspace",
                "--examples",
                "--message-format=json-render-diagnostics",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::piped());
        if let Ok(features) = std::env::var(FEATURES_VAR) {
            cargo.args(["--features", &features]);
        }
        let profile = if profile_dir().file_name().is_some_and(|p| p == "release") {
            "bench"
        } else {
            "test"
        };
        cargo.args(["--profile", profile]);
        let output = cargo.output().expect("cargo runs");
        assert!(
            output.status.success(),
            "building the examples failed: {}",
            output.status
        );
        let mut built = HashMap::new();
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let is_example = message["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == "example"));
            if let (true, Some(name), Some(exe)) = (
                is_example,
                message["target"]["name"].as_str(),
                message["executable"].as_str(),
            ) {
                built.insert(name.to_string(), PathBuf::from(exe));
            }
        }
        built
    })
}

/// Runs example `name` with `args`; returns its stdout, after checking it exited 0.
fn run(name: &str, args: &[&str]) -> String {
    let binary = examples()
        .get(name)
        .unwrap_or_else(|| panic!("cargo built no example named {name}"))
        .clone();
    let mut child = Command::new(&binary)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    let started = Instant::now();
    // Read both pipes on threads so that a chatty example never blocks on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).map(|_| text)
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("example {name} still running after {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().expect("reader").unwrap_or_default();
    let stderr = err.join().expect("reader").unwrap_or_default();
    assert!(
        status.success(),
        "example {name} exited with {status}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    stdout
}

fn assert_lines(name: &str, stdout: &str, expected: &[&str]) {
    for line in expected {
        assert!(
            stdout.contains(line),
            "example {name} did not print {line:?}\n--- stdout\n{stdout}"
        );
    }
}

#[test]
fn quickstart_starts_children_by_message_and_sees_a_crashed_one_restarted() {
    let out = run("quickstart", &[]);
    assert_lines(
        "quickstart",
        &out,
        &[
            "started 3 children",
            "counter-1 = 15",
            "event: fragile restarted",
            "done",
        ],
    );
}

#[test]
fn cluster_places_messages_and_fails_over_in_process() {
    let out = run("cluster", &[]);
    assert_lines(
        "cluster",
        &out,
        &[
            "started 3000 children from a",
            "counter-7 (asked from c): 5",
            "failover: every child runs on a or b",
        ],
    );
}

#[test]
fn multi_node_survives_the_sigkill_of_a_host_process() {
    let out = run("multi_node", &[]);
    assert_lines(
        "multi_node",
        &out,
        &[
            "cluster formed",
            "[a] started 6 children",
            "killing node",
            "c's monitor of counter-",
            "NodeDown",
            "came back and answered again",
            "done in",
        ],
    );
    // Six answers before the kill, each naming the node that runs the child.
    assert_eq!(out.matches("[c] answer counter-").count(), 6, "{out}");
}

#[test]
fn chat_rooms_read_the_same_members_and_history_from_every_node() {
    let out = run("chat", &[]);
    assert_lines(
        "chat",
        &out,
        &[
            "[a] opened 3 rooms",
            // A `Vec<User>` crossed from b and from c to the room's node.
            "[c] members of #rust: ana, bo, cy",
            "every node read the same history of #rust",
            "members ana (via b@",
            ", bo (via c@",
            ", cy (via c@",
            "<ana> anyone tried ractor_cluster? | <bo> yes: one node per process",
        ],
    );
}

#[test]
fn proxy_footprint_measures_a_small_run() {
    let out = run("proxy_footprint", &["200"]);
    let json = out
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line\n{out}"));
    let figures: serde_json::Value = serde_json::from_str(json).expect("JSON figures");
    assert_eq!(figures["n"], 200);
    assert!(figures["proxy_bytes_each"].is_u64(), "{figures}");
}
