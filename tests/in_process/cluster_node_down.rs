//! A request waiting on a node that goes down fails at once, not at `default_timeout` (issue 4):
//! starts and stops sent to a node that crashes before answering, child calls, and a durable
//! start's mutation sent to a leader that crashes. And around an indirectly connected node
//! (docs/cluster.md "Reachability"): sends to a ring member this node cannot reach fail at once;
//! starts and child calls forwarded by a node whose ring differs (the owner came back through
//! it only) are answered through the forwarder, and fail at once when the next node crashes.
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

// Reachability (docs/cluster.md "Reachability"): with the link a–c cut and b reaching both, c is
// indirectly connected. The tests below run on tokio's paused clock with a `stable_after` of
// [`STABLE`]: the window in which c is indirectly connected, before the resolution sets it
// aside, is then far longer than any step of a test, and waiting for its end costs no real
// time.

/// The hubs' `stable_after`: long next to every step of these tests (virtual time).
const STABLE: Duration = Duration::from_secs(10);

/// a, b and c with a 60 s `default_timeout`, `nodedown_grace` `grace` and `stable_after`
/// [`STABLE`].
async fn reach_cluster(seed: u64, grace: Duration) -> TestCluster {
    let options = Options {
        migration_retry: None,
        ..Options::plain()
            .grace(grace)
            .default_timeout(LONG)
            .stable_after(STABLE)
    };
    TestCluster::with_nodes(seed, &["a", "b", "c"], options).await
}

const ABC: [&str; 3] = ["a", "b", "c"];
const AB: [&str; 2] = ["a", "b"];

fn names(short: &[&str]) -> Vec<String> {
    short.iter().map(|n| full(n)).collect()
}

/// c is cut off from a and b, then comes back through b only (a–c stays cut). A node joins a
/// ring over a direct link, so c is back in b's ring but not in a's, while a's table says a
/// reaches c through b (indirectly connected). a sends a start or a call for a child c owns
/// by the whole ring and b by a ring without c ([`owned_by_c_else_b`]) to b, which forwards it
/// to c.
async fn back_through_b_only(nodes: &TestCluster) {
    let (a, b) = (nodes.hub("a"), nodes.hub("b"));
    nodes.net.cut(&full("a"), &full("c"));
    nodes.net.cut(&full("b"), &full("c"));
    wait_until("a and b see c down", || {
        a.nodes(true) == names(&AB) && b.nodes(true) == names(&AB)
    })
    .await;
    nodes.net.heal_link(&full("b"), &full("c"));
    wait_until("b has c back; a reaches c through b", || {
        b.nodes(true) == names(&ABC) && a.indirectly_connected() == vec![full("c")]
    })
    .await;
    assert_eq!(
        a.nodes(true),
        names(&AB),
        "a admitted c without a direct link"
    );
    assert!(!nodes.hub("c").is_set_aside());
}

/// Children c owns by the whole ring and b by a ring without c.
fn owned_by_c_else_b(prefix: &str, n: usize) -> Vec<ChildSpec> {
    owned(prefix, n, "c", &ABC, Some(("b", &AB)))
}

/// Whether each of `ids` runs once, on `node`, by the hubs' own supervisors.
fn all_run_on(nodes: &TestCluster, ids: &BTreeSet<ChildId>, node: &str) -> bool {
    let running = nodes.running();
    ids.iter()
        .all(|id| running.get(id).is_some_and(|on| on == &[node.to_owned()]))
}

/// Waits until c set itself aside (the end of the cut link a–c with the greater name, once the
/// picture held for [`STABLE`]), a and b keep it out of their rings, and `ids` run once, on b,
/// their owner in a ring without c.
async fn wait_set_aside_and_replaced(nodes: &TestCluster, ids: &BTreeSet<ChildId>) {
    wait_until("c is set aside and its children run once, on b", || {
        nodes.hub("c").is_set_aside()
            && nodes.hub("a").nodes(true) == names(&AB)
            && nodes.hub("b").nodes(true) == names(&AB)
            && all_run_on(nodes, ids, "b")
    })
    .await;
}

