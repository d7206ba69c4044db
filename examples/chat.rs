//! Chat rooms: an application to copy. Each room is a child of the hub (kind `room`, a ractor
//! actor with a typed message enum); the hub places every room on one node of the cluster and
//! any node can post to it and read it by the room's name.
//!
//! Run: `cargo run --example chat`
//!
//! Three OS processes of this binary form a cluster on loopback (`support/nodes.rs`). Node a
//! opens the rooms; users connected to b and c post into them; every node reads each room's
//! history and sees the same messages in the same order, whichever node hosts the room.

#[path = "support/nodes.rs"]
mod nodes;

use std::time::{Duration, Instant};

use nodes::{say, Error, NodeRole, Nodes};
use process_hub::{ChildKinds, ChildSpec, Hub, ProcessHub, StartOptions};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};

const ROOMS: [&str; 3] = ["rust", "elixir", "general"];
const WAIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// The room: a plain ractor actor. Its arguments come from the child spec (JSON).
// ---------------------------------------------------------------------------------------------

/// The kind's name, registered on every node.
const ROOM: &str = "room";

/// A room's arguments: its topic.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct RoomArgs {
    topic: String,
}

/// One line of a room's history.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Line {
    user: String,
    text: String,
}

/// A room's topic and lines, as `RoomMsg::History` answers them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct History {
    topic: String,
    lines: Vec<Line>,
}

// How a line and a history cross nodes: ractor_cluster's `BytesConvertable`, here with bincode.
// `from_bytes` cannot fail, so bytes that do not decode become an empty value rather than a
// panic (which would drop the message).
impl ractor::BytesConvertable for Line {
    fn into_bytes(self) -> Vec<u8> {
        bincode::serialize(&self).unwrap_or_default()
    }
    fn from_bytes(bytes: Vec<u8>) -> Self {
        bincode::deserialize(&bytes).unwrap_or_default()
    }
}

impl ractor::BytesConvertable for History {
    fn into_bytes(self) -> Vec<u8> {
        bincode::serialize(&self).unwrap_or_default()
    }
    fn from_bytes(bytes: Vec<u8>) -> Self {
        bincode::deserialize(&bytes).unwrap_or_default()
    }
}

/// What a room understands. `ChildMessage` makes it reachable from any node through a
/// `ChildRef<RoomMsg>` (the same rules and bytes as ractor_cluster's `RactorClusterMessage`,
/// without a proxy of every room on every node).
#[derive(Debug, process_hub::ChildMessage)]
enum RoomMsg {
    /// Append a line; answers the number of lines, so a poster knows it landed.
    #[rpc]
    Post(Line, RpcReplyPort<u64>),
    /// The topic and every line so far.
    #[rpc]
    History(RpcReplyPort<History>),
}

#[derive(Clone)]
struct Room;

struct RoomState {
    topic: String,
    lines: Vec<Line>,
}

/// The most lines a room keeps: a room is state in memory, bounded like any other.
const MAX_LINES: usize = 1_000;

