//! Partial partitions between real `process-hub node` processes: five nodes, each in a network
//! namespace of its own (see `partition/mod.rs`), with a fault on the one link between n1 and
//! n5 only, made of iptables rules in n1's namespace (`partition/links.rs`) while n2, n3 and
//! n4 still reach everyone:
//!
//! - **partial-cut**: the link dropped both ways;
//! - **one-way**: n1 -> n5 dropped, n5 -> n1 delivered;
//! - **flapping**: the link cut and healed every 2.5 s for 20 s;
//! - **lossy**: 70% of the link's packets dropped both ways, at random (iptables' `statistic`
//!   match), for 10 s: TCP's retransmissions stall past the failure detector's timeout, so the
//!   link seems to go down and up at no rhythm (at 50%, in the runs tried, no node saw it down
//!   and nothing moved). The line also gives the packets the rules dropped (none is a failure:
//!   the fault was not in place) and whether a node saw the link down. It runs under
//!   divergence only (the same rule resolves it under quorum; each scenario costs about 30 s).
//!
//! While each fault lasts, every node's own registry copy is polled every 200 ms and each
//! child's time running on two nodes at once is measured (`harness::double_run`: a node runs
//! what its own copy lists on itself). No stretch may last longer than the bound the hub states
//! for the settings the nodes run with; the test prints the bound and the worst stretch on a
//! line per scenario (`partial-cut bound_ms=... worst_double_ms=...`), the bound being the hub's
//! own (`core::reachability::double_run_bound`) for the flags the nodes run with. A cut or
//! one-way link is held until the cluster resolved it (a node says it is set aside, or the
//! bound passed) and every child runs on exactly one node; then it heals. Under flapping and
//! loss no child changes host more than twice (away and back): the ring does not follow the
//! link's ups and downs.
//! After every heal every child runs once, every registry copy is equal, every declared list is
//! equal, and every durable start and stop asked during the fault (through every node, the
//! link's ends too) is kept as it was answered.
//!
//! One cluster per strategy (`divergence`, `majority-quorum:5`) serves the four scenarios in
//! turn. Needs root (network namespaces) and iptables, as CI has. The durable requests and the
//! checks after a heal are in `checks.rs`.

mod checks;

use crate::partition;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use checks::{issue, plan, settle, summary, PartialVerdict};
use clap::Parser;
use partition::links::{iptables_present, Link};
use partition::{spawn, tails, wait_whole, Network, Node, DEADLINE};
use process_hub::core::reachability::BoundTerms;
use process_hub_actors::cli::node_settings::NodeFlags;
use process_hub_actors::harness::outage::counter_specs;
use process_hub_actors::harness::{wait_for, AdminClient, DoubleRun, Watch};
use process_hub_actors::node::{cluster_config, hub_config};

const NODES: usize = 5;
/// Children started without `durable` (the ring alone keeps them).
const PLAIN: usize = 240;
/// Durable children started before the first fault; the scenarios stop some of them.
const DURABLE: usize = 60;
/// How often every node's registry copy is read.
const POLL: Duration = Duration::from_millis(200);
/// The ends of the faulty link.
const A: usize = 1;
const E: usize = 5;
/// Flapping: cut for one half-period, healed for the next, this many times.
const FLAP_HALF: Duration = Duration::from_millis(2500);
const FLAP_CYCLES: u32 = 4;
/// Lossy: each packet of the link dropped with this probability, both ways, for this long.
const LOSS: f64 = 0.7;
const LOSSY_FOR: Duration = Duration::from_secs(10);

/// How fast the nodes see a silent peer and resolve a partial partition: short, so that each
/// scenario takes seconds.
const TIMING: [&str; 8] = [
    "--nodedown-grace-ms",
    "300",
    "--heartbeat-ms",
    "200",
    "--failure-timeout-ms",
    "1500",
    "--stable-after-ms",
    "2000",
];

/// The flags every node runs with under `strategy` (beyond the ones `partition::spawn` adds).
fn node_flags(strategy: &str) -> Vec<String> {
    let mut flags = vec![
        "--partition-tolerance",
        strategy,
        "--auto-recovery",
        "--reconcile-grace-ms",
        "500",
        "--reconcile-interval-ms",
        "1000",
    ];
    flags.extend(TIMING);
    flags.into_iter().map(String::from).collect()
}

