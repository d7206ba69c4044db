//! Multi-node: one binary run as three ractor_cluster nodes (three OS processes on loopback),
//! children started from node a, called from node c with typed references wherever they run,
//! one of them monitored from c, the process hosting it killed with SIGKILL, the monitor's
//! `ChildDown`, and that child answering again from a survivor.
//!
//! Run: `cargo run --example multi_node`
//!
//! The parent process only orchestrates (`support/nodes.rs`): it starts the three nodes, tells
//! them what to do over stdin, reads what they print, and kills one. Everything a node does is
//! plain library use: `ClusterNode::start`, `Hub::builder(..).network(node)`, `start_children`,
//! `Hub::child_ref` (a typed reference that follows the child) and `Hub::monitor_channel`.

#[path = "support/nodes.rs"]
mod nodes;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nodes::{node_name, say, Error, NodeRole, Nodes};
use process_hub::{ChildDown, ChildSpec, Hub, MonitorOptions, ProcessHub, StartOptions};
use process_hub_actors::counter::{CounterArgs, CounterMsg};
use tokio::sync::mpsc::UnboundedReceiver;

const CHILDREN: usize = 6;
const WAIT: Duration = Duration::from_secs(60);

fn main() -> Result<(), Error> {
    match NodeRole::from_args() {
        Some(role) => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(node(role?))
        }
        None => parent(),
    }
}

// ---------------------------------------------------------------------------------------------
// Messaging a child: a typed reference (`Hub::child_ref`), resolved where the child runs at each
// send. `CounterMsg` derives `process_hub::ChildMessage`, so the call crosses nodes in
// the hub's serde encoding; while the child is between nodes (its host just died), the call
// retries within its timeout.
// ---------------------------------------------------------------------------------------------

/// The value of counter `id`, wherever it runs.
async fn counter_value(hub: &Hub, id: &str) -> Result<i64, Error> {
    let counter = hub.child_ref::<CounterMsg>(id);
    Ok(counter
        .call(CounterMsg::Get, Duration::from_secs(5))
        .await?)
}

// ---------------------------------------------------------------------------------------------
// The parent: starts the nodes, drives the scenario, checks what they print.
// ---------------------------------------------------------------------------------------------

