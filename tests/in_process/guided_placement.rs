//! Guided placement on the in-process cluster: a start names a child's node
//! (`StartOptions::child_mapping`), the child runs there and never migrates when nodes join; its
//! node gone, it waits for it, or with `guided_fallback` the ring places it; the original's
//! mapping errors are refused per child; a hub whose distribution is `guided` refuses a child
//! without a mapping.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::*;
use common::{wait_for, wait_until};
use process_hub::core::placement::HashRing;
use process_hub::{ChildId, ChildSpec, ChildStartError, Distribution, StartOptions};

/// The first id `{prefix}{i}` whose ring owner among `members` is `owner`.
fn owned_by(members: &[&str], owner: &str, prefix: &str) -> ChildId {
    let ring = HashRing::new(members.iter().map(|m| full(m)));
    (0..)
        .map(|i| ChildId::from(format!("{prefix}{i}")))
        .find(|id| ring.owner(id).map(String::as_str) == Some(full(owner).as_str()))
        .unwrap()
}

fn on(cluster: &TestCluster, id: &ChildId) -> Vec<String> {
    cluster.running().get(id).cloned().unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn a_guided_child_runs_on_its_node_and_stays_when_nodes_join() {
    let mut cluster = TestCluster::with_nodes(1, &["a", "b"], Options::plain()).await;
    // Owned by b on the ring of a, b, and by c once c joins: guided to a.
    let guided = (0..)
        .map(|i| ChildId::from(format!("g{i}")))
        .find(|id| {
            let two = HashRing::new([full("a"), full("b")]);
            let three = HashRing::new([full("a"), full("b"), full("c")]);
            two.owner(id) == Some(&full("b")) && three.owner(id) == Some(&full("c"))
        })
        .unwrap();
    // A plain child that moves to c when it joins: the sign that a pass ran.
    let plain = owned_by(&["a", "b", "c"], "c", "p");
    let opts = StartOptions::new().child_on(guided.clone(), full("a"));
    let result = cluster
        .hub("b")
        .start_children(
            vec![
                ChildSpec::new(guided.clone(), "counter"),
                ChildSpec::new(plain.clone(), "counter"),
            ],
            opts,
        )
        .await
        .unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(on(&cluster, &guided), ["a"]);

    cluster.add("c").await;
    cluster.wait_members().await;
    wait_until("the plain child moved to its new owner c", || {
        on(&cluster, &plain) == ["c"]
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        on(&cluster, &guided),
        ["a"],
        "a guided child never migrates"
    );
    let row = cluster
        .hub("c")
        .child_lookup_with_metadata(&guided)
        .unwrap();
    let hosts: Vec<String> = row.nodes.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(hosts, [full("a")]);
}

#[tokio::test(start_paused = true)]
async fn mapping_errors_are_refused_per_child() {
    let cluster = TestCluster::with_nodes(2, &["a", "b"], Options::plain()).await;
    let mut opts = StartOptions::new()
        .child_on("stranger", "zz@test")
        .child_on("fine", full("b"));
    opts.child_mapping
        .insert("twice".into(), vec![full("a"), full("b")]);
    let specs = ["stranger", "fine", "twice", "free"]
        .map(|id| ChildSpec::new(id, "counter"))
        .to_vec();
    let result = cluster.hub("a").start_children(specs, opts).await.unwrap();
    let started: BTreeSet<String> = result.started.iter().map(|s| s.id.to_string()).collect();
    assert_eq!(started, BTreeSet::from(["fine".into(), "free".into()]));
    let reason = |id: &str| {
        result
            .errors
            .iter()
            .find(|e| e.id.as_str() == id)
            .map(|e| e.reason.clone())
    };
    assert!(
        matches!(
            reason("stranger"),
            Some(ChildStartError::ChildMappingInvalid { .. })
        ),
        "{:?}",
        result.errors
    );
    assert_eq!(
        reason("twice"),
        Some(ChildStartError::ChildMappingMismatch {
            expected: 1,
            got: 2
        })
    );
    assert_eq!(on(&cluster, &"fine".into()), ["b"]);
}

#[tokio::test(start_paused = true)]
async fn a_guided_hub_refuses_a_child_without_a_mapping() {
    let options = Options::plain().distribution(Distribution::Guided);
    let cluster = TestCluster::with_nodes(4, &["a", "b"], options).await;
    let opts = StartOptions::new().child_on("mapped", full("a"));
    let specs = vec![
        ChildSpec::new("mapped", "counter"),
        ChildSpec::new("unmapped", "counter"),
    ];
    let result = cluster.hub("b").start_children(specs, opts).await.unwrap();
    assert_eq!(result.started.len(), 1);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].id.as_str(), "unmapped");
    assert_eq!(
        result.errors[0].reason,
        ChildStartError::ChildMappingMissing
    );
    assert_eq!(on(&cluster, &"mapped".into()), ["a"]);
}

#[tokio::test(start_paused = true)]
async fn a_guided_child_waits_for_its_node_unless_it_may_fall_back() {
    let mut cluster = TestCluster::with_nodes(5, &["a", "b", "c"], Options::plain()).await;
    let waits: ChildId = "waits".into();
    let falls: ChildId = "falls".into();
    for (id, fallback) in [(&waits, false), (&falls, true)] {
        let opts = StartOptions::new()
            .child_on(id.clone(), full("c"))
            .guided_fallback(fallback);
        let result = cluster
            .hub("a")
            .start_children(vec![ChildSpec::new(id.clone(), "counter")], opts)
            .await
            .unwrap();
        assert!(result.errors.is_empty(), "{:?}", result.errors);
    }
    assert_eq!(on(&cluster, &waits), ["c"]);
    assert_eq!(on(&cluster, &falls), ["c"]);

    cluster.crash("c").await;
    let ring = HashRing::new([full("a"), full("b")]);
    let fallback_owner = ring
        .owner(&falls)
        .unwrap()
        .trim_end_matches("@test")
        .to_owned();
    wait_for(
        "the child allowed to fall back runs on its ring owner",
        || {
            let now = on(&cluster, &falls);
            if now == [fallback_owner.clone()] {
                Ok(())
            } else {
                Err(format!("{now:?}"))
            }
        },
    )
    .await;
    assert!(
        on(&cluster, &waits).is_empty(),
        "a guided child without fallback waits for its node"
    );

    cluster.restart("c").await;
    cluster.wait_members().await;
    wait_until("the waiting child is back on its node", || {
        on(&cluster, &waits) == ["c"]
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        on(&cluster, &falls),
        [fallback_owner],
        "a child placed by the fallback does not migrate back"
    );
}
