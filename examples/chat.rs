//! Chat rooms: an application to copy. Each room is a child of the hub (kind `room`, a ractor
//! actor with a typed message enum); the hub places every room on one node of the cluster and
//! any node can post to it and read it by the room's name.
//!
//! Run: `cargo run --example chat`
//!
//! Three OS processes of this binary form a cluster on loopback (`support/nodes.rs`). Node a
//! opens the rooms; users join #rust through b and c (a `Vec<User>` of a plain serde struct in
//! one message) and post into the rooms; every node reads each room's history and sees the same
//! members and messages in the same order, whichever node hosts the room.

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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Line {
    user: String,
    text: String,
}

/// A member of a room: who, and through which node they joined.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct User {
    name: String,
    via: String,
}

/// A room's topic, members and lines, as `RoomMsg::History` answers them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct History {
    topic: String,
    members: Vec<User>,
    lines: Vec<Line>,
}

/// What a room understands. `ChildMessage` makes it reachable from any node through a
/// `ChildRef<RoomMsg>`: every field and every answer is a serde type (the user structs above,
/// a `Vec` of them), encoded by the hub, with nothing written by hand. Bytes that do not decode
/// as a `RoomMsg` are refused with a `decode` error, never turned into a default value.
#[derive(Debug, process_hub::ChildMessage)]
enum RoomMsg {
    /// Append a line; answers the number of lines, so a poster knows it landed.
    #[rpc]
    Post(Line, RpcReplyPort<u64>),
    /// Adds users to the room (once each); answers every member's name.
    #[rpc]
    Join {
        users: Vec<User>,
        reply: RpcReplyPort<Vec<String>>,
    },
    /// The topic, the members and every line so far.
    #[rpc]
    History(RpcReplyPort<History>),
}

#[derive(Clone)]
struct Room;

struct RoomState {
    topic: String,
    members: Vec<User>,
    lines: Vec<Line>,
}

/// The most members a room keeps.
const MAX_MEMBERS: usize = 1_000;

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
            members: Vec::new(),
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
            RoomMsg::Join { users, reply } => {
                for user in users {
                    let known = state.members.iter().any(|m| m.name == user.name);
                    if !known && state.members.len() < MAX_MEMBERS {
                        state.members.push(user);
                    }
                }
                let _ = reply.send(state.members.iter().map(|m| m.name.clone()).collect());
            }
            RoomMsg::History(reply) => {
                let _ = reply.send(History {
                    topic: state.topic.clone(),
                    members: state.members.clone(),
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

/// Adds `names` (joining through this node) to `room` wherever it runs: a `Vec<User>` crosses
/// nodes; answers every member's name.
async fn join_room(hub: &Hub, room: &str, names: &[&str]) -> Result<Vec<String>, Error> {
    let users: Vec<User> = names
        .iter()
        .map(|name| User {
            name: (*name).to_owned(),
            via: hub.node().to_string(),
        })
        .collect();
    Ok(hub
        .child_ref::<RoomMsg>(room)
        .call(
            |reply| RoomMsg::Join { users, reply },
            Duration::from_secs(5),
        )
        .await?)
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
    // Users join #rust through b and c (a `Vec<User>` in one message each).
    for (node, users) in [("b", "ana"), ("c", "bo,cy")] {
        nodes.tell(node, &format!("join rust {users}"))?;
        nodes.expect(node, "members", WAIT)?;
    }
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
            (Some("join"), Some(room), Some(users), None) => {
                let names: Vec<&str> = users.split(',').collect();
                let members = join_room(&hub, room, &names).await?;
                say(format!("members of #{room}: {}", members.join(", ")));
            }
            (Some("read"), Some(room), ..) => {
                let history = history(&hub, room).await?;
                let lines: Vec<String> = history
                    .lines
                    .iter()
                    .map(|l| format!("<{}> {}", l.user, l.text))
                    .collect();
                let members: Vec<String> = history
                    .members
                    .iter()
                    .map(|u| format!("{} (via {})", u.name, u.via))
                    .collect();
                say(format!(
                    "history #{room} ({}; members {}): {}",
                    history.topic,
                    members.join(", "),
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
