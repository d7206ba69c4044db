//! A real network split between real `process-hub node` processes: five nodes, each in a
//! network namespace of its own, joined by a bridge in a "switch" namespace (the test reaches
//! every admin API through a veth from its own namespace). The split is made of blackhole routes
//! inside the nodes' namespaces, so established connections die as they would on a real network.
//!
//! Under `--partition-tolerance majority-quorum:5` a 3/2 split leaves every child running exactly
//! once, on the majority; the minority answers `partitioned` (503) and reports it in health; after
//! the heal every child runs once, on its owner.
//!
//! Needs root (network namespaces), as CI has.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub::core::placement::HashRing;
use process_hub::ChildId;
use process_hub_actors::harness::{wait_for, write_private, AdminClient};

const DEADLINE: Duration = Duration::from_secs(90);
const NODES: usize = 5;
const CHILDREN: usize = 60;
const CLUSTER_PORT: u16 = 7100;
const ADMIN_PORT: u16 = 8100;
const TOKEN: &str = "partition-test-token";

fn binary() -> &'static Path {
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
struct Network {
    tag: u32,
    switch: String,
    namespaces: Vec<String>,
}

impl Network {
    fn create(nodes: usize) -> Result<Self, String> {
        let tag = std::process::id() % 200 + 20;
        let mut net = Self {
            tag,
            switch: format!("ph{tag}s"),
            namespaces: Vec::new(),
        };
        // Leftovers of an earlier run with the same tag.
        let _ = ip(&["netns", "del", &net.switch]);
        for k in 1..=nodes {
            let _ = ip(&["netns", "del", &format!("ph{tag}n{k}")]);
        }
        let _ = ip(&["link", "del", &format!("ph{tag}r")]);
        let s = net.switch.clone();
        ip(&["netns", "add", &s])?;
        ip(&["-n", &s, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &s, "link", "set", "br0", "up"])?;
        // The test's own way in.
        let (root, root_peer) = (format!("ph{tag}r"), format!("ph{tag}rs"));
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
            let ns = format!("ph{tag}n{k}");
            ip(&["netns", "add", &ns])?;
            net.namespaces.push(ns.clone());
            let (sw, inner) = (format!("ph{tag}v{k}"), format!("ph{tag}p{k}"));
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
    fn addr(&self, k: usize) -> String {
        format!("10.213.{}.{k}", self.tag)
    }

    /// Cuts every link between the two sides (blackhole routes both ways).
    fn split(&self, left: &[usize], right: &[usize]) -> Result<(), String> {
        self.routes("add", left, right)
    }

    fn heal(&self, left: &[usize], right: &[usize]) -> Result<(), String> {
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
        let _ = ip(&["link", "del", &format!("ph{}r", self.tag)]);
    }
}

/// One node process in its namespace; killed on drop.
struct Node {
    name: String,
    admin: SocketAddr,
    log: PathBuf,
    child: Child,
}

impl Node {
    fn client(&self) -> AdminClient {
        AdminClient::new(self.admin).with_token(TOKEN)
    }

