use std::collections::BTreeMap;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

fn nodes(n: usize) -> Vec<NodeName> {
    (0..n).map(|i| format!("n{i}")).collect()
}

/// Delivers one delta from `origin` through the tree the way the hubs do: every receiver
/// plans its share. Returns how often each node received it and how deep the tree went.
fn disseminate(n: usize, fanout: usize, seed: u64) -> (BTreeMap<NodeName, usize>, usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let all = nodes(n);
    let mut received: BTreeMap<NodeName, usize> = BTreeMap::new();
    let mut max_sent_by_one = 0;
    let mut frontier = vec![(all[0].clone(), all[1..].to_vec(), 0usize)];
    let mut depth = 0;
    while let Some((node, share, level)) = frontier.pop() {
        depth = depth.max(level);
        let plan = relay_plan(share, fanout, &mut rng);
        max_sent_by_one = max_sent_by_one.max(plan.len());
        for (next, rest) in plan {
            *received.entry(next.clone()).or_default() += 1;
            frontier.push((next, rest, level + 1));
        }
        let _ = node;
    }
    (received, depth, max_sent_by_one)
}

#[test]
fn a_delta_reaches_every_node_once_and_nobody_sends_more_than_the_fanout() {
    for (n, fanout) in [(2, 3), (3, 3), (10, 3), (30, 3), (30, 1), (100, 4)] {
        let (received, depth, most) = disseminate(n, fanout, n as u64);
        assert_eq!(received.len(), n - 1, "{n} nodes fan-out {fanout}");
        assert!(received.values().all(|&k| k == 1), "{received:?}");
        assert!(most <= fanout);
        // About log_fanout(n) hops (a chain only with a fan-out of one).
        let bound = if fanout == 1 {
            n
        } else {
            (n as f64).log(fanout as f64).ceil() as usize + 1
        };
        assert!(depth <= bound, "{n} nodes fan-out {fanout}: depth {depth}");
    }
}

#[test]
fn shares_differ_by_at_most_one() {
    let mut rng = StdRng::seed_from_u64(7);
    let plan = relay_plan(nodes(11), 3, &mut rng);
    let sizes: Vec<usize> = plan.iter().map(|(_, rest)| rest.len() + 1).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 11);
    assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
    assert!(relay_plan(Vec::new(), 3, &mut rng).is_empty());
    // Duplicates in a share (a forged frame) are delivered once.
    let plan = relay_plan(vec!["a".into(), "a".into(), "b".into()], 5, &mut rng);
    assert_eq!(plan.len(), 2);
}

#[test]
fn deltas_apply_in_order_whatever_order_they_arrive_in() {
    let mut streams: Streams<u64> = Streams::default();
    assert_eq!(streams.synced("a", 9, 0, 0), Some(vec![]));
    assert_eq!(streams.offer("a", 9, 2, 2, 10), Offer::Held);
    assert_eq!(streams.offer("a", 9, 3, 3, 10), Offer::Held);
    assert_eq!(streams.offer("a", 9, 1, 1, 10), Offer::Apply(vec![1, 2, 3]));
    assert_eq!(streams.offer("a", 9, 2, 2, 10), Offer::Duplicate);
    assert_eq!(streams.heads(), vec![("a".to_owned(), 9, 3)]);
}

#[test]
fn a_gap_that_lasts_asks_the_origin_once_per_interval() {
    let mut streams: Streams<u64> = Streams::default();
    streams.synced("a", 1, 0, 0);
    assert_eq!(streams.offer("a", 1, 3, 3, 100), Offer::Held);
    assert!(streams.overdue(100 + GAP_WAIT_MS - 1).is_empty());
    assert_eq!(streams.overdue(100 + GAP_WAIT_MS), vec!["a".to_owned()]);
    assert!(streams.overdue(100 + GAP_WAIT_MS + 1).is_empty());
    // The sync (position 2) fills the gap: the held delta follows it.
    assert_eq!(streams.synced("a", 1, 2, 2_000), Some(vec![3]));
    assert!(streams.overdue(10_000).is_empty());
}

#[test]
fn a_sync_older_than_what_was_applied_is_refused() {
    let mut streams: Streams<u64> = Streams::default();
    streams.synced("a", 1, 5, 0);
    assert_eq!(streams.offer("a", 1, 6, 6, 0), Offer::Apply(vec![6]));
    assert_eq!(streams.synced("a", 1, 5, 0), None);
    assert_eq!(streams.synced("a", 1, 6, 0), Some(vec![]));
}

#[test]
fn a_stream_without_a_start_or_of_another_epoch_asks_at_once() {
    let mut streams: Streams<u64> = Streams::default();
    assert_eq!(streams.offer("a", 1, 4, 4, 0), Offer::Held);
    assert_eq!(streams.overdue(0), vec!["a".to_owned()]);
    // The origin restarted: its new epoch's deltas wait for its sync; the old one's go.
    streams.synced("a", 1, 4, 0);
    assert_eq!(streams.offer("a", 2, 1, 21, 5), Offer::Held);
    assert_eq!(streams.overdue(5_000), vec!["a".to_owned()]);
    assert_eq!(streams.synced("a", 2, 0, 5_000), Some(vec![21]));
    assert_eq!(streams.offer("a", 1, 5, 5, 5_000), Offer::Held);
    assert_eq!(streams.held("a"), 1);
    assert_eq!(streams.synced("a", 2, 1, 6_000), Some(vec![]));
    assert_eq!(streams.held("a"), 0, "the old epoch's straggler is dropped");
}

