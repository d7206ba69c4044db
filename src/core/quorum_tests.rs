use proptest::prelude::*;

use super::*;

fn n(i: usize) -> NodeName {
    format!("n{i}@h")
}

/// Takes nodes `from..to` down at `at` ms, one per ms, on a cluster of `size`; the verdicts.
fn down(t: &mut QuorumTracker, size: usize, from: usize, to: usize, at: u64) -> Vec<Verdict> {
    (from..to)
        .map(|i| t.node_down(&n(i), at + i as u64, size - (i - from + 1)))
        .collect()
}

#[test]
fn divergence_never_partitions() {
    let mut t = QuorumTracker::new(PartitionTolerance::Divergence, 6);
    assert!(down(&mut t, 6, 0, 5, 0)
        .iter()
        .all(|v| *v == Verdict::Unchanged));
    assert!(!t.is_partitioned());
}

#[test]
fn static_quorum_holds_down_to_its_size_and_comes_back_with_it() {
    let strategy = PartitionTolerance::StaticQuorum {
        quorum_size: 4,
        startup_confirm: false,
    };
    let mut t = QuorumTracker::new(strategy.clone(), 6);
    assert_eq!(
        down(&mut t, 6, 0, 3, 0),
        [Verdict::Unchanged, Verdict::Unchanged, Verdict::Lost]
    );
    assert!(t.is_partitioned());
    assert_eq!(t.node_up(&n(2), 10, 4), Verdict::Regained);
    assert!(!t.is_partitioned());
    // Without startup_confirm a lone node starts running; with it, partitioned.
    assert!(!QuorumTracker::new(strategy, 1).is_partitioned());
    let confirm = PartitionTolerance::StaticQuorum {
        quorum_size: 4,
        startup_confirm: true,
    };
    let mut t = QuorumTracker::new(confirm, 1);
    assert!(t.is_partitioned());
    assert_eq!(t.node_up(&n(1), 0, 2), Verdict::Unchanged);
    assert_eq!(t.node_up(&n(3), 0, 4), Verdict::Regained);
}

#[test]
fn two_peers_taken_out_by_one_decision_leave_a_sixty_percent_side_its_quorum() {
    // Five nodes; d and e are cut off: both are suspects, then one decision takes both out of
    // the members, one after the other. The side of three keeps 3 of 5 = 60 % all along.
    let strategy = PartitionTolerance::DynamicQuorum {
        quorum_size_percent: 60,
        threshold_time_ms: 400,
    };
    let mut t = QuorumTracker::new(strategy, 5);
    let suspects: std::collections::BTreeSet<NodeName> = [n(3), n(4)].into_iter().collect();
    let mut members: Vec<NodeName> = (0..5).map(n).collect();
    assert_eq!(counted_members(&members, |m| suspects.contains(m)), 3);
    members.retain(|m| *m != n(3));
    let counted = counted_members(&members, |m| suspects.contains(m));
    assert_eq!(counted, 3, "d left the members: not subtracted twice");
    assert_eq!(t.node_down(&n(3), 10, counted), Verdict::Unchanged);
    members.retain(|m| *m != n(4));
    let counted = counted_members(&members, |m| suspects.contains(m));
    assert_eq!(counted, 3);
    assert_eq!(t.node_down(&n(4), 10, counted), Verdict::Unchanged);
    assert!(!t.is_partitioned());
}

#[test]
fn dynamic_quorum_counts_only_the_nodes_lost_within_the_threshold() {
    let strategy = PartitionTolerance::DynamicQuorum {
        quorum_size_percent: 50,
        threshold_time_ms: 10_000,
    };
    // Six nodes lose three at once: 3 of 6 = 50 %, still quorum; a fourth: 2 of 6, lost.
    let mut t = QuorumTracker::new(strategy.clone(), 6);
    assert!(down(&mut t, 6, 0, 3, 0)
        .iter()
        .all(|v| *v == Verdict::Unchanged));
    assert_eq!(t.node_down(&n(3), 5, 2), Verdict::Lost);
    // One of them comes back: 3 members, 3 lost: 50 % again.
    assert_eq!(t.node_up(&n(3), 6, 3), Verdict::Regained);
    // The losses age out of the threshold: 2 members alone are all there is.
    assert_eq!(t.node_down(&n(4), 7, 2), Verdict::Lost);
    assert_eq!(t.tick(10_010, 2), Verdict::Regained);

    // The same five losses, one every 11 s (slower than the threshold): never partitioned.
    let mut t = QuorumTracker::new(strategy, 6);
    for i in 0..5 {
        assert_eq!(
            t.node_down(&n(i), i as u64 * 11_000, 6 - (i + 1)),
            Verdict::Unchanged,
            "loss {i}"
        );
    }
    assert!(!t.is_partitioned());
}

