//! DNS discovery between real `process-hub node` processes and a real DNS server: each node in
//! a network namespace of its own (`partition/mod.rs`, on addresses `10.233.x.k`), dnsmasq in
//! one more, serving the cluster's name from a hosts file it re-reads on SIGHUP and SRV records
//! naming the same hosts. The nodes know only the name (`--discovery`, `--dns-server`) and are
//! named after their address (`--name 'node-{ip}'`).
//!
//! - **A records**: three nodes form one cluster; a fourth record appears and the fourth node
//!   joins, dialled by the others from DNS; a record disappears and no member is downed; the
//!   DNS server goes away and every node logs it, retries, and keeps its members.
//! - **SRV records**: three nodes form one cluster from `dns-srv:`.
//!
//! Needs root (network namespaces) and dnsmasq (`scripts/test.sh` installs it), as CI has.

use crate::partition;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use partition::{cluster_port, spawn_named, tails, Network, Node, DEADLINE};
use process_hub::admin::MembersResponse;
use process_hub_actors::harness::wait_for;

/// The namespace (and address `10.233.x.5`) of the DNS server.
const DNS_NS: usize = 5;
/// The name whose A records list the nodes.
const PEERS: &str = "peers.hub.test";
/// The name whose SRV records list the nodes.
const SRV: &str = "_ph._tcp.hub.test";
/// How fast the nodes see a silent peer: short, so that a member wrongly downed would show
/// within the test's watch.
const TIMING: [&str; 6] = [
    "--heartbeat-ms",
    "200",
    "--failure-timeout-ms",
    "1500",
    "--nodedown-grace-ms",
    "300",
];
/// How long, after every node acted on a dropped record, the members are watched for a
/// wrongly downed one: a few failure-detector timeouts.
const WATCH: Duration = Duration::from_millis(3 * 1500);

fn dnsmasq() -> Result<PathBuf, String> {
    ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq", "/sbin/dnsmasq"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| {
            "dnsmasq is missing (scripts/test.sh installs it: apt-get install dnsmasq-base)".into()
        })
}

/// dnsmasq in its namespace, answering for `hub.test` only; killed on drop.
struct Dns {
    child: Child,
    hosts: PathBuf,
    log: PathBuf,
    addr: SocketAddr,
}

