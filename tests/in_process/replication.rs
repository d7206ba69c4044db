//! Replication on the in-process cluster (the original's `Replication` strategy tests, ported):
//! with a factor k each child runs on its k ring owners; messages by id go to the active
//! replica; when the active replica's node dies the passive one answers at once, with no
//! restart, and the lost replica is re-created after the grace; a joining node takes its
//! replica slots; a stop stops every replica; replicas learn their role
//! (`redundancy_signal`) at start and when it changes, and only those whose role changed.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::*;
use common::{wait_for, wait_until};
use process_hub::core::placement::HashRing;
use process_hub::{
    ChildId, ChildKinds, ChildSpec, ChildStartError, RedundancySignal, ReplicationModel, Role,
    StartOptions, StopOptions,
};
use process_hub_actors::counter::CounterMsg;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

const K: usize = 2;

fn owners(members: &[&str], id: &ChildId, k: usize) -> Vec<String> {
    let ring = HashRing::new(members.iter().map(|m| full(m)));
    ring.owners(id, k)
        .into_iter()
        .map(|n| n.trim_end_matches("@test").to_owned())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Every child of `ids` runs on exactly its `k` owners among `members`.
fn on_owners(
    cluster: &TestCluster,
    members: &[&str],
    ids: &[ChildId],
    k: usize,
) -> Result<(), String> {
    let running = cluster.running();
    for id in ids {
        let want = sorted(owners(members, id, k));
        let got = sorted(running.get(id).cloned().unwrap_or_default());
        if got != want {
            return Err(format!("{id} runs on {got:?}, its owners are {want:?}"));
        }
    }
    Ok(())
}

fn replicated() -> Options {
    Options::plain().replication(K, ReplicationModel::ActivePassive, RedundancySignal::None)
}

fn counters(n: usize) -> (Vec<ChildSpec>, Vec<ChildId>) {
    let specs: Vec<ChildSpec> = (0..n)
        .map(|i| ChildSpec::new(format!("r{i}"), "counter"))
        .collect();
    let ids = specs.iter().map(|s| s.id.clone()).collect();
    (specs, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_child_runs_on_its_owners_and_messages_go_to_the_active_one() {
    let cluster = TestCluster::with_nodes(11, &["a", "b", "c"], replicated()).await;
    let (specs, ids) = counters(12);
    let result = cluster
        .hub("a")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let members = ["a", "b", "c"];
    wait_for("every child on its two owners", || {
        on_owners(&cluster, &members, &ids, K)
    })
    .await;
    wait_until("every registry copy shows both replicas", || {
        ids.iter().all(|id| {
            let want = sorted(owners(&members, id, K).iter().map(|n| full(n)).collect());
            members.iter().all(|node| {
                cluster.hub(node).child_lookup(id).is_some_and(|info| {
                    sorted(info.nodes.iter().map(|(n, _)| n.clone()).collect()) == want
                })
            })
        })
    })
    .await;

    for id in &ids {
        let owners = owners(&members, id, K);
        // Every node sees the same roles: the first owner active, the second passive.
        for node in members {
            let hub = cluster.hub(node);
            let info = hub.child_lookup_with_metadata(id).unwrap();
            let roles = hub.replica_roles(
                id,
                info.metadata.as_ref(),
                info.nodes.iter().map(|(n, _)| n),
            );
            assert_eq!(
                roles,
                vec![
                    (full(&owners[0]), Role::Active),
                    (full(&owners[1]), Role::Passive)
                ],
                "{id} as {node} sees it"
            );
        }
        // Increments by id from every node reach the active replica only.
        for node in members {
            cluster
                .hub(node)
                .child_ref::<CounterMsg>(id.clone())
                .cast(CounterMsg::Increment(1))
                .unwrap();
        }
        let active = cluster
            .hub(&owners[0])
            .local_child_ref::<CounterMsg>(id)
            .unwrap();
        let passive = cluster
            .hub(&owners[1])
            .local_child_ref::<CounterMsg>(id)
            .unwrap();
        wait_for_value(&active, 3).await;
        let value = ractor::call_t!(passive, CounterMsg::Get, 1000).unwrap();
        assert_eq!(value, 0, "{id}: the passive replica got nothing");
        // A call by id from the passive replica's node is answered by the active one.
        let value = cluster
            .hub(&owners[1])
            .child_ref::<CounterMsg>(id.clone())
            .call(CounterMsg::Get, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(value, 3);
        // cast_replicas reaches both.
        let sent = cluster
            .hub("c")
            .child_ref::<CounterMsg>(id.clone())
            .cast_replicas(|| CounterMsg::Increment(10))
            .unwrap();
        assert_eq!(sent, 2);
        wait_for_value(&active, 13).await;
        wait_for_value(&passive, 10).await;
    }
}

async fn wait_for_value(child: &ActorRef<CounterMsg>, want: i64) {
    let child = child.clone();
    common::wait_for_async(&format!("the counter reads {want}"), || {
        let child = child.clone();
        async move {
            match ractor::call_t!(child, CounterMsg::Get, 1000) {
                Ok(v) if v == want => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_passive_replica_answers_at_once_when_the_active_one_dies() {
    // A long grace: the lost replica must not be re-created before it ends, and the child
    // must be answered all along by the survivor, without a restart.
    let options = replicated().grace(Duration::from_secs(3));
    let mut cluster = TestCluster::with_nodes(12, &["a", "b", "c"], options).await;
    let members = ["a", "b", "c"];
    let id = (0..)
        .map(|i| ChildId::from(format!("f{i}")))
        .find(|id| owners(&members, id, K) == ["a", "b"])
        .unwrap();
    cluster
        .hub("c")
        .start_children(
            vec![ChildSpec::new(id.clone(), "counter")],
            StartOptions::new(),
        )
        .await
        .unwrap();
    let ids = vec![id.clone()];
    wait_for("on a and b", || on_owners(&cluster, &members, &ids, K)).await;
    let b_pid = cluster.hub("b").local_child(&id).unwrap().get_id();

    cluster.crash("a").await;
    // As soon as c sees a down, b answers (a call by id from c).
    let child = cluster.hub("c").child_ref::<CounterMsg>(id.clone());
    wait_until("c sees a down", || {
        !cluster.hub("c").nodes(true).contains(&full("a"))
    })
    .await;
    let value = child.call(CounterMsg::Get, Duration::from_secs(1)).await;
    assert_eq!(value.ok(), Some(0), "answered by the promoted replica");
    assert_eq!(
        cluster.hub("b").local_child(&id).unwrap().get_id(),
        b_pid,
        "promoted without a restart"
    );
    assert!(
        cluster.running().get(&id).is_some_and(|n| n == &["b"]),
        "no new replica within the grace: {:?}",
        cluster.running().get(&id)
    );
    // After the grace the replica is re-created on c, the new second owner.
    wait_for("re-created on b and c", || {
        on_owners(&cluster, &["b", "c"], &ids, K)
    })
    .await;
    assert_eq!(cluster.hub("b").local_child(&id).unwrap().get_id(), b_pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_takes_its_replica_slots_and_a_stop_stops_every_replica() {
    let mut cluster = TestCluster::with_nodes(13, &["a", "b"], replicated()).await;
    let (specs, ids) = counters(16);
    cluster
        .hub("b")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    wait_for("every child on a and b", || {
        on_owners(&cluster, &["a", "b"], &ids, K)
    })
    .await;
    cluster.add("c").await;
    cluster.wait_members().await;
    let members = ["a", "b", "c"];
    wait_for("every child on its owners among three", || {
        on_owners(&cluster, &members, &ids, K)
    })
    .await;
    assert!(
        ids.iter()
            .any(|id| owners(&members, id, K).contains(&"c".to_owned())),
        "the joiner owns some replicas"
    );

    let result = cluster
        .hub("c")
        .stop_children(ids.clone(), StopOptions::new())
        .await
        .unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    wait_until("no replica left", || {
        let running = cluster.running();
        ids.iter().all(|id| !running.contains_key(id))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let running = cluster.running();
    assert!(
        ids.iter().all(|id| !running.contains_key(id)),
        "{running:?}"
    );
    for node in members {
        assert!(ids
            .iter()
            .all(|id| cluster.hub(node).child_lookup(id).is_none()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapping_must_name_as_many_nodes_as_the_factor() {
    let cluster = TestCluster::with_nodes(14, &["a", "b", "c"], replicated()).await;
    let mut opts = StartOptions::new().child_on("one", full("a"));
    opts.child_mapping
        .insert("two".into(), vec![full("c"), full("a")]);
    let specs = vec![
        ChildSpec::new("one", "counter"),
        ChildSpec::new("two", "counter"),
    ];
    let result = cluster.hub("b").start_children(specs, opts).await.unwrap();
    assert_eq!(result.errors.len(), 1, "{:?}", result.errors);
    assert_eq!(result.errors[0].id.as_str(), "one");
    assert_eq!(
        result.errors[0].reason,
        ChildStartError::ChildMappingMismatch {
            expected: 2,
            got: 1
        }
    );
    let ids = [ChildId::from("two")];
    wait_until("two runs on c and a", || {
        cluster.running().get(&ids[0]).map(|n| sorted(n.clone()))
            == Some(sorted(vec!["a".into(), "c".into()]))
    })
    .await;
    let hub = cluster.hub("b");
    let info = hub.child_lookup_with_metadata(&ids[0]).unwrap();
    let roles = hub.replica_roles(
        &ids[0],
        info.metadata.as_ref(),
        info.nodes.iter().map(|(n, _)| n),
    );
    assert_eq!(
        roles[0],
        (full("c"), Role::Active),
        "the mapping's first node is active"
    );
}

/// Role messages each instance received, by the instance's actor id.
type RoleLog = Arc<Mutex<Vec<(ractor::ActorId, String, Role)>>>;

enum WatchMsg {
    Role(Role),
    #[allow(dead_code)]
    Ping(RpcReplyPort<()>),
}

impl ractor::Message for WatchMsg {}

#[derive(Clone)]
struct RoleWatcher(RoleLog);

impl Actor for RoleWatcher {
    type Msg = WatchMsg;
    type State = String;
    type Arguments = String;

    async fn pre_start(
        &self,
        _: ActorRef<WatchMsg>,
        id: String,
    ) -> Result<String, ActorProcessingErr> {
        Ok(id)
    }

    async fn handle(
        &self,
        myself: ActorRef<WatchMsg>,
        msg: WatchMsg,
        id: &mut String,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            WatchMsg::Role(role) => {
                self.0
                    .lock()
                    .unwrap()
                    .push((myself.get_id(), id.clone(), role))
            }
            WatchMsg::Ping(reply) => {
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_learn_their_role_and_only_changed_ones_are_told_again() {
    let log: RoleLog = Arc::default();
    let mut kinds = ChildKinds::new();
    kinds
        .register("watcher", RoleWatcher(log.clone()))
        .redundancy("watcher", WatchMsg::Role);
    let options = Options::plain()
        .replication(K, ReplicationModel::ActivePassive, RedundancySignal::All)
        .grace(Duration::from_millis(300))
        .kinds(kinds);
    let mut cluster = TestCluster::with_nodes(15, &["a", "b", "c", "d"], options).await;
    let members = ["a", "b", "c", "d"];
    let ids: Vec<ChildId> = (0..8).map(|i| ChildId::from(format!("w{i}"))).collect();
    let specs = ids
        .iter()
        .map(|id| {
            ChildSpec::new(id.clone(), "watcher")
                .with_args(&id.to_string())
                .unwrap()
        })
        .collect();
    cluster
        .hub("a")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    wait_for("on their owners", || on_owners(&cluster, &members, &ids, K)).await;

    // The last role each running instance was told, by node.
    let last_roles = |cluster: &TestCluster| -> BTreeMap<(ChildId, String), Role> {
        let log = log.lock().unwrap();
        let mut out = BTreeMap::new();
        for view in cluster.node_views() {
            for (id, pid) in &view.running {
                if let Some((_, _, role)) = log
                    .iter()
                    .rev()
                    .find(|(actor, child, _)| actor.pid() == *pid && child == id.as_str())
                {
                    out.insert((id.clone(), view.node.clone()), *role);
                }
            }
        }
        out
    };
    let expected = |members: &[&str]| -> BTreeMap<(ChildId, String), Role> {
        let mut out = BTreeMap::new();
        for id in &ids {
            let owners = owners(members, id, K);
            out.insert((id.clone(), full(&owners[0])), Role::Active);
            out.insert((id.clone(), full(&owners[1])), Role::Passive);
        }
        out
    };
    wait_until("each replica told its role at start", || {
        last_roles(&cluster) == expected(&members)
    })
    .await;
    let told_before = log.lock().unwrap().len();
    assert_eq!(told_before, 2 * ids.len(), "one message per replica");

    // a dies: its active replicas' partners are promoted and told; its passive replicas'
    // partners stay active and hear nothing; the replacements start passive or active.
    let promoted: BTreeSet<ChildId> = ids
        .iter()
        .filter(|id| owners(&members, id, K)[0] == "a")
        .cloned()
        .collect();
    assert!(
        !promoted.is_empty(),
        "a is the active owner of some watcher"
    );
    let survivors = ["b", "c", "d"];
    cluster.crash("a").await;
    wait_for("every child on its owners among b, c, d", || {
        on_owners(&cluster, &survivors, &ids, K)
    })
    .await;
    wait_until("every replica's last role is its role now", || {
        last_roles(&cluster) == expected(&survivors)
    })
    .await;
    let log = log.lock().unwrap();
    let after: Vec<_> = log[told_before..].to_vec();
    drop(log);
    let promoted_told = after
        .iter()
        .filter(|(_, child, role)| {
            *role == Role::Active && promoted.contains(&ChildId::from(child.as_str()))
        })
        .count();
    assert_eq!(
        promoted_told,
        promoted.len(),
        "each promoted replica told once: {after:?}"
    );
    let unchanged_told = after
        .iter()
        .filter(|(_, child, _)| {
            let id = ChildId::from(child.as_str());
            !promoted.contains(&id) && !owners(&members, &id, K).contains(&"a".to_owned())
        })
        .count();
    assert_eq!(
        unchanged_told, 0,
        "replicas of children a never ran hear nothing: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_children_come_back_on_their_owners_after_a_whole_cluster_outage() {
    let options =
        Options::durable().replication(K, ReplicationModel::ActivePassive, RedundancySignal::None);
    let mut d = TestCluster::with_nodes(16, &["a", "b", "c"], options).await;
    let all = specs("d", 12);
    let result = d
        .hub("b")
        .start_children(all.clone(), common::durable())
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    d.wait_versions(12).await;
    let stopped: Vec<ChildId> = all[..2].iter().map(|s| s.id.clone()).collect();
    d.hub("c")
        .stop_children(stopped.clone(), StopOptions::new())
        .await
        .unwrap();
    d.wait_versions(14).await;
    let members = ["a", "b", "c"];
    let declared: Vec<ChildId> = all[2..].iter().map(|s| s.id.clone()).collect();
    wait_for("declared children on their two owners", || {
        on_owners(&d, &members, &declared, K)
    })
    .await;

    for name in members {
        d.crash(name).await;
    }
    for name in members {
        d.restart(name).await;
    }
    d.wait_members().await;
    for hub in d.hubs.values() {
        hub.await_normal(common::DEADLINE).await.unwrap();
    }
    wait_for("declared children back on their two owners", || {
        on_owners(&d, &members, &declared, K)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    on_owners(&d, &members, &declared, K).unwrap();
    let running = d.running();
    for id in &stopped {
        assert!(!running.contains_key(id), "{id} was stopped: {running:?}");
    }
    stop_all(&d).await;
}
