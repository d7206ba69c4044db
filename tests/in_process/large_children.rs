//! Children as large as the API allows, on the in-process cluster: every batch that carries
//! them (full syncs, re-placements, declared offers) is cut to the frame budget, so a node that
//! joins a node hosting forty children of a megabyte each gets the registry and the declared
//! list, and takes its share of the children; a child too large to ever cross the wire is
//! refused at start.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::*;
use common::wait_until;
use process_hub::model::MAX_CHILD_BYTES;
use process_hub::{ChildStartError, StartOptions};

const MB: usize = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joining_forty_one_megabyte_children_converges() {
    // Forty megabytes written durably take seconds on a loaded machine: a start is not to be
    // reported pending for it.
    let options = Options {
        default_timeout: Duration::from_secs(30),
        ..Options::durable()
    };
    let mut cluster = TestCluster::with_nodes(7, &["a"], options).await;
    let specs = specs("big-", 40);
    let all = ids(&specs);
    let blob = "m".repeat(MB);
    let result = cluster
        .hub("a")
        .start_children(
            specs,
            StartOptions::new()
                .durable(true)
                .metadata("blob", blob.clone()),
        )
        .await
        .unwrap();
    assert_eq!(result.started.len(), 40, "{result:?}");
    // 40 MiB of children: more than twice what one frame may carry.
    cluster.add("b").await;
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after b joined").await;
    let on_b = cluster
        .running()
        .values()
        .filter(|nodes| nodes.iter().any(|n| n == "b"))
        .count();
    assert!(on_b > 0, "b took none of the children");
    let version = cluster.hub("a").declared_children().unwrap().version;
    assert!(version > 0);
    wait_until("b holds a's declared version", || {
        cluster.versions().iter().all(|v| *v == version)
    })
    .await;
    let b = cluster.hub("b");
    wait_until("b holds every row with its metadata", || {
        all.iter().all(|id| {
            b.child_lookup_with_metadata(id)
                .and_then(|info| info.metadata)
                .is_some_and(|m| m.get("blob") == Some(&blob))
        })
    })
    .await;
    let declared: BTreeSet<_> = b
        .declared_children()
        .unwrap()
        .children
        .into_iter()
        .map(|c| c.spec.id)
        .collect();
    assert_eq!(declared, all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_start_larger_than_a_frame_from_a_non_leader_is_declared_whole() {
    let cluster = TestCluster::with_nodes(9, &["a", "b"], Options::durable()).await;
    cluster.wait_members().await;
    // A first mutation names the leader.
    let first = cluster
        .hub("a")
        .start_child(
            common::cluster::specs("probe-", 1).remove(0),
            StartOptions::new().durable(true),
        )
        .await
        .unwrap();
    assert_eq!(first.started.len(), 1, "errors: {:?}", first.errors);
    let leader = cluster
        .hub("a")
        .declared_children()
        .unwrap()
        .last_mutated_by
        .expect("a mutation names its author");
    let other = if leader == cluster.hub("a").node().as_str() {
        "b"
    } else {
        "a"
    };
    // 12 children of 1.5 MiB: 18 MiB, more than one frame may carry, forwarded to the leader.
    let specs = specs("huge-", 12);
    let all = ids(&specs);
    let result = cluster
        .hub(other)
        .start_children(
            specs,
            StartOptions::new()
                .durable(true)
                .metadata("blob", "h".repeat(3 * MB / 2)),
        )
        .await
        .unwrap();
    let errors: Vec<String> = result
        .errors
        .iter()
        .map(|e| {
            format!("{}: {}", e.id, e.reason)
                .chars()
                .take(300)
                .collect()
        })
        .collect();
    assert_eq!(result.started.len(), 12, "failed: {errors:?}");
    for node in ["a", "b"] {
        let hub = cluster.hub(node);
        wait_until("every node declares the whole batch", || {
            let declared: BTreeSet<_> = hub
                .declared_children()
                .unwrap()
                .children
                .into_iter()
                .map(|c| c.spec.id)
                .collect();
            all.is_subset(&declared)
        })
        .await;
    }
    // And stopping them (undeclare through the leader, terminate) works the same way.
    let stopped = cluster
        .hub(other)
        .stop_children(
            all.iter().cloned().collect(),
            process_hub::StopOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        stopped.stopped.len(),
        12,
        "errors: {:?}",
        stopped.errors.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_too_large_for_the_wire_is_refused_alone() {
    let cluster = TestCluster::with_nodes(8, &["a", "b"], Options::plain()).await;
    let mut specs = specs("s-", 2);
    specs[0] = specs[0]
        .clone()
        .with_args(&"x".repeat(MAX_CHILD_BYTES as usize))
        .unwrap();
    let result = cluster
        .hub("a")
        .start_children(specs.clone(), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(result.started.len(), 1, "the small child starts");
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].id, specs[0].id);
    assert!(
        matches!(
            result.errors[0].reason,
            ChildStartError::TooLarge { max, bytes } if max == MAX_CHILD_BYTES && bytes > max
        ),
        "{:?}",
        result.errors[0].reason
    );
}
