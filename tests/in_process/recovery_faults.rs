//! The seeded random fault run of the declared-list recovery (issue 5): crashes and restarts
//! (some with the disk lost), partitions, bursts of dropped frames, with durable starts and
//! stops in between. Replay a printed seed with `PROCESS_HUB_RECOVERY_SEED=<seed>`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::cluster::*;
use common::{durable, wait_until};
use process_hub::{ChildId, ChildSpec, StopOptions};

/// What the run asked for, and what it was told.
#[derive(Default)]
struct Ledger {
    /// Acknowledged declarations not stopped since.
    declared: BTreeSet<ChildId>,
    /// Acknowledged stops.
    stopped: BTreeSet<ChildId>,
    /// Mutations that failed and may still have been applied (their answer was lost).
    unknown: BTreeSet<ChildId>,
    /// The number of the last child named (`f1`, `f2`, ...).
    next: usize,
}

impl Ledger {
    /// Declares `n` new children through `node` and records what it answered.
    async fn start(&mut self, d: &TestCluster, node: &str, n: usize, when: &str) {
        let batch: Vec<ChildSpec> = (0..n)
            .map(|_| {
                self.next += 1;
                ChildSpec::new(format!("f{}", self.next), "counter")
            })
            .collect();
        let outcome = d.hub(node).start_children(batch.clone(), durable()).await;
        println!(
            "{when}: start {:?} on {node}: {}",
            ids(&batch),
            outcome.is_ok()
        );
        match outcome {
            Ok(_) => self.declared.extend(ids(&batch)),
            Err(_) => self.unknown.extend(ids(&batch)),
        }
    }
}

/// Eight steps of durable starts and stops, each with one fault: a crash and restart (half the
/// time with the disk lost), a partition of one node with durable starts on the majority side
/// while it lasts (only the majority mutates: when both sides do, the losing side's
/// acknowledged mutations are undone by design, see `docs/recovery.md`), or a burst of dropped
/// frames during the mutations. A mutation that fails may still have been applied (its answer
/// was lost): its children may end up declared or not. At the end, after the heal:
/// - every node holds the same declared list;
/// - every acknowledged declaration is in it, no acknowledged stop is;
/// - every child of the list runs exactly once, and no other child started in the run (stopped,
///   or of a failed mutation that did not take) runs anywhere.
///
/// The seed is printed for replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_random_faults_keep_the_declared_children() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let seed = std::env::var("PROCESS_HUB_RECOVERY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!("recovery fault run seed: {seed} (replay with PROCESS_HUB_RECOVERY_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let names = ["a", "b", "c"];
    let mut d = TestCluster::with_nodes(seed, &names, Options::durable()).await;
    let mut run = Ledger::default();
    for step in 0..8 {
        let fault = rng.gen_range(0..3);
        if fault == 2 {
            println!("step {step}: drop 30% of the frames during the mutations");
            d.net.set_drop_probability(0.3);
        }
        let node = names[rng.gen_range(0..3)];
        let n = rng.gen_range(1..6);
        run.start(&d, node, n, &format!("step {step}")).await;
        if let Some(victim) = run
            .declared
            .iter()
            .nth(rng.gen_range(0..run.declared.len().max(1)))
            .cloned()
        {
            let node = names[rng.gen_range(0..3)];
            let outcome = d
                .hub(node)
                .stop_child(victim.clone(), StopOptions::new())
                .await;
            println!("step {step}: stop {victim} on {node}: {outcome:?}");
            run.declared.remove(&victim);
            match outcome {
                Ok(_) => run.stopped.insert(victim),
                Err(_) => run.unknown.insert(victim),
            };
        }
        match fault {
            0 => {
                let victim = names[rng.gen_range(0..3)];
                d.crash(victim).await;
                let lose_disk = rng.gen_bool(0.5);
                println!("step {step}: crash {victim}, disk lost: {lose_disk}");
                if lose_disk {
                    remove_dir(&d.data_dir(victim));
                }
                d.restart(victim).await;
            }
            1 => {
                let alone = names[rng.gen_range(0..3)];
                let rest: Vec<&str> = names.into_iter().filter(|n| *n != alone).collect();
                println!("step {step}: partition {alone} from the rest");
                d.net
                    .partition(&[vec![full(alone)], rest.iter().map(|n| full(n)).collect()]);
                wait_until("the partition is seen on both sides", || {
                    d.hub(alone).nodes(true).len() == 1
                        && rest.iter().all(|n| d.hub(n).nodes(true).len() == 2)
                })
                .await;
                let node = rest[rng.gen_range(0..rest.len())];
                let n = rng.gen_range(1..4);
                run.start(&d, node, n, &format!("step {step} (majority side)"))
                    .await;
                d.net.heal();
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                d.net.set_drop_probability(0.0);
            }
        }
        d.wait_members().await;
        let top = d.versions().into_iter().max().unwrap_or(0);
        d.wait_versions(top).await;
    }
    println!(
        "declared {}, stopped {}, unknown {}",
        run.declared.len(),
        run.stopped.len(),
        run.unknown.len()
    );
    let top = d.versions().into_iter().max().unwrap_or(0);
    d.wait_versions(top).await;
    let lists: BTreeMap<&str, BTreeSet<ChildId>> = names
        .iter()
        .map(|n| {
            let view = d.hub(n).declared_children().unwrap();
            (*n, view.children.into_iter().map(|c| c.spec.id).collect())
        })
        .collect();
    let list = lists["a"].clone();
    assert!(
        lists.values().all(|l| *l == list),
        "seed {seed}: the nodes' lists differ at version {top}: {lists:?}"
    );
    let lost: Vec<&ChildId> = run
        .declared
        .difference(&run.unknown)
        .filter(|id| !list.contains(*id))
        .collect();
    assert!(
        lost.is_empty(),
        "seed {seed}: acknowledged declarations lost: {lost:?}"
    );
    let undone: Vec<&ChildId> = run
        .stopped
        .difference(&run.unknown)
        .filter(|id| list.contains(*id))
        .collect();
    assert!(
        undone.is_empty(),
        "seed {seed}: acknowledged stops undone: {undone:?}"
    );
    let started: BTreeSet<ChildId> = (1..=run.next)
        .map(|n| ChildId::from(format!("f{n}")))
        .collect();
    let dead: BTreeSet<ChildId> = started.difference(&list).cloned().collect();
    d.wait_exactly(&list, &dead, &format!("seed {seed}")).await;
    stop_all(&d).await;
}
