//! Real `process-hub node` processes on loopback, driven through their admin APIs: three nodes
//! form a cluster; children started on one are visible on all; a SIGKILLed node's children run
//! again on the survivors; a node restarted on its data directory rejoins; a node with the wrong
//! cookie never becomes a member, reports itself isolated and is refused once in the others'
//! logs; nodes that dial each other at once, and a restart among them, log no warning.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::cli::node_settings::BackendChoice;
use process_hub_actors::harness::{wait_for, AdminClient, ClusterOptions, LocalCluster};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);
const CHILDREN: usize = 30;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn formed(n: usize, options: &ClusterOptions) -> LocalCluster {
    let mut cluster = LocalCluster::start(binary(), n, options, None).expect("nodes spawn");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    cluster
}

fn specs(prefix: &str, n: usize) -> Vec<StartSpec> {
    (0..n)
        .map(|i| StartSpec::new(format!("{prefix}-{i:03}"), "counter"))
        .collect()
}

/// The hosts of every child in `client`'s registry copy, if it lists exactly `expected` children
/// and each runs on exactly one node of `live`.
fn hosts(client: &AdminClient, expected: usize, live: &BTreeSet<String>) -> Option<Vec<String>> {
    let children = client.children().ok()?;
    if children.len() != expected {
        return None;
    }
    children
        .iter()
        .map(|c| match c.nodes.as_slice() {
            [one] if live.contains(&one.node) => Some(one.node.clone()),
            _ => None,
        })
        .collect()
}

/// Waits until every client's registry places all `expected` children on `live` nodes, all
/// copies agreeing; returns the hosts.
fn wait_placed(
    cluster: &LocalCluster,
    clients: &[AdminClient],
    expected: usize,
    live: &BTreeSet<String>,
) -> Vec<String> {
    let result = wait_for("every registry to place every child", DEADLINE, || {
        let views: Option<Vec<Vec<String>>> =
            clients.iter().map(|c| hosts(c, expected, live)).collect();
        let views = views?;
        views
            .windows(2)
            .all(|w| w[0] == w[1])
            .then(|| views[0].clone())
    });
    result.unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)))
}

fn names(cluster: &LocalCluster) -> BTreeSet<String> {
    cluster.nodes.iter().map(|n| n.node_name.clone()).collect()
}

#[test]
fn three_nodes_form_a_cluster_and_share_every_child() {
    let mut cluster = formed(3, &ClusterOptions::default());
    let all = names(&cluster);
    for client in cluster.live_clients() {
        let health = client.health().expect("health");
        assert_eq!(
            health.members,
            all.iter().cloned().collect::<Vec<_>>(),
            "sorted, self included"
        );
    }
    // A node that has done nothing yet exports every family, each sample with hub and node.
    let scrape = cluster.nodes[0]
        .client()
        .get_text("/metrics")
        .expect("metrics");
    let families: BTreeSet<&str> = scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        families.len() >= 25,
        "{} families:\n{scrape}",
        families.len()
    );
    let node = &cluster.nodes[0].node_name;
    for line in scrape
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        assert!(
            line.contains("hub=\"") && line.contains(&format!("node=\"{node}\"")),
            "a sample without hub and node: {line}"
        );
    }
    // Present: at 0 where nothing failed yet, above 0 where a figure is known.
    type Check = fn(f64) -> bool;
    let checks: [(&str, Check); 6] = [
        ("process_hub_child_start_failures_total", |v: f64| v == 0.0),
        ("process_hub_refused_peer_input_total", |v: f64| v == 0.0),
        ("process_hub_wire_frames_dropped_total", |v: f64| v >= 0.0),
        ("process_hub_calls_total", |v: f64| v == 0.0),
        ("process_hub_build_info", |v: f64| v == 1.0),
        ("process_resident_memory_bytes", |v: f64| v > 0.0),
    ];
    for (name, check) in checks {
        let value = series(&scrape, name, node);
        assert!(value.is_some_and(check), "{name} = {value:?}:\n{scrape}");
    }
    let started = cluster.nodes[1]
        .client()
        .start(&specs("c", CHILDREN))
        .expect("start");
    assert_eq!(started.started.len(), CHILDREN, "{started:?}");
    let clients = cluster.live_clients();
    let placed = wait_placed(&cluster, &clients, CHILDREN, &all);
    let used: BTreeSet<&String> = placed.iter().collect();
    assert!(
        used.len() > 1,
        "children are spread over the ring, not all on one node: {used:?}"
    );
    // Every node answers a lookup of every child with the same host.
    for client in &clients {
        let one = client.child("c-007").expect("lookup from any node");
        assert_eq!(one.nodes[0].node, placed[7]);
    }
    // The summary every node gives agrees with the listings.
    let mut per_node = std::collections::BTreeMap::new();
    for host in &placed {
        *per_node.entry(host.clone()).or_insert(0usize) += 1;
    }
    for client in &clients {
        let summary = client.registry_summary().expect("summary");
        assert!(summary.complete(CHILDREN), "{summary:?}");
        assert_eq!(summary.per_node, per_node);
    }
}

