//! `#[derive(ChildMessage)]` with serde fields across two in-process nodes: structs, `Vec`s,
//! maps and `Option`s in casts, calls and answers arrive as they were sent; bytes that do not
//! decode as the child's message type (another variant's fields, truncated, trailing bytes, an
//! answer of another type) are a typed `decode` error or a counted refusal, never a default
//! value, and the child is unharmed.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use process_hub::{ChildId, ChildKinds, ChildMessage, ChildSpec, Hub, StartOptions};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};

use common::cluster::{id_owned_by, Options, TestCluster};
use common::{wait_for_async, wait_until};

const T: Duration = Duration::from_secs(10);

/// A user's struct: what `BytesConvertable` could not carry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Player {
    name: String,
    level: u32,
    badges: Vec<String>,
    guild: Option<String>,
}

/// A team's state, as `TeamMsg::Snapshot` answers it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Team {
    players: Vec<Player>,
    scores: HashMap<String, i64>,
    notes: BTreeMap<u32, Vec<String>>,
    motto: Option<String>,
}

#[derive(Debug, ChildMessage)]
enum TeamMsg {
    /// Adds players (a `Vec` of a user struct).
    Join(Vec<Player>),
    /// Sets scores (a map) and, named fields, a note.
    Score {
        scores: HashMap<String, i64>,
        note: Option<(u32, String)>,
    },
    /// Sets the motto; answers the previous one.
    #[rpc]
    Motto(String, RpcReplyPort<Option<String>>),
    /// Answers everything.
    #[rpc]
    Snapshot(RpcReplyPort<Team>),
    /// A variant without fields.
    Clear,
}

/// The same variant names as `TeamMsg` with other fields or answers: what a sender with
/// another version of the type sends.
#[derive(Debug, ChildMessage)]
enum Impostor {
    /// `Join` with a string where a `Vec<Player>` is expected.
    Join(String),
    /// `Score` with only a `u8`: truncated for `TeamMsg::Score`.
    Score(u8),
    /// `Motto` with an extra field: trailing bytes for `TeamMsg::Motto`.
    #[rpc]
    Motto(String, u64, RpcReplyPort<Option<String>>),
    /// `Snapshot` whose answer is read as a `Vec<Player>` (the host sends a `Team`).
    #[rpc]
    Snapshot(RpcReplyPort<Vec<Player>>),
}

#[derive(Clone)]
struct TeamActor;

impl Actor for TeamActor {
    type Msg = TeamMsg;
    type State = Team;
    type Arguments = Option<()>;

    async fn pre_start(
        &self,
        _: ActorRef<TeamMsg>,
        _: Option<()>,
    ) -> Result<Team, ActorProcessingErr> {
        Ok(Team::default())
    }

    async fn handle(
        &self,
        _: ActorRef<TeamMsg>,
        msg: TeamMsg,
        team: &mut Team,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TeamMsg::Join(players) => team.players.extend(players),
            TeamMsg::Score { scores, note } => {
                team.scores.extend(scores);
                if let Some((key, text)) = note {
                    team.notes.entry(key).or_default().push(text);
                }
            }
            TeamMsg::Motto(motto, reply) => {
                let _ = reply.send(team.motto.replace(motto));
            }
            TeamMsg::Snapshot(reply) => {
                let _ = reply.send(team.clone());
            }
            TeamMsg::Clear => *team = Team::default(),
        }
        Ok(())
    }
}

fn player(name: &str, guild: Option<&str>) -> Player {
    Player {
        name: name.to_owned(),
        level: name.len() as u32,
        badges: vec![format!("{name}-1"), "ünïcode".to_owned()],
        guild: guild.map(str::to_owned),
    }
}

/// Two nodes with the team kind and a team running on b; the cluster and the team's id.
async fn team_on_b(seed: u64) -> (TestCluster, ChildId) {
    let mut kinds = ChildKinds::new();
    kinds.register("team", TeamActor);
    let members = ["a", "b"];
    let cluster = TestCluster::with_nodes(seed, &members, Options::plain().kinds(kinds)).await;
    let id = id_owned_by("b", &members, "team-");
    let result = cluster
        .hub("a")
        .start_child(ChildSpec::new(id.clone(), "team"), StartOptions::new())
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    wait_until("a knows the team runs on b", || {
        cluster
            .hub("a")
            .child_lookup(&id)
            .is_some_and(|c| !c.nodes.is_empty())
    })
    .await;
    (cluster, id)
}

