//! A request waiting on a node that goes down fails at once, not at `default_timeout` (issue 4):
//! starts and stops sent to a node that crashes before answering, starts and child calls
//! forwarded by a node whose view differs (the next node crashes, or cannot reach the origin),
//! child calls, and a durable start's mutation sent to a leader that crashes.
//!
//! Every hub here has a `default_timeout` of 60 s, and each request must return within
//! [`FAST`] (20 s): far from both, so no tight timing is involved. The request is kept from
//! being answered by holding its frame in the router, then the node is crashed.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{full, stop_all, Options, TestCluster};
use common::{durable, wait_until};
use process_hub::cluster::in_process::InProcessCluster;
use process_hub::cluster::wire::WireMsg;
use process_hub::core::placement::HashRing;
use process_hub::{
    ChildFailure, ChildId, ChildSpec, ChildStartError, ChildStopError, StartError, StartOptions,
    StopOptions,
};

/// The hubs' `default_timeout`: a request that waited for it would fail the test.
const LONG: Duration = Duration::from_secs(60);
/// What each request must return within.
const FAST: Duration = Duration::from_secs(20);

/// Three (or more) hubs with a 60 s `default_timeout` (and the hub's default migration retry).
async fn cluster(seed: u64, names: &[&str]) -> TestCluster {
    cluster_with_grace(seed, names, Duration::from_millis(100)).await
}

/// With `nodedown_grace` `grace` (a long one keeps a down node's children where they are).
async fn cluster_with_grace(seed: u64, names: &[&str], grace: Duration) -> TestCluster {
    let options = Options {
        migration_retry: None,
        ..Options::plain().grace(grace).default_timeout(LONG)
    };
    TestCluster::with_nodes(seed, names, options).await
}

/// `n` ids owned by `owner` in a ring of `members` (and, if given, by `other_owner` in a ring
/// of `other_members`).
fn owned(
    prefix: &str,
    n: usize,
    owner: &str,
    members: &[&str],
    other: Option<(&str, &[&str])>,
) -> Vec<ChildSpec> {
    let ring = HashRing::new(members.iter().map(|m| full(m)));
    let other = other.map(|(o, ms)| (full(o), HashRing::new(ms.iter().map(|m| full(m)))));
    (0..)
        .map(|i| ChildSpec::new(format!("{prefix}-{i}"), "counter"))
        .filter(|s| ring.owner(&s.id) == Some(&full(owner)))
        .filter(|s| {
            other
                .as_ref()
                .is_none_or(|(o, r)| r.owner(&s.id) == Some(o))
        })
        .take(n)
        .collect()
}

/// The spawned request's outcome, which must come long before the hubs' `default_timeout`.
async fn within_fast<T>(task: tokio::task::JoinHandle<T>, what: &str) -> T {
    tokio::time::timeout(FAST, task)
        .await
        .expect(what)
        .expect("the request task panicked")
}

/// Ends the test's frame hold and drops what it held back (the crashed node never gets it).
fn stop_holding(net: &InProcessCluster) {
    net.hold_frames(None);
    net.discard_held();
}

/// Every failure says the node that was to start the child went away.
fn assert_node_unavailable(errors: &[ChildFailure]) {
    for f in errors {
        assert!(
            matches!(f.reason, ChildStartError::NodeUnavailable { .. }),
            "{f:?}"
        );
    }
}