const GET: &[u8] = br#"{"kind":"counter","command":{"op":"get"}}"#;

/// A start and a call through a for an owner or host a cannot reach, though b does: while c
/// is indirectly connected it stays in a's ring and a's sends to it fail at once, a start
/// `node_unavailable` (nothing started anywhere) and a call `unreachable`; b, which reaches c,
/// is answered. Once c is set aside its child runs on b, and the same start and call through
/// a succeed.
#[tokio::test(start_paused = true)]
async fn a_start_or_call_for_an_indirectly_connected_owner_fails_at_once_then_succeeds_once_it_is_set_aside(
) {
    let nodes = reach_cluster(48, Duration::from_millis(100)).await;
    let (a, b) = (nodes.hub("a").clone(), nodes.hub("b").clone());
    let hosted = owned_by_c_else_b("h", 1);
    let id = hosted[0].id.clone();
    let result = a.start_children(hosted, StartOptions::new()).await.unwrap();
    assert_eq!(result.started[0].nodes[0].0, full("c"), "{result:?}");
    wait_until("a sees the child", || a.child_lookup(&id).is_some()).await;

    nodes.net.cut(&full("a"), &full("c"));
    wait_until("a and c are indirectly connected", || {
        a.indirectly_connected() == vec![full("c")]
            && nodes.hub("c").indirectly_connected() == vec![full("a")]
    })
    .await;
    assert_eq!(a.nodes(true), names(&ABC), "c stays in a's ring");

    let fresh = owned_by_c_else_b("i", 2);
    let fresh_ids = id_set(fresh.iter().map(|s| &s.id));
    let (hub, wanted) = (a.clone(), fresh.clone());
    let start = tokio::spawn(async move { hub.start_children(wanted, StartOptions::new()).await });
    let result = within_fast(start, "a's start to c fails at once")
        .await
        .unwrap();
    assert!(result.started.is_empty(), "{:?}", result.started);
    assert_eq!(id_set(result.errors.iter().map(|f| &f.id)), fresh_ids);
    assert_node_unavailable(&result.errors);
    let running = nodes.running();
    assert!(
        fresh_ids.iter().all(|id| !running.contains_key(id)),
        "{running:?}"
    );

    let (hub, call_id) = (a.clone(), id.clone());
    let call = tokio::spawn(async move { hub.call_child(call_id, GET.to_vec(), LONG).await });
    let err = within_fast(call, "a's call to c fails at once")
        .await
        .unwrap_err();
    assert_eq!(err.code, "unreachable", "{err:?}");
    assert_eq!(err.id, id);
    let answer = b.call_child(id.clone(), GET.to_vec(), LONG).await;
    assert_eq!(answer.expect("b reaches c"), b"0");

    wait_set_aside_and_replaced(&nodes, &id_set([&id])).await;
    let result = a.start_children(fresh, StartOptions::new()).await.unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(id_set(result.started.iter().map(|s| &s.id)), fresh_ids);
    for s in &result.started {
        assert_eq!(s.nodes[0].0, full("b"), "{s:?}");
    }
    let answer = a.call_child(id, GET.to_vec(), LONG).await;
    assert_eq!(answer.expect("the child answers from b"), b"0");
}