#[test]
fn a_sigkilled_nodes_children_run_again_on_the_survivors() {
    let mut cluster = formed(3, &ClusterOptions::default());
    let all = names(&cluster);
    cluster.nodes[0]
        .client()
        .start(&specs("f", CHILDREN))
        .expect("start");
    let clients = cluster.live_clients();
    let before = wait_placed(&cluster, &clients, CHILDREN, &all);
    let victim = cluster
        .nodes
        .iter()
        .position(|n| n.node_name != cluster.nodes[0].node_name && before.contains(&n.node_name))
        .expect("some node other than the entry hosts children");
    let victim_name = cluster.nodes[victim].node_name.clone();
    cluster.nodes[victim].kill();
    let live: BTreeSet<String> = all.iter().filter(|n| **n != victim_name).cloned().collect();
    let survivors = cluster.live_clients();
    let after = wait_placed(&cluster, &survivors, CHILDREN, &live);
    // Children of the survivors did not move; the victim's went to survivors.
    for (b, a) in before.iter().zip(&after) {
        if *b != victim_name {
            assert_eq!(a, b, "a survivor's child stays where it was");
        }
    }
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
}

#[test]
fn a_node_restarted_on_its_data_directory_rejoins() {
    let options = ClusterOptions {
        backend: BackendChoice::Durable,
        ..ClusterOptions::default()
    };
    let mut cluster = formed(3, &options);
    let all = names(&cluster);
    cluster.nodes[0]
        .client()
        .start(&specs("r", CHILDREN))
        .expect("start");
    let clients = cluster.live_clients();
    wait_placed(&cluster, &clients, CHILDREN, &all);

    cluster.nodes[2].restart().expect("restart");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let clients = cluster.live_clients();
    assert_eq!(clients.len(), 3);
    let placed = wait_placed(&cluster, &clients, CHILDREN, &all);
    assert_eq!(placed.len(), CHILDREN);
}

