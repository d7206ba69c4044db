//! Hooks (register, cancel, duplicates, priorities, the alter hook, the one-node hook keys) and
//! event subscriptions (actors and channels, a burst of 10,000 starts, slow subscribers).

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{spawn_hub, wait_for_async, wait_until, DEADLINE};
use process_hub::{
    ChildArgs, ChildId, ChildSpec, HookError, HookEvent, HookHandler, HookKey, Hub, HubEvent,
    HubMsg, ProcessHub, StartOptions, StopOptions,
};
use process_hub_actors::counter::CounterMsg;
use ractor::{call_t, Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

#[tokio::test]
async fn hook_handlers_register_cancel_and_reject_duplicates() {
    let hub = spawn_hub("hooks-register").await;
    let noop = |id: &str, prio| HookHandler::observe(id, prio, |_| {});
    hub.register_hook(HookKey::RegistryPidInsert, noop("a", 1))
        .unwrap();
    hub.register_hook(HookKey::RegistryPidInsert, noop("b", 5))
        .unwrap();
    assert_eq!(
        hub.register_hook(HookKey::RegistryPidInsert, noop("a", 9)),
        Err(HookError::DuplicateHandlerId {
            key: HookKey::RegistryPidInsert,
            id: "a".into()
        })
    );
    // The same id under another key is fine.
    hub.register_hook(HookKey::RegistryPidRemove, noop("a", 0))
        .unwrap();
    assert_eq!(hub.hook_handlers(HookKey::RegistryPidInsert), ["b", "a"]);
    hub.cancel_hook(HookKey::RegistryPidInsert, "b").unwrap();
    assert_eq!(hub.hook_handlers(HookKey::RegistryPidInsert), ["a"]);
    assert!(matches!(
        hub.cancel_hook(HookKey::RegistryPidInsert, "b"),
        Err(HookError::UnknownHandler { .. })
    ));
    // And as messages.
    let actor = hub.actor();
    let t = Some(Duration::from_secs(10));
    let dup = actor
        .call(
            |reply| HubMsg::RegisterHook {
                key: HookKey::RegistryPidInsert,
                handler: noop("a", 0),
                reply,
            },
            t,
        )
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(dup, Err(HookError::DuplicateHandlerId { .. })));
    let cancel = actor
        .call(
            |reply| HubMsg::CancelHook {
                key: HookKey::RegistryPidInsert,
                handler_id: "a".into(),
                reply,
            },
            t,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cancel, Ok(()));
    assert!(hub.hook_handlers(HookKey::RegistryPidInsert).is_empty());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn one_node_hooks_fire_at_their_moments() {
    let log: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let handler = |key: HookKey| {
        let log = log.clone();
        HookHandler::observe("log", 0, move |e: &HookEvent| {
            let entry = match e {
                HookEvent::RegistryPidInsert { id, .. } => format!("{key}:{id}"),
                HookEvent::RegistryPidRemove { id, .. } => format!("{key}:{id}"),
                HookEvent::PreChildrenStart { specs, .. } => format!("{key}:{}", specs.len()),
                HookEvent::PostChildrenStart {
                    started, failed, ..
                } => {
                    format!("{key}:{}/{}", started.len(), failed.len())
                }
                HookEvent::ProcessStartups { processes, .. } => {
                    format!("{key}:{}", processes.len())
                }
                HookEvent::CoordinatorShutdown { hub_id, .. } => format!("{key}:{hub_id}"),
                other => format!("{key}:{other:?}"),
            };
            log.lock().unwrap().push(entry);
        })
    };
    let mut builder = Hub::builder(
        ProcessHub::new("hooks-moments"),
        process_hub_actors::default_kinds(),
    );
    for key in [
        HookKey::RegistryPidInsert,
        HookKey::RegistryPidRemove,
        HookKey::PreChildrenStart,
        HookKey::PostChildrenStart,
        HookKey::ProcessStartups,
        HookKey::CoordinatorShutdown,
    ] {
        builder = builder.hook(key, handler(key));
    }
    let (hub, _) = builder.spawn().await.unwrap();
    hub.start_children(
        vec![
            ChildSpec::new("h1", "counter"),
            // A child that fails to start reaches both hooks (an unknown kind would not: it is
            // refused where the request enters, before any hook).
            ChildSpec::new("h2", "crasher")
                .with_args(&serde_json::json!({"fail_in_pre_start": true}))
                .unwrap(),
        ],
        StartOptions::new(),
    )
    .await
    .unwrap();
    hub.stop_child("h1", StopOptions::new()).await.unwrap();
    hub.shutdown().await.unwrap();
    let log = log.lock().unwrap().clone();
    for expected in [
        "pre_children_start:2",
        "process_startups:1",
        "post_children_start:1/1",
        "registry_pid_insert:h1",
        "registry_pid_remove:h1",
        "coordinator_shutdown:hooks-moments",
    ] {
        assert!(
            log.iter().any(|l| l == expected),
            "missing {expected} in {log:?}"
        );
    }
    let pos = |s: &str| log.iter().position(|l| l == s).unwrap();
    assert!(pos("pre_children_start:2") < pos("post_children_start:1/1"));
    assert!(pos("registry_pid_insert:h1") < pos("registry_pid_remove:h1"));
}

#[tokio::test]
async fn the_alter_hook_changes_a_childs_arguments_before_it_starts() {
    let hub = spawn_hub("hooks-alter").await;
    // Two handlers: the higher priority runs first, the lower one sees its change.
    hub.register_hook(
        HookKey::ChildDataAlter,
        HookHandler::alter("seed", 10, |spec, metadata| {
            if spec.kind == "counter" && metadata.get("tag").map(String::as_str) == Some("seeded") {
                spec.args = ChildArgs::from_json(&serde_json::json!({ "start": 100 }));
            }
        }),
    )
    .unwrap();
    hub.register_hook(
        HookKey::ChildDataAlter,
        HookHandler::alter("double", 1, |spec, _| {
            if let Ok(Some(v)) = spec.args.decode::<Option<serde_json::Value>>() {
                if let Some(start) = v.get("start").and_then(|s| s.as_i64()) {
                    spec.args = ChildArgs::from_json(&serde_json::json!({ "start": start * 2 }));
                }
            }
        }),
    )
    .unwrap();
    hub.start_child(
        ChildSpec::new("altered", "counter"),
        StartOptions::new().tag("seeded"),
    )
    .await
    .unwrap();
    hub.start_child(ChildSpec::new("plain", "counter"), StartOptions::new())
        .await
        .unwrap();
    let get = |id: &str| hub.local_child_ref::<CounterMsg>(&id.into()).unwrap();
    assert_eq!(
        call_t!(get("altered"), CounterMsg::Get, 10_000).unwrap(),
        200
    );
    assert_eq!(call_t!(get("plain"), CounterMsg::Get, 10_000).unwrap(), 0);
    // The registry records what actually runs.
    let row = hub.child_lookup(&"altered".into()).unwrap();
    assert_eq!(row.spec.args.as_json_text(), r#"{"start":200}"#);
    hub.shutdown().await.unwrap();
}

/// A subscriber actor that counts events by type.
struct Counting;

enum CountingMsg {
    Event(HubEvent),
    Counts(RpcReplyPort<(usize, usize, usize)>),
}

impl ractor::Message for CountingMsg {}

impl Actor for Counting {
    type Msg = CountingMsg;
    type State = (HashSet<ChildId>, usize, usize);
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ActorRef<CountingMsg>,
        _: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok((HashSet::new(), 0, 0))
    }

    async fn handle(
        &self,
        _: ActorRef<CountingMsg>,
        msg: CountingMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CountingMsg::Event(HubEvent::ChildStarted { id, .. }) => {
                state.0.insert(id);
                state.1 += 1;
            }
            CountingMsg::Event(HubEvent::RegistryInserted { .. }) => state.2 += 1,
            CountingMsg::Event(_) => {}
            CountingMsg::Counts(reply) => {
                let _ = reply.send((state.0.len(), state.1, state.2));
            }
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_of_a_burst_of_10000_starts_reaches_every_subscriber() {
    let hub = spawn_hub("events-burst").await;
    let (counter, _) = Actor::spawn(None, Counting, ()).await.unwrap();
    hub.subscribe_mapped(counter.clone(), CountingMsg::Event);
    // A slow subscriber: nobody reads this channel until the burst is over.
    let (_, mut slow) = hub.subscribe_channel();
    let n = 10_000;
    let specs: Vec<_> = (0..n)
        .map(|i| ChildSpec::new(format!("e{i}"), "counter"))
        .collect();
    let result = hub
        .start_children(specs, StartOptions::new().timeout(Duration::from_secs(120)))
        .await
        .unwrap();
    assert_eq!(result.started.len(), n);

    wait_for_async("every event reaches the actor", || async {
        let (unique, started, inserted) = call_t!(counter, CountingMsg::Counts, 10_000).unwrap();
        if unique == n && inserted == n {
            assert_eq!(started, n, "no duplicates");
            Ok(())
        } else {
            Err(format!(
                "actor got {unique} starts, {inserted} inserts of {n}"
            ))
        }
    })
    .await;
    let mut started = HashSet::new();
    let mut inserted = 0;
    while started.len() < n || inserted < n {
        match tokio::time::timeout(DEADLINE, slow.recv())
            .await
            .expect("slow subscriber missed events")
        {
            Some(HubEvent::ChildStarted { id, .. }) => {
                started.insert(id);
            }
            Some(HubEvent::RegistryInserted { .. }) => inserted += 1,
            Some(_) => {}
            None => panic!("channel closed"),
        }
    }
    hub.shutdown().await.unwrap();
    counter.stop(None);
}

#[tokio::test]
async fn subscribers_can_leave_and_dead_ones_are_dropped() {
    let hub = spawn_hub("events-leave").await;
    let (id, mut rx) = hub.subscribe_channel();
    let (_, dropped) = hub.subscribe_channel();
    drop(dropped);
    hub.start_child(ChildSpec::new("one", "counter"), StartOptions::new())
        .await
        .unwrap();
    let first = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        first,
        HubEvent::ChildStarted { .. } | HubEvent::RegistryInserted { .. }
    ));
    assert!(hub.unsubscribe(id));
    assert!(!hub.unsubscribe(id));
    hub.start_child(ChildSpec::new("two", "counter"), StartOptions::new())
        .await
        .unwrap();
    // Drain what was queued before the unsubscribe; after it the channel is closed.
    wait_until("channel closes", || {
        matches!(
            rx.try_recv(),
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
        )
    })
    .await;
    hub.shutdown().await.unwrap();
}

// ---- The cluster: membership hooks and events, moves, re-placements, leaves ----------------

mod cluster_events {
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    use super::common::cluster::{full, ids, specs, Options, TestCluster};
    use super::common::{wait_event, wait_until, DEADLINE};
    use process_hub::cluster::wire::WireMsg;
    use process_hub::{
        ChildId, HookEvent, HookHandler, HookKey, Hub, HubEvent, HubMsg, MoveReason, NodeName,
        StartOptions,
    };
    use tokio::sync::mpsc::UnboundedReceiver;

    const CLUSTER_KEYS: [HookKey; 4] = [
        HookKey::PreClusterJoin,
        HookKey::PostClusterJoin,
        HookKey::PreClusterLeave,
        HookKey::PostClusterLeave,
    ];

    fn record_cluster_hooks(hub: &Hub) -> Arc<Mutex<Vec<HookEvent>>> {
        let seen: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
        for key in CLUSTER_KEYS {
            let seen = seen.clone();
            hub.register_hook(
                key,
                HookHandler::observe("test", 0, move |e| seen.lock().unwrap().push(e.clone())),
            )
            .unwrap();
        }
        seen
    }

    fn drain(rx: &mut UnboundedReceiver<HubEvent>) -> Vec<HubEvent> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            out.push(e);
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn membership_fires_the_cluster_hooks_and_events() {
        let mut cluster = TestCluster::with_nodes(21, &["a", "b"], Options::plain()).await;
        let hooks = record_cluster_hooks(cluster.hub("a"));
        let (_, mut events) = cluster.hub("a").subscribe_channel();

        // A node joins: the join hooks in order, then `NodeUp` and, once its registry is
        // merged, `ClusterSettled`.
        cluster.add("c").await;
        cluster.wait_members().await;
        wait_event(
            &mut events,
            "c up",
            |e| matches!(e, HubEvent::NodeUp { node } if *node == full("c")),
        )
        .await;
        let settled = wait_event(&mut events, "settled", |e| {
            matches!(e, HubEvent::ClusterSettled { .. })
        })
        .await;
        assert_eq!(
            settled,
            HubEvent::ClusterSettled {
                members: vec![full("a"), full("b"), full("c")]
            }
        );
        // A crash: down (not graceful), then gone for good after the grace.
        cluster.crash("c").await;
        wait_event(&mut events, "c down", |e| {
            *e == HubEvent::NodeDown {
                node: full("c"),
                graceful: false,
            }
        })
        .await;
        wait_event(&mut events, "c left", |e| {
            *e == HubEvent::NodeLeft { node: full("c") }
        })
        .await;
        // A graceful leave: down without a grace, then gone.
        let b = cluster.hubs.remove(&full("b")).unwrap();
        b.leave().await.unwrap();
        wait_event(&mut events, "b down", |e| {
            *e == HubEvent::NodeDown {
                node: full("b"),
                graceful: true,
            }
        })
        .await;
        wait_event(&mut events, "b left", |e| {
            *e == HubEvent::NodeLeft { node: full("b") }
        })
        .await;
        let hooked = hooks.lock().unwrap().clone();
        let c = full("c");
        let b = full("b");
        assert_eq!(
            hooked,
            vec![
                HookEvent::PreClusterJoin { node: c.clone() },
                HookEvent::PostClusterJoin { node: c.clone() },
                HookEvent::PreClusterLeave { node: c.clone() },
                HookEvent::PostClusterLeave { node: c },
                HookEvent::PreClusterLeave { node: b.clone() },
                HookEvent::PostClusterLeave { node: b },
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cold_swap_is_a_move_not_a_stop_and_a_lost_node_s_children_are_replaced() {
        let mut cluster = TestCluster::with_nodes(22, &["a", "b"], Options::plain()).await;
        let all = specs("mv-", 24);
        cluster
            .hub("a")
            .start_children(all.clone(), StartOptions::new())
            .await
            .unwrap();
        cluster.wait_converged(&ids(&all), "started").await;
        let (_, mut on_a) = cluster.hub("a").subscribe_channel();
        let (_, mut on_b) = cluster.hub("b").subscribe_channel();
        let before = cluster.running();
        // Each pass says what it is about to move before it moves anything.
        let announced: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
        let passes: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
        for name in ["a", "b"] {
            let announced = announced.clone();
            cluster
                .hub(name)
                .register_hook(
                    HookKey::PreChildrenRedistribution,
                    HookHandler::observe("test", 0, move |e| {
                        announced.lock().unwrap().push(e.clone())
                    }),
                )
                .unwrap();
            for key in [
                HookKey::PreNodesRedistribution,
                HookKey::PostNodesRedistribution,
                HookKey::ChildrenMigrated,
            ] {
                let passes = passes.clone();
                cluster
                    .hub(name)
                    .register_hook(
                        key,
                        HookHandler::observe("test", 0, move |e| {
                            passes.lock().unwrap().push(e.clone())
                        }),
                    )
                    .unwrap();
            }
        }

        cluster.add("c").await;
        cluster.wait_members().await;
        cluster.wait_converged(&ids(&all), "c joined").await;
        let on_c_alone = |cluster: &TestCluster| -> BTreeSet<ChildId> {
            cluster
                .running()
                .iter()
                .filter(|(_, nodes)| nodes.as_slice() == ["c".to_owned()])
                .map(|(id, _)| id.clone())
                .collect()
        };
        let mut moved = on_c_alone(&cluster);
        assert!(!moved.is_empty(), "the new node owns some children");
        // Each moved child is reported by the node it left, with its destination and why;
        // nobody reports it stopped. The report may trail the registries (the node that left a
        // child reports the move once its copy is gone), so the events are read until every
        // move is reported or a deadline passes.
        let mut reported = BTreeSet::new();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            for (name, rx) in [("a", &mut on_a), ("b", &mut on_b)] {
                for event in drain(rx) {
                    match event {
                        HubEvent::ChildMoved { id, from, to, why } => {
                            assert_eq!(from, full(name));
                            assert_eq!(to, full("c"));
                            assert_eq!(why, MoveReason::NodeJoined);
                            assert_eq!(before[&id], vec![name.to_owned()]);
                            reported.insert(id);
                        }
                        HubEvent::ChildStopped { id, .. } => panic!("{id} reported stopped"),
                        _ => {}
                    }
                }
            }
            if reported == moved || tokio::time::Instant::now() > deadline {
                break;
            }
            // A move still under way when the registries first agreed ends meanwhile.
            moved = on_c_alone(&cluster);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(reported, moved);
        let mut to_move = BTreeSet::new();
        for event in announced.lock().unwrap().iter() {
            let HookEvent::PreChildrenRedistribution {
                migrating,
                replacing,
            } = event
            else {
                panic!("{event:?}")
            };
            for (id, to) in migrating {
                assert_eq!(*to, full("c"), "{event:?}");
                to_move.insert(id.clone());
            }
            // A peer may see a moving child's stub before c records it, and re-place it to c
            // too (c keeps one): still toward c.
            for (_, to) in replacing {
                assert_eq!(*to, full("c"), "{event:?}");
            }
        }
        assert_eq!(
            to_move, moved,
            "pre_children_redistribution named every move"
        );
        // The pass hooks: a pass for the join (before and after it issued its moves), and the
        // moved children reported running on their new owner.
        let passes = passes.lock().unwrap().clone();
        assert!(
            passes.iter().any(|e| matches!(e,
                HookEvent::PreNodesRedistribution { joined, left }
                    if joined.contains(&full("c")) && left.is_empty())),
            "{passes:?}"
        );
        let issued: usize = passes
            .iter()
            .filter_map(|e| match e {
                HookEvent::PostNodesRedistribution { migrating, .. } => Some(*migrating),
                _ => None,
            })
            .sum();
        assert_eq!(
            issued,
            moved.len(),
            "post_nodes_redistribution counted every move"
        );
        let migrated: BTreeSet<ChildId> = passes
            .iter()
            .flat_map(|e| match e {
                HookEvent::ChildrenMigrated { children } => children.clone(),
                _ => Vec::new(),
            })
            .map(|(id, to)| {
                assert_eq!(to, full("c"));
                id
            })
            .collect();
        assert_eq!(migrated, moved, "children_migrated named every moved child");

        // A crash: after the grace the survivors re-place its children.
        let (_, mut on_a) = cluster.hub("a").subscribe_channel();
        let (_, mut on_b) = cluster.hub("b").subscribe_channel();
        cluster.crash("c").await;
        cluster.wait_members().await;
        cluster.wait_converged(&ids(&all), "c crashed").await;
        // Each re-placement is reported once its child runs again: the last reports may still
        // be on their way when the registries agree.
        let mut replaced = BTreeSet::new();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while replaced != moved && tokio::time::Instant::now() < deadline {
            for rx in [&mut on_a, &mut on_b] {
                for event in drain(rx) {
                    if let HubEvent::ChildReplaced { id, node, why } = event {
                        assert_eq!(why, MoveReason::NodeDown);
                        assert_ne!(node, full("c"));
                        replaced.insert(id);
                    }
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(
            replaced, moved,
            "every child of the lost node is reported re-placed"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_nodes_leaving_at_once_hand_nothing_to_each_other() {
        let mut cluster = TestCluster::with_nodes(23, &["a", "b", "c"], Options::plain()).await;
        let all = specs("lv-", 30);
        cluster
            .hub("a")
            .start_children(all.clone(), StartOptions::new())
            .await
            .unwrap();
        cluster.wait_converged(&ids(&all), "started").await;
        let b = cluster.hubs.remove(&full("b")).unwrap();
        let c = cluster.hubs.remove(&full("c")).unwrap();
        let (_, mut on_b) = b.subscribe_channel();
        let (_, mut on_c) = c.subscribe_channel();
        let running = cluster_running_on(&b, &c);
        assert!(running > 0);

        // Both announce their leave before either hears the other's: the goodbyes are held
        // until all four are sent (b and c to each other and to a).
        cluster
            .net
            .hold_frames(Some(Arc::new(|_, _, msg: &WireMsg| {
                matches!(msg, WireMsg::Goodbye)
            })));
        let leave = |hub: &Hub| {
            let root = hub.actor();
            async move {
                root.call(|reply| HubMsg::Leave { reply }, Some(DEADLINE))
                    .await
                    .expect("the hub answers the leave")
            }
        };
        let both = tokio::spawn({
            let (leave_b, leave_c) = (leave(&b), leave(&c));
            async move { tokio::join!(leave_b, leave_c) }
        });
        wait_until("both goodbyes are sent", || cluster.net.held_frames() == 4).await;
        cluster.net.hold_frames(None);
        assert_eq!(cluster.net.release_held(), 4);
        both.await.unwrap();
        b.shutdown().await.unwrap();
        c.shutdown().await.unwrap();
        cluster.wait_members().await;
        cluster.wait_converged(&ids(&all), "b and c left").await;
        // Every child of b and c was handed to a, the one node that stays.
        let mut handed = 0;
        for rx in [&mut on_b, &mut on_c] {
            for event in drain(rx) {
                if let HubEvent::ChildMoved { to, why, .. } = event {
                    assert_eq!(to, full("a"), "a leaving node handed a child to {to}");
                    assert_eq!(why, MoveReason::NodeLeft);
                    handed += 1;
                }
            }
        }
        assert_eq!(handed, running, "every child was handed over once");
        wait_until("a runs everything", || {
            cluster
                .hub("a")
                .process_list(process_hub::ProcessScope::Local)
                .len()
                == all.len()
        })
        .await;
    }

    /// How many children b and c run between them.
    fn cluster_running_on(b: &Hub, c: &Hub) -> usize {
        let on = |hub: &Hub, node: &NodeName| {
            hub.process_list(process_hub::ProcessScope::Local)
                .iter()
                .filter(|e| e.nodes.iter().any(|(n, _)| n == node))
                .count()
        };
        on(b, b.node()) + on(c, c.node())
    }
}

// ---- Recovery and the declared list as events ----------------------------------------------

mod recovery_events {
    use super::common::recovery_hub::{config, hub_dir};
    use super::common::{durable, wait_event};
    use process_hub::recovery::declared_store::DECLARED_FILE;
    use process_hub::{ChildSpec, EventSink, Hub, HubEvent};

    async fn spawn_watched(
        cfg: process_hub::ProcessHub,
    ) -> (
        Hub,
        tokio::task::JoinHandle<()>,
        tokio::sync::mpsc::UnboundedReceiver<HubEvent>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (hub, join) = Hub::builder(cfg, process_hub_actors::default_kinds())
            .subscriber(EventSink::channel(tx))
            .spawn()
            .await
            .unwrap();
        (hub, join, rx)
    }

    #[tokio::test]
    async fn rounds_recovery_parking_and_versions_are_events() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config("ev-recovery", dir.path());
        let (hub, join, mut events) = spawn_watched(cfg.clone()).await;
        let node = hub.node().clone();
        wait_event(&mut events, "a round", |e| {
            matches!(e, HubEvent::ReconcileRoundCompleted { parked: false, .. })
        })
        .await;
        wait_event(&mut events, "normal", |e| {
            *e == HubEvent::RecoveryNormal { node: node.clone() }
        })
        .await;
        hub.start_child(ChildSpec::new("r1", "counter"), durable())
            .await
            .unwrap();
        let version = hub.declared_children().unwrap().version;
        assert!(version > 0);
        wait_event(&mut events, "the declaration's version", |e| {
            *e == HubEvent::DeclaredVersionChanged {
                node: node.clone(),
                version,
            }
        })
        .await;
        hub.shutdown().await.unwrap();
        drop(hub);
        join.await.unwrap();

        // The list is lost while durable rows remain: the node boots parked, and the
        // operator's clear unparks it one version up.
        std::fs::remove_file(hub_dir(dir.path(), "ev-recovery").join(DECLARED_FILE)).unwrap();
        let (hub, join, mut events) = spawn_watched(cfg).await;
        wait_event(&mut events, "parked", |e| {
            *e == HubEvent::DeclaredParked { node: node.clone() }
        })
        .await;
        wait_event(&mut events, "a parked round", |e| {
            matches!(e, HubEvent::ReconcileRoundCompleted { parked: true, .. })
        })
        .await;
        let cleared = hub.clear_declared().await.unwrap();
        wait_event(&mut events, "unparked", |e| {
            *e == HubEvent::DeclaredUnparked { node: node.clone() }
        })
        .await;
        wait_event(&mut events, "the clear's version", |e| {
            *e == HubEvent::DeclaredVersionChanged {
                node: node.clone(),
                version: cleared,
            }
        })
        .await;
        hub.shutdown().await.unwrap();
        drop(hub);
        join.await.unwrap();
    }
}

// ---- Partition mode, forwarded starts and duplicates resolved by a reconcile round ---------

mod quorum_and_duplicates {
    use std::sync::{Arc, Mutex};

    use super::common::cluster::{full, ids, specs, Options, TestCluster};
    use super::common::{durable, wait_event, wait_until};
    use process_hub::{
        ChildSpec, HookEvent, HookHandler, HookKey, Hub, HubEvent, PartitionTolerance, StartOptions,
    };

    fn record(hub: &Hub, key: HookKey) -> Arc<Mutex<Vec<HookEvent>>> {
        let seen: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
        let sink = seen.clone();
        hub.register_hook(
            key,
            HookHandler::observe("test", 0, move |e| sink.lock().unwrap().push(e.clone())),
        )
        .unwrap();
        seen
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn losing_and_regaining_quorum_fires_priority_state_updated_and_the_events() {
        let strategy = PartitionTolerance::MajorityQuorum {
            initial_cluster_size: 3,
            track_max_size: true,
        };
        let cluster = TestCluster::with_nodes(
            61,
            &["a", "b", "c"],
            Options::plain().partition_tolerance(strategy),
        )
        .await;
        let a = cluster.hub("a");
        let priority = record(a, HookKey::PriorityStateUpdated);
        let (_, mut events) = a.subscribe_channel();
        cluster
            .net
            .partition(&[vec![full("a")], vec![full("b"), full("c")]]);
        let entered = wait_event(&mut events, "partition mode", |e| {
            matches!(e, HubEvent::PartitionModeEntered { .. })
        })
        .await;
        // The event names the members a still counted when quorum went: itself, and at most
        // the one peer whose link had not dropped yet (a member leaves only once no member
        // still reaching it vouches for it, docs/cluster.md "Reachability").
        match &entered {
            HubEvent::PartitionModeEntered { members } => {
                assert!(members.contains(&full("a")), "{members:?}");
                assert!(members.len() < 3, "{members:?}");
            }
            other => panic!("{other:?}"),
        }
        cluster.net.heal();
        wait_event(&mut events, "quorum back", |e| {
            matches!(e, HubEvent::PartitionModeLeft { .. })
        })
        .await;
        wait_until("unlocked, and said so", || {
            !a.is_locked()
                && matches!(
                    priority.lock().unwrap().last(),
                    Some(HookEvent::PriorityStateUpdated { locked: false, .. })
                )
        })
        .await;
        let seen = priority.lock().unwrap().clone();
        let states: Vec<(bool, bool)> = seen
            .iter()
            .map(|e| match e {
                HookEvent::PriorityStateUpdated {
                    node,
                    locked,
                    partitioned,
                } => {
                    assert_eq!(*node, full("a"));
                    (*locked, *partitioned)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(states.first(), Some(&(true, true)), "{seen:?}");
        assert_eq!(states.last().map(|s| s.0), Some(false), "{seen:?}");
        assert!(
            states.windows(2).all(|w| w[0].0 != w[1].0),
            "each change announced once: {seen:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_start_sent_to_a_node_that_does_not_own_it_is_forwarded_and_says_so() {
        let mut cluster = TestCluster::with_nodes(62, &["a", "b"], Options::plain()).await;
        // c joins, but a does not hear of it yet: b does, so a start a routes to b by its
        // ring may belong to c by b's.
        cluster.net.cut("a@test", "c@test");
        cluster.add("c").await;
        wait_until("b sees c", || cluster.hub("b").nodes(true).len() == 3).await;
        let forwarded = record(cluster.hub("b"), HookKey::ForwardedMigration);
        let all = specs("fw-", 40);
        cluster
            .hub("a")
            .start_children(all.clone(), StartOptions::new())
            .await
            .unwrap();
        let seen = forwarded.lock().unwrap().clone();
        assert!(
            seen.iter().any(|e| matches!(e,
                HookEvent::ForwardedMigration { to, ids } if *to == full("c") && !ids.is_empty())),
            "b forwarded the starts c owns: {seen:?}"
        );
        cluster.net.heal();
        cluster.wait_members().await;
        cluster.wait_converged(&ids(&all), "after the heal").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_declared_child_running_on_both_sides_is_reduced_to_one_and_reconcile_duplicate_says_which(
    ) {
        // Redistribution passes never migrate here, so the duplicate a heal reveals is left to
        // the reconcile round (which a pass usually beats to it).
        let options = Options::durable().bug(process_hub::sim::InjectedBug::NeverMigrate);
        let cluster = TestCluster::with_nodes(63, &["a", "b"], options).await;
        let spec = ChildSpec::new("dup", "counter");
        cluster
            .hub("a")
            .start_children(vec![spec.clone()], durable())
            .await
            .unwrap();
        cluster.wait_versions(1).await;
        let one = ids(std::slice::from_ref(&spec));
        cluster
            .wait_exactly(&one, &Default::default(), "declared")
            .await;
        // Split: each side runs it (divergence), the heal shows it twice; a round keeps one.
        cluster.net.partition(&[vec![full("a")], vec![full("b")]]);
        wait_until("it runs on both sides", || {
            ["a", "b"]
                .iter()
                .all(|n| cluster.hub(n).local_child(&spec.id).is_some())
        })
        .await;
        let duplicates: Vec<_> = ["a", "b"]
            .iter()
            .map(|n| record(cluster.hub(n), HookKey::ReconcileDuplicate))
            .collect();
        cluster.net.heal();
        cluster.wait_members().await;
        cluster
            .wait_exactly(&one, &Default::default(), "once again")
            .await;
        let fired: Vec<HookEvent> = duplicates
            .iter()
            .flat_map(|d| d.lock().unwrap().clone())
            .collect();
        let owner = process_hub::core::placement::HashRing::new([full("a"), full("b")])
            .owner(&spec.id)
            .cloned()
            .unwrap();
        assert_eq!(
            cluster.running()[&spec.id],
            vec![owner.trim_end_matches("@test").to_owned()],
            "the ring owner's instance is kept"
        );
        assert!(!fired.is_empty(), "no reconcile_duplicate");
        for event in &fired {
            match event {
                HookEvent::ReconcileDuplicate { id, node, keep, .. } => {
                    assert_eq!(*id, spec.id);
                    assert_eq!(*keep, owner);
                    assert_ne!(*node, owner, "the other node stops its instance");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
