//! A hub reached from a client node: two `process-hub node` processes run hub `remote`; this
//! test process joins their cluster as a bare `ClusterNode` that runs no hub at all, and drives
//! the hub through its remote endpoints (`RemoteHub`): starts, lookups, calls and casts to
//! children, the members, stops, and the typed refusals of bad requests.
//!
//! The test runs alone in a process of its own (`common::alone`): ractor's pg groups are
//! process-global, so that process is one node.

use crate::common::alone;
use crate::common::remote_start::start_through;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Duration;

use process_hub::cluster::node::{ClusterConfig, ClusterNode};
use process_hub::{ChildSpec, RemoteHub, RemoteHubError, StartOptions};
use process_hub_actors::harness::{ClusterOptions, LocalCluster};

const DEADLINE: Duration = Duration::from_secs(60);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn refused_code(result: Result<impl std::fmt::Debug, RemoteHubError>) -> String {
    match result {
        Err(RemoteHubError::Refused { failure, .. }) => failure.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_node_drives_the_hub_through_its_remote_endpoints() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_client_node_drives_the_hub_through_its_remote_endpoints",
    ) {
        return;
    }
    let options = ClusterOptions {
        hub: "remote".into(),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 2, &options, None).expect("nodes spawn");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
    let seeds = cluster.nodes.iter().map(|n| n.listen.to_string()).collect();
    let config = ClusterConfig {
        bind: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        seeds,
        ..ClusterConfig::new("client", "127.0.0.1", 0, options.cookie.clone())
    };
    let client = ClusterNode::start(config)
        .await
        .expect("the client node starts");

    let hub = RemoteHub::any("remote").timeout(Duration::from_secs(20));
    let start = tokio::time::Instant::now();
    while hub.endpoints() != names {
        assert!(
            start.elapsed() < DEADLINE,
            "endpoints seen: {:?}, nodes: {names:?}\n{}",
            hub.endpoints(),
            cluster.log_tails(40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Starts through any endpoint land on their owners, across both nodes.
    let specs: Vec<ChildSpec> = (0..12)
        .map(|i| ChildSpec::new(format!("room-{i}"), "counter"))
        .collect();
    start_through(&hub, &specs, StartOptions::new().tag("rooms")).await;

    // Lookups, calls and casts through each node's endpoint, whichever node runs the child.
    let increment = br#"{"kind":"counter","command":{"op":"increment","by":3}}"#.to_vec();
    let get = br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec();
    let mut hosts = std::collections::BTreeSet::new();
    for name in &names {
        let on = RemoteHub::on("remote", name.clone()).timeout(Duration::from_secs(20));
        assert_eq!(on.nodes().await.unwrap(), names);
        for spec in &specs {
            // A start is answered once its host recorded it; another node's copy learns it a
            // moment later (the host's delta): a lookup that finds nothing yet is asked again.
            let asked = tokio::time::Instant::now();
            let info = loop {
                if let Some(info) = on.child_lookup(spec.id.clone()).await.unwrap() {
                    break info;
                }
                assert!(
                    asked.elapsed() < Duration::from_secs(10),
                    "{} unknown to {name} 10 s after its start",
                    spec.id
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(
                info.metadata.unwrap().get("tag").map(String::as_str),
                Some("rooms")
            );
            hosts.insert(info.nodes[0].0.clone());
            on.cast_child(spec.id.clone(), increment.clone())
                .await
                .unwrap();
        }
    }
    assert_eq!(hosts.len(), 2, "the children run on both nodes");
    for spec in &specs {
        // One cast through each endpoint: 6, once both arrived (casts from different nodes
        // are not ordered with this call).
        let start = tokio::time::Instant::now();
        loop {
            let answer = hub.call_child(spec.id.clone(), get.clone()).await.unwrap();
            if answer == b"6" {
                break;
            }
            assert!(start.elapsed() < DEADLINE, "{} answers {answer:?}", spec.id);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // Bad requests are typed refusals; nothing panics, nothing starts.
    assert_eq!(
        refused_code(hub.call_child("nobody", get.clone()).await),
        "not_found"
    );
    assert_eq!(
        refused_code(hub.call_child("room-0", b"not json".to_vec()).await),
        "command_failed"
    );
    assert_eq!(
        refused_code(
            hub.start_children(vec![ChildSpec::new("", "counter")], StartOptions::new())
                .await
        ),
        "invalid_child"
    );
    assert_eq!(
        refused_code(
            hub.start_children(
                vec![ChildSpec::new("ok", "counter")],
                StartOptions::new().metadata("__process_hub__", "x")
            )
            .await
        ),
        "invalid_child"
    );
    assert_eq!(
        refused_code(hub.start_children(Vec::new(), StartOptions::new()).await),
        "no_children"
    );
    let dup = hub
        .start_children(vec![specs[0].clone()], StartOptions::new())
        .await
        .unwrap();
    assert_eq!(dup.errors.len(), 1, "a duplicate is a per-child error");
    assert!(matches!(
        RemoteHub::any("no-such-hub").nodes().await,
        Err(RemoteHubError::NoEndpoint { .. })
    ));
    assert!(matches!(
        RemoteHub::on("remote", "z@nowhere").nodes().await,
        Err(RemoteHubError::NoEndpoint { .. })
    ));

    // Stops.
    let ids = specs.iter().map(|s| s.id.clone()).collect();
    let stopped = hub.stop_children(ids).await.unwrap();
    assert_eq!(stopped.stopped.len(), 12, "{stopped:?}");
    assert_eq!(hub.child_lookup("room-0").await.unwrap(), None);
    client.shutdown();
}