impl Actor for Room {
    type Msg = RoomMsg;
    type State = RoomState;
    type Arguments = RoomArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<RoomMsg>,
        args: RoomArgs,
    ) -> Result<RoomState, ActorProcessingErr> {
        Ok(RoomState {
            topic: args.topic,
            lines: Vec::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<RoomMsg>,
        msg: RoomMsg,
        state: &mut RoomState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RoomMsg::Post(line, reply) => {
                if state.lines.len() == MAX_LINES {
                    state.lines.remove(0);
                }
                state.lines.push(line);
                let _ = reply.send(state.lines.len() as u64);
            }
            RoomMsg::History(reply) => {
                let _ = reply.send(History {
                    topic: state.topic.clone(),
                    lines: state.lines.clone(),
                });
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Messaging a room by name from any node: a typed reference (`Hub::child_ref`), resolved where
// the room runs at each send. Nothing else to register: `ChildKinds::register` captured
// `RoomMsg` with the kind.
// ---------------------------------------------------------------------------------------------

/// Registers the room kind.
fn register_room(kinds: &mut ChildKinds) {
    kinds.register(ROOM, Room);
}

/// Posts a line to `room` wherever it runs; answers once the room has it.
async fn post(hub: &Hub, room: &str, user: &str, text: &str) -> Result<(), Error> {
    let line = Line {
        user: user.to_owned(),
        text: text.to_owned(),
    };
    hub.child_ref::<RoomMsg>(room)
        .call(|reply| RoomMsg::Post(line, reply), Duration::from_secs(5))
        .await?;
    Ok(())
}

/// The history of `room` wherever it runs.
async fn history(hub: &Hub, room: &str) -> Result<History, Error> {
    Ok(hub
        .child_ref::<RoomMsg>(room)
        .call(RoomMsg::History, Duration::from_secs(5))
        .await?)
}

// ---------------------------------------------------------------------------------------------
// The parent process and the nodes.
// ---------------------------------------------------------------------------------------------

fn main() -> Result<(), Error> {
    match NodeRole::from_args() {
        Some(role) => tokio::runtime::Runtime::new()?.block_on(node(role?)),
        None => parent(),
    }
}

fn parent() -> Result<(), Error> {
    let mut nodes = Nodes::launch(&["a", "b", "c"])?;
    for name in ["a", "b", "c"] {
        nodes.expect(name, "ready", WAIT)?;
    }
    nodes.tell("a", "open-rooms")?;
    nodes.expect("a", "opened", WAIT)?;
    // Users on b and c take turns, so the order of the lines is known.
    for (node, user, room, text) in [
        ("b", "ana", "rust", "anyone tried ractor_cluster?"),
        ("c", "bo", "rust", "yes: one node per process"),
        ("b", "ana", "elixir", "ProcessHub, but in Rust"),
        ("c", "cy", "general", "hello from c"),
    ] {
        nodes.tell(node, &format!("post {room} {user} {text}"))?;
        nodes.expect(node, "posted", WAIT)?;
    }
    let mut seen = Vec::new();
    for name in ["a", "b", "c"] {
        nodes.tell(name, "read rust")?;
        seen.push(nodes.expect(name, "history", WAIT)?);
    }
    if seen.iter().any(|h| h != &seen[0]) {
        return Err(format!("the nodes read different histories: {seen:?}").into());
    }
    println!("every node read the same history of #rust: {}", seen[0]);
    nodes.stop_all(Duration::from_secs(30))?;
    Ok(())
}

async fn node(role: NodeRole) -> Result<(), Error> {
    let mut commands = role.commands();
    let cluster = role.start_node().await?;
    let mut kinds = ChildKinds::new();
    register_room(&mut kinds);
    let config = ProcessHub::builder("chat").build()?;
    let (hub, join) = Hub::builder(config, kinds).network(cluster).spawn().await?;
    let deadline = Instant::now() + WAIT;
    while hub.nodes(true).len() < 3 || !hub.cluster_settled() {
        if Instant::now() > deadline {
            return Err(format!("members after {WAIT:?}: {:?}", hub.nodes(true)).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    say(format!("ready {}", hub.node()));

    while let Some(command) = commands.recv().await {
        let mut words = command.splitn(4, ' ');
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("open-rooms"), ..) => {
                let specs = ROOMS
                    .iter()
                    .map(|room| {
                        ChildSpec::new(*room, ROOM).with_args(&RoomArgs {
                            topic: format!("all about {room}"),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let result = hub.start_children(specs, StartOptions::new()).await?;
                for room in &result.started {
                    let hosts: Vec<&str> = room.nodes.iter().map(|(n, _)| n.as_str()).collect();
                    say(format!("room #{} runs on {}", room.id, hosts.join(",")));
                }
                say(format!("opened {} rooms", result.started.len()));
            }
            (Some("post"), Some(room), Some(user), Some(text)) => {
                post(&hub, room, user, text).await?;
                say(format!("posted {user} in #{room}"));
            }
            (Some("read"), Some(room), ..) => {
                let history = history(&hub, room).await?;
                let lines: Vec<String> = history
                    .lines
                    .iter()
                    .map(|l| format!("<{}> {}", l.user, l.text))
                    .collect();
                say(format!(
                    "history #{room} ({}): {}",
                    history.topic,
                    lines.join(" | ")
                ));
            }
            (Some("quit"), ..) => break,
            _ => return Err(format!("unknown command {command:?}").into()),
        }
    }
    hub.shutdown().await?;
    drop(hub);
    join.await?;
    Ok(())
}