fn id_set<'a>(ids: impl IntoIterator<Item = &'a ChildId>) -> BTreeSet<ChildId> {
    ids.into_iter().cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_routed_to_a_node_that_crashes_before_answering_fails_at_once() {
    let mut nodes = cluster(41, &["a", "b", "c"]).await;
    let to_b = owned("s", 3, "b", &["a", "b", "c"], None);
    let to_c = owned("s", 3, "c", &["a", "b", "c"], None);
    nodes.hold("start_children", "c");
    let a = nodes.hub("a").clone();
    let specs: Vec<ChildSpec> = to_b.iter().chain(&to_c).cloned().collect();
    let start = tokio::spawn(async move { a.start_children(specs, StartOptions::new()).await });
    nodes.wait_held().await;
    nodes.crash("c").await;
    let result = within_fast(start, "the start returns long before default_timeout")
        .await
        .unwrap();
    // Only the part sent to the dead node fails.
    let started = id_set(result.started.iter().map(|s| &s.id));
    assert_eq!(started, id_set(to_b.iter().map(|s| &s.id)));
    let failed = id_set(result.errors.iter().map(|f| &f.id));
    assert_eq!(failed, id_set(to_c.iter().map(|s| &s.id)));
    assert_node_unavailable(&result.errors);
    stop_holding(&nodes.net);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_sent_to_a_node_that_crashes_before_answering_fails_at_once() {
    let mut nodes = cluster(42, &["a", "b", "c"]).await;
    let on_c = owned("t", 3, "c", &["a", "b", "c"], None);
    let result = nodes
        .hub("a")
        .start_children(on_c.clone(), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(result.started.len(), 3, "{:?}", result.errors);
    let ids: Vec<ChildId> = on_c.iter().map(|s| s.id.clone()).collect();
    wait_until("a sees the children", || {
        ids.iter()
            .all(|id| nodes.hub("a").child_lookup(id).is_some())
    })
    .await;
    nodes.hold("stop_children", "c");
    let a = nodes.hub("a").clone();
    let stop_ids = ids.clone();
    let stop = tokio::spawn(async move { a.stop_children(stop_ids, StopOptions::new()).await });
    nodes.wait_held().await;
    nodes.crash("c").await;
    let result = within_fast(stop, "the stop returns long before default_timeout")
        .await
        .unwrap();
    assert!(result.stopped.is_empty(), "{:?}", result.stopped);
    assert_eq!(id_set(result.errors.iter().map(|f| &f.id)), id_set(&ids));
    for f in &result.errors {
        assert!(
            matches!(f.reason, ChildStopError::NodeUnavailable { .. }),
            "{f:?}"
        );
    }
    stop_holding(&nodes.net);
}

/// Cuts a–c: a's ring is {a, b}, b's is {a, b, c}. A child b owns by a's ring and c by b's is
/// sent by a to b, which forwards it to c; c cannot reach a.
async fn forwarding_setup(seed: u64) -> (TestCluster, Vec<ChildSpec>) {
    let nodes = cluster(seed, &["a", "b", "c"]).await;
    nodes.net.cut(&full("a"), &full("c"));
    let (ab, bc) = (vec![full("a"), full("b")], vec![full("b"), full("c")]);
    wait_until("a and c see each other down", || {
        nodes.hub("a").nodes(true) == ab && nodes.hub("c").nodes(true) == bc
    })
    .await;
    let specs = owned("f", 2, "c", &["a", "b", "c"], Some(("b", &["a", "b"])));
    (nodes, specs)
}

#[ignore = "built on one node dropping a peer that another still reaches (a ring without c at a, with c at b); under the reachability rule (docs/cluster.md) that view no longer exists: to be rewritten for an indirectly connected owner"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_start_is_answered_through_the_forwarder_when_the_owner_cannot_reach_the_origin(
) {
    let (nodes, specs) = forwarding_setup(43).await;
    let a = nodes.hub("a").clone();
    let wanted = specs.clone();
    let start = tokio::spawn(async move { a.start_children(wanted, StartOptions::new()).await });
    let result = within_fast(
        start,
        "the answer is relayed by b, not lost on the cut link",
    )
    .await
    .unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        id_set(result.started.iter().map(|s| &s.id)),
        id_set(specs.iter().map(|s| &s.id))
    );
    for s in &result.started {
        assert_eq!(s.nodes[0].0, full("c"), "{s:?}");
    }
}

#[ignore = "built on one node dropping a peer that another still reaches (a ring without c at a, with c at b); under the reachability rule (docs/cluster.md) that view no longer exists: to be rewritten for an indirectly connected owner"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_start_whose_owner_crashes_fails_at_once() {
    let (mut nodes, specs) = forwarding_setup(44).await;
    nodes.hold("start_children", "c");
    let a = nodes.hub("a").clone();
    let wanted = specs.clone();
    let start = tokio::spawn(async move { a.start_children(wanted, StartOptions::new()).await });
    nodes.wait_held().await;
    nodes.crash("c").await;
    let result = within_fast(start, "b fails what it forwarded to c when c goes down")
        .await
        .unwrap();
    assert!(result.started.is_empty(), "{:?}", result.started);
    assert_eq!(
        id_set(result.errors.iter().map(|f| &f.id)),
        id_set(specs.iter().map(|s| &s.id))
    );
    assert_node_unavailable(&result.errors);
    stop_holding(&nodes.net);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_call_to_a_node_that_crashes_fails_at_once() {
    let mut nodes = cluster(45, &["a", "b", "c"]).await;
    let on_c = owned("m", 1, "c", &["a", "b", "c"], None);
    let id = on_c[0].id.clone();
    nodes
        .hub("a")
        .start_children(on_c, StartOptions::new())
        .await
        .unwrap();
    wait_until("a sees the child", || {
        nodes.hub("a").child_lookup(&id).is_some()
    })
    .await;
    nodes.hold("child_call", "c");
    let a = nodes.hub("a").clone();
    let get = br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec();
    let call_id = id.clone();
    let call = tokio::spawn(async move { a.call_child(call_id, get, LONG).await });
    nodes.wait_held().await;
    nodes.crash("c").await;
    let err = within_fast(call, "the call returns long before its timeout")
        .await
        .unwrap_err();
    assert_eq!(err.code, "unreachable", "{err:?}");
    assert_eq!(err.id, id);
    stop_holding(&nodes.net);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_start_whose_leader_crashes_before_answering_is_unknown_at_once() {
    // a (the lowest member) leads the declared list; b's durable start is a mutation sent to a.
    let options = Options::durable().default_timeout(LONG);
    let mut d = TestCluster::with_nodes(46, &["a", "b"], options).await;
    let a = full("a");
    d.net
        .hold_frames(Some(Arc::new(move |_, to, msg: &WireMsg| {
            to == a && msg.kind() == "declared_mutate"
        })));
    let b = d.hub("b").clone();
    let start = tokio::spawn(async move {
        b.start_child(ChildSpec::new("lost", "counter"), durable())
            .await
    });
    wait_until("the mutation is held", || d.net.held_frames() >= 1).await;
    d.crash("a").await;
    let err = within_fast(
        start,
        "the durable start returns long before default_timeout",
    )
    .await
    .unwrap_err();
    // The mutation left b: b cannot tell whether a applied it before crashing, so it says so
    // rather than "refused".
    assert!(matches!(err, StartError::OutcomeUnknown { .. }), "{err}");
    assert!(d.hub("b").local_child(&ChildId::from("lost")).is_none());
    stop_holding(&d.net);
    stop_all(&d).await;
}

#[ignore = "built on one node dropping a peer that another still reaches (a ring without c at a, with c at b); under the reachability rule (docs/cluster.md) that view no longer exists: to be rewritten for an indirectly connected owner"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_child_call_is_relayed_and_fails_at_once_when_the_next_node_crashes() {
    // A long grace: c's child stays bound to c in every registry while c is cut off or down.
    let mut nodes = cluster_with_grace(47, &["a", "b", "c"], LONG).await;
    // Runs on c; by a's ring without c its owner is b, so a sends its calls to b, which
    // forwards them to c (b's registry says c runs it).
    let spec = owned("n", 1, "c", &["a", "b", "c"], Some(("b", &["a", "b"])));
    let id = spec[0].id.clone();
    let result = nodes
        .hub("b")
        .start_children(spec, StartOptions::new())
        .await
        .unwrap();
    assert_eq!(result.started.len(), 1, "{:?}", result.errors);
    wait_until("a sees the child", || {
        nodes.hub("a").child_lookup(&id).is_some()
    })
    .await;
    nodes.net.cut(&full("a"), &full("c"));
    wait_until("a sees c down", || {
        nodes.hub("a").nodes(true) == vec![full("a"), full("b")]
    })
    .await;
    let get = br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec();
    // c cannot reach a: the answer comes back through b.
    let a = nodes.hub("a").clone();
    let (call_id, payload) = (id.clone(), get.clone());
    let call = tokio::spawn(async move { a.call_child(call_id, payload, LONG).await });
    let out = within_fast(call, "the answer is relayed by b")
        .await
        .expect("the child answers");
    assert_eq!(out, b"0");
    nodes.hold("child_call", "c");
    let a = nodes.hub("a").clone();
    let call_id = id.clone();
    let call = tokio::spawn(async move { a.call_child(call_id, get, LONG).await });
    nodes.wait_held().await;
    nodes.crash("c").await;
    let err = within_fast(call, "b fails the call it forwarded to c when c goes down")
        .await
        .unwrap_err();
    assert_eq!(err.code, "unreachable", "{err:?}");
    assert_eq!(err.id, id);
    stop_holding(&nodes.net);
}
