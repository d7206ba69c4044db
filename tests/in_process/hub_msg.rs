//! The hub driven by messages alone: a user actor holding nothing but the hub's
//! `ActorRef<HubMsg>` runs every operation of the `Hub` handle, and each answer is the one the
//! handle gives.

use crate::common;

use std::time::Duration;

use common::recovery_hub::config;
use process_hub::{
    ChildSpec, HookEvent, HookHandler, HookKey, Hub, HubInfo, HubMsg, ProcessScope, RecoveryState,
    StartOptions, StopOptions,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;

/// What the driver saw, one line per operation, for the test to check.
type Log = Vec<(&'static str, String)>;

/// A user actor: on `Run` it drives the hub through `HubMsg` and answers what it saw.
struct Driver;

enum DriverMsg {
    Run(RpcReplyPort<Log>),
}

impl ractor::Message for DriverMsg {}

const T: Option<Duration> = Some(Duration::from_secs(20));

async fn ask<R: Send + 'static>(
    hub: &ActorRef<HubMsg>,
    build: impl FnOnce(RpcReplyPort<R>) -> HubMsg,
) -> Result<R, ActorProcessingErr> {
    match hub.call(build, T).await? {
        ractor::rpc::CallResult::Success(answer) => Ok(answer),
        ractor::rpc::CallResult::Timeout => Err("the hub did not answer in time".into()),
        ractor::rpc::CallResult::SenderError => Err("the hub dropped the request".into()),
    }
}

impl Actor for Driver {
    type Msg = DriverMsg;
    type State = ActorRef<HubMsg>;
    type Arguments = ActorRef<HubMsg>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        hub: ActorRef<HubMsg>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(hub)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        hub: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let DriverMsg::Run(reply) = msg;
        let mut log: Log = Vec::new();
        if let Err(e) = drive(hub, &mut log).await {
            log.push(("error", e.to_string()));
        }
        let _ = reply.send(log);
        Ok(())
    }
}

