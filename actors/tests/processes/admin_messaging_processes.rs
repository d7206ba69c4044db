//! Messaging children over the admin API of real `process-hub node` processes: a command sent
//! to one node reaches a child running on another, its answer comes back as JSON, and an id no
//! node runs is 404.

use std::path::Path;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::harness::{wait_for, ClusterOptions, LocalCluster};
use serde_json::json;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn counter(id: &str, start: i64) -> StartSpec {
    StartSpec {
        args: Some(json!({ "start": start })),
        ..StartSpec::new(id, "counter")
    }
}

#[test]
fn a_command_posted_to_one_node_reaches_a_child_on_another() {
    let mut cluster =
        LocalCluster::start(binary(), 2, &ClusterOptions::default(), None).expect("nodes spawn");
    cluster
        .wait_formed(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[1].log_tail(30)));
    let first = cluster.nodes[0].client();
    let second = cluster.nodes[1].client();
    let specs: Vec<StartSpec> = (0..8).map(|i| counter(&format!("c{i}"), 100 * i)).collect();
    let started = first.start(&specs).expect("start answers");
    assert_eq!(started.started.len(), 8, "{started:?}");
    // A child the second node runs, messaged through the first node's API.
    let remote = started
        .started
        .iter()
        .find(|c| c.nodes.iter().any(|n| n.node == cluster.nodes[1].node_name))
        .expect("eight children on two nodes: some run on the second")
        .id
        .clone();
    let start: i64 = remote[1..].parse::<i64>().expect("cN") * 100;

    let get = json!({"kind": "counter", "command": {"op": "get"}});
    let answer = first.call(&remote, &get, 5_000).expect("call answers");
    assert_eq!(answer.id, remote);
    assert_eq!(answer.answer, json!(start));
    assert_eq!(
        answer.node.as_deref(),
        Some(cluster.nodes[1].node_name.as_str())
    );

    let accepted = first
        .cast(
            &remote,
            &json!({"kind": "counter", "command": {"op": "increment", "by": 7}}),
        )
        .expect("cast accepted");
    assert_eq!(accepted.id, remote);
    // A cast through the command path is handled on the host in a task of its own: a call
    // sent after it may be handled first (typed references keep a sender's order), so the
    // cast is awaited by its effect.
    wait_for(
        "the cast reaches the child",
        Duration::from_secs(30),
        || {
            let answer = first.call(&remote, &get, 5_000).ok()?;
            (answer.answer == json!(start + 7)).then_some(())
        },
    )
    .expect("the cast arrived");
    // The node hosting it answers the same.
    let answer = second.call(&remote, &get, 5_000).expect("call answers");
    assert_eq!(answer.answer, json!(start + 7));

    let err = first.call("ghost", &get, 5_000).expect_err("unknown id");
    assert_eq!(err.status(), Some(404), "{err}");
    let err = first
        .call(
            &remote,
            &json!({"kind": "counter", "command": {"op": "fly"}}),
            5_000,
        )
        .expect_err("a command the kind refuses");
    assert_eq!(err.status(), Some(422), "{err}");

    for node in &mut cluster.nodes {
        let status = node
            .terminate_status(Duration::from_secs(30))
            .expect("the node exits on SIGTERM");
        assert!(status.success(), "{status:?}");
    }
}