/// `process-hub node`'s flags, to read them as the node does.
#[derive(clap::Parser)]
struct NodeCommand {
    #[command(flatten)]
    flags: NodeFlags,
}

/// The longest a child may run on two nodes, as the hub states it
/// (`core::reachability::double_run_bound`) for the configuration a node builds from `flags`:
/// the same settings, read by the same code, as the nodes of the test.
fn bound_terms(flags: &[String]) -> BoundTerms {
    let required = [
        "node",
        "--hub",
        "h",
        "--name",
        "n1",
        "--listen",
        "127.0.0.1:7100",
    ];
    let args = required
        .into_iter()
        .map(String::from)
        .chain(flags.iter().cloned());
    let settings = NodeCommand::try_parse_from(args)
        .expect("the test's node flags parse")
        .flags
        .resolve()
        .expect("the test's node flags are valid");
    let hub = hub_config(&settings).expect("the hub's configuration");
    let cluster = cluster_config(&settings, "cookie".into());
    // A silent link is seen after the detector's timeout, a healed one within the reconnect
    // backoff's cap.
    let detection = cluster.heartbeat.timeout.max(cluster.reconnect.max);
    BoundTerms::new(&hub, detection)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Cut,
    OneWay,
    Flapping,
    Lossy,
}

impl Fault {
    fn label(self) -> &'static str {
        match self {
            Fault::Cut => "partial-cut",
            Fault::OneWay => "one-way",
            Fault::Flapping => "flapping",
            Fault::Lossy => "lossy",
        }
    }

    fn link(self) -> Link {
        match self {
            Fault::OneWay => Link::one_way(A, E),
            Fault::Cut | Fault::Flapping => Link::cut(A, E),
            Fault::Lossy => Link::lossy(A, E, LOSS),
        }
    }

    /// A fault whose link goes up and down (or seems to): the ring must not follow it.
    fn unsteady(self) -> bool {
        matches!(self, Fault::Flapping | Fault::Lossy)
    }
}

/// The five nodes and their network (the nodes are killed before the network goes).
struct Cluster {
    nodes: Vec<Node>,
    net: Network,
    clients: Vec<AdminClient>,
    named: Vec<(String, AdminClient)>,
    members: Vec<String>,
    _dir: tempfile::TempDir,
}

/// What the cluster must hold: the plain children (run once, always) and the durable ones
/// declared so far.
struct Expect {
    plain: BTreeSet<String>,
    declared: BTreeSet<String>,
    /// Every durable id any request named.
    universe: BTreeSet<String>,
}

#[test]
fn a_partial_partition_under_divergence_runs_no_child_twice_past_the_bound() {
    partial_partitions("divergence", "partial-div");
}

#[test]
fn a_partial_partition_under_majority_quorum_runs_no_child_twice_past_the_bound() {
    partial_partitions("majority-quorum:5", "partial-maj");
}

fn partial_partitions(strategy: &str, hub: &str) {
    iptables_present().unwrap_or_else(|e| panic!("{e}"));
    let flags = node_flags(strategy);
    let terms = bound_terms(&flags);
    println!("{strategy}: double-run bound {terms}");
    let cluster = start_cluster(hub, &flags);
    let c = &cluster;
    let plain: Vec<String> = (0..PLAIN).map(|i| format!("p-{i:03}")).collect();
    let durable: Vec<String> = (0..DURABLE).map(|i| format!("d-{i:03}")).collect();
    let started = c.clients[1]
        .start(&counter_specs(&plain, false))
        .expect("plain start");
    assert_eq!(started.started.len(), PLAIN, "{:?}", started.errors);
    let started = c.clients[2]
        .start(&counter_specs(&durable, true))
        .expect("durable start");
    assert_eq!(started.started.len(), DURABLE, "{:?}", started.errors);
    let mut expect = Expect {
        plain: plain.into_iter().collect(),
        declared: durable.iter().cloned().collect(),
        universe: durable.into_iter().collect(),
    };
    let settled = settle(c, &expect, "every child once before the faults");
    assert_eq!(settled.declared, expect.declared, "the durable starts");

    let watch = Watch::start(&c.named, POLL).expect("the watch's threads");
    let mut findings = Vec::new();
    // The lossy link runs under one strategy: it resolves through the same rule as the cut
    // (the link is seen down), and each scenario costs about 30 s of the processes tier.
    let faults: &[Fault] = if strategy == "divergence" {
        &[Fault::Cut, Fault::OneWay, Fault::Flapping, Fault::Lossy]
    } else {
        &[Fault::Cut, Fault::OneWay, Fault::Flapping]
    };
    for &fault in faults {
        let finding = scenario(c, &watch, fault, terms.total(), &mut expect);
        println!("{}", finding.line(strategy));
        findings.push(finding);
    }
    let problems: Vec<String> = findings.iter().flat_map(Finding::problems).collect();
    let lines: Vec<String> = findings.iter().map(|f| f.line(strategy)).collect();
    assert!(
        problems.is_empty(),
        "{strategy}:\n{}\n\n{}\n{}",
        problems.join("\n"),
        lines.join("\n"),
        tails(&c.nodes)
    );
}

