//! Hot swap with state handover (`migration = "hot"`), through the in-process cluster: a
//! counter keeps its value when a node joins and its child moves, and when its node leaves
//! gracefully; a kind that does not hand over moves cold; an export that never answers falls
//! back to a cold swap and the event says so; casts sent during a move are all counted.

use crate::common;

use std::time::Duration;

use common::cluster::{full, id_owned_by, Options, TestCluster};
use common::{wait_event, wait_for_async, wait_until};
use process_hub::core::placement::HashRing;
use process_hub::{
    ChildId, ChildKinds, ChildSpec, HandoverError, HandoverOutcome, HotSwapConfig, Hub, HubEvent,
    StartOptions,
};
use process_hub_actors::counter::{Counter, CounterMsg};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

const CALL: Duration = Duration::from_secs(5);

fn timing() -> HotSwapConfig {
    HotSwapConfig {
        handover_data_wait_ms: 300,
        ..HotSwapConfig::default()
    }
}

async fn start(hub: &Hub, id: &ChildId, kind: &str) {
    let result = hub
        .start_child(ChildSpec::new(id.clone(), kind), StartOptions::new())
        .await
        .expect("start");
    assert!(result.errors.is_empty(), "{:?}", result.errors);
}

async fn increment(hub: &Hub, id: &ChildId, times: i64) {
    let child = hub.child_ref::<CounterMsg>(id.clone());
    for _ in 0..times {
        child
            .cast_within(CounterMsg::Increment(1), CALL)
            .await
            .unwrap();
    }
    // The casts are handled before this call (one sender, one node).
    assert_eq!(value(hub, id).await, times);
}

async fn value(hub: &Hub, id: &ChildId) -> i64 {
    hub.child_ref::<CounterMsg>(id.clone())
        .call(CounterMsg::Get, CALL)
        .await
        .expect("the counter answers")
}

