//! The coordinator's state as the seed gives it, seen from outside: the pending work count, the
//! four membership batches (node-downs, grace expiries, leaves, joins) and the migration retry
//! timer with its running state.

use crate::common;

use std::sync::{Arc, Mutex};

use common::cluster::*;
use common::wait_until;
use process_hub::{HookEvent, HookHandler, HookKey, StartOptions};

#[tokio::test(start_paused = true)]
async fn pending_work_counts_what_the_coordinator_waits_for_and_returns_to_zero() {
    let cluster = TestCluster::with_nodes(71, &["a", "b"], Options::plain()).await;
    let a = cluster.hub("a").clone();
    wait_until("quiet", || a.pending_work() == 0).await;
    // Starts for b held in the router: a waits for b's answer.
    cluster.hold("start_children", "b");
    let all = specs("pw-", 40);
    let owned_by_b = {
        let ring = process_hub::core::placement::HashRing::new([full("a"), full("b")]);
        all.iter()
            .filter(|s| ring.owner(&s.id) == Some(&full("b")))
            .count()
    };
    assert!(owned_by_b > 0);
    let start = tokio::spawn({
        let a = a.clone();
        let all = all.clone();
        async move { a.start_children(all, StartOptions::new()).await }
    });
    cluster.wait_held().await;
    wait_until("a waits for b", || a.pending_work() >= 1).await;
    let health = process_hub::admin::AdminOps::health(&a).await.unwrap();
    assert!(health.pending_work >= 1, "{health:?}");
    cluster.net.hold_frames(None);
    cluster.net.release_held();
    let result = start.await.unwrap().unwrap();
    assert_eq!(result.started.len(), all.len(), "{result:?}");
    wait_until("quiet again", || a.pending_work() == 0).await;
}

#[tokio::test(start_paused = true)]
async fn nodes_lost_together_are_reaped_together_and_re_placed_in_one_pass() {
    let mut cluster = TestCluster::with_nodes(72, &["a", "b", "c", "d"], Options::plain()).await;
    let all = specs("gx-", 60);
    cluster
        .hub("a")
        .start_children(all.clone(), StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&ids(&all), "started").await;
    let passes: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
    let sink = passes.clone();
    cluster
        .hub("a")
        .register_hook(
            HookKey::PreNodesRedistribution,
            HookHandler::observe("test", 0, move |e| sink.lock().unwrap().push(e.clone())),
        )
        .unwrap();
    cluster.crash("c").await;
    cluster.crash("d").await;
    cluster.wait_members().await;
    cluster.wait_converged(&ids(&all), "re-placed").await;
    let passes = passes.lock().unwrap().clone();
    let lefts: Vec<Vec<String>> = passes
        .iter()
        .filter_map(|e| match e {
            HookEvent::PreNodesRedistribution { left, .. } if !left.is_empty() => {
                Some(left.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        lefts,
        vec![vec![full("c"), full("d")]],
        "one pass for both lost nodes: {passes:?}"
    );
}