/// The value of the series `name{...node="<node>"...}` in a Prometheus text `scrape`.
fn series(scrape: &str, name: &str, node: &str) -> Option<f64> {
    scrape
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| l.contains(&format!("node=\"{node}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The log lines at WARN or ERROR that speak of sessions, seals, frames or cookies.
fn session_warnings(log: &str) -> Vec<&str> {
    const ABOUT: [&str; 7] = [
        "session",
        "seal",
        "frame",
        "cookie",
        "authenticat",
        "refused",
        "isolated",
    ];
    log.lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .filter(|l| {
            let l = l.to_lowercase();
            ABOUT.iter().any(|word| l.contains(word))
        })
        .collect()
}

#[test]
fn a_node_with_the_wrong_cookie_never_becomes_a_member() {
    let options = ClusterOptions::default();
    let mut cluster = formed(2, &options);
    let impostor = cluster
        .add_node(&ClusterOptions {
            cookie: "not-the-cookie".into(),
            // Short, so that the test sees it isolated soon (default 10 s).
            extra_args: vec!["--isolated-after-ms".into(), "300".into()],
            ..options.clone()
        })
        .expect("impostor spawns");
    let impostor_name = cluster.nodes[impostor].node_name.clone();
    let impostor_client = cluster.nodes[impostor].client();
    wait_for("the impostor to serve its admin API", DEADLINE, || {
        impostor_client.health().ok()
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    // A node with the right cookie, started after the impostor, gets in: by the time it is a
    // member everywhere, the impostor has had as long to try.
    let honest = cluster.add_node(&options).expect("honest node spawns");
    let expected: Vec<String> = [0, 1, honest]
        .iter()
        .map(|&i| cluster.nodes[i].node_name.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let members_clients: Vec<AdminClient> = [0, 1, honest]
        .iter()
        .map(|&i| cluster.nodes[i].client())
        .collect();
    wait_for(
        "the honest node to be a member everywhere",
        DEADLINE,
        || {
            members_clients
                .iter()
                .all(|c| c.health().is_ok_and(|h| h.members == expected))
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    for client in &members_clients {
        let members = client.health().expect("health").members;
        assert!(!members.contains(&impostor_name), "{members:?}");
    }
    assert_eq!(
        impostor_client.health().expect("impostor health").members,
        vec![impostor_name.clone()]
    );

    // The impostor says it is isolated, and why: its seed (node 0) refused its cookie.
    let seed = cluster.nodes[0].listen.to_string();
    let health = wait_for("the impostor to report its seed refused", DEADLINE, || {
        let h = impostor_client.health().ok()?;
        let refused = h
            .unreached_seeds
            .iter()
            .any(|u| u.seed == seed && u.reason == "cookie_refused");
        refused.then_some(h)
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e}
{}",
            cluster.log_tails(40)
        )
    });
    assert_eq!(health.status, "isolated", "{health:?}");
    assert!(health.isolated);
    assert_eq!(health.members, vec![impostor_name.clone()]);
    assert!(health.peer_auth_failures > 0, "{health:?}");
    let not_ready = impostor_client
        .ready()
        .expect_err("an isolated node is not ready");
    assert_eq!(not_ready.status(), Some(503), "{not_ready}");
    assert!(not_ready.to_string().contains("isolated"), "{not_ready}");
    let scrape = impostor_client.get_text("/metrics").expect("metrics");
    let refusals = series(
        &scrape,
        "process_hub_peer_auth_failures_total",
        &impostor_name,
    );
    assert!(refusals.is_some_and(|n| n > 0.0), "{scrape}");
    assert_eq!(
        series(&scrape, "process_hub_isolated", &impostor_name),
        Some(1.0)
    );

    // The members count it too, stay ok and ready, and warn of it once however often it
    // tries.
    let seed_client = cluster.nodes[0].client();
    let seed_name = cluster.nodes[0].node_name.clone();
    wait_for("node 0 to refuse the impostor twice", DEADLINE, || {
        let h = seed_client.health().ok()?;
        (h.peer_auth_failures_by_peer.get(&impostor_name).copied() >= Some(2)).then_some(())
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e}
{}",
            cluster.log_tails(40)
        )
    });
    let ready = seed_client.ready().expect("a member is ready");
    assert_eq!(ready.status, "ok");
    let scrape = seed_client.get_text("/metrics").expect("metrics");
    let refusals = series(&scrape, "process_hub_peer_auth_failures_total", &seed_name);
    assert!(refusals.is_some_and(|n| n >= 2.0), "{scrape}");
    let log = cluster.nodes[0].log();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("peer refused"))
        .collect();
    assert_eq!(warned.len(), 1, "one warning per refused peer:\n{log}");
    assert!(warned[0].contains(&impostor_name), "{}", warned[0]);
}

#[test]
fn nodes_that_dial_each_other_at_once_and_a_restart_among_them_log_no_warning() {
    // Every node lists every node as a seed and all start at once: they dial each other, and
    // ractor_cluster closes one session of each pair.
    let options = ClusterOptions {
        mesh: true,
        ..ClusterOptions::default()
    };
    let mut cluster = formed(3, &options);
    cluster.nodes[2].restart().expect("restart");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    // A session closed before authenticating is judged within the verdict's grace: let every
    // close of the restart fall due before reading what was logged.
    std::thread::sleep(
        process_hub::core::isolation::CLOSE_VERDICT_GRACE + Duration::from_millis(500),
    );
    for node in &cluster.nodes {
        let health = node.client().health().expect("health");
        assert_eq!(health.status, "ok", "{}: {health:?}", node.name);
        assert_eq!(health.peer_auth_failures, 0, "{}: {health:?}", node.name);
        let log = node.log();
        let warnings = session_warnings(&log);
        assert!(
            warnings.is_empty(),
            "{} warned about sessions or seals:\n{}",
            node.name,
            warnings.join("\n")
        );
        // Its stderr is a file: no colour codes.
        assert!(
            !log.contains("\x1b["),
            "{}: colour codes in a file",
            node.name
        );
        assert!(log.contains("ready: node"), "{}: {log}", node.name);
    }
}

#[test]
fn a_node_stopped_with_sigterm_hands_its_children_over_and_exits_zero() {
    // A grace period far beyond the test's deadline: only the graceful leave can move the
    // leaving node's children in time, not the survivors' failure handling.
    let options = ClusterOptions {
        extra_args: vec!["--nodedown-grace-ms".into(), "600000".into()],
        ..ClusterOptions::default()
    };
    let mut cluster = formed(3, &options);
    let all = names(&cluster);
    cluster.nodes[0]
        .client()
        .start(&specs("g", CHILDREN))
        .expect("start");
    let clients = cluster.live_clients();
    let before = wait_placed(&cluster, &clients, CHILDREN, &all);
    let leaver = cluster
        .nodes
        .iter()
        .position(|n| n.node_name != cluster.nodes[0].node_name && before.contains(&n.node_name))
        .expect("some node other than the entry hosts children");
    let leaver_name = cluster.nodes[leaver].node_name.clone();
    let status = cluster.nodes[leaver]
        .terminate_status(DEADLINE)
        .unwrap_or_else(|| panic!("no exit on SIGTERM\n{}", cluster.log_tails(40)));
    assert!(status.success(), "exit status {status:?}");
    let live: BTreeSet<String> = all.iter().filter(|n| **n != leaver_name).cloned().collect();
    let survivors = cluster.live_clients();
    let after = wait_placed(&cluster, &survivors, CHILDREN, &live);
    for (b, a) in before.iter().zip(&after) {
        if *b != leaver_name {
            assert_eq!(a, b, "a survivor's child stays where it was");
        }
    }
}
