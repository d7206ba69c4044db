use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn nodes(n: usize) -> Vec<NodeName> {
    (0..n).map(|i| format!("n{i}@h")).collect()
}

fn children(counts: &[u64]) -> BTreeMap<NodeName, u64> {
    nodes(counts.len())
        .into_iter()
        .zip(counts.iter().copied())
        .collect()
}

fn with_children(n: u64) -> LoadSample {
    LoadSample {
        children: n,
        ..LoadSample::default()
    }
}

#[test]
fn placement_follows_spare_capacity() {
    // n0 is busy in every figure, n1 and n2 idle: almost nothing goes to n0, the rest splits.
    let members = nodes(3);
    let loads = BTreeMap::from([
        (
            members[0].clone(),
            LoadSample {
                children: 1000,
                busy_permille: 900,
                run_queue: 50,
                memory_bytes: 1 << 30,
                moving: 0,
            },
        ),
        (members[1].clone(), with_children(0)),
    ]);
    let spare = spare_capacity(&loads, &members);
    assert!((spare[0].1 - MIN_SPARE).abs() < 1e-9, "{spare:?}");
    assert!((spare[1].1 - (1.0 + MIN_SPARE)).abs() < 1e-9);
    assert!(
        (spare[2].1 - (1.0 + MIN_SPARE)).abs() < 1e-9,
        "no report: idle"
    );
    let mut on = BTreeMap::<NodeName, usize>::new();
    for i in 0..6000 {
        let chosen = place(&ChildId::from(format!("child-{i}")), &spare, 1);
        *on.entry(chosen[0].clone()).or_default() += 1;
    }
    let share = |n: &NodeName| *on.get(n).unwrap_or(&0) as f64 / 6000.0;
    // Expected shares: 0.05/2.15 = 2.3% and 48.8% each.
    assert!(share(&members[0]) < 0.05, "{on:?}");
    assert!((share(&members[1]) - 0.488).abs() < 0.04, "{on:?}");
    assert!((share(&members[2]) - 0.488).abs() < 0.04, "{on:?}");
}

#[test]
fn average_decays_toward_new_reports() {
    let mut avg = LoadAverage::first(with_children(100));
    avg.update(with_children(0), 0.9);
    assert_eq!(avg.sample().children, 90);
    avg.update(with_children(0), 0.0);
    assert_eq!(avg.sample().children, 0, "decay 0 keeps only the newest");
    let huge = LoadSample {
        children: u64::MAX,
        busy_permille: u64::MAX,
        run_queue: u64::MAX,
        memory_bytes: u64::MAX,
        moving: u64::MAX,
    };
    let bounded = LoadAverage::first(huge).sample();
    assert_eq!(bounded.busy_permille, 1000);
    assert_eq!(bounded.children, 1 << 40);
}

#[test]
fn rebalance_moves_half_the_spread_above_the_threshold() {
    assert_eq!(
        plan_rebalance(&children(&[300, 0, 0]), 0.5, 1000),
        Some(Rebalance {
            from: "n0@h".into(),
            to: "n1@h".into(),
            count: 150
        })
    );
    assert_eq!(
        plan_rebalance(&children(&[300, 0, 0]), 0.5, 40).map(|r| r.count),
        Some(40),
        "at most max_moves"
    );
    assert_eq!(plan_rebalance(&children(&[110, 100, 90]), 0.5, 100), None);
    assert_eq!(
        plan_rebalance(&children(&[1, 0]), 0.0, 100),
        None,
        "spread < 2"
    );
    assert_eq!(plan_rebalance(&children(&[0, 0]), 0.0, 100), None);
    assert_eq!(plan_rebalance(&children(&[7]), 0.0, 100), None);
}

proptest! {
    #[test]
    fn placement_is_deterministic_and_distinct(
        id in "[a-z0-9]{1,12}",
        weights in proptest::collection::vec(0.0f64..2.0, 1..8),
        k in 1usize..5,
    ) {
        let spare: Vec<(NodeName, f64)> = nodes(weights.len()).into_iter().zip(weights).collect();
        let id = ChildId::from(id);
        let a = place(&id, &spare, k);
        let mut shuffled = spare.clone();
        shuffled.reverse();
        prop_assert_eq!(&a, &place(&id, &shuffled, k), "order of the table is irrelevant");
        let positive = spare.iter().filter(|(_, w)| *w > 0.0).count();
        prop_assert_eq!(a.len(), k.min(positive));
        let distinct: BTreeSet<_> = a.iter().collect();
        prop_assert_eq!(distinct.len(), a.len());
        for node in &a {
            prop_assert!(spare.iter().any(|(n, w)| n == node && *w > 0.0));
        }
    }

    #[test]
    fn spare_capacity_is_bounded(
        samples in proptest::collection::vec(
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()), 0..6),
        extra in 0usize..3,
    ) {
        let members = nodes(samples.len() + extra);
        let loads: BTreeMap<NodeName, LoadSample> = members
            .iter()
            .zip(&samples)
            .map(|(n, &(children, busy_permille, run_queue, memory_bytes))| {
                (n.clone(), LoadSample { children, busy_permille, run_queue, memory_bytes, moving: 0 })
            })
            .collect();
        let spare = spare_capacity(&loads, &members);
        prop_assert_eq!(spare.len(), members.len());
        for (_, w) in &spare {
            prop_assert!(w.is_finite() && *w >= MIN_SPARE - 1e-9 && *w <= 1.0 + MIN_SPARE + 1e-9);
        }
    }

    #[test]
    fn a_rebalance_never_overshoots(counts in proptest::collection::vec(0u64..10_000, 0..8),
                                    threshold in 0.0f64..2.0, max_moves in 0u64..5000) {
        let table = children(&counts);
        if let Some(r) = plan_rebalance(&table, threshold, max_moves) {
            let (from, to) = (table[&r.from], table[&r.to]);
            prop_assert!(r.count >= 1 && r.count <= max_moves);
            prop_assert!(from - r.count >= to + r.count, "the busiest stays at least as busy");
            prop_assert_eq!(from, *table.values().max().unwrap());
            prop_assert_eq!(to, *table.values().min().unwrap());
        }
    }
}

#[test]
fn children_alone_weigh_fully_when_no_host_figures_are_reported() {
    let members = nodes(2);
    let loads = BTreeMap::from([
        (members[0].clone(), with_children(100)),
        (members[1].clone(), with_children(50)),
    ]);
    let spare = spare_capacity(&loads, &members);
    assert!((spare[0].1 - MIN_SPARE).abs() < 1e-9, "{spare:?}");
    assert!((spare[1].1 - (0.5 + MIN_SPARE)).abs() < 1e-9, "{spare:?}");
    let idle = spare_capacity(&BTreeMap::new(), &members);
    assert!(idle
        .iter()
        .all(|(_, w)| (*w - (1.0 + MIN_SPARE)).abs() < 1e-9));
}