#[test]
fn majority_quorum_keeps_the_larger_side_of_a_split() {
    let strategy = PartitionTolerance::MajorityQuorum {
        initial_cluster_size: 1,
        track_max_size: true,
    };
    // A node alone is a majority of one; the cluster grows to five.
    let mut three = QuorumTracker::new(strategy.clone(), 1);
    assert!(!three.is_partitioned());
    for size in 2..=5 {
        assert_eq!(three.node_up(&n(size), 0, size), Verdict::Unchanged);
    }
    let mut two = three.clone();
    // Split 3/2: the three keep quorum, the two lose it.
    assert_eq!(down(&mut three, 5, 3, 5, 100), [Verdict::Unchanged; 2]);
    assert!(!three.is_partitioned());
    assert_eq!(
        down(&mut two, 5, 0, 3, 100),
        [Verdict::Unchanged, Verdict::Unchanged, Verdict::Lost]
    );
    // The heal brings the two back; an intentional downsizing to two nodes is a reset.
    assert_eq!(two.node_up(&n(0), 200, 3), Verdict::Regained);
    assert_eq!(two.node_down(&n(0), 300, 2), Verdict::Lost);
    assert_eq!(two.reset_cluster_size(2, 2), Verdict::Regained);

    // Without tracking, the initial size stays the base.
    let fixed = PartitionTolerance::MajorityQuorum {
        initial_cluster_size: 3,
        track_max_size: false,
    };
    let mut t = QuorumTracker::new(fixed, 3);
    t.node_up(&n(4), 0, 7);
    assert!(t.has_quorum(2), "a majority of 3, not of 7");

    // A node booting alone into a cluster configured for five waits for two more.
    let five = PartitionTolerance::MajorityQuorum {
        initial_cluster_size: 5,
        track_max_size: true,
    };
    let mut t = QuorumTracker::new(five.clone(), 1);
    assert!(t.is_partitioned());
    assert_eq!(t.node_up(&n(1), 0, 2), Verdict::Unchanged);
    assert_eq!(t.node_up(&n(2), 0, 3), Verdict::Regained);

    // A tracker told it starts partitioned leaves only with quorum.
    let mut t = QuorumTracker::new(five, 5);
    t.assume_partitioned();
    assert_eq!(t.node_up(&n(1), 0, 2), Verdict::Unchanged);
    assert_eq!(t.node_up(&n(2), 0, 3), Verdict::Regained);
}

fn strategies() -> impl Strategy<Value = PartitionTolerance> {
    prop_oneof![
        Just(PartitionTolerance::Divergence),
        (1usize..8, any::<bool>()).prop_map(|(quorum_size, startup_confirm)| {
            PartitionTolerance::StaticQuorum {
                quorum_size,
                startup_confirm,
            }
        }),
        (1u8..=100, 1u64..20_000).prop_map(|(quorum_size_percent, threshold_time_ms)| {
            PartitionTolerance::DynamicQuorum {
                quorum_size_percent,
                threshold_time_ms,
            }
        }),
        (1usize..8, any::<bool>()).prop_map(|(initial_cluster_size, track_max_size)| {
            PartitionTolerance::MajorityQuorum {
                initial_cluster_size,
                track_max_size,
            }
        }),
    ]
}

proptest! {
    /// Whatever the events, the verdicts alternate Lost / Regained, and the mode is what the
    /// count says after each event.
    #[test]
    fn the_mode_follows_the_count_and_verdicts_alternate(
        strategy in strategies(),
        events in proptest::collection::vec((any::<bool>(), 0usize..8, 0u64..5_000), 0..60),
    ) {
        let mut members = 4usize;
        let mut t = QuorumTracker::new(strategy, members);
        let mut now = 0u64;
        let mut last = None;
        for (up, node, gap) in events {
            now += gap;
            let verdict = if up {
                members = (members + 1).min(12);
                t.node_up(&n(node), now, members)
            } else {
                members = members.saturating_sub(1).max(1);
                t.node_down(&n(node), now, members)
            };
            prop_assert_eq!(t.is_partitioned(), !t.has_quorum(members));
            if verdict != Verdict::Unchanged {
                prop_assert_ne!(Some(verdict), last, "two {:?} in a row", verdict);
                last = Some(verdict);
            }
        }
    }
}
