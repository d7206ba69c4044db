//! The hub across nodes on the in-process cluster: placement, replication, restarts,
//! membership changes.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::*;
use common::{wait_for_async, wait_until};
use process_hub::{ChildId, ChildStartError, StartOptions, StopOptions};

#[tokio::test(start_paused = true)]
async fn start_and_stop_1000_children_with_identical_registries() {
    let cluster = TestCluster::with_nodes(1, &["a", "b", "c"], Options::plain()).await;
    let specs = specs("c-", 1000);
    let all = ids(&specs);
    let result = cluster
        .hub("a")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    assert_eq!(
        result.started.len(),
        1000,
        "errors: {:?}",
        result.errors.first()
    );
    // Every child was placed on its owner, not just on the node that was asked.
    let placed: BTreeSet<_> = result
        .started
        .iter()
        .map(|s| s.nodes[0].0.clone())
        .collect();
    assert_eq!(placed.len(), 3);
    cluster.wait_converged(&all, "after start").await;
    for name in ["a", "b", "c"] {
        let id = all.iter().next().unwrap();
        assert!(cluster.hub(name).child_lookup(id).is_some());
    }
    let stopped = cluster
        .hub("b")
        .stop_children(all.iter().cloned().collect(), StopOptions::new())
        .await
        .unwrap();
    assert_eq!(
        stopped.stopped.len(),
        1000,
        "errors: {:?}",
        stopped.errors.first()
    );
    cluster.wait_converged(&BTreeSet::new(), "after stop").await;
}

#[tokio::test(start_paused = true)]
async fn periodic_sync_heals_lost_deltas() {
    let cluster = TestCluster::with_nodes(2, &["a", "b", "c"], Options::plain()).await;
    let a = cluster.hub("a");
    // Children a owns, so the start itself needs no frame; then every frame is lost.
    let ring = process_hub::core::placement::HashRing::new(cluster.names());
    let mine: Vec<_> = specs("s-", 300)
        .into_iter()
        .filter(|s| ring.owner(&s.id).map(String::as_str) == Some("a@test"))
        .collect();
    assert!(!mine.is_empty());
    cluster.net.set_drop_probability(1.0);
    let result = a
        .start_children(mine.clone(), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(result.started.len(), mine.len());
    assert!(
        cluster.hub("b").child_lookup(&mine[0].id).is_none(),
        "the delta was dropped"
    );
    cluster.net.set_drop_probability(0.0);
    cluster.wait_converged(&ids(&mine), "after sync").await;
    let stats = cluster.net.stats();
    assert!(stats.dropped_random > 0, "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn crashed_children_restart_with_new_pids_everywhere() {
    let cluster = TestCluster::with_nodes(3, &["a", "b", "c"], Options::plain()).await;
    let specs = specs("k-", 100);
    let all = ids(&specs);
    cluster
        .hub("c")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&all, "after start").await;
    let before = cluster.views().remove(0);
    for hub in cluster.hubs.values() {
        for id in &all {
            if let Some(cell) = hub.local_child(id) {
                cell.kill();
            }
        }
    }
    wait_until("every node sees a new pid for every child", || {
        cluster.views().iter().all(|v| {
            all.iter()
                .all(|id| v.get(id).is_some_and(|p| p.len() == 1 && p != &before[id]))
        })
    })
    .await;
    cluster.wait_converged(&all, "after restarts").await;
}

#[tokio::test(start_paused = true)]
async fn nodes_join_and_leave_one_by_one() {
    let mut cluster = TestCluster::with_nodes(4, &["a"], Options::plain()).await;
    let specs = specs("j-", 300);
    let all = ids(&specs);
    cluster
        .hub("a")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&all, "one node").await;
    for name in ["b", "c", "d"] {
        cluster.add(name).await;
        cluster.wait_members().await;
        cluster
            .wait_converged(&all, &format!("after {name} joined"))
            .await;
    }
    // Graceful leave: children are handed over before the node goes.
    let b = cluster.hubs.remove("b@test").unwrap();
    b.leave().await.unwrap();
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after b left").await;
    // A crash: after the grace, the survivors take its children.
    cluster.crash("c").await;
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after c crashed").await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_duplicate_starts_yield_one_child() {
    let cluster = TestCluster::with_nodes(5, &["a", "b", "c"], Options::plain()).await;
    let specs = specs("d-", 60);
    let (ra, rb, rc) = tokio::join!(
        cluster
            .hub("a")
            .start_children(specs.clone(), StartOptions::new()),
        cluster
            .hub("b")
            .start_children(specs.clone(), StartOptions::new()),
        cluster
            .hub("c")
            .start_children(specs.clone(), StartOptions::new()),
    );
    let results = [ra.unwrap(), rb.unwrap(), rc.unwrap()];
    for spec in &specs {
        let wins = results
            .iter()
            .filter(|r| r.started.iter().any(|s| s.id == spec.id))
            .count();
        assert_eq!(wins, 1, "{} started {wins} times", spec.id);
        for r in &results {
            for e in r.errors.iter().filter(|e| e.id == spec.id) {
                assert_eq!(e.reason, ChildStartError::AlreadyStarted);
            }
        }
    }
    cluster
        .wait_converged(&ids(&specs), "after duplicates")
        .await;
}

