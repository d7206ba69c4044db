//! The deployment files of `deploy/` hold up: the Kubernetes manifests validate against the
//! Kubernetes schemas (`kubernetes-validate`), the systemd unit passes `systemd-analyze verify`
//! with the real binary as its `ExecStart`, the container's final stage runs as a numeric
//! non-root user on a base that has every library the binary links, and the flags the files
//! give the node are flags it knows. A node started as a `Type=notify` service tells a real
//! notification socket `READY=1` once `GET /v1/ready` answers 200, and `STOPPING=1` on SIGTERM.
//!
//! The validators are installed by `scripts/test.sh`; a run without one skips its test loudly,
//! or fails under `CI=true`.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use process_hub_actors::harness::{free_port, wait_for, AdminClient};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `tool` runs here; without it, the calling test skips loudly, or fails under
/// `CI=true` (where scripts/test.sh installs it).
fn have(tool: &str, hint: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").is_err(),
            "{tool} is missing under CI=true: {hint}"
        );
        eprintln!("SKIPPED: {tool} is missing ({hint}); the deployment files are not validated");
    }
    found
}

/// The `--flags` of `process-hub node --help`.
fn node_flags() -> String {
    let out = Command::new(binary())
        .args(["node", "--help"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every `--flag` in `text` (comments aside) is one `process-hub node` knows.
fn assert_known_flags(what: &str, text: &str, help: &str) {
    let mut unknown = Vec::new();
    let uncommented: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    for word in uncommented.split(|c: char| c.is_whitespace() || c == '"' || c == ',') {
        let Some(flag) = word.strip_prefix("--") else {
            continue;
        };
        let flag = flag.split('=').next().unwrap_or(flag);
        if flag.is_empty() || !flag.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            continue;
        }
        let long = format!("--{flag}");
        if help.contains(&format!("{long} ")) || help.contains(&format!("{long}\n")) {
            continue;
        }
        unknown.push(long);
    }
    assert!(
        unknown.is_empty(),
        "{what} gives the node flags it does not know: {unknown:?}"
    );
}

#[test]
fn the_kubernetes_manifests_validate_against_the_schemas() {
    let dir = deploy_dir().join("kubernetes");
    let statefulset = read(&dir.join("statefulset.yaml"));
    let service = read(&dir.join("service.yaml"));
    // What the files must say, whatever the validator thinks of their shape.
    for needle in [
        "kind: StatefulSet",
        "serviceName: process-hub-headless",
        "podManagementPolicy: Parallel",
        "volumeClaimTemplates:",
        "mountPath: /var/lib/process-hub",
        "path: /v1/ready",
        "path: /v1/health",
        "preStop:",
        "terminationGracePeriodSeconds: 90",
        "secretKeyRef:",
        "name: PROCESS_HUB_COOKIE",
        "dns:process-hub-headless.$(POD_NAMESPACE).svc.cluster.local:4000",
        "runAsNonRoot: true",
    ] {
        assert!(
            statefulset.contains(needle),
            "statefulset.yaml lacks {needle:?}"
        );
    }
    assert!(service.contains("clusterIP: None"), "{service}");
    assert!(
        service.contains("publishNotReadyAddresses: true"),
        "{service}"
    );
    let kustomization = read(&dir.join("kustomization.yaml"));
    for resource in kustomization
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter(|r| r.ends_with(".yaml"))
    {
        assert!(
            dir.join(resource).is_file(),
            "kustomization names {resource}"
        );
    }
    assert_known_flags("statefulset.yaml", &statefulset, &node_flags());

    if !have(
        "kubernetes-validate",
        "pip install kubernetes-validate; scripts/test.sh installs it",
    ) {
        return;
    }
    let manifests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "yaml")
                && p.file_name().is_some_and(|n| n != "kustomization.yaml")
        })
        .collect();
    assert!(manifests.len() >= 4, "{manifests:?}");
    let out = Command::new("kubernetes-validate")
        .arg("--strict")
        .args(&manifests)
        .output()
        .expect("kubernetes-validate runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the manifests do not validate:\n{report}"
    );
    for manifest in &manifests {
        let name = manifest.file_name().unwrap().to_string_lossy();
        assert!(
            report
                .lines()
                .any(|l| l.contains(name.as_ref()) && l.contains("passed")),
            "{name} was not validated:\n{report}"
        );
    }

    // The validator does refuse what the schema does not allow.
    let broken_dir = tempfile::tempdir().unwrap();
    let broken = broken_dir.path().join("statefulset.yaml");
    std::fs::write(
        &broken,
        statefulset.replace("replicas: 3", "replicas: three"),
    )
    .unwrap();
    let out = Command::new("kubernetes-validate")
        .arg("--strict")
        .arg(&broken)
        .output()
        .expect("kubernetes-validate runs");
    assert!(!out.status.success(), "a string replica count passed");
}

