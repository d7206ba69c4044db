//! Real `process-hub node --sync gossip` processes on loopback, driven through their admin APIs
//! as an operator would: children started through one node are listed, bound to the same nodes,
//! by every node; a node killed with SIGKILL and started again (a new gossip stream) catches up,
//! and what is started through it reaches every other node.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::harness::{wait_for, AdminClient, ClusterOptions, LocalCluster};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(90);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn counter(id: String) -> StartSpec {
    StartSpec::new(id, "counter")
}

/// `id -> nodes` as one node's registry lists it.
fn placement(client: &AdminClient) -> Option<BTreeMap<String, Vec<String>>> {
    let children = client.children().ok()?;
    Some(
        children
            .into_iter()
            .map(|c| (c.id, c.nodes.into_iter().map(|n| n.node).collect()))
            .collect(),
    )
}

/// Waits until every live node lists exactly `expected` ids, each placed alike everywhere.
fn wait_agree(cluster: &mut LocalCluster, expected: usize, what: &str) {
    let clients = cluster.live_clients();
    wait_for(what, DEADLINE, || {
        let views: Vec<_> = clients.iter().map(placement).collect::<Option<_>>()?;
        let first = views.first()?;
        (first.len() == expected
            && first.values().all(|nodes| nodes.len() == 1)
            && views.iter().all(|v| v == first))
        .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(30)));
}

#[test]
fn gossiping_nodes_agree_and_a_restarted_node_catches_up() {
    let options = ClusterOptions {
        extra_args: vec!["--sync".into(), "gossip:500:1".into()],
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 4, &options, None).expect("nodes spawn");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let entry = cluster.nodes[0].client();
    let first: Vec<StartSpec> = (0..120).map(|i| counter(format!("g-{i:03}"))).collect();
    let started = entry.start(&first).expect("start answers");
    assert_eq!(started.started.len(), 120, "{:?}", started.errors.first());
    wait_agree(&mut cluster, 120, "every node lists the 120 children alike");

    cluster.nodes[3].kill();
    cluster.nodes[3].restart().expect("restart");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    wait_agree(&mut cluster, 120, "the restarted node catches up");

    let through_restarted = cluster.nodes[3].client();
    let second: Vec<StartSpec> = (0..60).map(|i| counter(format!("h-{i:03}"))).collect();
    let started = through_restarted.start(&second).expect("start answers");
    assert_eq!(started.started.len(), 60, "{:?}", started.errors.first());
    wait_agree(&mut cluster, 180, "its new stream reaches every node");
    for id in ["g-007", "h-042"] {
        let stopped = entry.stop(id).expect("stop answers");
        assert_eq!(stopped.stopped.len(), 1, "{stopped:?}");
    }
    wait_agree(&mut cluster, 178, "stops reach every node");
    cluster.shutdown(Duration::from_secs(10));
}
