//! Typed messages and monitors from a client node: three `process-hub node` processes run hub
//! `rmon`; this test process joins their cluster as a bare `ClusterNode` (no hub) and, through
//! the hub's remote endpoints only, calls and casts to counters on each node with
//! `RemoteChildRef<CounterMsg>`, and monitors children: a missing id (`no_child`), a stopped
//! child (`stopped`), a demonitored one (nothing), a child whose host is SIGKILLed
//! (`node_down` naming the host), and a child monitored through an endpoint whose node is
//! SIGKILLed or frozen (SIGSTOP: `node_down` naming the endpoint's node), and sends the
//! endpoint requests no honest client sends. Each monitor delivers exactly one `ChildDown`:
//! after the first, the test waits a while for a duplicate.
//!
//! The test runs alone in a process of its own (`common::alone`): ractor's pg groups are
//! process-global, so that process is one node.

use crate::common::alone;
use crate::common::remote_start::start_through;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Duration;

use process_hub::cluster::node::{ClusterConfig, ClusterNode};
use process_hub::remote::{
    decode, encode, endpoint_group, endpoint_node, EndpointMsg, EndpointReply, EndpointRequest,
};
use process_hub::{
    ChildDown, ChildId, ChildRefError, ChildSpec, DownReason, MonitorId, MonitorOptions, RemoteHub,
    RemoteHubError, StartOptions,
};
use process_hub_actors::counter::CounterMsg;
use process_hub_actors::harness::{ClusterOptions, LocalCluster};
use ractor::rpc::CallResult;
use ractor::ActorRef;
use tokio::sync::mpsc::UnboundedReceiver;

const DEADLINE: Duration = Duration::from_secs(60);
/// How long the test waits for a duplicate down after the first (none may come).
const DUPLICATE_WINDOW: Duration = Duration::from_millis(1500);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

/// The one down of `monitor`: it arrives, and no second one follows.
async fn exactly_one(
    what: &str,
    monitor: MonitorId,
    rx: &mut UnboundedReceiver<ChildDown>,
) -> ChildDown {
    let down = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: no ChildDown"))
        .expect("the channel stays open");
    assert_eq!(down.monitor, monitor, "{what}");
    tokio::time::sleep(DUPLICATE_WINDOW).await;
    assert!(rx.try_recv().is_err(), "{what}: a second ChildDown");
    down
}

/// Sends `request` as raw bytes to the endpoint of hub `rmon` on `node`, as any client could.
async fn raw(node: &str, request: &EndpointRequest) -> EndpointReply {
    let cell = ractor::pg::get_members(&endpoint_group("rmon"))
        .into_iter()
        .find(|c| {
            c.get_name()
                .is_some_and(|n| endpoint_node("rmon", &n) == Some(node))
        })
        .expect("the endpoint is visible");
    let endpoint: ActorRef<EndpointMsg> = ActorRef::from(cell);
    let bytes = encode(request);
    match endpoint
        .call(|reply| EndpointMsg::Request(bytes, reply), Some(DEADLINE))
        .await
    {
        Ok(CallResult::Success(answer)) => decode(&answer.0).expect("the answer decodes"),
        other => panic!("no answer from {node}: {other:?}"),
    }
}

