//! The network of the partition tests: five `process-hub node` processes, each in a network
//! namespace of its own, joined by a bridge in a "switch" namespace (the test reaches every admin
//! API through a veth from its own namespace). A split is made of blackhole routes inside the
//! nodes' namespaces, so established connections die as they would on a real network.
//!
//! Needs root (network namespaces), as CI has.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

pub mod answer;
pub mod links;
pub mod outcome;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use process_hub_actors::harness::{wait_for, write_private, AdminClient};

pub const DEADLINE: Duration = Duration::from_secs(90);
const CLUSTER_PORT: u16 = 7100;
const ADMIN_PORT: u16 = 8100;
const TOKEN: &str = "partition-test-token";

pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// The namespaces, the switch and the links; removed on drop.
pub struct Network {
    /// One network at a time per test process: the tag, the addresses and the ports are the
    /// same for every test of the process (and two five-node clusters at once would only
    /// crowd the machine).
    _serial: MutexGuard<'static, ()>,
    tag: u32,
    /// The first two octets of every address (`10.213` unless [`Network::create_on`] says).
    base: &'static str,
    /// The first letters of every namespace and link name.
    prefix: &'static str,
    switch: String,
    /// The nodes' namespaces, node `k` at `k - 1`.
    pub namespaces: Vec<String>,
}

impl Network {
    /// Creates the switch and one namespace per node, `nodes` of them.
    pub fn create(nodes: usize) -> Result<Self, String> {
        Self::create_on(nodes, "10.213", "ph")
    }

    /// The same network on addresses `BASE.x.k` (`base` the first two octets, a range no other
    /// test uses) with names starting with `prefix` (two letters).
    pub fn create_on(
        nodes: usize,
        base: &'static str,
        prefix: &'static str,
    ) -> Result<Self, String> {
        static SERIAL: Mutex<()> = Mutex::new(());
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let tag = std::process::id() % 200 + 20;
        let mut net = Self {
            _serial: serial,
            tag,
            base,
            prefix,
            switch: format!("{prefix}{tag}s"),
            namespaces: Vec::new(),
        };
        // Leftovers of an earlier run with the same tag.
        let _ = ip(&["netns", "del", &net.switch]);
        for k in 1..=nodes {
            let _ = ip(&["netns", "del", &format!("{prefix}{tag}n{k}")]);
        }
        let _ = ip(&["link", "del", &format!("{prefix}{tag}r")]);
        let s = net.switch.clone();
        ip(&["netns", "add", &s])?;
        ip(&["-n", &s, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &s, "link", "set", "br0", "up"])?;
        // The test's own way in.
        let (root, root_peer) = (format!("{prefix}{tag}r"), format!("{prefix}{tag}rs"));
        ip(&[
            "link", "add", &root, "type", "veth", "peer", "name", &root_peer,
        ])?;
        ip(&["link", "set", &root_peer, "netns", &s])?;
        ip(&["-n", &s, "link", "set", &root_peer, "master", "br0", "up"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", net.addr(254)),
            "dev",
            &root,
        ])?;
        ip(&["link", "set", &root, "up"])?;
        for k in 1..=nodes {
            let ns = format!("{prefix}{tag}n{k}");
            ip(&["netns", "add", &ns])?;
            net.namespaces.push(ns.clone());
            let (sw, inner) = (format!("{prefix}{tag}v{k}"), format!("{prefix}{tag}p{k}"));
            ip(&["link", "add", &sw, "type", "veth", "peer", "name", &inner])?;
            ip(&["link", "set", &sw, "netns", &s])?;
            ip(&["-n", &s, "link", "set", &sw, "master", "br0", "up"])?;
            ip(&["link", "set", &inner, "netns", &ns])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", net.addr(k)),
                "dev",
                &inner,
            ])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    /// Node `k`'s address (1-based; 254 is the test's).
    pub fn addr(&self, k: usize) -> String {
        format!("{}.{}.{k}", self.base, self.tag)
    }

    /// Node `k`'s cluster name (`n3@10.213.x.3`).
    pub fn name(&self, k: usize) -> String {
        format!("n{k}@{}", self.addr(k))
    }

