//! Gossip synchronization (`sync = gossip`) across in-process nodes: the original's gossip
//! start/stop and periodic-sync tests, the tree's fan-out, reordering links, a restarted
//! node's new stream, and a cluster changing strategy one node at a time.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::*;
use process_hub::cluster::in_process::{FrameEvent, FrameFate, LinkFaults};
use process_hub::{StartOptions, StopOptions, SyncStrategy};

fn gossip(recipients: usize, restricted_init: bool) -> SyncStrategy {
    SyncStrategy::Gossip {
        interval_ms: 300,
        recipients,
        restricted_init,
    }
}

/// Frames delivered, by `(kind, sender)`.
type Counts = Arc<Mutex<BTreeMap<(String, String), u64>>>;

fn count_frames(cluster: &TestCluster) -> Counts {
    let counts: Counts = Arc::default();
    let sink = counts.clone();
    cluster
        .net
        .set_observer(Some(Arc::new(move |event: &FrameEvent<'_>| {
            if event.fate == FrameFate::Delivered {
                *sink
                    .lock()
                    .unwrap()
                    .entry((event.kind.to_owned(), event.from.to_owned()))
                    .or_default() += 1;
            }
        })));
    counts
}

fn total(counts: &Counts, kind: &str) -> u64 {
    counts
        .lock()
        .unwrap()
        .iter()
        .filter(|((k, _), _)| k == kind)
        .map(|(_, n)| n)
        .sum()
}

fn sent_by(counts: &Counts, kind: &str, node: &str) -> u64 {
    counts
        .lock()
        .unwrap()
        .get(&(kind.to_owned(), full(node)))
        .copied()
        .unwrap_or(0)
}

const SIX: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

#[tokio::test(start_paused = true)]
async fn gossip_start_and_stop_1000_children_with_identical_registries() {
    let options = Options::plain().sync(gossip(2, true));
    let cluster = TestCluster::with_nodes(11, &SIX, options).await;
    let counts = count_frames(&cluster);
    let specs = specs("g-", 1000);
    let all = ids(&specs);
    let started = cluster
        .hub("a")
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    assert_eq!(started.started.len(), 1000, "{:?}", started.errors.first());
    cluster.wait_converged(&all, "after start").await;
    let stopped = cluster
        .hub("b")
        .stop_children(all.iter().cloned().collect(), StopOptions::new())
        .await
        .unwrap();
    assert_eq!(stopped.stopped.len(), 1000, "{:?}", stopped.errors.first());
    cluster.wait_converged(&BTreeSet::new(), "after stop").await;
    // Every registry change went through the gossip tree, none by broadcast.
    assert!(total(&counts, "gossip_delta") > 0);
    assert_eq!(total(&counts, "registry_delta"), 0);
    assert_eq!(total(&counts, "full_sync"), 0);
    stop_all(&cluster).await;
}