fn parent() -> Result<(), Error> {
    let started = Instant::now();
    let mut nodes = Nodes::launch(&["a", "b", "c"])?;
    for name in ["a", "b", "c"] {
        nodes.expect(name, "ready", WAIT)?;
    }
    println!("cluster formed: a, b and c see each other");

    nodes.tell("a", "start")?;
    nodes.expect("a", "started", WAIT)?;

    // c calls every child and says where each runs; the first one not on c is the victim.
    nodes.tell("c", "call-all")?;
    let mut victim = None;
    for _ in 0..CHILDREN {
        // "counter-3 = 30 on b@127.0.0.1"
        let answer = nodes.expect("c", "answer", WAIT)?;
        let words: Vec<&str> = answer.split(' ').collect();
        if let [id, "=", _, "on", host] = words[..] {
            if victim.is_none() && host != node_name("c") {
                victim = Some((id.to_owned(), host.to_owned()));
            }
        }
    }
    let (id, host) = victim.ok_or("every child runs on c: no host to kill")?;
    let short = host.split('@').next().unwrap_or_default().to_owned();

    nodes.tell("c", &format!("monitor {id}"))?;
    nodes.expect("c", "monitoring", WAIT)?;
    println!("killing node {short} (SIGKILL), which hosts {id}");
    nodes.kill(&short)?;
    nodes.tell("c", &format!("await {id} {host}"))?;
    let down = nodes.expect("c", "down", WAIT)?;
    println!("c's monitor of {id}: {down}");
    let again = nodes.expect("c", "answered-again", WAIT)?;
    println!("{id} came back and answered again: {again}");

    nodes.stop_all(Duration::from_secs(30))?;
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A node: a cluster node and a hub, then the parent's commands.
// ---------------------------------------------------------------------------------------------

async fn node(role: NodeRole) -> Result<(), Error> {
    let mut commands = role.commands();
    let cluster = role.start_node().await?;
    let config = ProcessHub::builder("multi-node-example").build()?;
    let (hub, join) = Hub::builder(config, process_hub_actors::default_kinds())
        .network(cluster)
        .spawn()
        .await?;
    // The cluster has formed once all three are members (woken by the joins, not polled);
    // then their registries are merged here.
    hub.wait_for_members(3, WAIT).await?;
    if !hub.wait_cluster_settled(WAIT).await {
        return Err(format!(
            "registries not merged after {WAIT:?}: {:?}",
            hub.nodes(true)
        )
        .into());
    }
    say(format!("ready {}", hub.node()));

    let mut monitors: HashMap<String, UnboundedReceiver<ChildDown>> = HashMap::new();
    while let Some(command) = commands.recv().await {
        let words: Vec<&str> = command.split(' ').collect();
        match words[..] {
            ["start"] => start_children(&hub).await?,
            ["call-all"] => call_all(&hub).await?,
            ["monitor", id] => {
                let (_monitor, downs) = hub.monitor_channel(id, MonitorOptions::new());
                monitors.insert(id.to_owned(), downs);
                say(format!("monitoring {id}"));
            }
            ["await", id, dead] => {
                if let Some(mut downs) = monitors.remove(id) {
                    let down = tokio::time::timeout(WAIT, downs.recv())
                        .await
                        .map_err(|_| format!("no ChildDown for {id} within {WAIT:?}"))?
                        .ok_or("the monitor's channel closed")?;
                    say(format!("down {} {:?}", down.id, down.reason));
                }
                await_failover(&hub, id, dead).await?
            }
            ["quit"] => break,
            _ => return Err(format!("unknown command {command:?}").into()),
        }
    }
    hub.shutdown().await?;
    drop(hub);
    join.await?;
    Ok(())
}

/// On a: one request starts every counter; each goes to the node that owns its id.
async fn start_children(hub: &Hub) -> Result<(), Error> {
    let specs = (0..CHILDREN)
        .map(|i| {
            ChildSpec::new(format!("counter-{i}"), "counter").with_args(&CounterArgs {
                start: 10 * i as i64,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let result = hub.start_children(specs, StartOptions::new()).await?;
    if !result.errors.is_empty() {
        return Err(format!("start failed: {:?}", result.errors).into());
    }
    for child in &result.started {
        let hosts: Vec<&str> = child.nodes.iter().map(|(node, _)| node.as_str()).collect();
        say(format!("placed {} on {}", child.id, hosts.join(",")));
    }
    say(format!("started {} children", result.started.len()));
    Ok(())
}

/// On c: once c's registry copy has every child, call each one where it runs.
async fn call_all(hub: &Hub) -> Result<(), Error> {
    let deadline = Instant::now() + WAIT;
    while hub.registry_dump().len() < CHILDREN {
        if Instant::now() > deadline {
            return Err("the children never reached c's registry".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..CHILDREN {
        let id = format!("counter-{i}");
        let value = counter_value(hub, &id).await?;
        let host = host_of(hub, &id).unwrap_or_else(|| "nowhere".into());
        say(format!("answer {id} = {value} on {host}"));
    }
    Ok(())
}

/// On c: after `dead` was killed, wait until `id` runs elsewhere and answers. A typed call made
/// in between retries while the child is between nodes; one that still fails is retried here.
async fn await_failover(hub: &Hub, id: &str, dead: &str) -> Result<(), Error> {
    let killed = Instant::now();
    let mut failed_calls = 0;
    loop {
        if killed.elapsed() > WAIT {
            return Err(format!("{id} did not come back within {WAIT:?}").into());
        }
        match host_of(hub, id) {
            Some(host) if host != dead => match counter_value(hub, id).await {
                Ok(value) => {
                    say(format!(
                        "answered-again {id} = {value} on {host}, {} ms after the kill ({failed_calls} calls failed meanwhile)",
                        killed.elapsed().as_millis()
                    ));
                    return Ok(());
                }
                Err(_) => failed_calls += 1,
            },
            _ => {
                if counter_value(hub, id).await.is_err() {
                    failed_calls += 1;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node this node's registry names as the child's host.
fn host_of(hub: &Hub, id: &str) -> Option<String> {
    hub.get_pids(&id.into())
        .into_iter()
        .next()
        .map(|(node, _)| node)
}
