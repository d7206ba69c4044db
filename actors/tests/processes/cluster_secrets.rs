//! The cluster's secrets with real `process-hub node` processes: no built-in cookie (a node
//! without one creates a private random cookie in `$HOME`, which the nodes of that home then
//! share), cookie and key files others can read are refused, and under mutual TLS a peer with
//! the cookie but no certificate from the cluster's CA never becomes a member.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use process_hub_actors::harness::{
    free_port, wait_for, write_private, AdminClient, ClusterOptions, LocalCluster,
};

const DEADLINE: Duration = Duration::from_secs(60);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

/// Kills the node it holds when dropped, so that a failing test leaves no process behind.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_cookie_file_others_can_read_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cookie = dir.path().join("cookie");
    write_private(&cookie, "a-shared-secret\n").expect("writes");
    std::fs::set_permissions(&cookie, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = Command::new(binary())
        .args(["node", "--hub", "h", "--name", "a"])
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port().expect("port")))
        .arg("--cookie-file")
        .arg(&cookie)
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(stderr.contains(&cookie.display().to_string()), "{stderr}");
    assert!(!stderr.contains("ready:"), "{stderr}");
}

#[test]
fn without_a_cookie_the_nodes_of_one_home_share_a_private_random_one() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let ports: Vec<(u16, u16)> = (0..2)
        .map(|_| (free_port().expect("port"), free_port().expect("port")))
        .collect();
    let seed = format!("127.0.0.1:{}", ports[0].0);
    let nodes: Vec<Node> = ports
        .iter()
        .enumerate()
        .map(|(i, (port, admin))| {
            let mut cmd = Command::new(binary());
            cmd.args(["node", "--hub", "h", "--name", &format!("n{i}")])
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--admin")
                .arg(format!("127.0.0.1:{admin}"))
                .arg("--data-dir")
                .arg(work.path().join(format!("n{i}")))
                .env("HOME", home.path())
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if i > 0 {
                cmd.args(["--join", &seed]);
            }
            Node(cmd.spawn().expect("spawns"))
        })
        .collect();
    let names: Vec<String> = (0..2).map(|i| format!("n{i}@127.0.0.1")).collect();
    let clients: Vec<AdminClient> = ports
        .iter()
        .map(|(_, admin)| AdminClient::new(([127, 0, 0, 1], *admin).into()))
        .collect();
    wait_for("both nodes to be members of one hub", DEADLINE, || {
        clients
            .iter()
            .all(|c| c.health().is_ok_and(|h| h.members == names))
            .then_some(())
    })
    .expect("the nodes of one home join with its cookie");
    let cookie = home.path().join(".process-hub.cookie");
    let mode = std::fs::metadata(&cookie)
        .expect("created")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&cookie).expect("reads");
    assert!(text.trim().len() >= 32, "{text:?}");
    assert_ne!(text.trim(), "process-hub");
    drop(nodes);
}

/// A CA and the files of nodes it certified, all for the server name [`SERVER_NAME`].
struct Pki {
    dir: PathBuf,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

const SERVER_NAME: &str = "node.cluster.test";

impl Pki {
    fn new(dir: &Path, name: &str) -> Self {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("{name} CA"));
        let ca = params.self_signed(&ca_key).expect("CA");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("writes");
        Self { dir, ca, ca_key }
    }

    /// Certifies a node: its certificate and private key, as `--tls-*` flags trusting
    /// `trusted` (a CA's `ca.pem`).
    fn node_flags(&self, node: &str, trusted: &Path) -> Vec<String> {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec![SERVER_NAME.to_owned()]).expect("params");
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("signed");
        let cert_path = self.dir.join(format!("{node}.pem"));
        let key_path = self.dir.join(format!("{node}.key"));
        std::fs::write(&cert_path, cert.pem()).expect("writes");
        write_private(&key_path, &key.serialize_pem()).expect("writes");
        vec![
            "--tls-cert".into(),
            cert_path.display().to_string(),
            "--tls-key".into(),
            key_path.display().to_string(),
            "--tls-ca".into(),
            trusted.display().to_string(),
            "--tls-server-name".into(),
            SERVER_NAME.into(),
        ]
    }

    fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}