    /// Cuts every link between the two sides (blackhole routes both ways).
    pub fn split(&self, left: &[usize], right: &[usize]) -> Result<(), String> {
        self.routes("add", left, right)
    }

    /// Restores the links [`Network::split`] cut.
    pub fn heal(&self, left: &[usize], right: &[usize]) -> Result<(), String> {
        self.routes("del", left, right)
    }

    fn routes(&self, verb: &str, left: &[usize], right: &[usize]) -> Result<(), String> {
        for (from, to) in [(left, right), (right, left)] {
            for a in from {
                for b in to {
                    let ns = &self.namespaces[a - 1];
                    let dest = format!("{}/32", self.addr(*b));
                    ip(&["-n", ns, "route", verb, "blackhole", &dest])?;
                }
            }
        }
        Ok(())
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["netns", "del", &self.switch]);
        let _ = ip(&["link", "del", &format!("{}{}r", self.prefix, self.tag)]);
    }
}

/// One node process in its namespace; killed on drop.
pub struct Node {
    name: String,
    admin: SocketAddr,
    log: PathBuf,
    child: Child,
}

impl Node {
    /// A client of the node's admin API, with the token.
    pub fn client(&self) -> AdminClient {
        AdminClient::new(self.admin).with_token(TOKEN)
    }

    /// The node's whole log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` of the node's log, headed by its name.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        format!(
            "--- {} ---\n{}",
            self.name,
            all[all.len().saturating_sub(lines)..].join("\n")
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts node `k` of hub `hub` in its namespace, with `flags` after the common ones (the
/// partition tolerance, grace periods, recovery); every node but the first joins node 1.
pub fn spawn(net: &Network, k: usize, dir: &Path, hub: &str, flags: &[&str]) -> Node {
    let join = format!("{}:{CLUSTER_PORT}", net.addr(1));
    let join: &[&str] = if k > 1 { &["--join", &join] } else { &[] };
    spawn_named(net, k, dir, hub, &format!("n{k}"), &[flags, join].concat())
}

/// The cluster port every node listens on (on its own address).
pub const fn cluster_port() -> u16 {
    CLUSTER_PORT
}

/// Starts node `k` of hub `hub` in its namespace as `--name name` (a template is expanded by
/// the node; files are named after `k`), with `flags` after the common ones and no seed.
pub fn spawn_named(
    net: &Network,
    k: usize,
    dir: &Path,
    hub: &str,
    name: &str,
    flags: &[&str],
) -> Node {
    let short = format!("n{k}");
    let listen = format!("{}:{CLUSTER_PORT}", net.addr(k));
    let admin: SocketAddr = format!("{}:{ADMIN_PORT}", net.addr(k)).parse().unwrap();
    let token = dir.join(format!("{short}.token"));
    write_private(&token, TOKEN).unwrap();
    let log = dir.join(format!("{short}.log"));
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &net.namespaces[k - 1]])
        .arg(binary())
        .args(["node", "--hub", hub, "--name", name, "--listen", &listen])
        .args(["--admin", &admin.to_string()])
        .arg("--admin-token-file")
        .arg(&token)
        .arg("--data-dir")
        .arg(dir.join(&short))
        .args(["--cookie", "partition-test-cookie", "--backend", "memory"])
        .args(flags);
    let child = cmd
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("spawn a node in its namespace");
    Node {
        name: short,
        admin,
        log,
        child,
    }
}

/// Waits until every node sees exactly `expected` as members and none is partitioned or set
/// aside.
pub fn wait_whole(nodes: &[Node], expected: &[String], what: &str) {
    wait_for(what, DEADLINE, || {
        nodes
            .iter()
            .all(|n| {
                n.client()
                    .health()
                    .is_ok_and(|h| h.members == expected && !h.partitioned && !h.set_aside)
            })
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(nodes)));
}

/// The last lines of every node's log, for a failure's message.
pub fn tails(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| n.log_tail(30))
        .collect::<Vec<_>>()
        .join("\n")
}