async fn wait_runs_on(cluster: &TestCluster, id: &ChildId, node: &str) {
    wait_until(&format!("{id} runs on {node} alone"), || {
        cluster.running().get(id) == Some(&vec![node.to_owned()])
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_counter_keeps_its_value_when_a_node_joins_and_its_child_moves_there() {
    let options = Options::plain().hot_swap(timing());
    let mut cluster = TestCluster::with_nodes(1, &["a"], options).await;
    let id = id_owned_by("b", &["a", "b"], "hot-");
    start(cluster.hub("a"), &id, "counter").await;
    increment(cluster.hub("a"), &id, 7).await;
    let (_, mut events) = cluster.hub("a").subscribe_channel();

    cluster.add("b").await;
    cluster.wait_members().await;
    wait_runs_on(&cluster, &id, "b").await;

    let event = wait_event(
        &mut events,
        "the handover",
        |e| matches!(e, HubEvent::ChildHandover { id: moved, .. } if moved == &id),
    )
    .await;
    match event {
        HubEvent::ChildHandover {
            from,
            to,
            pid,
            outcome,
            ..
        } => {
            assert_eq!((from, to), (full("a"), full("b")));
            assert_eq!(outcome, HandoverOutcome::Imported { bytes: 8 });
            // The event names the instance that took the state: the one running on b.
            let running = cluster
                .hub("b")
                .local_child(&id)
                .map(|cell| cell.get_id().pid());
            assert!(pid.is_some());
            assert_eq!(pid, running);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(value(cluster.hub("a"), &id).await, 7);
    assert_eq!(value(cluster.hub("b"), &id).await, 7);
}

#[tokio::test(start_paused = true)]
async fn a_counter_keeps_its_value_when_its_node_leaves_gracefully() {
    let options = Options::plain().hot_swap(timing());
    let mut cluster = TestCluster::with_nodes(2, &["a", "b"], options).await;
    let id = id_owned_by("b", &["a", "b"], "leave-");
    start(cluster.hub("a"), &id, "counter").await;
    wait_runs_on(&cluster, &id, "b").await;
    increment(cluster.hub("b"), &id, 5).await;
    let (_, mut events) = cluster.hub("b").subscribe_channel();

    let b = cluster.hubs.remove(&full("b")).unwrap();
    b.leave().await.unwrap();
    cluster.wait_members().await;
    wait_runs_on(&cluster, &id, "a").await;

    let event = wait_event(
        &mut events,
        "the handover",
        |e| matches!(e, HubEvent::ChildHandover { id: moved, .. } if moved == &id),
    )
    .await;
    assert!(
        matches!(
            event,
            HubEvent::ChildHandover {
                outcome: HandoverOutcome::Imported { .. },
                ..
            }
        ),
        "{event:?}"
    );
    assert_eq!(value(cluster.hub("a"), &id).await, 5);
}

#[tokio::test(start_paused = true)]
async fn a_kind_that_does_not_hand_over_moves_cold() {
    let mut kinds = process_hub_actors::default_kinds();
    kinds.register("forgetful", Counter);
    let options = Options::plain().hot_swap(timing()).kinds(kinds);
    let mut cluster = TestCluster::with_nodes(3, &["a"], options).await;
    let id = id_owned_by("b", &["a", "b"], "cold-");
    start(cluster.hub("a"), &id, "forgetful").await;
    increment(cluster.hub("a"), &id, 4).await;
    let (_, mut events) = cluster.hub("a").subscribe_channel();

    cluster.add("b").await;
    cluster.wait_members().await;
    wait_runs_on(&cluster, &id, "b").await;
    wait_event(
        &mut events,
        "the move",
        |e| matches!(e, HubEvent::ChildMoved { id: moved, .. } if moved == &id),
    )
    .await;
    assert_eq!(
        value(cluster.hub("b"), &id).await,
        0,
        "a cold swap starts afresh"
    );
    while let Ok(e) = events.try_recv() {
        assert!(!matches!(e, HubEvent::ChildHandover { .. }), "{e:?}");
    }
}

/// A counter whose export never answers (it keeps the reply port).
#[derive(Clone)]
struct Stubborn;

#[derive(Debug, process_hub::ChildMessage)]
enum StubbornMsg {
    Increment(i64),
    #[rpc]
    Get(RpcReplyPort<i64>),
    #[rpc]
    Export(RpcReplyPort<Vec<u8>>),
    Import(Vec<u8>),
}

impl Actor for Stubborn {
    type Msg = StubbornMsg;
    type State = (i64, Vec<RpcReplyPort<Vec<u8>>>);
    type Arguments = Option<()>;

    async fn pre_start(
        &self,
        _: ActorRef<StubbornMsg>,
        _: Option<()>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok((0, Vec::new()))
    }

    async fn handle(
        &self,
        _: ActorRef<StubbornMsg>,
        msg: StubbornMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            StubbornMsg::Increment(n) => state.0 += n,
            StubbornMsg::Get(reply) => {
                let _ = reply.send(state.0);
            }
            StubbornMsg::Export(reply) => state.1.push(reply),
            StubbornMsg::Import(_) => state.0 = -1,
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_handover_whose_export_never_answers_falls_back_to_a_cold_swap_and_says_so() {
    let mut kinds = ChildKinds::new();
    kinds.register("stubborn", Stubborn).handover(
        "stubborn",
        StubbornMsg::Export,
        StubbornMsg::Import,
    );
    let options = Options::plain().hot_swap(timing()).kinds(kinds);
    let mut cluster = TestCluster::with_nodes(4, &["a"], options).await;
    let id = id_owned_by("b", &["a", "b"], "stuck-");
    start(cluster.hub("a"), &id, "stubborn").await;
    let child = cluster.hub("a").child_ref::<StubbornMsg>(id.clone());
    child.cast(StubbornMsg::Increment(3)).unwrap();
    assert_eq!(child.call(StubbornMsg::Get, CALL).await.unwrap(), 3);
    let (_, mut events) = cluster.hub("a").subscribe_channel();

    cluster.add("b").await;
    cluster.wait_members().await;
    let event = wait_event(
        &mut events,
        "the fallback",
        |e| matches!(e, HubEvent::ChildHandover { id: moved, .. } if moved == &id),
    )
    .await;
    match event {
        HubEvent::ChildHandover { to, outcome, .. } => {
            assert_eq!(to, full("b"));
            assert_eq!(
                outcome,
                HandoverOutcome::FellBackCold {
                    reason: HandoverError::Timeout { waited_ms: 300 }
                }
            );
        }
        other => panic!("{other:?}"),
    }
    wait_runs_on(&cluster, &id, "b").await;
    let child = cluster.hub("b").child_ref::<StubbornMsg>(id.clone());
    assert_eq!(
        child.call(StubbornMsg::Get, CALL).await.unwrap(),
        0,
        "started without state, and no import"
    );
}

#[tokio::test(start_paused = true)]
async fn casts_sent_during_a_hot_move_are_all_counted() {
    let options = Options::plain().hot_swap(timing());
    let mut cluster = TestCluster::with_nodes(5, &["a", "c"], options).await;
    // An id on `a` now that moves to `b` when it joins.
    let two = HashRing::new([full("a"), full("c")]);
    let three = HashRing::new([full("a"), full("b"), full("c")]);
    let id = (0..)
        .map(|i| ChildId::from(format!("busy-{i}")))
        .find(|id| two.owner(id) == Some(&full("a")) && three.owner(id) == Some(&full("b")))
        .unwrap();
    start(cluster.hub("a"), &id, "counter").await;
    wait_runs_on(&cluster, &id, "a").await;

    // Two senders, on the old node and on a bystander, cast until the child runs on `b`.
    let mut senders = Vec::new();
    for name in ["a", "c"] {
        let child = cluster.hub(name).child_ref::<CounterMsg>(id.clone());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut sent = 0i64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if child
                    .cast_within(CounterMsg::Increment(1), CALL)
                    .await
                    .is_ok()
                {
                    sent += 1;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            sent
        });
        senders.push((stop, task));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    cluster.add("b").await;
    cluster.wait_members().await;
    wait_runs_on(&cluster, &id, "b").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut sent = 0;
    for (stop, task) in senders {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        sent += task.await.unwrap();
    }
    assert!(sent > 0);
    let hub = cluster.hub("b").clone();
    wait_for_async("every acknowledged cast is counted", || {
        let hub = hub.clone();
        let id = id.clone();
        async move {
            let counted = value(&hub, &id).await;
            if counted == sent {
                Ok(())
            } else {
                Err(format!("{counted} of {sent} counted"))
            }
        }
    })
    .await;
}

/// A command to a `kv_shard` by bytes (the kind's JSON commands), answered as JSON.
async fn kv(hub: &Hub, id: &ChildId, command: serde_json::Value) -> serde_json::Value {
    let payload =
        serde_json::to_vec(&serde_json::json!({"kind": "kv_shard", "command": command})).unwrap();
    let answer = hub
        .call_child(id.clone(), payload, CALL)
        .await
        .expect("the shard answers");
    serde_json::from_slice(&answer).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_kv_shard_keeps_its_entries_when_it_moves_without_waiting_for_confirmation() {
    let options = Options::plain().hot_swap(HotSwapConfig {
        confirm_handover: false,
        ..timing()
    });
    let mut cluster = TestCluster::with_nodes(6, &["a"], options).await;
    let id = id_owned_by("b", &["a", "b"], "shard-");
    start(cluster.hub("a"), &id, "kv_shard").await;
    for (key, value) in [("x", "1"), ("y", "2")] {
        kv(
            cluster.hub("a"),
            &id,
            serde_json::json!({"op": "put", "key": key, "value": value}),
        )
        .await;
    }
    assert_eq!(
        kv(cluster.hub("a"), &id, serde_json::json!({"op": "len"})).await,
        serde_json::json!(2)
    );

    cluster.add("b").await;
    cluster.wait_members().await;
    wait_runs_on(&cluster, &id, "b").await;
    let get = serde_json::json!({"op": "get", "key": "y"});
    assert_eq!(kv(cluster.hub("b"), &id, get).await, serde_json::json!("2"));
    assert_eq!(
        kv(cluster.hub("a"), &id, serde_json::json!({"op": "len"})).await,
        serde_json::json!(2)
    );
}