#[test]
fn the_systemd_unit_verifies_with_the_real_binary() {
    let dir = deploy_dir().join("systemd");
    let unit = read(&dir.join("process-hub.service"));
    for needle in [
        "Type=notify",
        "NotifyAccess=main",
        "StateDirectory=process-hub",
        "--data-dir ${STATE_DIRECTORY}",
        "LoadCredential=cookie:",
        "--cookie-file %d/cookie",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=",
        "Restart=on-failure",
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
    ] {
        assert!(unit.contains(needle), "the unit lacks {needle:?}");
    }
    // Every variable ExecStart uses is set by the example environment file or by systemd.
    let env = read(&dir.join("process-hub.env"));
    for var in unit
        .split("${")
        .skip(1)
        .filter_map(|rest| rest.split('}').next())
    {
        assert!(
            var == "STATE_DIRECTORY" || env.lines().any(|l| l.starts_with(&format!("{var}="))),
            "process-hub.env does not set {var}"
        );
    }
    assert_known_flags("process-hub.service", &unit, &node_flags());

    if !have(
        "systemd-analyze",
        "apt-get install systemd; scripts/test.sh installs it",
    ) {
        return;
    }
    // verify wants the ExecStart binary to exist: the one this test build made.
    let verify = |text: &str| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("process-hub.service");
        std::fs::write(
            &path,
            text.replace(
                "/usr/local/bin/process-hub",
                &binary().display().to_string(),
            ),
        )
        .unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .output()
            .expect("systemd-analyze runs");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), report)
    };
    let (ok, report) = verify(&unit);
    // verify exits 0 on directives it ignores: any word from it is a finding.
    assert!(
        ok && report.trim().is_empty(),
        "systemd-analyze verify:\n{report}"
    );
    let (_, report) = verify(&unit.replace("Type=notify", "Type=notified"));
    assert!(
        report.contains("notified"),
        "verify says nothing of a bad Type=:\n{report}"
    );
}

/// The libraries the container's runtime base (distroless cc, Debian 12) carries.
const RUNTIME_BASE_LIBS: [&str; 7] = [
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
];

#[test]
fn the_container_runs_the_binary_as_a_numeric_non_root_user() {
    let dockerfile = read(&deploy_dir().join("container/Dockerfile"));
    let lines: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms = lines.iter().filter(|l| l.starts_with("FROM ")).count();
    assert!(froms >= 2, "a multi-stage build: {froms} FROM");
    let last_from = lines.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    let builder = &lines[..last_from];
    let runtime = &lines[last_from..];
    assert!(
        builder.iter().any(|l| l
            .contains("cargo build --release --locked -p process_hub_actors --bin process-hub")),
        "the builder builds the release binary"
    );
    let user = runtime
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the final stage sets USER");
    let uid: u32 = user
        .trim()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("USER {user} is not numeric"));
    assert_ne!(uid, 0, "USER is root");
    for needle in [
        "ENTRYPOINT [\"/usr/local/bin/process-hub\"]",
        "EXPOSE ",
        "VOLUME ",
    ] {
        assert!(
            runtime.iter().any(|l| l.starts_with(needle)),
            "the final stage lacks {needle}"
        );
    }
    assert!(
        runtime[0].contains("distroless/cc") || runtime[0].contains("debian:bookworm-slim"),
        "the runtime base is not one whose libraries this test knows: {}",
        runtime[0]
    );

    // The binary needs no library the base lacks (this test build's binary links what the
    // release one does: the same crates, the same target).
    let out = Command::new("readelf").args(["-d"]).arg(binary()).output();
    let Ok(out) = out else {
        assert!(
            std::env::var("CI").is_err(),
            "readelf is missing under CI=true"
        );
        eprintln!("SKIPPED: readelf is missing; the binary's libraries are not checked");
        return;
    };
    let dynamic = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(!needed.is_empty(), "no NEEDED entry read:\n{dynamic}");
    let missing: Vec<&&str> = needed
        .iter()
        .filter(|lib| !RUNTIME_BASE_LIBS.contains(lib))
        .collect();
    assert!(
        missing.is_empty(),
        "the binary needs libraries the runtime base lacks: {missing:?}"
    );
}

