//! The hub across nodes under faults: partitions, crash + restart versus a flap, and a seeded
//! random fault run (replay a failure with `PROCESS_HUB_CLUSTER_SEED=<seed>`).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::cluster::*;
use common::wait_until;
use process_hub::{NodeName, StartOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[tokio::test(start_paused = true)]
async fn partition_then_heal_leaves_each_child_once_on_its_owner() {
    let cluster = TestCluster::with_nodes(11, &["a", "b", "c"], Options::plain()).await;
    let specs = specs("p-", 300);
    let all = ids(&specs);
    cluster
        .hub("b")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&all, "before the partition").await;
    cluster.net.partition(&[
        vec!["a@test".into()],
        vec!["b@test".into(), "c@test".into()],
    ]);
    // Each side re-places the other side's children after the grace.
    wait_until("a runs every child alone", || {
        all.iter()
            .all(|id| cluster.hub("a").local_child(id).is_some())
    })
    .await;
    wait_until("b and c run every child", || {
        all.iter().all(|id| {
            cluster.hub("b").local_child(id).is_some() || cluster.hub("c").local_child(id).is_some()
        })
    })
    .await;
    cluster.net.heal();
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after the heal").await;
}

fn pids_of(cluster: &TestCluster) -> BTreeMap<process_hub::ChildId, BTreeMap<NodeName, u64>> {
    cluster.views().remove(0)
}

#[tokio::test(start_paused = true)]
async fn flap_keeps_children_and_restart_replaces_them() {
    // A long grace: a flap shorter than it must move nothing.
    let mut cluster = TestCluster::new(12, Options::plain().grace(Duration::from_secs(30)));
    for name in ["a", "b", "c"] {
        cluster.add(name).await;
    }
    cluster.wait_members().await;
    let specs = specs("f-", 200);
    let all = ids(&specs);
    cluster
        .hub("a")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&all, "started").await;
    let before = pids_of(&cluster);

    // Flap: c is cut off and comes back with the same boot token.
    cluster.net.cut("a@test", "c@test");
    cluster.net.cut("b@test", "c@test");
    wait_until("c seen down", || cluster.hub("a").nodes(true).len() == 2).await;
    cluster.net.heal();
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after the flap").await;
    assert_eq!(
        pids_of(&cluster),
        before,
        "a flap moved or restarted children"
    );

    // Restart: c crashes and comes back at once with a new token, well within the grace:
    // its stale bindings are reaped and its children re-placed without waiting.
    let on_c: Vec<_> = before
        .iter()
        .filter(|(_, p)| p.contains_key("c@test"))
        .map(|(id, _)| id.clone())
        .collect();
    assert!(!on_c.is_empty());
    cluster.crash("c").await;
    cluster.restart("c").await;
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after the restart").await;
    let after = pids_of(&cluster);
    for id in &on_c {
        assert_ne!(after[id], before[id], "{id} kept its stale binding");
    }
}

#[tokio::test(start_paused = true)]
async fn seeded_random_faults_converge() {
    let seed: u64 = std::env::var("PROCESS_HUB_CLUSTER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("cluster fault run seed: {seed} (replay with PROCESS_HUB_CLUSTER_SEED={seed})");
    let names = ["a", "b", "c", "d", "e"];
    let mut cluster = TestCluster::new(seed, Options::plain());
    for name in names {
        cluster.add(name).await;
    }
    cluster.wait_members().await;
    let specs = specs("r-", 250);
    let all = ids(&specs);
    cluster
        .hub("a")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    cluster
        .wait_converged(&all, &format!("seed {seed}: started"))
        .await;
    let mut rng = StdRng::seed_from_u64(seed);
    for _round in 0..4 {
        match rng.gen_range(0..3) {
            0 => {
                // Crash a minority (one or two nodes) and bring them back.
                let k = rng.gen_range(1..=2);
                let mut victims: Vec<&str> = Vec::new();
                while victims.len() < k {
                    let v = names[rng.gen_range(0..names.len())];
                    if !victims.contains(&v) {
                        victims.push(v);
                    }
                }
                for v in &victims {
                    cluster.crash(v).await;
                }
                cluster.wait_members().await;
                for v in &victims {
                    cluster.restart(v).await;
                }
            }
            1 => {
                let split = rng.gen_range(1..names.len());
                let (left, right) = names.split_at(split);
                let group = |g: &[&str]| g.iter().map(|n| format!("{n}@test")).collect();
                cluster.net.partition(&[group(left), group(right)]);
                tokio::time::sleep(Duration::from_millis(rng.gen_range(50..400))).await;
                cluster.net.heal();
            }
            _ => {
                cluster.net.set_drop_probability(rng.gen_range(0.05..0.3));
                tokio::time::sleep(Duration::from_millis(rng.gen_range(50..400))).await;
                cluster.net.set_drop_probability(0.0);
            }
        }
    }
    cluster.net.heal();
    cluster.net.set_drop_probability(0.0);
    cluster.wait_members().await;
    cluster
        .wait_converged(&all, &format!("seed {seed}: after faults"))
        .await;
}

/// A peer's frame that asks for an allocation beyond the bounds (a message in `u32::MAX` parts)
/// is refused, counted, and shown in the admin API's health; the node goes on.
#[tokio::test(start_paused = true)]
async fn refused_peer_input_is_counted_and_shown_in_health() {
    use process_hub::cluster::wire::{encode, WireMsg};
    let cluster = TestCluster::with_nodes(12, &["a", "b"], Options::plain()).await;
    cluster.wait_members().await;
    let a = cluster.hub("a");
    assert!(
        a.refused_peer_input().is_empty(),
        "{:?}",
        a.refused_peer_input()
    );
    let b_name = cluster.hub("b").node().clone();
    let frame = WireMsg::FullSyncPart {
        sync_id: 7,
        index: 0,
        total: u32::MAX,
        rows: Vec::new(),
    };
    let bytes = encode(cluster.options.hub_id, &b_name, &frame).expect("encodes");
    cluster
        .net
        .inject_frame(cluster.options.hub_id, &b_name, a.node(), bytes)
        .expect("the link is up");
    wait_until("a counts the refused part", || {
        a.refused_peer_input().get("parts").copied().unwrap_or(0) >= 1
    })
    .await;
    let (status, body) = common::admin::call_admin(a, "GET", "/v1/health", None).await;
    assert_eq!(status, axum::http::StatusCode::OK, "{body}");
    assert!(
        body["refused_peer_input"]["parts"].as_u64() >= Some(1),
        "{body}"
    );
    // The node still works.
    let started = a
        .start_children(specs("after-", 4), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 4, "{:?}", started.errors);
}