fn start_cluster(hub: &str, flags: &[String]) -> Cluster {
    let net = Network::create(NODES)
        .unwrap_or_else(|e| panic!("network namespaces are needed (run as root, as CI does): {e}"));
    let dir = tempfile::tempdir().unwrap();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let nodes: Vec<Node> = (1..=NODES)
        .map(|k| spawn(&net, k, dir.path(), hub, &flags))
        .collect();
    let members: Vec<String> = (1..=NODES).map(|k| net.name(k)).collect();
    wait_whole(
        &nodes,
        &members,
        "five members everywhere, none partitioned",
    );
    let clients: Vec<AdminClient> = nodes.iter().map(Node::client).collect();
    wait_for("every node to be normal", DEADLINE, || {
        clients
            .iter()
            .all(|c| c.health().is_ok_and(|h| h.recovery_state == "normal"))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let named = members
        .iter()
        .cloned()
        .zip(clients.iter().cloned())
        .collect();
    Cluster {
        nodes,
        net,
        clients,
        named,
        members,
        _dir: dir,
    }
}

/// What one scenario showed.
struct Finding {
    fault: Fault,
    bound: Duration,
    /// The longest stretch a child ran on two nodes, from the fault to the settled heal.
    worst: Option<DoubleRun>,
    /// Children that ran on two nodes at some point.
    doubled: usize,
    /// When the link healed, the cluster settled and the worst stretch began, from the fault.
    moments: String,
    /// The most host changes of one child, from the fault to the settled heal.
    most_moves: usize,
    /// Cut and one-way: how the cluster resolved the fault before the heal.
    resolution: Option<Resolution>,
    /// Lossy: the packets the link's rules dropped, and whether a node saw the link down
    /// (some node set aside or indirectly connected) while they did.
    loss: Option<Loss>,
    answers: String,
    contradictions: Vec<String>,
}

impl Finding {
    fn worst_ms(&self) -> u128 {
        self.worst.as_ref().map_or(0, |w| w.lasted.as_millis())
    }

    fn line(&self, strategy: &str) -> String {
        let worst = self.worst.as_ref().map_or(String::new(), |w| {
            format!(
                " worst_child={} on {:?}{}",
                w.child,
                w.nodes,
                if w.ongoing { " (ongoing)" } else { "" }
            )
        });
        let resolution = self.resolution.as_ref().map_or(String::new(), |r| {
            format!(
                " resolved_ms={} set_aside={:?}",
                r.after.as_millis(),
                r.set_aside
            )
        });
        let loss = self.loss.as_ref().map_or(String::new(), |l| {
            format!(
                " loss={LOSS} dropped_packets={} seen_down={}",
                l.dropped, l.seen_down
            )
        });
        format!(
            "{} bound_ms={} worst_double_ms={} strategy={strategy} doubled_children={} \
             most_moves={}{resolution}{loss} {}{worst}; answers: {}",
            self.fault.label(),
            self.bound.as_millis(),
            self.worst_ms(),
            self.doubled,
            self.most_moves,
            self.moments,
            self.answers
        )
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.worst_ms() > self.bound.as_millis() {
            problems.push(format!(
                "{}: a child ran on two nodes for {} ms, past the bound of {} ms: {:?}",
                self.fault.label(),
                self.worst_ms(),
                self.bound.as_millis(),
                self.worst
            ));
        }
        if self.loss.as_ref().is_some_and(|l| l.dropped == 0) {
            problems.push(format!(
                "{}: the link's rules dropped no packet: the fault was not in place",
                self.fault.label()
            ));
        }
        if self.resolution.as_ref().is_some_and(|r| !r.once) {
            problems.push(format!(
                "{}: before the heal, some child did not run exactly once",
                self.fault.label()
            ));
        }
        // Away from a node and back once is a resolution; more is the ring following the link.
        if self.fault.unsteady() && self.most_moves > 2 {
            problems.push(format!(
                "{}: a child changed host {} times: the ring followed the link's ups and downs",
                self.fault.label(),
                self.most_moves
            ));
        }
        problems.extend(
            self.contradictions
                .iter()
                .map(|c| format!("{}: {c}", self.fault.label())),
        );
        problems
    }
}

/// Applies `fault` to the link between n1 and n5, asks durable starts and stops through every
/// node meanwhile, heals, waits until the cluster settled, and reads what the watch saw.
fn scenario(
    c: &Cluster,
    watch: &Watch,
    fault: Fault,
    bound: Duration,
    expect: &mut Expect,
) -> Finding {
    let link = fault.link();
    let label = fault.label();
    let mut pool = stop_pool(watch, &expect.declared);
    let first = plan(label, 1, &mut pool);
    let second = plan(label, 2, &mut pool);
    expect
        .universe
        .extend(first.iter().chain(&second).map(|r| r.id.clone()));
    let began = Instant::now();
    c.net.block(link).unwrap_or_else(|e| panic!("{label}: {e}"));
    let (requests, resolution, loss, healed) = std::thread::scope(|scope| {
        let first = scope.spawn(move || issue(&c.clients, first));
        let (second, resolved, loss, healed) = match fault {
            Fault::Cut | Fault::OneWay => {
                // The second batch once the cluster knows of the partial partition.
                let _ = wait_for("a node to see the link down", bound, || {
                    let seen = c.clients.iter().any(|client| {
                        client
                            .health()
                            .is_ok_and(|h| h.set_aside || !h.indirectly_connected.is_empty())
                    });
                    if !seen {
                        std::thread::sleep(POLL);
                    }
                    seen.then_some(())
                });
                let second = scope.spawn(move || issue(&c.clients, second));
                let resolved = hold_until_resolved(c, watch, &expect.plain, began, bound);
                c.net
                    .unblock(link)
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                (second, Some(resolved), None, Instant::now())
            }
            Fault::Flapping => {
                let mut second = Some(second);
                let mut handle = None;
                let mut healed = began;
                for cycle in 0..FLAP_CYCLES {
                    if cycle > 0 {
                        c.net.block(link).unwrap_or_else(|e| panic!("{label}: {e}"));
                    }
                    std::thread::sleep(FLAP_HALF);
                    c.net
                        .unblock(link)
                        .unwrap_or_else(|e| panic!("{label}: {e}"));
                    healed = Instant::now();
                    if cycle == FLAP_CYCLES / 2 {
                        let batch = second.take().expect("one second batch");
                        handle = Some(scope.spawn(move || issue(&c.clients, batch)));
                    }
                    std::thread::sleep(FLAP_HALF);
                }
                (
                    handle.expect("the second batch was sent"),
                    None,
                    None,
                    healed,
                )
            }
            Fault::Lossy => {
                let mut seen_down = false;
                let mut second = Some(second);
                let mut handle = None;
                while began.elapsed() < LOSSY_FOR {
                    seen_down |= c.clients.iter().any(|client| {
                        client
                            .health()
                            .is_ok_and(|h| h.set_aside || !h.indirectly_connected.is_empty())
                    });
                    if began.elapsed() >= LOSSY_FOR / 2 {
                        if let Some(batch) = second.take() {
                            handle = Some(scope.spawn(move || issue(&c.clients, batch)));
                        }
                    }
                    std::thread::sleep(POLL);
                }
                let dropped = c
                    .net
                    .dropped(link)
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                c.net
                    .unblock(link)
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                let loss = Loss { dropped, seen_down };
                let second = handle.expect("the second batch was sent");
                (second, None, Some(loss), Instant::now())
            }
        };
        let mut requests = first.join().expect("the first batch's thread");
        requests.extend(second.join().expect("the second batch's thread"));
        (requests, resolved, loss, healed)
    });
    let outcome = settle(c, expect, &format!("{label}: settled after the heal"));
    // One more reading of every copy after the settled one, so the timeline ends settled too.
    let settled_at = Instant::now();
    wait_for("the watch's next reading", DEADLINE, || {
        let timeline = watch.timeline();
        c.members
            .iter()
            .all(|m| timeline.last_report(m).is_some_and(|at| at > settled_at))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{label}: {e} ({} failed polls)", watch.failures()));
    let end = Instant::now();
    let timeline = watch.timeline();
    let runs = timeline.double_runs(began, end);
    let worst = runs.iter().max_by_key(|r| r.lasted).cloned();
    let since = |at: Instant| at.saturating_duration_since(began).as_millis();
    let doubled = runs
        .iter()
        .map(|r| r.child.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    let most_moves = timeline.moves(began, end).into_values().max().unwrap_or(0);
    let mut contradictions: Vec<String> = requests
        .iter()
        .filter_map(|r| outcome.contradicts(r, &requests))
        .collect();
    let touched: BTreeSet<&String> = requests.iter().map(|r| &r.id).collect();
    for id in expect.declared.iter().filter(|id| !touched.contains(id)) {
        if !(outcome.declared.contains(id) && outcome.runs_once(id)) {
            contradictions.push(format!(
                "untouched {id}: declared {}, runs: {}",
                outcome.declared.contains(id),
                outcome.census.describe(id)
            ));
        }
    }
    let answers = summary(&requests);
    expect.declared = outcome.declared;
    Finding {
        fault,
        moments: format!(
            "healed_ms={} settled_ms={}{}",
            since(healed),
            since(settled_at),
            worst.as_ref().map_or(String::new(), |w| format!(
                " worst_began_ms={}",
                since(w.began)
            ))
        ),
        bound,
        worst,
        doubled,
        most_moves,
        resolution,
        loss,
        answers,
        contradictions,
    }
}

/// What a lossy link did.
struct Loss {
    dropped: u64,
    seen_down: bool,
}

/// Durable children to stop, those n1 or n5 runs first (the link's ends are where a stop
/// meets the fault).
fn stop_pool(watch: &Watch, declared: &BTreeSet<String>) -> Vec<String> {
    let running = watch.timeline().running_now();
    let ends = [format!("n{A}@"), format!("n{E}@")];
    let on_an_end = |id: &String| {
        running
            .get(id)
            .is_some_and(|nodes| nodes.iter().any(|n| ends.iter().any(|e| n.starts_with(e))))
    };
    let (mut pool, rest): (Vec<String>, Vec<String>) =
        declared.iter().cloned().partition(on_an_end);
    // Popped from the back: the ends' children first.
    pool.splice(0..0, rest);
    pool
}

/// How the cluster dealt with a cut before it healed.
struct Resolution {
    /// Every child ran on exactly one node in the end.
    once: bool,
    /// From the cut until then (or until the test gave up).
    after: Duration,
    /// The nodes whose health said `set_aside` then.
    set_aside: Vec<String>,
}

/// Holds a cut until the cluster resolved it: every child runs on exactly one node, and a node
/// says it is set aside or the bound (and two readings more) passed. Gives up early once a
/// child has run on two nodes past the bound, or at the deadline.
fn hold_until_resolved(
    c: &Cluster,
    watch: &Watch,
    plain: &BTreeSet<String>,
    began: Instant,
    bound: Duration,
) -> Resolution {
    let held = bound + 2 * POLL;
    let set_aside = || -> Vec<String> {
        c.clients
            .iter()
            .filter_map(|client| client.health().ok())
            .filter(|h| h.set_aside)
            .map(|h| h.node)
            .collect()
    };
    let once = wait_for("every child once while the link is down", DEADLINE, || {
        let now = Instant::now();
        let timeline = watch.timeline();
        if timeline
            .double_runs(began, now)
            .iter()
            .any(|r| r.ongoing && r.lasted > bound)
        {
            return Some(false);
        }
        let running = timeline.running_now();
        let once = running.values().all(|nodes| nodes.len() == 1)
            && plain
                .iter()
                .all(|id| running.get(id).is_some_and(|n| n.len() == 1));
        if once && (now.duration_since(began) >= held || !set_aside().is_empty()) {
            return Some(true);
        }
        std::thread::sleep(POLL / 2);
        None
    })
    .unwrap_or(false);
    Resolution {
        once,
        after: began.elapsed(),
        set_aside: set_aside(),
    }
}
