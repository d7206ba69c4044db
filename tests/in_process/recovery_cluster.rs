//! Durable children across nodes on the in-process cluster (issue 5, `docs/recovery.md`):
//! mutations through the leader, a whole-cluster outage, a rejoin with nothing changed (an
//! empty diff: no round acts), a rejoin after a stop, a partition in which both sides mutate
//! (tie-break), every disk lost with a remote manifest, no leader (durable starts and stops
//! refused, plain ones and reads unaffected), a stop that crashed halfway, unbound rows waiting
//! two rounds, a first round whose start is not answered, a stop whose child a round stopped
//! first, and a child left running on both sides of a partition (one instance, on its ring
//! owner, after the heal).

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::cluster::*;
use common::{durable, wait_until, DEADLINE};
use process_hub::cluster::wire::WireMsg;
use process_hub::storage::BackendConfig;
use process_hub::{
    ChildId, ChildSpec, HookEvent, RecoveryError, StartError, StartOptions, StopError, StopOptions,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_outage_brings_back_every_declared_child_once() {
    let mut d = TestCluster::with_nodes(51, &["a", "b", "c"], Options::durable()).await;
    let all = specs("w", 30);
    // From a node that is not the leader: the declaration goes through a.
    let result = d
        .hub("b")
        .start_children(all.clone(), durable())
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    d.wait_versions(30).await;
    let stopped: Vec<ChildId> = all[..3].iter().map(|s| s.id.clone()).collect();
    d.hub("c")
        .stop_children(stopped.clone(), StopOptions::new())
        .await
        .unwrap();
    d.wait_versions(33).await;
    d.hub("a")
        .start_child(ChildSpec::new("plain", "counter"), StartOptions::new())
        .await
        .unwrap();
    let declared: BTreeSet<ChildId> = ids(&all[3..]);
    let mut dead: BTreeSet<ChildId> = stopped.into_iter().collect();
    d.wait_exactly(&declared, &dead, "before the outage").await;

    let before = d.events.lock().unwrap().len();
    for name in ["a", "b", "c"] {
        d.crash(name).await;
    }
    for name in ["a", "b", "c"] {
        d.restart(name).await;
    }
    d.wait_members().await;
    dead.insert(ChildId::from("plain"));
    for hub in d.hubs.values() {
        hub.await_normal(DEADLINE).await.unwrap();
    }
    d.wait_exactly(&declared, &dead, "after the outage").await;
    assert_eq!(d.versions(), vec![33, 33, 33]);
    // The owners went first: the first round to act saw every child as an orphan and left
    // the others' to them, so the children were not each submitted by every node.
    let (mut submitted, mut deferred) = (0, 0);
    for event in &d.events.lock().unwrap()[before..] {
        if let HookEvent::ReconcileRound { stats, .. } = event {
            submitted += stats.started;
            deferred += stats.deferred_to_owner;
        }
    }
    assert!(deferred > 0, "no round left an orphan to its owner");
    assert!(
        submitted < 2 * declared.len(),
        "{submitted} submissions for {} children",
        declared.len()
    );
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_stopped_while_a_node_was_away_stays_stopped() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut d = TestCluster::with_nodes(52, &["a", "b", "c"], Options::durable()).await;
    let all = specs("r", 20);
    d.declare_all("a", &all, 20).await;
    let dead = d.stop_while_away("c", "b", &all[..5], 25).await;

    // c comes back with its old copy (version 20, the stopped children still in it).
    let c = d.restart("c").await;
    d.wait_members().await;
    d.wait_versions(25).await;
    c.await_normal(DEADLINE).await.unwrap();
    let kept = ids(&all[5..]);
    d.wait_exactly(&kept, &dead, "after the rejoin").await;
    // Two more rounds on c change nothing.
    d.wait_rounds("c", d.rounds_on("c"), 2).await;
    d.exactly(&kept, &dead).unwrap();
    stop_all(&d).await;
}

/// The survivors plan a crashed node's re-placement half-way through its grace; a durable
/// child of it stopped in the other half (the declared list changes) is not re-placed at the
/// grace's end, and its other children run again, once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_child_stopped_in_the_second_half_of_a_grace_is_not_re_placed() {
    let grace = std::time::Duration::from_secs(4);
    let mut d =
        TestCluster::with_nodes(62, &["a", "b", "c"], Options::durable().grace(grace)).await;
    let all = specs("g", 30);
    d.declare_all("a", &all, 30).await;
    let on_c = d.running_only_on("c");
    assert!(on_c.len() >= 2, "c runs {on_c:?}");
    d.crash("c").await;
    d.wait_members().await;
    // Past the plan made half-way through the grace, before the grace's end.
    tokio::time::sleep(grace * 5 / 8).await;
    let stopped: Vec<ChildId> = on_c.iter().take(on_c.len() / 2).cloned().collect();
    let result = d
        .hub("b")
        .stop_children(stopped.clone(), StopOptions::new())
        .await
        .unwrap();
    assert!(result.errors.is_empty(), "{result:?}");
    d.wait_versions(30 + stopped.len() as u64).await;
    let dead: BTreeSet<ChildId> = stopped.into_iter().collect();
    let kept: BTreeSet<ChildId> = ids(&all).difference(&dead).cloned().collect();
    d.wait_exactly(&kept, &dead, "after c's grace").await;
    // Well past the grace's end and a reconcile round: still so.
    tokio::time::sleep(grace).await;
    d.exactly(&kept, &dead).unwrap();
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_of_a_partition_mutate_and_the_lowest_mutator_wins_the_tie() {
    let d = TestCluster::with_nodes(53, &["a", "b", "c"], Options::durable()).await;
    d.hub("a")
        .start_child(ChildSpec::new("base", "counter"), durable())
        .await
        .unwrap();
    d.wait_versions(1).await;
    d.net
        .partition(&[vec![full("a")], vec![full("b"), full("c")]]);
    wait_until("the sides see each other gone", || {
        d.hub("a").nodes(true) == vec![full("a")] && d.hub("b").nodes(true).len() == 2
    })
    .await;
    // Each side has a leader (a; b) and mutates once: both reach version 2.
    let left = d
        .hub("a")
        .start_child(ChildSpec::new("left", "counter"), durable())
        .await
        .unwrap();
    assert!(left.is_ok(), "{left:?}");
    let right = d
        .hub("c")
        .start_child(ChildSpec::new("right", "counter"), durable())
        .await
        .unwrap();
    assert!(right.is_ok(), "{right:?}");
    d.net.heal();
    d.wait_members().await;
    d.wait_versions(2).await;
    wait_until("every node adopts a's copy", || {
        d.hubs.values().all(|h| {
            let view = h.declared_children().unwrap();
            view.last_mutated_by.as_deref() == Some("a@test")
                && view
                    .children
                    .iter()
                    .any(|c| c.spec.id == ChildId::from("left"))
        })
    })
    .await;
    assert!(d.hooked(|e| matches!(
        e,
        HookEvent::DeclaredTiebreak { version: 2, winner: Some(w), loser: Some(l), .. }
            if w == "a@test" && l == "b@test"
    )));
    // The losing side's child is undeclared with a durable row: a round stops it.
    let expected: BTreeSet<ChildId> = ["base", "left"].into_iter().map(ChildId::from).collect();
    let dead: BTreeSet<ChildId> = [ChildId::from("right")].into();
    d.wait_exactly(&expected, &dead, "after the heal").await;
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_disk_lost_with_a_remote_manifest_brings_every_declared_child_back() {
    let mut d = TestCluster::with_nodes(54, &["a", "b", "c"], Options::durable().manifest()).await;
    let all = specs("m", 12);
    d.hub("c")
        .start_children(all.clone(), durable())
        .await
        .unwrap();
    d.hub("b")
        .stop_child(all[0].id.clone(), StopOptions::new())
        .await
        .unwrap();
    d.wait_versions(13).await;
    let manifest = d.manifest.clone().unwrap().join("declared-manifest.json");
    wait_until("the manifest holds version 13", || {
        std::fs::read(&manifest)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["version"] == 13)
    })
    .await;
    for name in ["a", "b", "c"] {
        d.crash(name).await;
    }
    for name in ["a", "b", "c"] {
        remove_dir(&d.data_dir(name));
    }
    for name in ["a", "b", "c"] {
        d.restart(name).await;
    }
    d.wait_members().await;
    assert_eq!(
        d.versions(),
        vec![13, 13, 13],
        "restored from the manifest at boot"
    );
    let dead: BTreeSet<ChildId> = [all[0].id.clone()].into();
    d.wait_exactly(&ids(&all[1..]), &dead, "after losing every disk")
        .await;
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_never_answers_makes_durable_requests_outcome_unknown() {
    let d = TestCluster::with_nodes(55, &["a", "b"], Options::durable()).await;
    d.hub("b")
        .start_child(ChildSpec::new("before", "counter"), durable())
        .await
        .unwrap();
    d.wait_versions(1).await;
    // Every frame is lost: b's mutation never reaches a, and a's answer never comes back. b
    // cannot tell a lost mutation from a lost answer, so it answers `outcome_unknown`, never a
    // refusal (which would promise that nothing changed).
    d.net.set_drop_probability(1.0);
    let err = d
        .hub("b")
        .start_child(ChildSpec::new("lost", "counter"), durable())
        .await
        .unwrap_err();
    assert!(matches!(err, StartError::OutcomeUnknown { .. }), "{err}");
    assert!(d.hub("b").local_child(&ChildId::from("lost")).is_none());
    // Over the admin API: 504 `outcome_unknown`, for a start and for a stop of a declared child.
    let (status, body) = common::admin::call_admin(
        d.hub("b"),
        "POST",
        "/v1/children",
        Some(serde_json::json!({"id": "lost2", "kind": "counter", "durable": true})),
    )
    .await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"], "outcome_unknown", "{body}");
    let (status, body) =
        common::admin::call_admin(d.hub("b"), "DELETE", "/v1/children/before", None).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"], "outcome_unknown", "{body}");
    let err = d
        .hub("b")
        .stop_child("before", StopOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, StopError::OutcomeUnknown { .. }), "{err}");
    // Here the mutations were lost on the way: nothing changed, the child keeps running and
    // the leader's list is as it was.
    assert_eq!(d.running()[&ChildId::from("before")].len(), 1);
    let declared: Vec<ChildId> = d
        .hub("a")
        .declared_children()
        .expect("a runs auto-recovery")
        .children
        .into_iter()
        .map(|c| c.spec.id)
        .collect();
    assert_eq!(declared, vec![ChildId::from("before")]);
    // Everything else keeps working: a plain child b owns starts and stops, reads answer.
    let plain = id_owned_by("b", &["a", "b"], "plain");
    d.hub("b")
        .start_child(
            ChildSpec::new(plain.clone(), "counter"),
            StartOptions::new(),
        )
        .await
        .unwrap();
    assert!(d.hub("b").local_child(&plain).is_some());
    d.hub("b")
        .stop_child(plain.clone(), StopOptions::new())
        .await
        .unwrap();
    assert!(d.hub("b").local_child(&plain).is_none());
    assert_eq!(d.hub("b").declared_children().unwrap().version, 1);
    d.net.set_drop_probability(0.0);
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_rejoins_with_nothing_changed_starts_and_stops_nothing() {
    // The seed's single-node rejoin: the peers already run every declared child, so the
    // returning node's list and the cluster's running children differ in nothing.
    let mut d = TestCluster::with_nodes(61, &["a", "b", "c"], Options::durable()).await;
    let all = specs("j", 15);
    d.declare_all("a", &all, 15).await;
    d.crash("c").await;
    d.wait_members().await;
    d.wait_exactly(&ids(&all), &BTreeSet::new(), "re-homed on a and b")
        .await;
    let seen = d.rounds_on("c");
    let before = d.events.lock().unwrap().len();
    let c = d.restart("c").await;
    d.wait_members().await;
    c.await_normal(DEADLINE).await.unwrap();
    d.wait_rounds("c", seen, 2).await;
    d.wait_exactly(&ids(&all), &BTreeSet::new(), "after the rejoin")
        .await;
    let events = d.events.lock().unwrap()[before..].to_vec();
    for event in &events {
        if let HookEvent::ReconcileRound { node, stats, .. } = event {
            assert_eq!(
                (
                    stats.started,
                    stats.stopped_undeclared,
                    stats.duplicates,
                    stats.removed_stale
                ),
                (0, 0, 0, 0),
                "a round on {node} after the rejoin acted: {stats:?}"
            );
        }
    }
    assert_eq!(d.versions(), vec![15, 15, 15], "no mutation");
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_that_crashed_halfway_is_finished_by_each_node_next_round() {
    // `clear` undeclares every child without terminating any: the state a stop leaves when it
    // crashes between the list removal and the terminate, on every node at once.
    let d = TestCluster::with_nodes(56, &["a", "b", "c"], Options::durable()).await;
    let all = specs("h", 12);
    d.hub("b")
        .start_children(all.clone(), durable())
        .await
        .unwrap();
    d.hub("c")
        .start_child(ChildSpec::new("plain", "counter"), StartOptions::new())
        .await
        .unwrap();
    d.wait_versions(12).await;
    d.wait_exactly(&ids(&all), &BTreeSet::new(), "declared")
        .await;
    let holders: BTreeSet<String> = d.running().values().flatten().cloned().collect();
    assert!(holders.len() > 1, "the children are spread: {holders:?}");

    d.hub("c").clear_declared().await.unwrap();
    d.wait_versions(13).await;
    let plain: BTreeSet<ChildId> = [ChildId::from("plain")].into();
    d.wait_exactly(&plain, &ids(&all), "after the next rounds")
        .await;
    // Each node stopped its own instances: several nodes report undeclared stops. (A round
    // reports after its stops completed, so the children may be gone before its report.)
    let holders: BTreeSet<String> = holders.iter().map(|n| full(n)).collect();
    wait_until("every holder reports its stops", || {
        d.stopped_undeclared_on().is_superset(&holders)
    })
    .await;
    let stopping = d.stopped_undeclared_on();
    assert_eq!(stopping, holders, "every holder stopped its own share");
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returning_disk_does_not_bring_back_a_child_stopped_while_it_was_away() {
    // With the registry on disk, the node that was away still holds rows of the children
    // stopped meanwhile. Those rows must not re-place the children: the declared list decides.
    let mut d = TestCluster::with_nodes(
        57,
        &["a", "b", "c"],
        Options::durable().backend(BackendConfig::Durable { path: None }),
    )
    .await;
    let all = specs("u", 15);
    d.declare_all("a", &all, 15).await;
    // The rows c holds on its disk include children running on the other nodes.
    let dead = d.stop_while_away("c", "b", &all[..6], 21).await;
    let kept = ids(&all[6..]);
    d.wait_exactly(&kept, &dead, "before c returns").await;
    d.events.lock().unwrap().clear();

    let c = d.restart("c").await;
    d.wait_members().await;
    c.await_normal(DEADLINE).await.unwrap();
    d.wait_versions(21).await;
    d.wait_exactly(&kept, &dead, "after c returns").await;
    // Nothing undeclared ever ran again: no round had to stop one.
    let seen = d.events.lock().unwrap().len();
    wait_until("two more rounds", || {
        d.events.lock().unwrap().len() >= seen + 6
    })
    .await;
    let stops = d.stopped_undeclared_on();
    assert!(stops.is_empty(), "a stopped child ran again on {stops:?}");
    d.exactly(&kept, &dead).unwrap();
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elector_chooses_the_leader_among_the_members() {
    // Every node elects the highest member; when it leaves, the next highest leads.
    let highest: Elector = |members| members.iter().next_back().cloned();
    let mut d =
        TestCluster::with_nodes(58, &["a", "b", "c"], Options::durable().elector(highest)).await;
    d.hub("a")
        .start_child(ChildSpec::new("e1", "counter"), durable())
        .await
        .unwrap();
    d.wait_versions(1).await;
    let mutator =
        |d: &TestCluster, name: &str| d.hub(name).declared_children().unwrap().last_mutated_by;
    for name in ["a", "b", "c"] {
        assert_eq!(mutator(&d, name).as_deref(), Some("c@test"), "on {name}");
    }
    d.crash("c").await;
    d.wait_members().await;
    d.hub("a")
        .start_child(ChildSpec::new("e2", "counter"), durable())
        .await
        .unwrap();
    d.wait_versions(2).await;
    for name in ["a", "b"] {
        assert_eq!(mutator(&d, name).as_deref(), Some("b@test"), "on {name}");
    }
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_start_does_not_keep_the_first_round_from_completing() {
    // After a whole-cluster outage the first round of each node submits the declared child, and
    // its owner's answer does not come (here: the child's start waits for the gate; on real
    // nodes: a start forwarded while the cluster forms, whose owner cannot reach the origin
    // yet). The round waits for answers at most one reconcile interval, not the start timeout
    // (set above the test's deadline here), so every node still reaches `normal`.
    let gate = Arc::new(AtomicBool::new(true));
    let mut d = TestCluster::with_nodes(
        59,
        &["a", "b", "c"],
        Options::durable().kinds(gated_kinds(&gate)),
    )
    .await;
    let slow = ChildSpec::new("slow", "gated-slow");
    d.declare_all("a", std::slice::from_ref(&slow), 1).await;

    for name in ["a", "b", "c"] {
        d.crash(name).await;
    }
    gate.store(false, Ordering::SeqCst);
    d.options.default_timeout = DEADLINE * 3;
    for name in ["a", "b", "c"] {
        d.restart(name).await;
    }
    d.wait_members().await;
    for hub in d.hubs.values() {
        hub.await_normal(DEADLINE).await.unwrap();
    }
    assert!(
        d.hooked(|e| matches!(e, HookEvent::ReconcileRound { stats, .. } if stats.started == 1)),
        "a round submitted the child"
    );
    assert!(!d.running().contains_key(&slow.id), "its start still waits");

    gate.store(true, Ordering::SeqCst);
    d.wait_exactly(&ids(&[slow]), &BTreeSet::new(), "once the start can finish")
        .await;
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_whose_child_a_round_stops_first_still_reports_it_stopped() {
    // A stop undeclares first (every node learns it), then terminates. If the node running
    // the child runs a round in between, it stops the undeclared child itself, and when that
    // node is the one stopping, its terminate finds no row: the stop answered `not_found` (a
    // 404 from the admin API) for a child that was declared and running. Here b stops its own
    // child; the leader's answer to b's undeclare is held until b's round ran (the stop's and
    // the undeclare's timeouts are above the test's deadline).
    let d = TestCluster::with_nodes(
        60,
        &["a", "b", "c"],
        Options::durable().default_timeout(DEADLINE * 2),
    )
    .await;
    let id = id_owned_by("b", &["a", "b", "c"], "late");
    d.declare_all("a", &[ChildSpec::new(id.clone(), "counter")], 1)
        .await;
    assert_eq!(d.running()[&id], vec!["b".to_owned()]);
    wait_until("b's copy shows the child", || {
        !d.hub("b").get_pids(&id).is_empty()
    })
    .await;
    d.net
        .hold_frames(Some(Arc::new(|_, to: &str, msg: &WireMsg| {
            to == "b@test" && matches!(msg, WireMsg::DeclaredMutateReply { .. })
        })));
    let hub = d.hub("b").clone();
    let stop_id = id.clone();
    let stop = tokio::spawn(async move {
        hub.stop_child(stop_id, StopOptions::new().timeout(DEADLINE))
            .await
    });
    wait_until("b's round stops the undeclared child", || {
        d.stopped_undeclared_on().contains("b@test")
    })
    .await;
    assert_eq!(d.net.held_frames(), 1, "the leader's answer is held");
    assert!(!d.running().contains_key(&id));
    d.net.hold_frames(None);
    assert_eq!(d.net.release_held(), 1);
    let result = stop.await.unwrap().unwrap();
    assert!(result.errors.is_empty(), "{result:?}");
    let stopped: Vec<(ChildId, Vec<String>)> = result
        .stopped
        .into_iter()
        .map(|s| (s.id, s.nodes))
        .collect();
    assert_eq!(stopped, vec![(id.clone(), vec![full("b")])]);
    d.wait_versions(2).await;
    d.wait_exactly(&BTreeSet::new(), &[id].into(), "after the stop")
        .await;
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_left_running_on_both_sides_of_a_partition_runs_once_on_its_owner_after_the_heal() {
    let d = TestCluster::with_nodes(62, &["a", "b", "c"], Options::durable()).await;
    // A declared child that b owns in the full ring: cut off from b, a takes it over.
    let id = id_owned_by("b", &["a", "b", "c"], "dup");
    d.declare_all("a", &[ChildSpec::new(id.clone(), "counter")], 1)
        .await;
    assert_eq!(d.running()[&id], vec!["b".to_owned()]);
    d.net
        .partition(&[vec![full("a")], vec![full("b"), full("c")]]);
    wait_until("a runs its own instance while b runs the first", || {
        d.hub("a").local_child(&id).is_some() && d.hub("b").local_child(&id).is_some()
    })
    .await;
    d.net.heal();
    d.wait_members().await;
    wait_until("one instance, on the ring owner b", || {
        d.running().get(&id) == Some(&vec!["b".to_owned()])
    })
    .await;
    // And it stays that way: two more rounds on a change nothing.
    d.wait_rounds("a", d.rounds_on("a"), 2).await;
    assert_eq!(d.running().get(&id), Some(&vec!["b".to_owned()]));
    assert_eq!(d.versions(), vec![1, 1, 1], "no mutation");
    stop_all(&d).await;
}

/// A durable start on a node whose leader runs the hub without auto-recovery (a mixed
/// deployment during a rollout) is refused by that leader, at once: its inbox answers the
/// mutation itself, from a task, since the transport may hold its own lock while it hands the
/// frame over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutation_sent_to_a_leader_without_recovery_is_refused_at_once() {
    let mut d = TestCluster::new(61, Options::durable());
    d.options.auto_recovery = false;
    d.add("a").await;
    d.options.auto_recovery = true;
    d.add("b").await;
    d.wait_members().await;
    let started = tokio::time::Instant::now();
    let outcome = tokio::time::timeout(
        DEADLINE,
        d.hub("b")
            .start_child(ChildSpec::new("mixed-1", "counter"), durable()),
    )
    .await
    .expect("answered, not left waiting");
    match outcome {
        Err(StartError::Declared(RecoveryError::AutoRecoveryDisabled)) => {}
        other => panic!("expected auto_recovery_disabled from the leader a, got {other:?}"),
    }
    assert!(
        started.elapsed() < d.options.default_timeout,
        "refused by the leader, not by the timeout"
    );
    assert!(d.hub("b").child_lookup(&ChildId::from("mixed-1")).is_none());
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_stop_whose_host_does_not_answer_is_pending_and_settles() {
    // The undeclare is the decisive half of a durable stop: once it is committed, a host that
    // does not answer the terminate makes the stop pending (never `node_receive_timeout` or
    // `node_unavailable`), and the host's own round finishes it.
    let d = TestCluster::with_nodes(63, &["a", "b", "c"], Options::durable()).await;
    let id = id_owned_by("c", &["a", "b", "c"], "far");
    d.declare_all("a", &[ChildSpec::new(id.clone(), "counter")], 1)
        .await;
    wait_until("a's copy shows the child on c", || {
        !d.hub("a").get_pids(&id).is_empty()
    })
    .await;
    d.hold("stop_children", "c");
    let quick = StopOptions::new().timeout(std::time::Duration::from_millis(300));
    let result = d
        .hub("a")
        .stop_child(id.clone(), quick.clone())
        .await
        .expect("the removal is committed: no refusal");
    assert!(result.errors.is_empty(), "{result:?}");
    assert!(result.stopped.is_empty(), "{result:?}");
    let pending: Vec<(ChildId, Vec<String>)> = result
        .pending
        .iter()
        .map(|p| (p.id.clone(), p.nodes.clone()))
        .collect();
    assert_eq!(pending, vec![(id.clone(), vec![full("c")])]);
    assert!(result.pending[0].reason.is_outcome_unknown());
    assert!(!result.is_complete() && result.is_ok());
    let declared = d.hub("a").declared_children().unwrap();
    assert!(declared.children.iter().all(|c| c.spec.id != id));
    // Retrying while the host still does not answer is safe: pending again, nothing else.
    if d.hub("a").get_pids(&id).is_empty() {
        // c's round stopped it already: nothing runs, so nothing is pending.
    } else {
        let again = d.hub("a").stop_child(id.clone(), quick).await.unwrap();
        assert!(again.errors.is_empty(), "{again:?}");
        assert_eq!(again.pending.len() + again.stopped.len(), 1, "{again:?}");
    }
    d.net.hold_frames(None);
    d.net.release_held();
    d.wait_exactly(
        &BTreeSet::new(),
        &[id.clone()].into(),
        "the pending stop settles",
    )
    .await;
    // Once settled, a stop finds nothing and changed nothing: not found.
    let last = d
        .hub("a")
        .stop_child(id.clone(), StopOptions::new())
        .await
        .unwrap();
    assert!(
        last.stopped.is_empty() && last.pending.is_empty(),
        "{last:?}"
    );
    assert_eq!(last.errors[0].reason, process_hub::ChildStopError::NotFound);
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_start_whose_owner_does_not_answer_is_pending_and_runs_once() {
    let d = TestCluster::with_nodes(64, &["a", "b", "c"], Options::durable()).await;
    d.wait_members().await;
    let id = id_owned_by("c", &["a", "b", "c"], "slow");
    d.hold("start_children", "c");
    let quick = durable().timeout(std::time::Duration::from_millis(300));
    let result = d
        .hub("a")
        .start_child(ChildSpec::new(id.clone(), "counter"), quick)
        .await
        .expect("the declaration is committed: no refusal");
    // c's own round may start it before the held start times out: then it runs already.
    if result.started.is_empty() {
        assert!(result.errors.is_empty(), "{result:?}");
        let pending: Vec<(ChildId, String)> = result
            .pending
            .iter()
            .map(|p| (p.id.clone(), p.node.clone()))
            .collect();
        assert_eq!(pending, vec![(id.clone(), full("c"))]);
    }
    let declared = d.hub("a").declared_children().unwrap();
    assert!(declared.children.iter().any(|c| c.spec.id == id));
    d.net.hold_frames(None);
    d.net.release_held();
    d.wait_exactly(
        &[id.clone()].into(),
        &BTreeSet::new(),
        "the pending start settles",
    )
    .await;
    // A retry of a start that took effect answers as for any running child.
    let again = d
        .hub("a")
        .start_child(ChildSpec::new(id.clone(), "counter"), durable())
        .await
        .unwrap();
    assert_eq!(
        again.errors.first().map(|e| &e.reason),
        Some(&process_hub::ChildStartError::AlreadyStarted),
        "{again:?}"
    );
    stop_all(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_a_stop_would_refuse_are_refused_before_the_list_changes() {
    let d = TestCluster::with_nodes(65, &["a", "b"], Options::durable()).await;
    let id = ChildId::from("kept");
    d.declare_all("a", &[ChildSpec::new(id.clone(), "counter")], 1)
        .await;
    let err = d
        .hub("b")
        .stop_child(
            id.clone(),
            StopOptions::new().timeout(std::time::Duration::from_secs(7200)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StopError::InvalidOption { .. }), "{err}");
    assert_eq!(d.versions(), vec![1, 1]);
    assert_eq!(d.running()[&id].len(), 1);
    let err = d
        .hub("b")
        .start_child(
            ChildSpec::new("never", "counter"),
            durable().timeout(std::time::Duration::from_secs(7200)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StartError::InvalidOption { .. }), "{err}");
    assert_eq!(d.versions(), vec![1, 1]);
    stop_all(&d).await;
}