impl Dns {
    /// Serves `hosts` (address, name) and SRV records of [`SRV`] naming `srv_targets` on the
    /// cluster port.
    fn start(
        net: &Network,
        dir: &Path,
        hosts: &[(String, String)],
        srv_targets: &[String],
    ) -> Self {
        let binary = dnsmasq().unwrap_or_else(|e| panic!("{e}"));
        let addr: SocketAddr = format!("{}:53", net.addr(DNS_NS)).parse().unwrap();
        let hosts_file = dir.join("dns.hosts");
        write_hosts(&hosts_file, hosts);
        let log = dir.join("dnsmasq.log");
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &net.namespaces[DNS_NS - 1]])
            .arg(binary)
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                "--user=root",
                "--group=root",
                "--log-queries",
                "--log-facility=-",
                "--local=/hub.test/",
            ])
            .arg(format!("--listen-address={}", addr.ip()))
            .arg(format!("--pid-file={}", dir.join("dnsmasq.pid").display()))
            .arg(format!("--addn-hosts={}", hosts_file.display()));
        for target in srv_targets {
            cmd.arg(format!("--srv-host={SRV},{target},{}", cluster_port()));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("spawn dnsmasq in its namespace");
        let dns = Self {
            child,
            hosts: hosts_file,
            log,
            addr,
        };
        wait_for("dnsmasq to listen", DEADLINE, || {
            std::fs::read_to_string(&dns.log)
                .unwrap_or_default()
                .contains("read ")
                .then_some(())
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", dns.log_text()));
        dns
    }

    /// Replaces the hosts file and has dnsmasq re-read it (SIGHUP); returns once it did.
    fn set_hosts(&self, hosts: &[(String, String)]) {
        let reads = self.reads();
        write_hosts(&self.hosts, hosts);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .expect("SIGHUP dnsmasq");
        wait_for("dnsmasq to re-read its hosts file", DEADLINE, || {
            (self.reads() > reads).then_some(())
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", self.log_text()));
    }

    /// How many times dnsmasq read the hosts file.
    fn reads(&self) -> usize {
        let hosts = self.hosts.display().to_string();
        self.log_text()
            .lines()
            .filter(|l| l.contains("read ") && l.contains(&hosts))
            .count()
    }

    fn log_text(&self) -> String {
        format!(
            "--- dnsmasq ---\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_hosts(path: &Path, hosts: &[(String, String)]) {
    let text: String = hosts
        .iter()
        .map(|(addr, name)| format!("{addr} {name}\n"))
        .collect();
    // Written whole, then renamed: dnsmasq never reads half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `node-{ip}@{ip}` of node `k`.
fn member(net: &Network, k: usize) -> String {
    format!("node-{0}@{0}", net.addr(k))
}

fn start_node(net: &Network, k: usize, dir: &Path, hub: &str, discovery: &str, dns: &Dns) -> Node {
    let server = dns.addr.to_string();
    let mut flags = vec![
        "--discovery",
        discovery,
        "--dns-server",
        &server,
        "--discovery-interval-ms",
        "300",
    ];
    flags.extend(TIMING);
    spawn_named(net, k, dir, hub, "node-{ip}", &flags)
}

/// Every node's `/v1/members`: the members that are `up`, sorted.
fn members_up(node: &Node) -> Option<Vec<String>> {
    let body = node.client().get("/v1/members").ok()?;
    let members: MembersResponse = serde_json::from_value(body).ok()?;
    let mut up: Vec<String> = members
        .members
        .into_iter()
        .filter(|m| m.state == "up")
        .map(|m| m.node)
        .collect();
    up.sort();
    Some(up)
}

/// Waits until every node of `nodes` lists exactly `expected` as its members.
fn wait_members(nodes: &[&Node], expected: &[String], what: &str, dns: &Dns) {
    let mut expected = expected.to_vec();
    expected.sort();
    wait_for(what, DEADLINE, || {
        nodes
            .iter()
            .all(|n| members_up(n).as_ref() == Some(&expected))
            .then_some(())
    })
    .unwrap_or_else(|e| {
        let seen: Vec<String> = nodes
            .iter()
            .map(|n| format!("{:?}", members_up(n)))
            .collect();
        let owned: Vec<&Node> = nodes.to_vec();
        panic!(
            "{e}\nexpected {expected:?}, seen {seen:?}\n{}\n{}",
            owned
                .iter()
                .map(|n| n.log_tail(40))
                .collect::<Vec<_>>()
                .join("\n"),
            dns.log_text()
        )
    });
}

fn host(net: &Network, k: usize, name: &str) -> (String, String) {
    (net.addr(k), name.to_owned())
}

#[test]
fn three_nodes_that_know_only_a_dns_name_form_a_cluster_a_fourth_joins_and_none_is_downed_when_dns_drops_it(
) {
    let net = Network::create_on(DNS_NS, "10.233", "pd")
        .unwrap_or_else(|e| panic!("network namespaces are needed (run as root, as CI does): {e}"));
    let dir = tempfile::tempdir().unwrap();
    let records = |ks: &[usize]| -> Vec<(String, String)> {
        ks.iter().map(|k| host(&net, *k, PEERS)).collect()
    };
    let dns = Dns::start(&net, dir.path(), &records(&[1, 2, 3]), &[]);
    let discovery = format!("dns:{PEERS}");
    let first: Vec<Node> = (1..=3)
        .map(|k| start_node(&net, k, dir.path(), "dns-a", &discovery, &dns))
        .collect();
    let three: Vec<String> = (1..=3).map(|k| member(&net, k)).collect();
    wait_members(
        &first.iter().collect::<Vec<_>>(),
        &three,
        "three nodes that know only the name to form one cluster",
        &dns,
    );

    // The fourth record appears: the others dial it from DNS, and it joins.
    dns.set_hosts(&records(&[1, 2, 3, 4]));
    let fourth = start_node(&net, 4, dir.path(), "dns-a", &discovery, &dns);
    let mut all: Vec<&Node> = first.iter().collect();
    all.push(&fourth);
    let four: Vec<String> = (1..=4).map(|k| member(&net, k)).collect();
    wait_members(&all, &four, "the fourth node to join", &dns);
    let new_seed = format!("new seed from DNS seed={}:{}", net.addr(4), cluster_port());
    wait_for(
        "the first three to take the fourth record as a seed",
        DEADLINE,
        || {
            first
                .iter()
                .all(|n| n.log_text().contains(&new_seed))
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&first)));

    // Node 2's record disappears: every other node lets it go as a seed, and it stays a member.
    let before: Vec<usize> = all.iter().map(|n| n.log_text().len()).collect();
    dns.set_hosts(&records(&[1, 3, 4]));
    let left = format!(
        "seed left DNS; still connected, it stays a peer (only the failure detector downs a member) seed={}:{}",
        net.addr(2),
        cluster_port()
    );
    let others = [&first[0], &first[2], &fourth];
    wait_for(
        "the others to drop node 2's record as a seed",
        DEADLINE,
        || {
            others
                .iter()
                .all(|n| n.log_text().contains(&left))
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", tails(&first), fourth.log_tail(40)));
    let watch_until = Instant::now() + WATCH;
    let mut readings = 0;
    while Instant::now() < watch_until {
        for node in &all {
            let up = members_up(node);
            assert_eq!(
                up.as_ref(),
                Some(&four),
                "a member was downed (or a node stopped answering) after DNS dropped node 2\n{}\n{}",
                tails(&first),
                fourth.log_tail(40)
            );
        }
        readings += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(readings > 1, "the members were read during the watch");
    for (node, from) in all.iter().zip(before) {
        let text = node.log_text();
        assert!(
            !text
                .get(from..)
                .unwrap_or("")
                .contains("node session closed"),
            "a session closed after DNS dropped a record:\n{}",
            node.log_tail(40)
        );
    }

    // The DNS server goes away: every node logs it and retries, and nothing changes.
    drop(dns);
    wait_for("every node to see DNS stop answering", DEADLINE, || {
        all.iter()
            .all(|n| n.log_text().contains("discovery: DNS did not answer"))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", tails(&first), fourth.log_tail(40)));
    for node in &all {
        assert_eq!(
            members_up(node).as_ref(),
            Some(&four),
            "a member was downed (or a node stopped) when DNS went away\n{}",
            node.log_tail(40)
        );
    }
    drop(all);
    drop(fourth);
    drop(first);
    drop(net);
}

#[test]
fn three_nodes_that_know_only_an_srv_name_form_a_cluster() {
    let net = Network::create_on(DNS_NS, "10.233", "pd")
        .unwrap_or_else(|e| panic!("network namespaces are needed (run as root, as CI does): {e}"));
    let dir = tempfile::tempdir().unwrap();
    let hosts: Vec<(String, String)> = (1..=3)
        .map(|k| host(&net, k, &format!("n{k}.hub.test")))
        .collect();
    let targets: Vec<String> = (1..=3).map(|k| format!("n{k}.hub.test")).collect();
    let dns = Dns::start(&net, dir.path(), &hosts, &targets);
    let discovery = format!("dns-srv:{SRV}");
    let nodes: Vec<Node> = (1..=3)
        .map(|k| start_node(&net, k, dir.path(), "dns-srv", &discovery, &dns))
        .collect();
    let three: Vec<String> = (1..=3).map(|k| member(&net, k)).collect();
    wait_members(
        &nodes.iter().collect::<Vec<_>>(),
        &three,
        "three nodes that know only the SRV name to form one cluster",
        &dns,
    );
    drop(nodes);
    drop(dns);
    drop(net);
}