/// A change reaches each of the other nodes exactly once, and its origin sends it to
/// `recipients` of them only; a pubsub origin sends it to all of them.
#[tokio::test(start_paused = true)]
async fn one_change_reaches_every_node_once_and_its_origin_sends_only_recipients_frames() {
    let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for (sync, per_origin) in [(gossip(3, true), 3u64), (SyncStrategy::PubSub, 9)] {
        let mut options = Options::plain().sync(sync.clone());
        if let SyncStrategy::Gossip { .. } = sync {
            // No round while counting.
            options = options.sync(SyncStrategy::Gossip {
                interval_ms: 600_000,
                recipients: 3,
                restricted_init: true,
            });
        }
        let cluster = TestCluster::with_nodes(12, &names, options).await;
        let counts = count_frames(&cluster);
        let kind = match sync {
            SyncStrategy::PubSub => "registry_delta",
            _ => "gossip_delta",
        };
        // Children n0 owns: the start needs no frame, its registry write is one delta.
        let id = id_owned_by("n0", &names, "one-");
        let spec = process_hub::ChildSpec::new(id.clone(), "counter");
        cluster
            .hub("n0")
            .start_children(vec![spec], StartOptions::new())
            .await
            .unwrap();
        let one: BTreeSet<_> = [id].into();
        cluster.wait_converged(&one, "one child").await;
        let from_origin = sent_by(&counts, kind, "n0");
        assert!(
            from_origin > 0 && from_origin.is_multiple_of(per_origin),
            "{sync:?}: {counts:?}"
        );
        let deltas = from_origin / per_origin;
        assert_eq!(
            total(&counts, kind),
            deltas * 9,
            "{sync:?}: each delta delivered once to each other node: {counts:?}"
        );
        if let SyncStrategy::Gossip { .. } = sync {
            let most = (1..10)
                .map(|i| sent_by(&counts, kind, &format!("n{i}")))
                .max()
                .unwrap();
            assert!(most <= 3 * deltas, "a relay sent {most} frames: {counts:?}");
        }
        stop_all(&cluster).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_periodic_round_heals_lost_deltas() {
    for restricted_init in [true, false] {
        let options = Options::plain().sync(gossip(2, restricted_init));
        let cluster = TestCluster::with_nodes(13, &["a", "b", "c", "d"], options).await;
        let counts = count_frames(&cluster);
        // Children the last node owns (it starts no round when only the first one does), so
        // the start itself needs no frame; then every frame is lost.
        let ring = process_hub::core::placement::HashRing::new(cluster.names());
        let mine: Vec<_> = specs("lost-", 200)
            .into_iter()
            .filter(|s| ring.owner(&s.id).map(String::as_str) == Some("d@test"))
            .collect();
        assert!(!mine.is_empty());
        cluster.net.set_drop_probability(1.0);
        let result = cluster
            .hub("d")
            .start_children(mine.clone(), StartOptions::new())
            .await
            .unwrap();
        assert_eq!(result.started.len(), mine.len());
        assert!(cluster.hub("a").child_lookup(&mine[0].id).is_none());
        cluster.net.set_drop_probability(0.0);
        cluster.wait_converged(&ids(&mine), "after a round").await;
        assert!(total(&counts, "gossip_round") > 0, "{counts:?}");
        assert!(total(&counts, "gossip_sync") > 0, "{counts:?}");
        assert_eq!(total(&counts, "full_sync"), 0);
        stop_all(&cluster).await;
    }
}

/// Links that delay and reorder frames: deltas of one origin reach a node out of order, and it
/// still applies them in order (a stop applied before its start would leave a ghost row).
#[tokio::test(start_paused = true)]
async fn reordering_links_still_apply_each_stream_in_order() {
    let names = ["a", "b", "c", "d", "e"];
    // No periodic round: only the order of the deltas can make the registries agree.
    let no_rounds = SyncStrategy::Gossip {
        interval_ms: 600_000,
        recipients: 2,
        restricted_init: true,
    };
    let cluster = TestCluster::with_nodes(14, &names, Options::plain().sync(no_rounds)).await;
    for from in names {
        for to in names {
            if from != to {
                cluster.net.set_link_faults(
                    &full(from),
                    &full(to),
                    LinkFaults {
                        drop_probability: 0.0,
                        delay: Some((Duration::from_millis(0), Duration::from_millis(40))),
                        reorder: true,
                    },
                );
            }
        }
    }
    // The syncs each node asks of a new peer for its first seconds would heal a misordered
    // stream: churn once they are over, so only the order of the deltas makes the registries
    // agree.
    tokio::time::sleep(Duration::from_secs(6)).await;
    // Each child started and at once stopped on its owner: two deltas of one stream leave
    // within a moment of each other and often arrive the other way round.
    let ring = process_hub::core::placement::HashRing::new(cluster.names());
    let mut kept = BTreeSet::new();
    for (i, spec) in specs("r-", 150).into_iter().enumerate() {
        let owner = ring.owner(&spec.id).unwrap().clone();
        let hub = &cluster.hubs[&owner];
        let started = hub
            .start_children(vec![spec.clone()], StartOptions::new())
            .await
            .unwrap();
        assert_eq!(started.started.len(), 1, "{:?}", started.errors.first());
        if i % 3 == 0 {
            kept.insert(spec.id);
            continue;
        }
        let stopped = hub
            .stop_children(vec![spec.id.clone()], StopOptions::new())
            .await
            .unwrap();
        assert_eq!(stopped.stopped.len(), 1, "{:?}", stopped.errors.first());
    }
    cluster.net.clear_link_faults();
    cluster
        .wait_converged(&kept, "after churn on reordering links")
        .await;
    stop_all(&cluster).await;
}

/// A node restarted (a new Registry, so a new stream): the others start its stream again from
/// its sync, and its changes reach them.
#[tokio::test(start_paused = true)]
async fn a_restarted_node_starts_a_new_stream() {
    let names = ["a", "b", "c"];
    let mut cluster =
        TestCluster::with_nodes(15, &names, Options::plain().sync(gossip(1, true))).await;
    let first = specs("before-", 90);
    cluster
        .hub("a")
        .start_children(first.clone(), StartOptions::new())
        .await
        .unwrap();
    cluster
        .wait_converged(&ids(&first), "before the restart")
        .await;
    cluster.crash("c").await;
    cluster.restart("c").await;
    cluster.wait_members().await;
    cluster
        .wait_converged(&ids(&first), "after the restart")
        .await;
    let second = specs("after-", 90);
    cluster
        .hub("c")
        .start_children(second.clone(), StartOptions::new())
        .await
        .unwrap();
    let mut all = ids(&first);
    all.extend(ids(&second));
    cluster
        .wait_converged(&all, "changes of the new stream")
        .await;
    stop_all(&cluster).await;
}

/// A cluster moving from pubsub to gossip one node at a time agrees all along.
#[tokio::test(start_paused = true)]
async fn nodes_with_pubsub_and_with_gossip_agree() {
    let mut cluster = TestCluster::new(16, Options::plain());
    cluster.add("a").await;
    cluster.add("b").await;
    cluster.options.sync = gossip(2, false);
    cluster.add("c").await;
    cluster.add("d").await;
    cluster.wait_members().await;
    let specs = specs("mixed-", 200);
    let half = specs.len() / 2;
    cluster
        .hub("a")
        .start_children(specs[..half].to_vec(), StartOptions::new())
        .await
        .unwrap();
    cluster
        .hub("d")
        .start_children(specs[half..].to_vec(), StartOptions::new())
        .await
        .unwrap();
    cluster
        .wait_converged(&ids(&specs), "mixed strategies")
        .await;
    stop_all(&cluster).await;
}

/// A cluster whose copies agree syncs by digest under either strategy: past the start, every
/// periodic sync is a `sync_digest` of 24 bytes, no peer asks for a full sync, and no rows
/// travel. Then one node's copy is made to differ (its deltas lost): its peers' digests of
/// it differ, they ask for its rows, and the copies agree again.
#[tokio::test(start_paused = true)]
async fn an_in_sync_cluster_syncs_by_digest_and_a_difference_asks_for_the_rows() {
    for sync in [SyncStrategy::PubSub, gossip(2, false)] {
        let period = match &sync {
            SyncStrategy::PubSub => Duration::from_secs(15),
            SyncStrategy::Gossip { interval_ms, .. } => Duration::from_millis(*interval_ms),
        };
        let options = Options::plain().sync(sync.clone());
        let cluster = TestCluster::with_nodes(14, &["a", "b", "c"], options).await;
        let started = specs("digest-", 300);
        cluster
            .hub("a")
            .start_children(started.clone(), StartOptions::new())
            .await
            .unwrap();
        cluster.wait_converged(&ids(&started), "started").await;
        // Past any sync a join or the start still owed.
        tokio::time::sleep(period * 3).await;
        let counts = count_frames(&cluster);
        tokio::time::sleep(period * 4).await;
        assert!(total(&counts, "sync_digest") >= 3, "{sync:?}: {counts:?}");
        for rows in ["full_sync", "full_sync_part", "gossip_sync", "sync_request"] {
            assert_eq!(total(&counts, rows), 0, "{sync:?}: {counts:?}");
        }
        // The last node's children started while every frame is lost: its peers' copies of
        // its bindings now differ from its digest.
        let ring = process_hub::core::placement::HashRing::new(cluster.names());
        let lost: Vec<_> = specs("lost-", 200)
            .into_iter()
            .filter(|s| ring.owner(&s.id).map(String::as_str) == Some("c@test"))
            .collect();
        cluster.net.set_drop_probability(1.0);
        cluster
            .hub("c")
            .start_children(lost.clone(), StartOptions::new())
            .await
            .unwrap();
        assert!(cluster.hub("a").child_lookup(&lost[0].id).is_none());
        cluster.net.set_drop_probability(0.0);
        let all: BTreeSet<_> = ids(&started).union(&ids(&lost)).cloned().collect();
        cluster
            .wait_converged(&all, "after the digests differed")
            .await;
        assert!(total(&counts, "sync_request") >= 1, "{sync:?}: {counts:?}");
        stop_all(&cluster).await;
    }
}
