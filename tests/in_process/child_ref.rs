//! Typed references to children (`Hub::child_ref`) and monitors (`Hub::monitor`) over the
//! in-process cluster: local and remote calls and casts, order, a child that moves, typed
//! errors, a child between nodes after its host crashed, and every reason a monitor fires for.

use crate::common;

use std::time::Duration;

use process_hub::{
    ChildId, ChildKinds, ChildMessage, ChildRefError, ChildSpec, DownReason, Hub, MonitorOptions,
    Restart, StartOptions, StopOptions,
};
use process_hub_actors::counter::CounterMsg;
use process_hub_actors::crasher::CrasherMsg;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use common::cluster::{full, id_owned_by, Options, TestCluster};
use common::{wait_for_async, wait_until, DEADLINE};

const T: Duration = Duration::from_secs(10);

/// An append-only log: shows the order in which casts arrived.
#[derive(Debug, ChildMessage)]
enum LogMsg {
    Append(u64),
    #[rpc]
    Entries(RpcReplyPort<Vec<u64>>),
}

#[derive(Clone)]
struct Log;

impl Actor for Log {
    type Msg = LogMsg;
    type State = Vec<u64>;
    type Arguments = Option<()>;

    async fn pre_start(
        &self,
        _: ActorRef<LogMsg>,
        _: Option<()>,
    ) -> Result<Vec<u64>, ActorProcessingErr> {
        Ok(Vec::new())
    }

    async fn handle(
        &self,
        _: ActorRef<LogMsg>,
        msg: LogMsg,
        log: &mut Vec<u64>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            LogMsg::Append(n) => log.push(n),
            LogMsg::Entries(reply) => {
                let _ = reply.send(log.clone());
            }
        }
        Ok(())
    }
}

/// A message type the counter does not speak (same encoding rules, other variants).
#[derive(Debug, ChildMessage)]
enum Stranger {
    #[rpc]
    Ask(RpcReplyPort<i64>),
}

fn kinds() -> ChildKinds {
    let mut kinds = process_hub_actors::default_kinds();
    kinds.register("log", Log);
    kinds
}

async fn start_on(cluster: &TestCluster, owner: &str, members: &[&str], kind: &str) -> ChildId {
    let id = id_owned_by(owner, members, &format!("{kind}-{owner}-"));
    let spec = ChildSpec::new(id.clone(), kind).with_restart(Restart::Permanent);
    let result = cluster
        .hub("a")
        .start_child(spec, StartOptions::new())
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    wait_until("every node knows the child", || {
        cluster
            .hubs
            .values()
            .all(|h| h.child_lookup(&id).is_some_and(|c| !c.nodes.is_empty()))
    })
    .await;
    id
}

async fn get(hub: &Hub, id: &ChildId) -> Result<i64, ChildRefError> {
    hub.child_ref::<CounterMsg>(id.clone())
        .call(CounterMsg::Get, T)
        .await
}