#[test]
fn a_buffer_that_never_drains_is_bounded() {
    let mut streams: Streams<u64> = Streams::default();
    streams.synced("a", 1, 0, 0);
    for seq in 2..(MAX_PENDING_PER_ORIGIN as u64 + 100) {
        streams.offer("a", 1, seq, seq, 0);
    }
    assert!(streams.held("a") <= MAX_PENDING_PER_ORIGIN);
    assert_eq!(streams.overdue(1), vec!["a".to_owned()]);
}

#[test]
fn rounds_tell_a_node_which_streams_it_is_behind_in() {
    let mut streams: Streams<u64> = Streams::default();
    streams.synced("a", 1, 5, 0);
    streams.synced("b", 1, 5, 0);
    let heads = vec![
        ("a".to_owned(), 1, 5),
        ("b".to_owned(), 1, 7),
        ("c".to_owned(), 3, 1),
        ("me".to_owned(), 1, 99),
    ];
    assert_eq!(
        streams.behind(&heads, "me", 0),
        vec!["b".to_owned(), "c".to_owned()]
    );
    assert!(streams.behind(&heads, "me", 10).is_empty(), "asked already");
    assert_eq!(streams.behind(&heads, "me", ASK_EVERY_MS).len(), 2);
}

#[test]
fn merged_heads_keep_the_furthest_position_and_the_origins_own_word() {
    let mut heads = vec![("a".to_owned(), 1, 5), ("b".to_owned(), 1, 2)];
    merge_heads(
        &mut heads,
        vec![
            ("a".to_owned(), 1, 3),
            ("b".to_owned(), 1, 4),
            ("c".to_owned(), 2, 1),
        ],
        "x",
    );
    assert_eq!(
        heads,
        vec![
            ("a".to_owned(), 1, 5),
            ("b".to_owned(), 1, 4),
            ("c".to_owned(), 2, 1)
        ]
    );
    // "a" restarted: only it can say its new epoch; another node's word of it is kept.
    merge_heads(&mut heads, vec![("a".to_owned(), 7, 0)], "a");
    assert_eq!(heads[0], ("a".to_owned(), 7, 0));
    merge_heads(&mut heads, vec![("a".to_owned(), 1, 9)], "x");
    assert_eq!(heads[0], ("a".to_owned(), 7, 0));
}

proptest! {
    /// Any arrival order, with syncs of any position in between, applies every delta once and
    /// in order.
    #[test]
    fn any_arrival_order_applies_each_delta_once_in_order(
        order in Just((1..=40u64).collect::<Vec<_>>()).prop_shuffle(),
        sync_at in proptest::collection::vec((0..40usize, 0..=40u64), 0..4),
    ) {
        let mut streams: Streams<u64> = Streams::default();
        streams.synced("a", 1, 0, 0);
        let mut state = 0u64; // the last delta reflected
        let mut applied = Vec::new();
        for (i, seq) in order.iter().enumerate() {
            for (at, pos) in &sync_at {
                if *at == i && *pos >= state {
                    // A sync reflects the origin's state at `pos` (only a state the origin
                    // had; a receiver never gets one older than the sync's position).
                    if let Some(ready) = streams.synced("a", 1, *pos, 0) {
                        state = *pos;
                        for d in ready {
                            prop_assert_eq!(d, state + 1);
                            state = d;
                            applied.push(d);
                        }
                    }
                }
            }
            if let Offer::Apply(ready) = streams.offer("a", 1, *seq, *seq, 0) {
                for d in ready {
                    prop_assert_eq!(d, state + 1);
                    state = d;
                    applied.push(d);
                }
            }
        }
        prop_assert_eq!(state, 40);
        let mut sorted = applied.clone();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), applied.len());
    }
}

#[test]
fn caught_up_names_the_origins_applied_up_to_the_round_s_position() {
    let mut streams: Streams<u8> = Streams::default();
    assert!(streams.synced("a", 1, 5, 0).is_some());
    assert!(streams.synced("b", 1, 2, 0).is_some());
    assert!(streams.synced("c", 7, 9, 0).is_some());
    let heads = vec![
        ("a".to_owned(), 1, 5), // applied exactly
        ("b".to_owned(), 1, 3), // one behind
        ("c".to_owned(), 8, 1), // another epoch
        ("d".to_owned(), 1, 0), // never synced
        ("me".to_owned(), 1, 4),
    ];
    assert_eq!(streams.caught_up(&heads, "me"), vec!["a".to_owned()]);
    // A round gathered before the last delta applied here still counts.
    assert!(matches!(streams.offer("b", 1, 3, 0, 0), Offer::Apply(_)));
    assert!(matches!(streams.offer("b", 1, 4, 0, 0), Offer::Apply(_)));
    assert_eq!(
        streams.caught_up(&heads, "me"),
        vec!["a".to_owned(), "b".to_owned()]
    );
}