async fn snapshot(hub: &Hub, id: &ChildId) -> Team {
    hub.child_ref::<TeamMsg>(id.clone())
        .call(TeamMsg::Snapshot, T)
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn structs_vecs_and_maps_cross_nodes_as_sent() {
    let (cluster, id) = team_on_b(141).await;
    let a = cluster.hub("a");
    let team = a.child_ref::<TeamMsg>(id.clone());
    let players = vec![player("ana", Some("north")), player("bo", None)];
    let scores: HashMap<String, i64> = [("ana".to_owned(), -7), ("bo".to_owned(), i64::MAX)].into();
    team.cast(TeamMsg::Join(players.clone())).unwrap();
    team.cast(TeamMsg::Score {
        scores: scores.clone(),
        note: Some((3, "won".to_owned())),
    })
    .unwrap();
    let before = team
        .call(|reply| TeamMsg::Motto("forward".to_owned(), reply), T)
        .await
        .unwrap();
    assert_eq!(before, None);
    let again = team
        .call(|reply| TeamMsg::Motto("onward".to_owned(), reply), T)
        .await
        .unwrap();
    assert_eq!(again.as_deref(), Some("forward"));
    // The answer crosses back whole: every struct, map and option as the casts carried them.
    let expected = Team {
        players,
        scores,
        notes: [(3, vec!["won".to_owned()])].into(),
        motto: Some("onward".to_owned()),
    };
    assert_eq!(snapshot(a, &id).await, expected);
    // The host reads the same state locally (no encoding on its side).
    assert_eq!(snapshot(cluster.hub("b"), &id).await, expected);
    // A variant without fields.
    team.cast(TeamMsg::Clear).unwrap();
    assert_eq!(snapshot(a, &id).await, Team::default());
    assert!(a.refused_peer_input().is_empty());
    assert!(cluster.hub("b").refused_peer_input().is_empty());
}

#[tokio::test(start_paused = true)]
async fn bytes_that_do_not_decode_are_a_typed_error_never_a_default() {
    let (cluster, id) = team_on_b(142).await;
    let a = cluster.hub("a");
    let b = cluster.hub("b");
    let team = a.child_ref::<TeamMsg>(id.clone());
    team.cast(TeamMsg::Join(vec![player("cy", None)])).unwrap();
    let state = snapshot(a, &id).await;
    assert_eq!(state.players.len(), 1);

    let impostor = a.child_ref::<Impostor>(id.clone());
    // A call whose fields are not the variant's (trailing bytes): the host answers `decode`.
    let refused = impostor
        .call(|reply| Impostor::Motto("x".to_owned(), 9, reply), T)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "decode", "{refused}");
    assert!(!refused.is_retryable());
    // An answer that is not of the caller's type: `decode` at the caller, not an empty value.
    let unreadable = impostor.call(Impostor::Snapshot, T).await.unwrap_err();
    assert_eq!(unreadable.code(), "decode", "{unreadable}");

    // Casts the host cannot decode (another type's fields; truncated): handed to the network,
    // then refused on b, counted and logged there.
    impostor
        .cast(Impostor::Join("not players".to_owned()))
        .unwrap();
    impostor.cast(Impostor::Score(1)).unwrap();
    wait_for_async("b counted the refused messages", || async {
        let refused = b.refused_peer_input();
        match refused.get("undecodable_message") {
            Some(n) if *n >= 3 => Ok(()),
            other => Err(format!("{other:?} in {refused:?}")),
        }
    })
    .await;
    assert_eq!(b.refused_peer_input()["undecodable_message"], 3);
    // Nothing reached the child: its state is what the valid messages made it.
    assert_eq!(snapshot(a, &id).await, state);
    // And the child still answers valid messages.
    team.cast(TeamMsg::Join(vec![player("di", Some("south"))]))
        .unwrap();
    assert_eq!(snapshot(a, &id).await.players.len(), 2);
}
