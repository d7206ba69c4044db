//! Typed references and monitors across real node processes: this test process is a node of
//! its own (a `ClusterNode` and the hub), joined to two `process-hub node` processes on
//! loopback. It calls and casts to counters hosted by the other processes with
//! `ChildRef<CounterMsg>`, monitors one, SIGKILLs its host, and sees the monitor fire
//! `node_down`, the child answer `between_nodes` during the grace, and answer again once it
//! is re-placed on a survivor.

use crate::common::alone;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use process_hub::cluster::node::{ClusterConfig, ClusterNode};
use process_hub::{
    ChildId, ChildRefError, ChildSpec, DownReason, Hub, MonitorOptions, ProcessHub, StartOptions,
};
use process_hub_actors::counter::CounterMsg;
use process_hub_actors::harness::{ClusterOptions, LocalCluster};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);
/// Long enough that a killed host's children stay between nodes while the test looks.
const GRACE: Duration = Duration::from_secs(8);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_calls_and_monitors_across_node_processes() {
    if alone::ran_in_own_process(
        module_path!(),
        "typed_calls_and_monitors_across_node_processes",
    ) {
        return;
    }
    let options = ClusterOptions {
        extra_args: vec!["--nodedown-grace-ms".into(), GRACE.as_millis().to_string()],
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 2, &options, None).expect("nodes spawn");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    let port = process_hub_actors::harness::free_port().unwrap();
    let mut config = ClusterConfig::new("t", "127.0.0.1", port, options.cookie.clone());
    config.bind = Some(std::net::Ipv4Addr::LOCALHOST.into());
    config.seeds = vec![cluster.nodes[0].listen.to_string()];
    let node = Arc::new(ClusterNode::start(config).await.expect("node starts"));
    let hub_config = ProcessHub::builder(options.hub.clone())
        .cluster_timing(
            Duration::from_secs(15),
            GRACE,
            Duration::from_millis(200),
            Duration::from_secs(2),
        )
        .build()
        .unwrap();
    let (hub, _) = Hub::builder(hub_config, process_hub_actors::default_kinds())
        .network(node)
        .spawn()
        .await
        .unwrap();
    let others: Vec<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
    wait_until("the test node joins both processes", || {
        let nodes = hub.nodes(false);
        others.iter().all(|o| nodes.contains(o))
    })
    .await;

    // Counters until each process hosts one.
    let mut hosted: Vec<(String, ChildId)> = Vec::new();
    for i in 0..64 {
        if others.iter().all(|o| hosted.iter().any(|(h, _)| h == o)) {
            break;
        }
        let spec = ChildSpec::new(format!("typed-{i}"), "counter");
        let result = hub
            .start_child(spec.clone(), StartOptions::new())
            .await
            .unwrap();
        let Some(started) = result.started.first() else {
            panic!("{result:?}");
        };
        if let Some((host, _)) = started.nodes.first() {
            if others.contains(host) && !hosted.iter().any(|(h, _)| h == host) {
                hosted.push((host.clone(), spec.id));
            }
        }
    }
    assert_eq!(hosted.len(), 2, "each process hosts a counter: {hosted:?}");

    for (host, id) in &hosted {
        let child = hub.child_ref::<CounterMsg>(id.clone());
        for _ in 0..5 {
            child.cast(CounterMsg::Increment(1)).unwrap();
        }
        // The call follows the casts on the same link: they arrived first.
        let value = child.call(CounterMsg::Get, DEADLINE).await;
        assert_eq!(value, Ok(5), "{id} on {host}");
    }

    let (host, id) = hosted[0].clone();
    let (_, mut down) = hub.monitor_channel(id.clone(), MonitorOptions::new());
    let index = cluster
        .nodes
        .iter()
        .position(|n| n.node_name == host)
        .unwrap();
    cluster.nodes[index].kill();
    let fired = tokio::time::timeout(DEADLINE, down.recv())
        .await
        .expect("the monitor fires")
        .unwrap();
    assert_eq!(fired.reason, DownReason::NodeDown { node: host.clone() });
    assert_eq!(fired.id, id);

    // Within the grace the child is between nodes, naming its dead host. The monitor may fire
    // (the session closed) before the membership marks the host down: until then a call is
    // sent to the host and fails `unreachable` (naming it) or times out.
    let child = hub.child_ref::<CounterMsg>(id.clone());
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let error = child
            .call(CounterMsg::Get, Duration::from_millis(100))
            .await
            .unwrap_err();
        match error {
            ChildRefError::BetweenNodes {
                id: ref of,
                host: Some(ref named),
            } if *of == id && *named == host => break,
            ChildRefError::Unreachable { ref node, .. } if *node == host => {}
            // Sent to the host before its death was noticed: no answer within the 100 ms.
            ChildRefError::Timeout { .. } => {}
            other => panic!("{other:?}"),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the child never showed between nodes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A call that can wait gets its answer from the survivor that runs it now.
    assert_eq!(child.call(CounterMsg::Get, DEADLINE).await, Ok(0));
    // Exactly once.
    assert!(down.try_recv().is_err());
    let _ = hub.shutdown().await;
    cluster.shutdown(Duration::from_secs(5));
}
