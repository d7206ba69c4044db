//! Partition tolerance by quorum (`partition_tolerance`) over in-process nodes: a split leaves
//! the minority without quorum, so it stops its children and refuses work while the majority
//! runs every child once; the heal brings everything back once, on its owners. And the
//! strategies' thresholds as a hub sees them: a static quorum that starts partitioned, a
//! majority of a configured cluster size, a dynamic quorum that forgets slow losses.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::*;
use common::wait_until;
use process_hub::admin::AdminOps;
use process_hub::{PartitionTolerance, StartError, StartOptions, StopError, StopOptions};

fn majority_of(size: usize) -> PartitionTolerance {
    PartitionTolerance::MajorityQuorum {
        initial_cluster_size: size,
        track_max_size: true,
    }
}

const MAJORITY: [&str; 3] = ["a", "b", "c"];
const MINORITY: [&str; 2] = ["d", "e"];

/// Every child of `all` runs exactly once, on a node of `side`; no other child runs.
fn once_on(
    cluster: &TestCluster,
    all: &BTreeSet<process_hub::ChildId>,
    side: &[&str],
) -> Result<(), String> {
    let running = cluster.running();
    for id in all {
        match running.get(id).map(Vec::as_slice) {
            Some([node]) if side.contains(&node.as_str()) => {}
            other => return Err(format!("{id} runs on {other:?}, expected once on {side:?}")),
        }
    }
    if running.len() != all.len() {
        return Err(format!(
            "{} children run, expected {}",
            running.len(),
            all.len()
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_three_two_leaves_every_child_once_on_the_majority_and_the_minority_refuses() {
    let names = ["a", "b", "c", "d", "e"];
    let options = Options::plain().partition_tolerance(majority_of(5));
    let cluster = TestCluster::with_nodes(51, &names, options).await;
    for name in names {
        assert!(
            !cluster.hub(name).is_partitioned(),
            "{name} before the split"
        );
    }
    let batch = specs("q-", 200);
    let mut all = ids(&batch);
    cluster
        .hub("d")
        .start_children(batch, StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&all, "before the split").await;

    cluster.net.partition(&[
        MAJORITY.iter().map(|n| full(n)).collect(),
        MINORITY.iter().map(|n| full(n)).collect(),
    ]);
    wait_until("the minority is partitioned", || {
        MINORITY.iter().all(|n| cluster.hub(n).is_partitioned())
    })
    .await;
    for n in MAJORITY {
        assert!(!cluster.hub(n).is_partitioned(), "{n} keeps quorum");
    }
    // The minority runs nothing; the majority re-places its children after the grace.
    wait_until("every child runs once, on the majority", || {
        once_on(&cluster, &all, &MAJORITY).is_ok()
    })
    .await;

    // The minority refuses work, typed; health says why.
    let d = cluster.hub("d");
    assert_eq!(
        d.start_children(specs("m-", 3), StartOptions::new()).await,
        Err(StartError::Partitioned)
    );
    let some = all.iter().next().unwrap().clone();
    assert_eq!(
        d.stop_child(some.clone(), StopOptions::new()).await,
        Err(StopError::Partitioned)
    );
    let health = d.health().await.unwrap();
    assert!(health.partitioned);
    assert_eq!(health.status, "partitioned");
    assert!(d.is_locked());
    // The majority takes work meanwhile.
    let more = specs("n-", 20);
    all.extend(ids(&more));
    let started = cluster
        .hub("a")
        .start_children(more, StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 20, "{started:?}");
    assert!(!cluster.hub("a").health().await.unwrap().partitioned);
    // A child stays once on the majority for as long as the split lasts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    once_on(&cluster, &all, &MAJORITY).unwrap();

    cluster.net.heal();
    cluster.wait_members().await;
    wait_until("quorum is back everywhere", || {
        names.iter().all(|n| !cluster.hub(n).is_partitioned())
    })
    .await;
    cluster.wait_converged(&all, "after the heal").await;
    // And work is taken on the former minority again.
    let late = specs("late-", 5);
    all.extend(ids(&late));
    d.start_children(late, StartOptions::new()).await.unwrap();
    cluster.wait_converged(&all, "after a start on d").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_quorum_with_startup_confirm_refuses_work_until_its_size_is_up() {
    let strategy = PartitionTolerance::StaticQuorum {
        quorum_size: 3,
        startup_confirm: true,
    };
    let mut cluster = TestCluster::new(52, Options::plain().partition_tolerance(strategy));
    let a = cluster.add("a").await;
    assert!(a.is_partitioned(), "one node of three");
    assert_eq!(
        a.start_children(specs("s-", 1), StartOptions::new()).await,
        Err(StartError::Partitioned)
    );
    cluster.add("b").await;
    cluster.wait_members().await;
    assert!(a.is_partitioned(), "two of three");
    cluster.add("c").await;
    cluster.wait_members().await;
    wait_until("quorum of three", || {
        ["a", "b", "c"]
            .iter()
            .all(|n| !cluster.hub(n).is_partitioned())
    })
    .await;
    let batch = specs("s-", 30);
    let all = ids(&batch);
    a.start_children(batch, StartOptions::new()).await.unwrap();
    cluster.wait_converged(&all, "with quorum").await;

    // One node lost: two of three is below the static quorum on both sides.
    cluster
        .net
        .partition(&[vec![full("a")], vec![full("b"), full("c")]]);
    wait_until("everyone is partitioned", || {
        ["a", "b", "c"]
            .iter()
            .all(|n| cluster.hub(n).is_partitioned())
    })
    .await;
    wait_until("nothing runs anywhere", || cluster.running().is_empty()).await;
    // The stubs wait for quorum: the heal brings every child back once, on its owner.
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.net.heal();
    cluster.wait_members().await;
    cluster.wait_converged(&all, "after the heal").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_quorum_counts_only_recent_losses() {
    let strategy = PartitionTolerance::DynamicQuorum {
        quorum_size_percent: 60,
        threshold_time_ms: 400,
    };
    let names = ["a", "b", "c", "d", "e"];
    let cluster =
        TestCluster::with_nodes(53, &names, Options::plain().partition_tolerance(strategy)).await;
    // Three of five lost at once: 2 of 5 < 60 %: the two are partitioned...
    cluster.net.partition(&[
        vec![full("a"), full("b"), full("c")],
        vec![full("d"), full("e")],
    ]);
    wait_until("d and e partitioned", || {
        cluster.hub("d").is_partitioned() && cluster.hub("e").is_partitioned()
    })
    .await;
    assert!(!cluster.hub("a").is_partitioned(), "3 of 5 is 60 %");
    // ... until the losses age out of the threshold: the cluster is the two of them now.
    wait_until("the losses aged out", || {
        !cluster.hub("d").is_partitioned() && !cluster.hub("e").is_partitioned()
    })
    .await;
    assert!(cluster
        .hub("d")
        .start_children(specs("dyn-", 2), StartOptions::new())
        .await
        .is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_children_under_a_quorum_take_no_minority_mutation_and_run_once_after_the_heal() {
    let options = Options::durable().partition_tolerance(majority_of(3));
    let cluster = TestCluster::with_nodes(54, &["a", "b", "c"], options).await;
    let all = specs("dq-", 30);
    cluster.declare_all("a", &all, 30).await;

    cluster
        .net
        .partition(&[vec![full("a")], vec![full("b"), full("c")]]);
    wait_until("a is partitioned", || cluster.hub("a").is_partitioned()).await;
    let a = cluster.hub("a");
    // The minority declares nothing and undeclares nothing.
    assert_eq!(
        a.start_children(specs("dq-minority-", 1), common::durable())
            .await,
        Err(StartError::Partitioned)
    );
    assert_eq!(
        a.stop_child(all[0].id.clone(), StopOptions::new()).await,
        Err(StopError::Partitioned)
    );
    assert!(
        a.clear_declared().await.is_err(),
        "a minority clears nothing"
    );
    // The majority runs every declared child once and takes a durable stop.
    wait_until("every declared child runs once, on b or c", || {
        once_on(&cluster, &ids(&all), &["b", "c"]).is_ok()
    })
    .await;
    cluster
        .hub("b")
        .stop_child(all[1].id.clone(), StopOptions::new())
        .await
        .unwrap();
    assert_eq!(
        a.declared_children().unwrap().version,
        30,
        "a's copy did not move"
    );

    cluster.net.heal();
    cluster.wait_members().await;
    cluster.wait_versions(31).await;
    let dead: BTreeSet<_> = [all[1].id.clone()].into();
    let expected: BTreeSet<_> = ids(&all).difference(&dead).cloned().collect();
    cluster
        .wait_exactly(
            &expected,
            &dead,
            "after the heal: once each, the stopped one stays stopped",
        )
        .await;
    assert!(!a.is_partitioned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_children_of_a_node_that_boots_without_quorum_start_once_quorum_is_there() {
    let strategy = PartitionTolerance::StaticQuorum {
        quorum_size: 2,
        startup_confirm: true,
    };
    let statics = vec![
        process_hub::ChildSpec::new("static-1", "counter"),
        process_hub::ChildSpec::new("static-2", "counter"),
    ];
    let options = Options::plain()
        .partition_tolerance(strategy)
        .child_specs(statics.clone());
    let mut cluster = TestCluster::new(55, options);
    // The hub spawns (its static children wait), and runs nothing alone.
    let a = cluster.add("a").await;
    assert!(a.is_partitioned());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        cluster.running().is_empty(),
        "nothing starts without quorum"
    );
    cluster.add("b").await;
    cluster.wait_members().await;
    cluster
        .wait_converged(&ids(&statics), "the static children run once")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_made_smaller_on_purpose_keeps_quorum_once_its_size_is_reset() {
    let mut cluster = TestCluster::with_nodes(
        56,
        &["a", "b", "c"],
        Options::plain().partition_tolerance(majority_of(3)),
    )
    .await;
    let batch = specs("rs-", 12);
    let all = ids(&batch);
    cluster
        .hub("a")
        .start_children(batch, StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&all, "started").await;
    // Two nodes leave for good, one after the other: 1 of 3 is no majority.
    for name in ["c", "b"] {
        let hub = cluster.hubs.remove(&full(name)).unwrap();
        hub.leave().await.unwrap();
    }
    let a = cluster.hub("a");
    wait_until("a alone is partitioned", || a.is_partitioned()).await;
    assert_eq!(
        a.start_children(specs("rs-late-", 1), StartOptions::new())
            .await,
        Err(StartError::Partitioned)
    );
    // The operator says the cluster is one node now: a regains quorum and runs everything.
    assert_eq!(a.reset_cluster_size(1).await, Ok(false));
    assert!(!a.is_partitioned());
    cluster.wait_converged(&all, "everything back on a").await;
    a.start_children(specs("rs-late-", 1), StartOptions::new())
        .await
        .unwrap();
}

/// Cuts the link a-e of a five-node cluster under `strategy`: e stays a member while it is
/// indirectly connected, then, once the picture is stable, the resolution sets e aside (it
/// stops its children, the others re-place them); no child runs on two nodes longer than the
/// stated bound meanwhile. After the heal e comes back by itself and every registry agrees with
/// each child once on its owner.
async fn one_cut_link_of_five(seed: u64, strategy: PartitionTolerance) {
    let options = Options::plain()
        .partition_tolerance(strategy)
        .stable_after(Duration::from_millis(500));
    let cluster = TestCluster::with_nodes(seed, &["a", "b", "c", "d", "e"], options).await;
    // In process a cut is seen at once (as a TCP close): no detection time.
    let bound =
        process_hub::core::reachability::double_run_bound(&cluster.config("a"), Duration::ZERO);
    println!(
        "double-run bound: {}",
        process_hub::core::reachability::BoundTerms::new(&cluster.config("a"), Duration::ZERO)
    );
    let children = specs("cut-", 150);
    let all = ids(&children);
    cluster
        .hub("b")
        .start_children(children, StartOptions::new())
        .await
        .unwrap();
    cluster.wait_converged(&all, "before the cut").await;

    cluster.net.cut("a@test", "e@test");
    // Watch every child: none may run on two nodes for longer than the bound.
    let mut doubled_since: std::collections::BTreeMap<process_hub::ChildId, tokio::time::Instant> =
        Default::default();
    let mut worst = Duration::ZERO;
    let mut watch = |cluster: &TestCluster| {
        let now = tokio::time::Instant::now();
        let running = cluster.running();
        doubled_since.retain(|id, _| running.get(id).is_some_and(|n| n.len() > 1));
        for (id, nodes) in &running {
            if nodes.len() > 1 {
                let since = *doubled_since.entry(id.clone()).or_insert(now);
                worst = worst.max(now - since);
                assert!(
                    now - since <= bound,
                    "{id} ran on {nodes:?} for {:?}, beyond the bound {bound:?}",
                    now - since
                );
            }
        }
        worst
    };
    wait_until("e is set aside and its children run once elsewhere", || {
        watch(&cluster);
        cluster.hub("e").is_set_aside()
            && all.iter().all(|id| {
                cluster
                    .running()
                    .get(id)
                    .is_some_and(|n| n.len() == 1 && n[0] != "e")
            })
    })
    .await;
    // While set aside, e refuses work and says so; a, b, c, d keep e out of their rings.
    let health = cluster.hub("e").health().await.unwrap();
    assert_eq!(health.status, "set_aside");
    assert!(matches!(
        cluster
            .hub("e")
            .start_children(specs("late-", 1), StartOptions::new())
            .await,
        Err(StartError::Partitioned)
    ));
    for name in ["a", "b", "c", "d"] {
        assert!(!cluster.hub(name).is_partitioned(), "{name} lost quorum");
        assert!(!cluster.hub(name).nodes(true).contains(&"e@test".to_owned()));
    }

    cluster.net.heal();
    wait_until("e is back in the ring", || {
        watch(&cluster);
        !cluster.hub("e").is_set_aside()
            && ["a", "b", "c", "d", "e"]
                .iter()
                .all(|n| cluster.hub(n).nodes(true).len() == 5)
    })
    .await;
    wait_for_converged_watching(&cluster, &all, &mut watch).await;
    println!("worst double run observed: {:?}", watch(&cluster));
}

async fn wait_for_converged_watching(
    cluster: &TestCluster,
    all: &BTreeSet<process_hub::ChildId>,
    watch: &mut impl FnMut(&TestCluster) -> Duration,
) {
    common::wait_for("convergence after the heal", || {
        watch(cluster);
        cluster.converged(all)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cut_link_of_five_under_divergence_runs_no_child_twice_beyond_the_bound() {
    one_cut_link_of_five(41, PartitionTolerance::Divergence).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cut_link_of_five_under_majority_quorum_runs_no_child_twice_beyond_the_bound() {
    one_cut_link_of_five(42, majority_of(5)).await;
}

/// What reachability costs a cluster at rest: once its table has not changed for the ten
/// seconds of fast anti-entropy, each node sends one `reach_digest` per sync period and nothing
/// else (no record, no answer), on 5 nodes and on 25. The rate at the default 15 s sync period
/// is printed: nodes / 15 frames a second for the whole cluster.
#[tokio::test(start_paused = true)]
async fn reachability_at_rest_is_one_digest_per_node_per_sync_period() {
    use process_hub::cluster::in_process::{FrameEvent, FrameFate};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    for n in [5usize, 25] {
        let names: Vec<String> = (1..=n).map(|i| format!("r{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let cluster = TestCluster::with_nodes(71, &refs, Options::plain()).await;
        cluster.wait_members().await;
        let sync = Duration::from_millis(cluster.config("r1").sync_interval_ms);
        // Past the fast anti-entropy that follows the boots' table changes.
        tokio::time::sleep(Duration::from_secs(15)).await;

        let counts: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
        let sink = counts.clone();
        cluster
            .net
            .set_observer(Some(Arc::new(move |event: &FrameEvent<'_>| {
                if event.fate == FrameFate::Delivered && event.kind.starts_with("reach") {
                    *sink
                        .lock()
                        .unwrap()
                        .entry(event.kind.to_owned())
                        .or_default() += 1;
                }
            })));
        let periods = 20u64;
        tokio::time::sleep(sync * periods as u32).await;
        cluster.net.set_observer(None);
        let counts = counts.lock().unwrap().clone();

        let digests = counts.get("reach_digest").copied().unwrap_or(0);
        let others: u64 = counts
            .iter()
            .filter(|(kind, _)| *kind != "reach_digest")
            .map(|(_, count)| count)
            .sum();
        let n = n as u64;
        assert_eq!(
            others, 0,
            "{n} nodes at rest sent more than digests: {counts:?}"
        );
        assert!(
            (n * (periods - 1)..=n * (periods + 1)).contains(&digests),
            "{n} nodes over {periods} sync periods sent {digests} digests, not one per node per period"
        );
        let per_node_per_period = digests as f64 / (n * periods) as f64;
        println!(
            "{n} nodes at rest: {digests} reach_digest frames in {periods} sync periods \
             ({per_node_per_period:.2} per node per period; {:.2} frames/s for the cluster at \
             the default 15 s period)",
            per_node_per_period * n as f64 / 15.0
        );
    }
}
