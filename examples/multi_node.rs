//! Multi-node: one binary run as three ractor_cluster nodes (three OS processes on loopback),
//! children started from node a, called from node c wherever they run, the process hosting one
//! of them killed with SIGKILL, and that child answering again from a survivor.
//!
//! Run: `cargo run --example multi_node`
//!
//! The parent process only orchestrates (`support/nodes.rs`): it starts the three nodes, tells
//! them what to do over stdin, reads what they print, and kills one. Everything a node does is
//! plain library use: `ClusterNode::start`, `Hub::builder(..).network(node)`, `start_children`,
//! and messaging a child by id from any node.

#[path = "support/nodes.rs"]
mod nodes;

use std::time::{Duration, Instant};

use nodes::{node_name, say, Error, NodeRole, Nodes};
use process_hub::{ChildSpec, Hub, ProcessHub, StartOptions};
use process_hub_actors::counter::CounterArgs;

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
// Messaging a child: the one place this example talks to a child. It sends the counter's JSON
// command by id (`Hub::call_child`); the hub finds the node running the child and carries the
// bytes there, where the kind's command handler turns them into `CounterMsg::Get`.
// ---------------------------------------------------------------------------------------------

/// The value of counter `id`, wherever it runs.
async fn counter_value(hub: &Hub, id: &str) -> Result<i64, Error> {
    let get = br#"{"kind":"counter","command":{"op":"get"}}"#.to_vec();
    let answer = hub.call_child(id, get, Duration::from_secs(5)).await?;
    Ok(serde_json::from_slice(&answer)?)
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

    println!("killing node {short} (SIGKILL), which hosts {id}");
    nodes.kill(&short)?;
    nodes.tell("c", &format!("await {id} {host}"))?;
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
    let deadline = Instant::now() + WAIT;
    while hub.nodes(true).len() < 3 || !hub.cluster_settled() {
        if Instant::now() > deadline {
            return Err(format!("members after {WAIT:?}: {:?}", hub.nodes(true)).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    say(format!("ready {}", hub.node()));

    while let Some(command) = commands.recv().await {
        let words: Vec<&str> = command.split(' ').collect();
        match words[..] {
            ["start"] => start_children(&hub).await?,
            ["call-all"] => call_all(&hub).await?,
            ["await", id, dead] => await_failover(&hub, id, dead).await?,
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

/// On c: after `dead` was killed, wait until `id` runs elsewhere and answers. Calls made in
/// between fail (the child has no host until the survivors re-place it); they are retried.
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