/// The status code of `GET path` on `addr` (a plain HTTP/1.0 request).
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
}

/// The datagrams the socket receives until one has `key` (or the deadline passes).
fn until_message(socket: &UnixDatagram, key: &str, deadline: Duration) -> Vec<String> {
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < deadline {
        if let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = message.lines().any(|l| l == key);
            seen.push(message);
            if done {
                break;
            }
        }
    }
    seen
}

#[test]
fn a_notify_service_hears_ready_once_the_node_is_ready_and_stopping_on_sigterm() {
    const DEADLINE: Duration = Duration::from_secs(60);
    use std::os::linux::net::SocketAddrExt;
    // An abstract socket, as systemd's own tests use (a path socket is tested in the unit
    // tests of `notify`).
    let name = format!(
        "process-hub-test-notify-{}-{}",
        std::process::id(),
        free_port().unwrap()
    );
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = UnixDatagram::bind_addr(&address).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();

    let data = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port().unwrap());
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
    let probe = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
    let log = data.path().join("node.log");
    // The cookie comes from the environment, as a Kubernetes Secret gives it: none is made
    // in $HOME.
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(binary())
        .args(["node", "--hub", "h", "--name", "svc", "--listen", &listen])
        .args(["--admin", &admin.to_string(), "--probe", &probe.to_string()])
        .args([
            "--backend",
            "durable",
            "--auto-recovery",
            "--reconcile-grace-ms",
            "500",
        ])
        .arg("--data-dir")
        .arg(data.path().join("state"))
        .env("PROCESS_HUB_COOKIE", "notify-test-cookie")
        .env("HOME", home.path())
        .env("NOTIFY_SOCKET", format!("@{name}"))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("node spawns");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    let before_ready = until_message(&socket, "READY=1", DEADLINE);
    assert!(
        before_ready.last().is_some_and(|m| m.contains("READY=1")),
        "no READY=1 within {DEADLINE:?}: {before_ready:?}\n{}",
        log_text()
    );
    // At that moment the node is ready by the rule of GET /v1/ready (it stays so: a single
    // node without seeds is never isolated).
    let health = AdminClient::new(admin)
        .ready()
        .unwrap_or_else(|e| panic!("READY=1 sent but /v1/ready refused: {e}\n{}", log_text()));
    assert_eq!(health.status, "ok");
    assert_eq!(health.recovery_state, "normal", "READY=1 before recovery");
    assert_eq!(http_status(probe, "/v1/ready"), Some(200));
    assert_eq!(http_status(probe, "/v1/health"), Some(200));
    assert!(
        before_ready.iter().all(|m| m
            .lines()
            .all(|l| l == "READY=1" || l.starts_with("STATUS="))),
        "only READY=1 and STATUS= lines: {before_ready:?}"
    );

    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let after = until_message(&socket, "STOPPING=1", DEADLINE);
    assert!(
        after.last().is_some_and(|m| m.contains("STOPPING=1")),
        "no STOPPING=1 after SIGTERM: {after:?}\n{}",
        log_text()
    );
    let status = wait_for("the node to exit on SIGTERM", DEADLINE, || {
        child.try_wait().ok().flatten()
    });
    let status = status.unwrap_or_else(|e| {
        let _ = child.kill();
        panic!("{e}\n{}", log_text())
    });
    assert!(status.success(), "exit {status:?}\n{}", log_text());
    assert_eq!(
        std::fs::read_dir(home.path()).unwrap().count(),
        0,
        "the node made a cookie in $HOME although PROCESS_HUB_COOKIE was set"
    );
    // A log written to a file carries no colour codes.
    let text = log_text();
    assert!(text.contains("ready: node svc@"), "{text}");
    assert!(
        !text.contains("\x1b["),
        "colour codes in a log file:\n{text}"
    );
}