/// Every operation, in an order whose answers are known.
async fn drive(hub: &ActorRef<HubMsg>, log: &mut Log) -> Result<(), ActorProcessingErr> {
    let mut note = |op: &'static str, what: String| log.push((op, what));

    let info = ask(hub, |reply| HubMsg::Info { reply }).await?;
    note(
        "info",
        format!("{}|{}|{}", info.hub_id, info.node, info.clustered),
    );
    let normal = ask(hub, |reply| HubMsg::AwaitNormal {
        timeout: Duration::from_secs(20),
        reply,
    })
    .await?;
    note("await_normal", format!("{normal:?}"));
    let state = ask(hub, |reply| HubMsg::RecoveryState { reply }).await?;
    note("recovery_state", format!("{state:?}"));

    let (tx, mut events) = mpsc::unbounded_channel();
    let sub = ask(hub, |reply| HubMsg::Subscribe {
        sink: process_hub::EventSink::channel(tx),
        reply: Some(reply),
    })
    .await?;
    let hook = HookHandler::observe("driver", 0, |_: &HookEvent| {});
    let registered = ask(hub, |reply| HubMsg::RegisterHook {
        key: HookKey::PostChildrenStart,
        handler: hook,
        reply,
    })
    .await?;
    note("register_hook", format!("{registered:?}"));
    let handlers = ask(hub, |reply| HubMsg::HookHandlers {
        key: HookKey::PostChildrenStart,
        reply,
    })
    .await?;
    note("hook_handlers", handlers.join(","));

    let one = ask(hub, |reply| HubMsg::StartChild {
        spec: ChildSpec::new("m1", "counter"),
        opts: StartOptions::new(),
        reply,
    })
    .await??;
    note("start_child", format!("{}", one.started.len()));
    let durable = ask(hub, |reply| HubMsg::StartChildren {
        specs: vec![
            ChildSpec::new("m2", "counter"),
            ChildSpec::new("m3", "counter"),
        ],
        opts: StartOptions::new().durable(true),
        reply,
    })
    .await??;
    note("start_children", format!("{}", durable.started.len()));
    let started = events.recv().await.ok_or("no event")?;
    note("event", format!("{started:?}"));

    let lookup = ask(hub, |reply| HubMsg::ChildLookup {
        id: "m1".into(),
        with_metadata: true,
        reply,
    })
    .await?;
    note(
        "child_lookup",
        format!("{}", lookup.is_some_and(|i| i.metadata.is_some())),
    );
    let pids = ask(hub, |reply| HubMsg::GetPids {
        id: "m1".into(),
        reply,
    })
    .await?;
    note("get_pids", format!("{}", pids.len()));
    let local = ask(hub, |reply| HubMsg::LocalChild {
        id: "m1".into(),
        reply,
    })
    .await?;
    note(
        "local_child",
        format!(
            "{}",
            local.map(|c| c.get_id().pid()) == pids.first().map(|p| p.1)
        ),
    );
    let list = ask(hub, |reply| HubMsg::ProcessList {
        scope: ProcessScope::Local,
        reply,
    })
    .await?;
    note("process_list", format!("{}", list.len()));
    let dump = ask(hub, |reply| HubMsg::RegistryDump { reply }).await?;
    note("registry_dump", format!("{}", dump.len()));
    let tagged = ask(hub, |reply| HubMsg::TagQuery {
        tag: "nothing".into(),
        reply,
    })
    .await?;
    note("tag_query", format!("{}", tagged.len()));
    let nodes = ask(hub, |reply| HubMsg::Nodes {
        include_local: true,
        reply,
    })
    .await?;
    note("nodes", nodes.join(","));
    let settled = ask(hub, |reply| HubMsg::ClusterSettled { reply }).await?;
    note("cluster_settled", format!("{settled}"));
    let waited = ask(hub, |reply| HubMsg::WaitClusterSettled {
        timeout: Duration::from_secs(5),
        reply,
    })
    .await?;
    note("wait_cluster_settled", format!("{waited}"));
    let problems = ask(hub, |reply| HubMsg::StorageProblems { reply }).await?;
    note("storage_problems", format!("{}", problems.len()));
    let refused = ask(hub, |reply| HubMsg::RefusedPeerInput { reply }).await?;
    note(
        "refused_peer_input",
        format!("{}", refused.values().sum::<u64>()),
    );

    hub.cast(HubMsg::CastChild {
        id: "m1".into(),
        payload: br#"{"kind":"counter","command":{"op":"increment","by":4}}"#.to_vec(),
    })?;
    let answer = ask(hub, |reply| HubMsg::CallChild {
        id: "m1".into(),
        payload: br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec(),
        timeout: Duration::from_secs(5),
        reply,
    })
    .await?
    .map_err(|e| e.to_string())?;
    note("call_child", String::from_utf8_lossy(&answer).into_owned());

    let declared = ask(hub, |reply| HubMsg::DeclaredChildren { reply }).await?;
    note(
        "declared_children",
        format!("{}", declared.map_or(0, |d| d.children.len())),
    );
    let (down_tx, mut downs) = mpsc::unbounded_channel();
    let watching = ask(hub, |reply| HubMsg::Monitor {
        id: "m1".into(),
        target: process_hub::DownSink::channel(down_tx.clone()),
        options: process_hub::MonitorOptions::new(),
        reply,
    })
    .await?;
    let on_m3 = ask(hub, |reply| HubMsg::Monitor {
        id: "m3".into(),
        target: process_hub::DownSink::channel(down_tx.clone()),
        options: process_hub::MonitorOptions::new(),
        reply,
    })
    .await?;
    let cancelled = ask(hub, |reply| HubMsg::Demonitor {
        monitor: on_m3,
        reply,
    })
    .await?;
    note("demonitor", format!("{cancelled}"));
    let stopped = ask(hub, |reply| HubMsg::StopChild {
        id: "m1".into(),
        opts: StopOptions::new(),
        reply,
    })
    .await??;
    note("stop_child", format!("{}", stopped.stopped.len()));
    let down = downs.recv().await.ok_or("no ChildDown")?;
    note(
        "monitor",
        format!("{}|{}|{:?}", down.monitor == watching, down.id, down.reason),
    );
    let ghost = ask(hub, |reply| HubMsg::Monitor {
        id: "ghost".into(),
        target: process_hub::DownSink::channel(down_tx),
        options: process_hub::MonitorOptions::new(),
        reply,
    })
    .await?;
    let down = downs.recv().await.ok_or("no ChildDown")?;
    note(
        "monitor_ghost",
        format!("{}|{:?}", down.monitor == ghost, down.reason),
    );
    let stopped = ask(hub, |reply| HubMsg::StopChildren {
        ids: vec!["m2".into()],
        opts: StopOptions::new(),
        reply,
    })
    .await??;
    note("stop_children", format!("{}", stopped.stopped.len()));
    let cleared = ask(hub, |reply| HubMsg::ClearDeclared { reply }).await??;
    note("clear_declared", format!("{cleared}"));

    let cancelled = ask(hub, |reply| HubMsg::CancelHook {
        key: HookKey::PostChildrenStart,
        handler_id: "driver".into(),
        reply,
    })
    .await?;
    note("cancel_hook", format!("{cancelled:?}"));
    hub.cast(HubMsg::Unsubscribe { id: sub })?;
    ask(hub, |reply| HubMsg::Leave { reply }).await?;
    note("leave", "done".into());
    ask(hub, |reply| HubMsg::ShutdownAndWait { reply }).await?;
    note("shutdown_and_wait", "done".into());
    Ok(())
}