#[tokio::test(start_paused = true)]
async fn typed_calls_and_casts_reach_a_child_on_any_node() {
    let members = ["a", "b", "c"];
    let options = Options::plain().kinds(kinds());
    let cluster = TestCluster::with_nodes(41, &members, options).await;
    for host in members {
        let id = start_on(&cluster, host, &members, "counter").await;
        for from in members {
            let child = cluster.hub(from).child_ref::<CounterMsg>(id.clone());
            child.cast(CounterMsg::Increment(2)).unwrap();
        }
        // Casts from one node arrive before that node's later call: each node sees at least
        // its own increment, and eventually all three.
        wait_for_async("every node's cast reached the child", || async {
            let mut seen = Vec::new();
            for from in members {
                seen.push(
                    get(cluster.hub(from), &id)
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            if seen.iter().all(|v| *v == 6) {
                Ok(())
            } else {
                Err(format!("{id} on {host}: {seen:?}"))
            }
        })
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn casts_of_one_sender_arrive_in_order() {
    let members = ["a", "b"];
    let options = Options::plain().kinds(kinds());
    let cluster = TestCluster::with_nodes(42, &members, options).await;
    let id = start_on(&cluster, "b", &members, "log").await;
    let log = cluster.hub("a").child_ref::<LogMsg>(id.clone());
    for n in 0..500 {
        log.cast(LogMsg::Append(n)).unwrap();
    }
    let entries = log.call(LogMsg::Entries, T).await.unwrap();
    assert_eq!(entries, (0..500).collect::<Vec<u64>>());
}

#[tokio::test(start_paused = true)]
async fn typed_errors_say_what_went_wrong() {
    let members = ["a", "b"];
    let options = Options::plain().kinds(kinds());
    let cluster = TestCluster::with_nodes(43, &members, options).await;
    let remote = start_on(&cluster, "b", &members, "counter").await;
    let local = start_on(&cluster, "a", &members, "counter").await;
    let a = cluster.hub("a");

    let missing = a
        .child_ref::<CounterMsg>("nobody")
        .call(CounterMsg::Get, T)
        .await
        .unwrap_err();
    assert!(
        matches!(missing, ChildRefError::NotFound { .. }),
        "{missing}"
    );
    assert!(!missing.is_retryable());

    // The wrong message type: refused by ractor's type check here, undecodable there.
    for id in [&local, &remote] {
        let wrong = a
            .child_ref::<Stranger>(id.clone())
            .call(Stranger::Ask, T)
            .await
            .unwrap_err();
        assert_eq!(wrong.code(), "decode", "{id}: {wrong}");
    }
    // A local-only message type cannot reach a child on another node.
    let local_only = a
        .child_ref::<CrasherMsg>(remote.clone())
        .cast(CrasherMsg::Panic)
        .unwrap_err();
    assert_eq!(local_only.code(), "not_remotable", "{local_only}");
    // The child is unharmed.
    assert_eq!(get(a, &remote).await.unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_child_ref_follows_its_child_when_it_moves() {
    let options = Options::plain().kinds(kinds());
    let mut cluster = TestCluster::with_nodes(44, &["a", "b"], options).await;
    // A child that c owns once it joins: a cold swap moves it there.
    let id = id_owned_by("c", &["a", "b", "c"], "mover-");
    let spec = ChildSpec::new(id.clone(), "counter");
    cluster
        .hub("a")
        .start_child(spec, StartOptions::new())
        .await
        .unwrap();
    let child = cluster.hub("a").child_ref::<CounterMsg>(id.clone());
    child.cast(CounterMsg::Increment(1)).unwrap();
    assert_eq!(child.call(CounterMsg::Get, T).await.unwrap(), 1);
    let before = cluster.hub("a").child_lookup(&id).unwrap().nodes;
    assert!(before.iter().all(|(n, _)| n != &full("c")));

    let mut down = cluster
        .hub("b")
        .monitor_channel(id.clone(), MonitorOptions::new())
        .1;
    cluster.add("c").await;
    cluster.wait_members().await;
    wait_until("the child runs on c", || {
        cluster.hubs.values().all(|h| {
            h.child_lookup(&id)
                .is_some_and(|c| c.nodes.iter().any(|(n, _)| n == &full("c")))
        })
    })
    .await;
    // The same reference reaches the new instance (a cold swap starts it afresh).
    assert_eq!(child.call(CounterMsg::Get, T).await.unwrap(), 0);
    let fired = tokio::time::timeout(DEADLINE, down.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(fired.reason, DownReason::Moved { .. }),
        "{fired:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_child_whose_host_crashed_is_between_nodes_then_answers_again() {
    // A long grace: the child stays between nodes until the test lets the grace end.
    let options = Options::plain()
        .kinds(kinds())
        .grace(Duration::from_secs(5));
    let members = ["a", "b", "c"];
    let mut cluster = TestCluster::with_nodes(45, &members, options).await;
    let id = start_on(&cluster, "b", &members, "counter").await;
    let (_, mut down) = cluster
        .hub("a")
        .monitor_channel(id.clone(), MonitorOptions::new().follow_restarts(true));
    cluster.crash("b").await;
    wait_until("a sees b down", || {
        !cluster.hub("a").nodes(true).contains(&full("b"))
    })
    .await;

    // The bytes path says so too, naming the host the registry gives.
    let bytes = cluster
        .hub("a")
        .call_child(
            id.clone(),
            br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec(),
            T,
        )
        .await
        .unwrap_err();
    assert_eq!(bytes.code, "between_nodes", "{bytes}");
    assert_eq!(bytes.node, full("b"));
    // A typed call that cannot wait out the grace says the same, retryable.
    let short = cluster
        .hub("a")
        .child_ref::<CounterMsg>(id.clone())
        .call(CounterMsg::Get, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!(
        short,
        ChildRefError::BetweenNodes {
            id: id.clone(),
            host: Some(full("b"))
        }
    );
    assert!(short.is_retryable());
    let cast = cluster
        .hub("a")
        .child_ref::<CounterMsg>(id.clone())
        .cast(CounterMsg::Increment(1))
        .unwrap_err();
    assert!(cast.is_retryable(), "{cast}");
    // A call with time to wait retries until the child runs on a survivor.
    let again = cluster
        .hub("a")
        .child_ref::<CounterMsg>(id.clone())
        .call(CounterMsg::Get, DEADLINE)
        .await;
    assert_eq!(again, Ok(0));

    let fired = tokio::time::timeout(DEADLINE, down.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        fired.reason,
        DownReason::NodeDown { node: full("b") },
        "{fired:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_monitor_fires_once_for_each_reason() {
    let members = ["a", "b"];
    let options = Options::plain().kinds(kinds());
    let cluster = TestCluster::with_nodes(46, &members, options).await;
    let a = cluster.hub("a");
    let b = cluster.hub("b");

    // No such child: at once.
    let (_, mut rx) = a.monitor_channel("ghost", MonitorOptions::new());
    assert_eq!(
        rx_one(&mut rx, "no child").await.reason,
        DownReason::NoChild
    );

    for (host, watcher) in [("b", "a"), ("a", "a")] {
        // Stopped through the hub.
        let id = start_on(&cluster, host, &members, "counter").await;
        let (_, mut rx) = cluster
            .hub(watcher)
            .monitor_channel(id.clone(), MonitorOptions::new());
        a.stop_child(id.clone(), StopOptions::new()).await.unwrap();
        let fired = rx_one(&mut rx, &format!("stopped on {host}")).await;
        assert_eq!(fired.reason, DownReason::Stopped { node: full(host) });
        assert_eq!(fired.id, id);

        // A crash that the supervisor restarts: a plain monitor fires (abnormal), one that
        // follows restarts does not, and fires when the child is stopped for good.
        let id = start_on(&cluster, host, &members, "crasher").await;
        let (_, mut plain) = cluster
            .hub(watcher)
            .monitor_channel(id.clone(), MonitorOptions::new());
        let (_, mut follows) = cluster
            .hub(watcher)
            .monitor_channel(id.clone(), MonitorOptions::new().follow_restarts(true));
        let (cancelled, mut quiet) = cluster
            .hub(watcher)
            .monitor_channel(id.clone(), MonitorOptions::new());
        assert!(cluster.hub(watcher).demonitor(cancelled));
        assert!(!cluster.hub(watcher).demonitor(cancelled));
        let hub = cluster.hub(host);
        let pid = hub.get_pid(&id).unwrap();
        hub.local_child_ref::<CrasherMsg>(&id)
            .unwrap()
            .cast(CrasherMsg::Panic)
            .unwrap();
        let fired = rx_one(&mut plain, &format!("crash on {host}")).await;
        assert!(
            matches!(&fired.reason, DownReason::Abnormal { node, .. } if node == &full(host)),
            "{fired:?}"
        );
        wait_until("restarted", || hub.get_pid(&id).is_some_and(|p| p != pid)).await;
        a.stop_child(id.clone(), StopOptions::new()).await.unwrap();
        let fired = rx_one(&mut follows, &format!("follows on {host}")).await;
        assert_eq!(fired.reason, DownReason::Stopped { node: full(host) });
        // Exactly once each, and nothing for the cancelled one.
        assert!(plain.try_recv().is_err());
        assert!(follows.try_recv().is_err());
        assert!(quiet.try_recv().is_err());
    }
    let _ = b;
}

#[tokio::test(start_paused = true)]
async fn a_watch_request_overtaken_by_the_stop_fires_with_the_stops_reason() {
    let members = ["a", "b"];
    let options = Options::plain().kinds(kinds());
    let cluster = TestCluster::with_nodes(47, &members, options).await;
    let a = cluster.hub("a");
    let id = start_on(&cluster, "b", &members, "counter").await;

    // a's watch request to b is held while the child is stopped there.
    cluster.hold("monitor_child", "b");
    let (_, mut rx) = a.monitor_channel(id.clone(), MonitorOptions::new());
    cluster.wait_held().await;
    a.stop_child(id.clone(), StopOptions::new()).await.unwrap();
    assert!(cluster.hub("b").get_pid(&id).is_none());
    assert_eq!(cluster.net.release_held(), 1);
    let fired = rx_one(&mut rx, "late watch").await;
    assert_eq!(fired.reason, DownReason::Stopped { node: full("b") });
    assert_eq!(fired.id, id);

    assert!(rx.try_recv().is_err());
}

async fn rx_one(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<process_hub::ChildDown>,
    what: &str,
) -> process_hub::ChildDown {
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("the monitor did not fire: {what}"))
        .expect("open")
}