#[test]
fn under_mutual_tls_a_peer_without_a_certificate_from_the_ca_never_joins() {
    let certs = tempfile::tempdir().expect("tempdir");
    let cluster_ca = Pki::new(certs.path(), "cluster");
    let rogue_ca = Pki::new(certs.path(), "rogue");
    let options = ClusterOptions {
        extra_args: cluster_ca.node_flags("member", &cluster_ca.ca_path()),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 2, &options, None).expect("nodes spawn");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    // The impostor has the cookie and trusts the cluster's CA (so it could check the servers),
    // but its own certificate comes from another CA.
    let impostor = cluster
        .add_node(&ClusterOptions {
            extra_args: rogue_ca.node_flags("impostor", &cluster_ca.ca_path()),
            ..options.clone()
        })
        .expect("impostor spawns");
    let impostor_name = cluster.nodes[impostor].node_name.clone();
    let impostor_client = cluster.nodes[impostor].client();
    wait_for("the impostor to serve its admin API", DEADLINE, || {
        impostor_client.health().ok()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    // A node certified by the cluster's CA, started after the impostor, gets in: by the time it
    // is a member everywhere, the impostor has had as long to try. (Under TLS a node connects
    // only to the nodes it is told of: it names both members.)
    let mut honest_flags = cluster_ca.node_flags("honest", &cluster_ca.ca_path());
    honest_flags.extend(["--join".into(), cluster.nodes[1].listen.to_string()]);
    let honest = cluster
        .add_node(&ClusterOptions {
            extra_args: honest_flags,
            ..options.clone()
        })
        .expect("honest node spawns");
    let members: Vec<usize> = vec![0, 1, honest];
    let expected: Vec<String> = members
        .iter()
        .map(|&i| cluster.nodes[i].node_name.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let clients: Vec<AdminClient> = members.iter().map(|&i| cluster.nodes[i].client()).collect();
    wait_for(
        "the certified node to be a member everywhere",
        DEADLINE,
        || {
            clients
                .iter()
                .all(|c| {
                    c.health()
                        .is_ok_and(|h| expected.iter().all(|m| h.members.contains(m)))
                })
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    // Exactly these members (a busy machine may make the newcomer flap once: it comes back),
    // never the impostor.
    wait_for("exactly the certified members everywhere", DEADLINE, || {
        clients
            .iter()
            .all(|c| {
                c.health().is_ok_and(|h| {
                    assert!(!h.members.contains(&impostor_name), "{:?}", h.members);
                    h.members == expected
                })
            })
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    assert_eq!(
        impostor_client.health().expect("impostor health").members,
        vec![impostor_name]
    );
    cluster.shutdown(Duration::from_secs(30));
}

/// Replaces the value of `flag` in `flags`.
fn set_flag(flags: &mut [String], flag: &str, value: &str) {
    let at = flags.iter().position(|f| f == flag).expect("flag present");
    flags[at + 1] = value.to_owned();
}

#[test]
fn a_node_whose_seed_fails_the_tls_handshake_is_isolated_for_tls_and_the_seed_counts_no_refusal() {
    let certs = tempfile::tempdir().expect("tempdir");
    let cluster_ca = Pki::new(certs.path(), "cluster");
    let rogue_ca = Pki::new(certs.path(), "rogue");
    let options = ClusterOptions {
        extra_args: cluster_ca.node_flags("seed", &cluster_ca.ca_path()),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 1, &options, None).expect("seed spawns");
    let short = ["--isolated-after-ms".to_owned(), "300".to_owned()];
    // Its seed presents a certificate from a CA it does not trust.
    let mut other_ca = rogue_ca.node_flags("other-ca", &rogue_ca.ca_path());
    other_ca.extend(short.clone());
    // It trusts the seed's CA, but expects another server name than the seed's certificate's.
    let mut other_name = cluster_ca.node_flags("other-name", &cluster_ca.ca_path());
    set_flag(
        &mut other_name,
        "--tls-server-name",
        "elsewhere.cluster.test",
    );
    other_name.extend(short.clone());
    // It trusts the seed, but the seed does not trust its certificate: under TLS 1.3 its side
    // of the handshake completes before the seed checks its certificate and refuses it.
    let mut refused = rogue_ca.node_flags("refused", &cluster_ca.ca_path());
    refused.extend(short);
    let seed = cluster.nodes[0].listen.to_string();
    let mut expected = Vec::new();
    for (flags, what) in [
        (other_ca, "certificate"),
        (other_name, "certificate"),
        (refused, "alert"),
    ] {
        let i = cluster
            .add_node(&ClusterOptions {
                extra_args: flags,
                ..options.clone()
            })
            .expect("node spawns");
        expected.push((i, what));
    }
    for (i, what) in expected {
        let client = cluster.nodes[i].client();
        let health = wait_for("the node to be isolated for TLS", DEADLINE, || {
            let h = client.health().ok()?;
            let tls = h
                .unreached_seeds
                .iter()
                .any(|u| u.seed == seed && u.reason == "tls");
            (h.isolated && tls).then_some(h)
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
        assert_eq!(health.status, "isolated", "{health:?}");
        let detail = &health.unreached_seeds[0].detail;
        assert!(
            detail.contains(what),
            "{}: the detail names the TLS failure ({what}): {detail:?}",
            cluster.nodes[i].name
        );
        assert_eq!(health.peer_auth_failures, 0, "{health:?}");
    }
    // The seed saw handshakes fail, not cookies: it counts no refusal, and stays ok (no seeds).
    let health = cluster.nodes[0].client().health().expect("seed health");
    assert_eq!(health.peer_auth_failures, 0, "{health:?}");
    assert_eq!(health.status, "ok", "{health:?}");
    cluster.shutdown(Duration::from_secs(30));
}

#[test]
fn a_tls_key_others_can_read_is_refused() {
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = Pki::new(certs.path(), "cluster");
    let flags = ca.node_flags("a", &ca.ca_path());
    let key = PathBuf::from(&flags[3]);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = Command::new(binary())
        .args(["node", "--hub", "h", "--name", "a", "--cookie", "c"])
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port().expect("port")))
        .arg("--data-dir")
        .arg(certs.path())
        .args(&flags)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
}