fn refused(reply: EndpointReply) -> String {
    match reply {
        EndpointReply::Failed(failure) => failure.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// This process's down sink group (it exists once a monitor was set).
fn own_sink() -> String {
    ractor::pg::which_groups()
        .into_iter()
        .find(|g| g.starts_with("process_hub.down_sink|"))
        .expect("the down sink joined its group")
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

/// Where `id` runs, by the registry of whichever endpoint answers. A start is answered once the
/// host recorded it; another node's copy learns it a moment later (the host's delta), so a
/// lookup that finds nothing yet is asked again, for at most 10 s.
async fn host_of(hub: &RemoteHub, id: &ChildId) -> String {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(info) = hub.child_lookup(id.clone()).await.unwrap() {
            if let Some((node, _)) = info.nodes.first() {
                return node.clone();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{id} is still unknown to the endpoints' registries 10 s after its start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_node_messages_and_monitors_children_through_remote_endpoints() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_client_node_messages_and_monitors_children_through_remote_endpoints",
    ) {
        return;
    }
    let options = ClusterOptions {
        hub: "rmon".into(),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 3, &options, None).expect("nodes spawn");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
    let seeds = cluster.nodes.iter().map(|n| n.listen.to_string()).collect();
    let config = ClusterConfig {
        bind: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        seeds,
        ..ClusterConfig::new("client", "127.0.0.1", 0, options.cookie.clone())
    };
    let client = ClusterNode::start(config)
        .await
        .expect("the client node starts");
    let hub = RemoteHub::any("rmon").timeout(Duration::from_secs(20));
    let start = tokio::time::Instant::now();
    while hub.endpoints() != names {
        assert!(
            start.elapsed() < DEADLINE,
            "endpoints seen: {:?}, nodes: {names:?}\n{}",
            hub.endpoints(),
            cluster.log_tails(40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Counters until each node hosts two.
    let mut by_host: std::collections::BTreeMap<String, Vec<ChildId>> = Default::default();
    for i in 0..96 {
        if names
            .iter()
            .all(|n| by_host.get(n).is_some_and(|c| c.len() >= 2))
        {
            break;
        }
        let spec = ChildSpec::new(format!("c-{i}"), "counter");
        start_through(&hub, std::slice::from_ref(&spec), StartOptions::new()).await;
        by_host
            .entry(host_of(&hub, &spec.id).await)
            .or_default()
            .push(spec.id);
    }
    for name in &names {
        assert!(
            by_host.get(name).is_some_and(|c| c.len() >= 2),
            "{name} hosts two counters: {by_host:?}"
        );
    }

    // Typed casts and calls to a counter on each node, through each endpoint.
    for (i, host) in names.iter().enumerate() {
        let via = RemoteHub::on("rmon", names[(i + 1) % names.len()].clone());
        let counter = via.child_ref::<CounterMsg>(by_host[host][0].clone());
        for _ in 0..3 {
            counter.cast(CounterMsg::Increment(2)).await.unwrap();
        }
        let value = counter.call(CounterMsg::Get, DEADLINE).await;
        assert_eq!(value, Ok(6), "{} on {host}", counter.id());
        // The same child through the endpoint of its own node.
        let local =
            RemoteHub::on("rmon", host.clone()).child_ref::<CounterMsg>(counter.id().clone());
        local.cast(CounterMsg::Increment(1)).await.unwrap();
        assert_eq!(local.call(CounterMsg::Get, DEADLINE).await, Ok(7));
    }
    let nobody = hub.child_ref::<CounterMsg>("nobody");
    assert!(matches!(
        nobody.call(CounterMsg::Get, Duration::from_secs(5)).await,
        Err(RemoteHubError::Child(ChildRefError::NotFound { .. }))
    ));
    assert!(matches!(
        nobody.cast(CounterMsg::Increment(1)).await,
        Err(RemoteHubError::Child(ChildRefError::NotFound { .. }))
    ));

    // Untrusted requests are typed refusals: a sink that is not one, a sink nobody runs, a
    // variant name past the bound.
    let monitor_to = |sink: &str| EndpointRequest::Monitor {
        id: "c-0".into(),
        sink: sink.to_owned(),
        monitor: 1,
        follow_restarts: false,
    };
    assert_eq!(
        refused(raw(&names[0], &monitor_to("process_hub.endpoint.rmon")).await),
        "unknown_sink"
    );
    let nobodys = "process_hub.down_sink|1|0123456789abcdef0123456789abcdef";
    assert_eq!(
        refused(raw(&names[0], &monitor_to(nobodys)).await),
        "unknown_sink"
    );
    let long = EndpointRequest::CallTyped {
        id: "c-0".into(),
        variant: "G".repeat(300),
        args: Vec::new(),
        timeout_ms: 1000,
    };
    assert_eq!(refused(raw(&names[0], &long).await), "bad_request");

    // A missing child: no_child.
    let (m, mut rx) = hub
        .monitor_channel("nobody", MonitorOptions::new())
        .await
        .unwrap();
    let down = exactly_one("missing", m, &mut rx).await;
    assert_eq!(down.reason, DownReason::NoChild);
    assert_eq!(down.id.as_str(), "nobody");

    // A stopped child: stopped, naming its node; through another node's endpoint.
    let (victim_host, victim) = (names[0].clone(), by_host[&names[0]][0].clone());
    let through = RemoteHub::on("rmon", names[1].clone());
    let (m, mut rx) = through
        .monitor_channel(victim.clone(), MonitorOptions::new())
        .await
        .unwrap();
    let stopped = hub.stop_children(vec![victim.clone()]).await.unwrap();
    assert_eq!(stopped.stopped.len(), 1, "{stopped:?}");
    let down = exactly_one("stopped", m, &mut rx).await;
    assert_eq!(down.id, victim);
    assert_eq!(
        down.reason,
        DownReason::Stopped {
            node: victim_host.clone()
        }
    );

    // A demonitored child: nothing, whatever happens to it.
    let quiet = by_host[&names[0]][1].clone();
    let (m, mut rx) = through
        .monitor_channel(quiet.clone(), MonitorOptions::new())
        .await
        .unwrap();
    let held = EndpointRequest::Held { sink: own_sink() };
    assert_eq!(raw(&names[1], &held).await, EndpointReply::Held(1));
    assert!(hub.demonitor(m).await);
    assert!(!hub.demonitor(m).await, "cancelled once");
    assert_eq!(
        raw(&names[1], &held).await,
        EndpointReply::Held(0),
        "the endpoint let go of it"
    );
    hub.stop_children(vec![quiet]).await.unwrap();
    tokio::time::sleep(DUPLICATE_WINDOW).await;
    assert!(rx.try_recv().is_err(), "a demonitored monitor fired");

    // A child whose host is SIGKILLed, monitored through a survivor: node_down naming the host.
    let (doomed_host, doomed) = (names[1].clone(), by_host[&names[1]][0].clone());
    let survivor = names[2].clone();
    let through = RemoteHub::on("rmon", survivor.clone());
    let (m, mut rx) = through
        .monitor_channel(doomed.clone(), MonitorOptions::new())
        .await
        .unwrap();
    // And one through the doomed node's own endpoint, of a child on the survivor.
    let (m2, mut rx2) = RemoteHub::on("rmon", doomed_host.clone())
        .monitor_channel(by_host[&survivor][0].clone(), MonitorOptions::new())
        .await
        .unwrap();
    cluster.nodes[1].kill();
    let down = exactly_one("host killed", m, &mut rx).await;
    assert_eq!(down.id, doomed);
    assert_eq!(
        down.reason,
        DownReason::NodeDown {
            node: doomed_host.clone()
        }
    );
    let down = exactly_one("endpoint killed", m2, &mut rx2).await;
    assert_eq!(down.id, by_host[&survivor][0]);
    assert_eq!(down.reason, DownReason::NodeDown { node: doomed_host });

    // An endpoint's node SIGKILLed while its monitor waits: node_down naming that node. The
    // child runs on the other survivor.
    let endpoint_host = names[0].clone();
    let watched = by_host[&survivor][1].clone();
    let (m, mut rx) = RemoteHub::on("rmon", endpoint_host.clone())
        .monitor_channel(watched.clone(), MonitorOptions::new())
        .await
        .unwrap();
    cluster.nodes[0].kill();
    let down = exactly_one("endpoint killed", m, &mut rx).await;
    assert_eq!(down.id, watched);
    assert_eq!(
        down.reason,
        DownReason::NodeDown {
            node: endpoint_host
        }
    );
    assert_eq!(
        RemoteHub::remote_monitors(),
        0,
        "every monitor fired or was cancelled"
    );

    // The survivor still answers.
    let still = RemoteHub::on("rmon", survivor.clone()).child_ref::<CounterMsg>(watched.clone());
    assert_eq!(still.call(CounterMsg::Get, DEADLINE).await, Ok(0));

    // An endpoint that stops answering (its node frozen: the connection stays open, so only
    // the client's probe tells): node_down naming its node.
    let (m, mut rx) = RemoteHub::on("rmon", survivor.clone())
        .monitor_channel(watched.clone(), MonitorOptions::new())
        .await
        .unwrap();
    let pid = cluster.nodes[2].pid().expect("the survivor runs");
    signal(pid, "-STOP");
    let down = exactly_one("endpoint frozen", m, &mut rx).await;
    signal(pid, "-CONT");
    assert_eq!(down.id, watched);
    assert_eq!(down.reason, DownReason::NodeDown { node: survivor });
    tokio::time::sleep(DUPLICATE_WINDOW).await;
    assert!(rx.try_recv().is_err(), "a second ChildDown once it thawed");
    client.shutdown();
}