/// c back through b only: a's start goes to b, which forwards it to c, and c's answer, which
/// cannot go to a directly, is relayed by b. Once c is set aside, its children run on b and a
/// start through a goes to b directly.
#[tokio::test(start_paused = true)]
async fn a_forwarded_start_is_answered_through_the_forwarder_when_the_owner_cannot_reach_the_origin(
) {
    let nodes = reach_cluster(43, Duration::from_millis(100)).await;
    back_through_b_only(&nodes).await;
    let a = nodes.hub("a").clone();
    let specs = owned_by_c_else_b("f", 2);
    let wanted = specs.clone();
    let hub = a.clone();
    let start = tokio::spawn(async move { hub.start_children(wanted, StartOptions::new()).await });
    let result = within_fast(
        start,
        "the answer is relayed by b, not lost on the cut link",
    )
    .await
    .unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let ids = id_set(specs.iter().map(|s| &s.id));
    assert_eq!(id_set(result.started.iter().map(|s| &s.id)), ids);
    for s in &result.started {
        assert_eq!(s.nodes[0].0, full("c"), "{s:?}");
    }
    assert!(all_run_on(&nodes, &ids, "c"), "{:?}", nodes.running());

    wait_set_aside_and_replaced(&nodes, &ids).await;
    let more = owned_by_c_else_b("g", 2);
    let result = a
        .start_children(more.clone(), StartOptions::new())
        .await
        .unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(
        id_set(result.started.iter().map(|s| &s.id)),
        id_set(more.iter().map(|s| &s.id))
    );
    for s in &result.started {
        assert_eq!(s.nodes[0].0, full("b"), "{s:?}");
    }
}

/// c back through b only; b forwards a's start to c, and c crashes before answering: b fails
/// what it forwarded at once (`node_unavailable`, nothing started), where a, which only knows
/// b, could not tell. The same start then succeeds on b.
#[tokio::test(start_paused = true)]
async fn a_forwarded_start_whose_owner_crashes_fails_at_once() {
    let mut nodes = reach_cluster(44, Duration::from_millis(100)).await;
    back_through_b_only(&nodes).await;
    let specs = owned_by_c_else_b("f", 2);
    let ids = id_set(specs.iter().map(|s| &s.id));
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
    assert_eq!(id_set(result.errors.iter().map(|f| &f.id)), ids);
    assert_node_unavailable(&result.errors);
    stop_holding(&nodes.net);
    let running = nodes.running();
    assert!(
        ids.iter().all(|id| !running.contains_key(id)),
        "{running:?}"
    );

    let a = nodes.hub("a");
    wait_until("a and b see c gone", || {
        a.nodes(true) == names(&AB)
            && nodes.hub("b").nodes(true) == names(&AB)
            && a.indirectly_connected().is_empty()
    })
    .await;
    let result = a.start_children(specs, StartOptions::new()).await.unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(id_set(result.started.iter().map(|s| &s.id)), ids);
    assert!(all_run_on(&nodes, &ids, "b"), "{:?}", nodes.running());
}

/// c runs a child and comes back through b only: a's registry names c, which is not in a's
/// ring, so a asks the child's owner by its ring, b, which forwards the call to c and relays
/// the answer. When c crashes while b waits on it, b fails the call at once (`unreachable`).
#[tokio::test(start_paused = true)]
async fn a_forwarded_child_call_is_relayed_and_fails_at_once_when_the_next_node_crashes() {
    // A grace longer than the test: c's child stays bound to c in every registry while c is
    // cut off.
    let mut nodes = reach_cluster(47, LONG).await;
    let spec = owned_by_c_else_b("n", 1);
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
    back_through_b_only(&nodes).await;

    let a = nodes.hub("a").clone();
    let call_id = id.clone();
    let call = tokio::spawn(async move { a.call_child(call_id, GET.to_vec(), LONG).await });
    let out = within_fast(call, "the answer is relayed by b")
        .await
        .expect("the child answers");
    assert_eq!(out, b"0");

    nodes.hold("child_call", "c");
    let a = nodes.hub("a").clone();
    let call_id = id.clone();
    let call = tokio::spawn(async move { a.call_child(call_id, GET.to_vec(), LONG).await });
    nodes.wait_held().await;
    nodes.crash("c").await;
    let err = within_fast(call, "b fails the call it forwarded to c when c goes down")
        .await
        .unwrap_err();
    assert_eq!(err.code, "unreachable", "{err:?}");
    assert_eq!(err.id, id);
    stop_holding(&nodes.net);
}