    fn log_tail(&self, lines: usize) -> String {
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

fn spawn(net: &Network, k: usize, dir: &Path) -> Node {
    let name = format!("n{k}");
    let listen = format!("{}:{CLUSTER_PORT}", net.addr(k));
    let admin: SocketAddr = format!("{}:{ADMIN_PORT}", net.addr(k)).parse().unwrap();
    let token = dir.join(format!("{name}.token"));
    write_private(&token, TOKEN).unwrap();
    let log = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &net.namespaces[k - 1]])
        .arg(binary())
        .args([
            "node", "--hub", "split", "--name", &name, "--listen", &listen,
        ])
        .args(["--admin", &admin.to_string()])
        .arg("--admin-token-file")
        .arg(&token)
        .arg("--data-dir")
        .arg(dir.join(&name))
        .args(["--cookie", "partition-test-cookie", "--backend", "memory"])
        .args(["--partition-tolerance", "majority-quorum:5"])
        .args(["--nodedown-grace-ms", "300"]);
    if k > 1 {
        cmd.args(["--join", &format!("{}:{CLUSTER_PORT}", net.addr(1))]);
    }
    let child = cmd
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("spawn a node in its namespace");
    Node {
        name,
        admin,
        log,
        child,
    }
}

/// Waits until every node sees exactly `expected` as members and none is partitioned.
fn wait_whole(nodes: &[Node], expected: &[String], what: &str) {
    wait_for(what, DEADLINE, || {
        nodes
            .iter()
            .all(|n| {
                n.client()
                    .health()
                    .is_ok_and(|h| h.members == expected && !h.partitioned)
            })
            .then_some(())
    })
    .unwrap_or_else(|e| {
        let tails: Vec<String> = nodes.iter().map(|n| n.log_tail(30)).collect();
        panic!("{e}\n{}", tails.join("\n"))
    });
}

fn specs(prefix: &str, n: usize) -> Vec<StartSpec> {
    (0..n)
        .map(|i| StartSpec {
            id: format!("{prefix}-{i:03}"),
            kind: "counter".into(),
            args: None,
            restart: None,
            metadata: None,
            durable: false,
            nodes: None,
            guided_fallback: false,
        })
        .collect()
}

/// Child -> hosts, from one node's registry copy.
fn placement(client: &AdminClient) -> Option<BTreeMap<String, Vec<String>>> {
    let children = client.children().ok()?;
    Some(
        children
            .into_iter()
            .map(|c| (c.id, c.nodes.into_iter().map(|n| n.node).collect()))
            .collect(),
    )
}

/// Every node of `side` places each of `ids` once, on a node of `side`, all agreeing.
fn once_on(nodes: &[&Node], ids: &BTreeSet<String>, side: &BTreeSet<String>) -> Option<()> {
    let views: Vec<_> = nodes
        .iter()
        .map(|n| placement(&n.client()))
        .collect::<Option<_>>()?;
    let first = views.first()?;
    let ok = first.keys().cloned().collect::<BTreeSet<_>>() == *ids
        && first
            .values()
            .all(|hosts| hosts.len() == 1 && side.contains(&hosts[0]));
    (ok && views.iter().all(|v| v == first)).then_some(())
}

#[test]
fn a_five_node_cluster_split_three_two_runs_every_child_once_on_the_majority() {
    let net = Network::create(NODES)
        .unwrap_or_else(|e| panic!("network namespaces are needed (run as root, as CI does): {e}"));
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<Node> = (1..=NODES).map(|k| spawn(&net, k, dir.path())).collect();
    let tails = |nodes: &[Node]| {
        nodes
            .iter()
            .map(|n| n.log_tail(30))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let all_names: BTreeSet<String> = (1..=NODES)
        .map(|k| format!("n{k}@{}", net.addr(k)))
        .collect();
    let expected: Vec<String> = all_names.iter().cloned().collect();
    wait_whole(
        &nodes,
        &expected,
        "five members everywhere, none partitioned",
    );

    let mut ids: BTreeSet<String> = BTreeSet::new();
    let batch = specs("s", CHILDREN);
    ids.extend(batch.iter().map(|s| s.id.clone()));
    let started = nodes[4].client().start(&batch).expect("start");
    assert_eq!(started.started.len(), CHILDREN, "{:?}", started.errors);
    let everyone: Vec<&Node> = nodes.iter().collect();
    wait_for("every child placed once", DEADLINE, || {
        once_on(&everyone, &ids, &all_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let before = placement(&nodes[0].client()).unwrap();
    let on_minority = before
        .values()
        .filter(|h| h[0].starts_with("n4@") || h[0].starts_with("n5@"))
        .count();
    assert!(
        on_minority > 0,
        "the minority ran some children before the split"
    );

    let (majority, minority) = ([1, 2, 3], [4, 5]);
    let split_at = std::time::Instant::now();
    net.split(&majority, &minority).unwrap();
    let majority_names: BTreeSet<String> = majority
        .iter()
        .map(|k| format!("n{k}@{}", net.addr(*k)))
        .collect();
    wait_for("the minority is partitioned", DEADLINE, || {
        minority
            .iter()
            .all(|k| nodes[k - 1].client().health().is_ok_and(|h| h.partitioned))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let partitioned_ms = split_at.elapsed().as_millis();
    let majority_nodes: Vec<&Node> = majority.iter().map(|k| &nodes[k - 1]).collect();
    wait_for("every child once, on the majority", DEADLINE, || {
        once_on(&majority_nodes, &ids, &majority_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let majority_ms = split_at.elapsed().as_millis();
    // The minority runs nothing: its own registry binds no child anywhere it can see.
    for k in minority {
        let client = nodes[k - 1].client();
        let health = client.health().unwrap();
        assert_eq!(health.status, "partitioned");
        wait_for("the minority binds nothing", DEADLINE, || {
            let summary = client.registry_summary().ok()?;
            (summary.placed == 0).then_some(())
        })
        .unwrap_or_else(|e| panic!("n{k}: {e}\n{}", tails(&nodes)));
        // It answers starts and stops `partitioned`, 503.
        let refused = client
            .start(&specs(&format!("minority{k}"), 1))
            .unwrap_err();
        assert_eq!(refused.status(), Some(503), "{refused}");
        assert!(refused.to_string().contains("partitioned"), "{refused}");
        let refused = client.stop(ids.iter().next().unwrap()).unwrap_err();
        assert_eq!(refused.status(), Some(503), "{refused}");
    }
    // The majority keeps taking work.
    let more = specs("m", 10);
    ids.extend(more.iter().map(|s| s.id.clone()));
    let started = nodes[1]
        .client()
        .start(&more)
        .expect("start on the majority");
    assert_eq!(started.started.len(), 10, "{:?}", started.errors);
    wait_for("the new children once, on the majority", DEADLINE, || {
        once_on(&majority_nodes, &ids, &majority_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));

    let heal_at = std::time::Instant::now();
    net.heal(&majority, &minority).unwrap();
    wait_whole(&nodes, &expected, "five members again, none partitioned");
    wait_for("every child once, everywhere agreeing", DEADLINE, || {
        once_on(&everyone, &ids, &all_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    // On their owners: the ring of all five gives the minority its children back.
    let ring = HashRing::new(all_names.iter().cloned());
    wait_for("every child on its ring owner", DEADLINE, || {
        let after = placement(&nodes[0].client())?;
        after
            .iter()
            .all(|(id, hosts)| {
                let id = ChildId::parse(id).expect("a valid id");
                hosts.len() == 1 && ring.owner(&id) == Some(&hosts[0])
            })
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    eprintln!(
        "split 3/2: minority partitioned after {partitioned_ms} ms, every child once on the \
         majority after {majority_ms} ms; heal: every child on its owner after {} ms",
        heal_at.elapsed().as_millis()
    );
    // And every child answers, asked through a node of the former minority.
    for id in &ids {
        nodes[3]
            .client()
            .call(
                id,
                &serde_json::json!({"kind": "counter", "command": {"op": "get"}}),
                5_000,
            )
            .unwrap_or_else(|e| panic!("{id}: {e}"));
    }
}