#[tokio::test]
async fn every_operation_of_the_handle_runs_through_hubmsg_from_an_actor() {
    let dir = tempfile::tempdir().unwrap();
    let (hub, join) = Hub::spawn(
        config("msg-driven", dir.path()),
        process_hub_actors::default_kinds(),
    )
    .await
    .unwrap();
    let (driver, _) = Actor::spawn(None, Driver, hub.actor()).await.unwrap();
    let log = ractor::call_t!(driver, DriverMsg::Run, 60_000).expect("the driver answers");
    let seen: std::collections::BTreeMap<&str, String> = log.iter().cloned().collect();
    assert!(!seen.contains_key("error"), "{log:?}");
    let expect = |op: &str, value: &str| {
        assert_eq!(seen.get(op).map(String::as_str), Some(value), "{op}");
    };
    let info = HubInfo {
        hub_id: "msg-driven".into(),
        node: "a@127.0.0.1".into(),
        clustered: false,
    };
    expect(
        "info",
        &format!("{}|{}|{}", info.hub_id, info.node, info.clustered),
    );
    expect("await_normal", "Ok(())");
    expect("recovery_state", &format!("{:?}", RecoveryState::Normal));
    expect("register_hook", "Ok(())");
    expect("hook_handlers", "driver");
    expect("start_child", "1");
    expect("demonitor", "true");
    expect("monitor", "true|m1|Stopped { node: \"a@127.0.0.1\" }");
    expect("monitor_ghost", "true|NoChild");
    expect("start_children", "2");
    assert!(
        seen["event"].starts_with("ChildStarted"),
        "{}",
        seen["event"]
    );
    expect("child_lookup", "true");
    expect("get_pids", "1");
    expect("local_child", "true");
    expect("process_list", "3");
    expect("registry_dump", "3");
    expect("tag_query", "0");
    expect("nodes", "a@127.0.0.1");
    expect("cluster_settled", "true");
    expect("wait_cluster_settled", "true");
    expect("storage_problems", "0");
    expect("refused_peer_input", "0");
    // The cast was handled before the call: one mailbox, in order.
    expect("call_child", "4");
    expect("declared_children", "2");
    expect("stop_child", "1");
    expect("stop_children", "1");
    // The declarations and the undeclaration of m2 came before the clear.
    expect("clear_declared", "4");
    expect("cancel_hook", "Ok(())");
    expect("leave", "done");
    expect("shutdown_and_wait", "done");
    // Every operation ran, the hub is down and its root has stopped.
    assert_eq!(log.len(), 30, "{log:?}");
    assert!(!hub.is_alive());
    join.await.unwrap();
}