#[tokio::test(start_paused = true)]
async fn undecodable_frames_are_dropped_and_the_hub_keeps_working() {
    let cluster = TestCluster::with_nodes(6, &["a", "b"], Options::plain()).await;
    let before = cluster.net.stats().undecodable;
    for garbage in [
        vec![],
        vec![1, 0],
        vec![1, 0, 255, 255, 255, 255],
        vec![9, 9, 9],
    ] {
        cluster
            .net
            .inject_frame(HUB, "b@test", "a@test", garbage)
            .unwrap();
    }
    assert_eq!(cluster.net.stats().undecodable, before + 4);
    let specs = specs("u-", 20);
    let result = cluster
        .hub("b")
        .start_children(specs.clone(), StartOptions::new())
        .await
        .unwrap();
    assert!(result.is_ok());
    cluster.wait_converged(&ids(&specs), "after garbage").await;
}

#[tokio::test(start_paused = true)]
async fn call_a_child_by_id_from_any_node() {
    let cluster = TestCluster::with_nodes(7, &["a", "b", "c"], Options::plain()).await;
    let specs = specs("m-", 9);
    cluster
        .hub("a")
        .start_children(specs.clone(), StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&ids(&specs), "started").await;
    let increment = br#"{"kind":"counter","command":{"op":"increment","by":2}}"#.to_vec();
    let get = br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec();
    for spec in &specs {
        // Every node casts to every child, wherever it runs; casts of one sender stay in order.
        for name in ["a", "b", "c"] {
            cluster
                .hub(name)
                .cast_child(spec.id.clone(), increment.clone())
                .unwrap();
        }
        wait_for_async("every node's casts reached the child", || async {
            let mut all = true;
            let mut outs = Vec::new();
            for name in ["a", "b", "c"] {
                let out = cluster
                    .hub(name)
                    .call_child(spec.id.clone(), get.clone(), Duration::from_secs(5))
                    .await
                    .expect("routed to the child");
                all &= out == b"6";
                outs.push(String::from_utf8_lossy(&out).into_owned());
            }
            if all {
                Ok(())
            } else {
                Err(format!("{} answers {outs:?}", spec.id))
            }
        })
        .await;
    }
    let missing = cluster
        .hub("b")
        .call_child("nobody", get.clone(), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(missing.code, "not_found");
    let garbage = cluster
        .hub("c")
        .call_child(
            specs[0].id.clone(),
            b"not json".to_vec(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert_eq!(garbage.code, "command_failed");
}

#[tokio::test(start_paused = true)]
async fn a_full_sync_in_parts_is_applied_only_once_complete() {
    // A node with more children than one frame holds sends its full sync in parts; a partial
    // sync must not be applied (it would unbind the sender from the missing parts' children).
    use process_hub::cluster::wire::{encode, WireMsg};
    use process_hub::{ChildSpec, Metadata, Row};
    let cluster = TestCluster::with_nodes(8, &["a", "b"], Options::plain()).await;
    let row = |id: &str| {
        let mut row = Row::authored(
            ChildSpec::new(id, "counter"),
            Metadata::new(),
            "b@test",
            1,
            false,
        )
        .unwrap();
        row.node_pids.insert("b@test".into(), 7);
        row
    };
    let part = |index: u32, ids: &[&str]| {
        let msg = WireMsg::FullSyncPart {
            sync_id: 1,
            index,
            total: 2,
            rows: ids.iter().map(|id| row(id)).collect(),
        };
        encode(HUB, "b@test", &msg).unwrap()
    };
    let a = cluster.hub("a");
    let known = |id: &str| a.child_lookup(&ChildId::from(id)).is_some();
    cluster
        .net
        .inject_frame(HUB, "b@test", "a@test", part(1, &["p3", "p4"]))
        .unwrap();
    // The first part alone is held back.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!known("p3") && !known("p4"));
    cluster
        .net
        .inject_frame(HUB, "b@test", "a@test", part(0, &["p1", "p2"]))
        .unwrap();
    wait_until("the completed sync is applied", || {
        ["p1", "p2", "p3", "p4"].iter().all(|id| known(id))
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn stopping_an_unknown_id_is_not_found_whichever_node_owns_it() {
    let cluster = TestCluster::with_nodes(13, &["a", "b", "c"], Options::plain()).await;
    let members = ["a", "b", "c"];
    // Ids owned by each member, so that the asking node routes most of them to a peer.
    let unknown: Vec<_> = (0..10)
        .flat_map(|i| members.map(|owner| id_owned_by(owner, &members, &format!("ghost-{i}-"))))
        .collect();
    let known = specs("real-", 6);
    let started = cluster
        .hub("a")
        .start_children(known.clone(), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 6, "{:?}", started.errors);
    cluster.wait_converged(&ids(&known), "after start").await;
    for asking in members {
        for id in &unknown {
            let result = cluster
                .hub(asking)
                .stop_child(id.clone(), StopOptions::new())
                .await
                .unwrap();
            assert!(
                result.stopped.is_empty(),
                "{asking} reported the unknown {id} stopped: {result:?}"
            );
            assert!(
                result
                    .errors
                    .iter()
                    .all(|e| e.id == *id && e.reason == process_hub::ChildStopError::NotFound)
                    && !result.errors.is_empty(),
                "{asking}, {id}: {result:?}"
            );
        }
    }
    // Known children still stop, from any node, and a second stop of one is not_found.
    let result = cluster
        .hub("c")
        .stop_children(ids(&known).into_iter().collect(), StopOptions::new())
        .await
        .unwrap();
    assert_eq!(result.stopped.len(), 6, "{result:?}");
    cluster.wait_converged(&BTreeSet::new(), "after stop").await;
    let again = cluster
        .hub("b")
        .stop_child(known[0].id.clone(), StopOptions::new())
        .await
        .unwrap();
    assert!(again.stopped.is_empty(), "{again:?}");
}

/// `wait_for_members` (and its `HubMsg`) blocks until the membership reaches the count, woken
/// by the joins, and on a lone node times out saying how many members it saw;
/// `wait_cluster_settled` does not wait for peers at all.
#[tokio::test(start_paused = true)]
async fn wait_for_members_blocks_until_the_third_node_joins() {
    use process_hub::HubMsg;
    let mut cluster = TestCluster::with_nodes(6, &["a"], Options::plain()).await;
    let a = cluster.hub("a").clone();
    // A lone node is "settled" at once: that call says nothing about the cluster forming.
    assert!(a.wait_cluster_settled(Duration::from_secs(5)).await);
    assert_eq!(a.wait_for_members(1, Duration::ZERO).await, Ok(1));
    let alone = a
        .wait_for_members(3, Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!((alone.wanted, alone.seen), (3, 1), "{alone}");
    assert!(alone.to_string().contains("1 of the 3 members"), "{alone}");
    let by_msg = |timeout: Duration| {
        let actor = a.actor();
        async move {
            actor
                .call(
                    |reply| HubMsg::WaitForMembers {
                        n: 3,
                        timeout,
                        reply,
                    },
                    None,
                )
                .await
                .expect("the hub answers")
                .success_or_else(|| "no answer")
        }
    };
    let alone = by_msg(Duration::from_millis(100))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!((alone.wanted, alone.seen), (3, 1));

    // Waiting from before the joins: still waiting with two members, done with three.
    let handle_wait = tokio::spawn({
        let a = a.clone();
        async move { a.wait_for_members(3, Duration::from_secs(120)).await }
    });
    let msg_wait = tokio::spawn(by_msg(Duration::from_secs(120)));
    cluster.add("b").await;
    wait_until("a sees b", || a.nodes(true).len() == 2).await;
    assert!(!handle_wait.is_finished(), "two members are not three");
    assert!(!msg_wait.is_finished(), "two members are not three");
    cluster.add("c").await;
    assert_eq!(handle_wait.await.unwrap(), Ok(3));
    assert_eq!(msg_wait.await.unwrap().unwrap(), Ok(3));
    assert_eq!(a.nodes(true).len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_crashed_nodes_children_run_again_once_each_when_they_take_several_start_batches() {
    // 4,000 children: the crashed node runs about 1,300, so each survivor re-places more than
    // one re-placement batch (500) of them, in several start batches.
    let mut cluster = TestCluster::with_nodes(8, &["a", "b", "c"], Options::plain()).await;
    let all = cluster.start_converged("a", "many-", 4_000).await;
    let on_c = cluster.running_only_on("c");
    assert!(on_c.len() > 1_000, "c runs {} children", on_c.len());
    cluster.crash("c").await;
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after c crashed").await;
    assert_eq!(cluster.running().len(), all.len());
    cluster.assert_each_runs_once_off(&on_c, "c");
}

/// The survivors read a crashed node's rows half-way through its grace; what the cluster does
/// in the other half still counts at its end: every child of the crashed node runs again once,
/// the children stopped in the meantime stay stopped and the ones started run.
#[tokio::test(start_paused = true)]
async fn what_changes_in_the_second_half_of_a_grace_counts_in_the_re_placement() {
    let grace = Duration::from_secs(4);
    let mut cluster =
        TestCluster::with_nodes(9, &["a", "b", "c"], Options::plain().grace(grace)).await;
    let first = cluster.start_converged("a", "early-", 300).await;
    let on_c = cluster.running_only_on("c");
    assert!(on_c.len() > 50, "c runs {} children", on_c.len());
    cluster.crash("c").await;
    cluster.wait_members().await;
    // Past the read-ahead, before the grace's end.
    tokio::time::sleep(grace * 3 / 4).await;
    assert_eq!(
        cluster.running().len(),
        first.len() - on_c.len(),
        "c's wait"
    );
    let stopped: Vec<ChildId> = first
        .iter()
        .filter(|id| !on_c.contains(*id))
        .take(20)
        .cloned()
        .collect();
    let result = cluster
        .hub("b")
        .stop_children(stopped.clone(), StopOptions::new())
        .await
        .unwrap();
    assert_eq!(result.stopped.len(), stopped.len(), "{result:?}");
    let later = specs("late-", 40);
    let result = cluster
        .hub("b")
        .start_children(later.clone(), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(result.started.len(), later.len(), "{:?}", result.errors);
    let mut all = first.clone();
    for id in &stopped {
        all.remove(id);
    }
    all.extend(ids(&later));
    cluster.wait_converged(&all, "after c's grace").await;
    assert_eq!(cluster.running().len(), all.len());
    cluster.assert_each_runs_once_off(&on_c, "c");
}
