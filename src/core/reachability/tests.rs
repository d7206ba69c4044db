use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::rule::{asks_to_vouch, component_of, down_links, indirect, link_up, set_aside, vouches};
use super::*;
use crate::model::NodeName;

fn n(i: usize) -> NodeName {
    format!("n{i}@h")
}

/// Node `i`'s first record (incarnation 1, version 1), reaching `reachable`.
fn first_record(i: usize, reachable: BTreeSet<NodeName>) -> (NodeName, Observation) {
    (
        n(i),
        Observation {
            observer: n(i),
            incarnation: 1,
            version: 1,
            reachable,
            aside: false,
        },
    )
}

fn record(observer: &str, version: u64, reachable: &[&str]) -> Observation {
    Observation {
        observer: observer.to_owned(),
        incarnation: 1,
        version,
        reachable: reachable.iter().map(|s| s.to_string()).collect(),
        aside: false,
    }
}

/// Records of a full mesh of `names` minus the `cut` links (both directions).
fn mesh(names: &[&str], cut: &[(&str, &str)]) -> BTreeMap<NodeName, Observation> {
    names
        .iter()
        .map(|u| {
            let reach: Vec<&str> = names
                .iter()
                .copied()
                .filter(|v| {
                    v != u
                        && !cut
                            .iter()
                            .any(|&(a, b)| (a == *u && b == *v) || (a == *v && b == *u))
                })
                .collect();
            (u.to_string(), record(u, 1, &reach))
        })
        .collect()
}

fn names(v: &[&str]) -> BTreeSet<NodeName> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Random records over `size` nodes: each observer lists a random subset of the others; some
/// observers have no record at all.
fn any_records(size: usize) -> impl Strategy<Value = BTreeMap<NodeName, Observation>> {
    prop::collection::vec(
        (any::<bool>(), prop::collection::vec(any::<bool>(), size)),
        size,
    )
    .prop_map(move |rows| {
        rows.into_iter()
            .enumerate()
            .filter(|(_, (present, _))| *present)
            .map(|(i, (_, bits))| {
                let reachable = bits
                    .into_iter()
                    .enumerate()
                    .filter(|(j, b)| *b && *j != i)
                    .map(|(j, _)| n(j))
                    .collect();
                first_record(i, reachable)
            })
            .collect()
    })
}

#[test]
fn one_cut_link_of_five_keeps_everyone_and_sets_aside_the_greater_end() {
    let all = ["a", "b", "c", "d", "e"];
    let records = mesh(&all, &[("a", "e")]);
    let comp = component_of(&records, "a");
    assert_eq!(comp, names(&all), "e is reached through b, c and d");
    assert_eq!(indirect(&records, &comp, "a"), names(&["e"]));
    assert_eq!(indirect(&records, &comp, "b"), BTreeSet::new());
    assert_eq!(set_aside(&records, &comp), names(&["e"]));
}

#[test]
fn a_one_way_drop_counts_as_a_cut() {
    let all = ["a", "b", "c"];
    let mut records = mesh(&all, &[]);
    // a still hears c, c no longer hears a.
    records.get_mut("c").unwrap().reachable.remove("a");
    assert!(!link_up(&records, "a", "c"));
    assert!(!link_up(&records, "c", "a"));
    assert_eq!(component_of(&records, "a"), names(&all));
    assert_eq!(set_aside(&records, &names(&all)), names(&["c"]));
}

#[test]
fn a_crashed_node_leaves_once_every_observer_reports_it() {
    let all = ["a", "b", "c"];
    let mut records = mesh(&all, &[]);
    // a saw c's sockets close; b's record has not arrived yet: c is indirectly connected.
    records.get_mut("a").unwrap().reachable.remove("c");
    assert!(component_of(&records, "a").contains("c"));
    // b's record arrives: c is out, whatever its own (stale) record says.
    records.get_mut("b").unwrap().reachable.remove("c");
    assert_eq!(component_of(&records, "a"), names(&["a", "b"]));
}

#[test]
fn a_node_cut_from_two_goes_before_the_ends_of_single_cuts() {
    let all = ["a", "b", "c", "d", "e"];
    let records = mesh(&all, &[("a", "c"), ("b", "c"), ("d", "e")]);
    let aside = set_aside(&records, &names(&all));
    assert_eq!(aside, names(&["c", "e"]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every member of a component computes the same component, the same set-aside nodes.
    #[test]
    fn every_member_computes_the_same_decision(records in any_records(7), me in 0usize..7) {
        let mine = component_of(&records, &n(me));
        let aside = set_aside(&records, &mine);
        for other in &mine {
            prop_assert_eq!(&component_of(&records, other), &mine);
            prop_assert_eq!(&set_aside(&records, &component_of(&records, other)), &aside);
        }
        // And the same as a resolver at the same instants.
        let table_of = |who: &NodeName| ReachTable::from_records(who.clone(), records.values().cloned());
        // Each member decides about itself alone: the one the rule picks sets itself aside
        // once stable, the others wait for its record to say so.
        let mut decisions = BTreeSet::new();
        for who in &mine {
            let mut resolver = Resolver::new(ResolverConfig::new(100));
            resolver.decide(&table_of(who), 0);
            let d = resolver.decide(&table_of(who), 100);
            prop_assert_eq!(d.me_aside, aside.contains(who));
            prop_assert_eq!(&d.set_aside, &if d.me_aside { BTreeSet::from([who.clone()]) } else { BTreeSet::new() });
            decisions.insert(d.component);
        }
        prop_assert!(decisions.len() <= 1);
    }

    /// A node linked (both ways) to a member of my component is in it: never down for me.
    #[test]
    fn a_node_reached_from_my_component_is_never_down(records in any_records(7), me in 0usize..7) {
        let mine = component_of(&records, &n(me));
        for u in &mine {
            for v in (0..7).map(n) {
                if link_up(&records, u, &v) {
                    prop_assert!(mine.contains(&v), "{} linked to {} but down", v, u);
                }
            }
        }
    }

    /// A clean split (each node reaches exactly its side) yields exactly the sides, and
    /// nothing is set aside.
    #[test]
    fn a_clean_split_yields_exactly_the_sides(sides in prop::collection::vec(0u8..3, 2..8)) {
        let mut records = BTreeMap::new();
        for (i, side) in sides.iter().enumerate() {
            let reach = sides
                .iter()
                .enumerate()
                .filter(|(j, s)| *j != i && *s == side)
                .map(|(j, _)| n(j))
                .collect();
            records.insert(n(i), Observation { observer: n(i), incarnation: 1, version: 1, reachable: reach, aside: false });
        }
        for (i, side) in sides.iter().enumerate() {
            let expected: BTreeSet<NodeName> = sides
                .iter()
                .enumerate()
                .filter(|(_, s)| *s == side)
                .map(|(j, _)| n(j))
                .collect();
            let comp = component_of(&records, &n(i));
            prop_assert_eq!(&comp, &expected);
            prop_assert!(set_aside(&records, &comp).is_empty());
        }
    }

    /// Resolution leaves a clique, and is a function of the records and the component.
    #[test]
    fn resolution_leaves_a_clique_deterministically(records in any_records(8), me in 0usize..8) {
        let comp = component_of(&records, &n(me));
        let aside = set_aside(&records, &comp);
        prop_assert!(aside.is_subset(&comp));
        let rest: BTreeSet<NodeName> = comp.difference(&aside).cloned().collect();
        prop_assert!(!rest.is_empty());
        prop_assert!(down_links(&records, &rest).is_empty());
        prop_assert_eq!(set_aside(&records.clone(), &comp.clone()), aside);
    }

    /// The record of a node nobody in my component lists is never trusted: whatever it says,
    /// my component is the same.
    #[test]
    fn stale_records_of_unreached_observers_are_ignored(
        records in any_records(7),
        me in 0usize..7,
        forged in prop::collection::vec(0usize..7, 0..7),
    ) {
        let mine = component_of(&records, &n(me));
        for x in (0..7).map(n).filter(|x| !mine.contains(x)) {
            let listed = mine.iter().any(|u| records.get(u).is_some_and(|r| r.reachable.contains(&x)));
            if listed {
                continue;
            }
            let mut changed = records.clone();
            changed.insert(x.clone(), Observation {
                observer: x.clone(),
                incarnation: 9,
                version: 9,
                reachable: forged.iter().map(|i| n(*i)).filter(|v| *v != x).collect(),
                aside: false,
            });
            prop_assert_eq!(component_of(&changed, &n(me)), mine.clone());
        }
    }

    /// Merging the same records in any order gives the same table (newer wins).
    #[test]
    fn merge_order_does_not_matter(
        versions in prop::collection::vec((0usize..4, 1u64..5, 1u64..20, prop::collection::vec(0usize..5, 0..4)), 0..20),
        seed in any::<u64>(),
    ) {
        let records: Vec<Observation> = versions
            .iter()
            .map(|(o, inc, v, reach)| Observation {
                observer: n(*o + 1),
                incarnation: *inc,
                version: *v,
                reachable: reach.iter().map(|i| n(*i)).filter(|x| *x != n(*o + 1)).collect(),
                aside: false,
            })
            .collect();
        let mut shuffled = records.clone();
        // A deterministic shuffle from the seed.
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (s >> 33) as usize % (i + 1));
        }
        let mut a = ReachTable::new(n(0), 1);
        let mut b = ReachTable::new(n(0), 1);
        // Records with equal keys and different contents are not honest; keep one per key.
        let mut seen = BTreeMap::new();
        let honest: Vec<Observation> = records.into_iter().filter(|r| seen.insert((r.observer.clone(), r.key()), ()).is_none()).collect();
        let keys: BTreeSet<_> = honest.iter().map(|r| (r.observer.clone(), r.key())).collect();
        for r in honest { let _ = a.merge(r, 1_000); }
        for r in shuffled.into_iter().filter(|r| keys.contains(&(r.observer.clone(), r.key()))) { let _ = b.merge(r, 1_000); }
        let ka: Vec<_> = a.records().values().map(|r| (r.observer.clone(), r.key())).collect();
        let kb: Vec<_> = b.records().values().map(|r| (r.observer.clone(), r.key())).collect();
        prop_assert_eq!(ka, kb);
    }
}

#[test]
fn hostile_records_are_refused_and_change_nothing() {
    let mut table = ReachTable::new("a".into(), 1_000);
    table.merge(record("b", 1, &["a"]), 2_000).unwrap();
    let before = table.clone();
    let frozen = Observation {
        version: u64::MAX,
        ..record("b", 1, &[])
    };
    assert!(matches!(
        table.merge(frozen, 2_000),
        Err(ReachError::VersionOutOfRange { .. })
    ));
    let jump = record("b", 1 + MAX_VERSION_STEP + 1, &[]);
    assert!(matches!(
        table.merge(jump, 2_000),
        Err(ReachError::VersionJump { .. })
    ));
    let future = Observation {
        incarnation: u64::MAX,
        ..record("b", 2, &[])
    };
    assert!(matches!(
        table.merge(future, 2_000),
        Err(ReachError::IncarnationAhead { .. })
    ));
    // An echo of this node's own record is fine.
    assert_eq!(table.merge(table.own().clone(), 2_000), Ok(Merge::Known));
    let huge = Observation {
        reachable: (0..MAX_NODES + 1).map(n).collect(),
        ..record("b", 2, &[])
    };
    assert!(matches!(
        table.merge(huge, 2_000),
        Err(ReachError::TooManyPeers { .. })
    ));
    assert!(matches!(
        table.merge(record("b", 2, &["b"]), 2_000),
        Err(ReachError::ListsItself { .. })
    ));
    assert!(matches!(
        table.merge(record("", 2, &[]), 2_000),
        Err(ReachError::BadName { .. })
    ));
    assert_eq!(table, before);
    // Somebody speaking for this node with a newer record (a previous life's, whose clock was
    // ahead, or a forgery): not taken; this node's own record is raised above it instead.
    let own = table.own().clone();
    let mut mine = own.clone();
    mine.version += 1;
    mine.reachable.clear();
    assert_eq!(table.merge(mine.clone(), 2_000), Ok(Merge::OwnRaised));
    assert_eq!(table.own().reachable, own.reachable);
    assert!(table.own().key() > mine.key());
    assert_eq!(table.merge(mine, 2_000), Ok(Merge::Known));
}

#[test]
fn a_restarted_observer_wins_with_its_new_incarnation() {
    let mut table = ReachTable::new("a".into(), 1_000);
    table.merge(record("b", 50, &["a"]), 2_000).unwrap();
    let reborn = Observation {
        incarnation: 1_500,
        ..record("b", 1, &[])
    };
    assert_eq!(table.merge(reborn, 2_000), Ok(Merge::Newer));
    assert_eq!(table.get("b").unwrap().version, 1);
    // Its previous life's records are old news now.
    assert_eq!(
        table.merge(record("b", 51, &["a"]), 2_000),
        Ok(Merge::Known)
    );
}

#[test]
fn digests_say_what_each_side_lacks() {
    let mut a = ReachTable::new("a".into(), 1);
    let mut b = ReachTable::new("b".into(), 1);
    a.set_reachable(names(&["b"]));
    b.set_reachable(names(&["a"]));
    a.merge(record("c", 3, &["a"]), 10).unwrap();
    assert!(b.behind(&a.digest()));
    let send = a.newer_than(&b.digest());
    let observers: Vec<&str> = send.iter().map(|r| r.observer.as_str()).collect();
    assert_eq!(observers, ["a", "c"]);
    for r in send {
        b.merge(r, 10).unwrap();
    }
    assert!(!b.behind(&a.digest()));
    assert!(a.behind(&b.digest()), "a lacks b's record");
}

fn table_of(me: &str, records: &BTreeMap<NodeName, Observation>) -> ReachTable {
    ReachTable::from_records(me.to_owned(), records.values().cloned())
}

/// `me`'s table over `records`, with `me`'s own record saying whether it set itself aside.
fn view(me: &str, records: &BTreeMap<NodeName, Observation>, me_aside: bool) -> ReachTable {
    let mut records = records.clone();
    if let Some(own) = records.get_mut(me) {
        own.aside = me_aside;
    }
    table_of(me, &records)
}

#[test]
fn a_cut_is_resolved_only_once_stable_and_the_set_aside_node_comes_back_with_hysteresis() {
    let all = ["a", "b", "c", "d", "e"];
    let cut = mesh(&all, &[("a", "e")]);
    let whole = mesh(&all, &[]);
    // e's own resolver: e is the node the rule picks.
    let mut r = Resolver::new(ResolverConfig::new(1_000));
    let mut aside = false;
    let mut step = |r: &mut Resolver, records: &BTreeMap<NodeName, Observation>, at: u64| {
        let d = r.decide(&view("e", records, aside), at);
        aside = d.me_aside;
        d
    };
    assert!(!step(&mut r, &whole, 0).me_aside);
    let d = step(&mut r, &cut, 10_000);
    assert!(d.unresolved && d.set_aside.is_empty() && !d.me_aside);
    assert_eq!(d.indirect, names(&["a"]));
    assert_eq!(d.next_check_at, Some(11_000));
    // Not stable yet: nothing set aside.
    assert!(!step(&mut r, &cut, 10_999).me_aside);
    let d = step(&mut r, &cut, 11_000);
    assert!(d.me_aside && d.set_aside == names(&["e"]));
    assert!(!d.unresolved && !d.is_member("e") && d.is_member("b"));
    assert_eq!(
        d.indirect,
        names(&["a"]),
        "e still reaches a only through others"
    );
    assert_eq!(r.strikes(), 1);
    // The link heals: e comes back after 1 s the rule does not pick it.
    let d = step(&mut r, &whole, 12_000);
    assert!(d.me_aside);
    assert_eq!(d.next_check_at, Some(13_000));
    assert!(!step(&mut r, &whole, 13_000).me_aside);
    // Cut again, within the window: set aside after 1 s stable, back only after 2 s.
    step(&mut r, &cut, 14_000);
    assert!(step(&mut r, &cut, 15_000).me_aside);
    assert_eq!(r.strikes(), 2);
    let d = step(&mut r, &whole, 16_000);
    assert_eq!(d.next_check_at, Some(18_000));
    assert!(step(&mut r, &whole, 17_000).me_aside);
    assert!(!step(&mut r, &whole, 18_000).me_aside);
}

#[test]
fn the_others_follow_the_set_aside_node_own_record_not_their_own_timers() {
    let all = ["a", "b", "c", "d", "e"];
    let mut cut = mesh(&all, &[("a", "e")]);
    let mut r = Resolver::new(ResolverConfig::new(1_000));
    r.decide(&table_of("a", &cut), 0);
    // Long stable: a is not the one picked, and e has not said it set itself aside: e stays a
    // member (indirectly connected), its children stay on it.
    let d = r.decide(&table_of("a", &cut), 60_000);
    assert!(!d.me_aside && d.set_aside.is_empty() && d.unresolved);
    assert!(d.is_member("e"));
    assert_eq!(d.indirect, names(&["e"]));
    assert_eq!(d.next_check_at, None, "nothing for a to wait for");
    // e's record says it released its children: out of the ring, at once.
    let e = cut.get_mut("e").unwrap();
    e.aside = true;
    e.version += 1;
    let d = r.decide(&table_of("a", &cut), 60_001);
    assert_eq!(d.set_aside, names(&["e"]));
    assert!(!d.is_member("e") && !d.unresolved && d.indirect.is_empty());
}

#[test]
fn a_flapping_link_is_never_resolved_and_never_changes_the_members() {
    let all = ["a", "b", "c", "d", "e"];
    let cut = mesh(&all, &[("a", "e")]);
    let whole = mesh(&all, &[]);
    for me in all {
        let mut r = Resolver::new(ResolverConfig::new(1_000));
        for step in 0..100u64 {
            let table = if step % 2 == 0 { &cut } else { &whole };
            let d = r.decide(&view(me, table, false), step * 900);
            assert!(d.set_aside.is_empty() && !d.me_aside, "{me} step {step}");
            assert_eq!(d.component, names(&all));
        }
    }
}

#[test]
fn the_default_bound_is_sixteen_seconds() {
    let hub = crate::config::ProcessHub::default();
    let terms = BoundTerms::new(&hub, std::time::Duration::from_secs(5));
    assert_eq!(terms.total(), std::time::Duration::from_secs(16));
    assert_eq!(
        double_run_bound(&hub, std::time::Duration::from_secs(5)),
        terms.total()
    );
    assert!(terms.to_string().starts_with("16000 ms = detection 5000"));
}

/// The rule by its definition, name by name over the records' sets: what [`rule::Links`]
/// must answer.
mod by_definition {
    use std::collections::{BTreeMap, BTreeSet, VecDeque};

    use super::super::rule::link_up;
    use super::super::Observation;
    use crate::model::NodeName;

    pub fn component_of(records: &BTreeMap<NodeName, Observation>, me: &str) -> BTreeSet<NodeName> {
        let mut component = BTreeSet::from([me.to_owned()]);
        let mut frontier = VecDeque::from([me.to_owned()]);
        while let Some(u) = frontier.pop_front() {
            let Some(record) = records.get(&u) else {
                continue;
            };
            for v in &record.reachable {
                if !component.contains(v) && link_up(records, &u, v) {
                    component.insert(v.clone());
                    frontier.push_back(v.clone());
                }
            }
        }
        component
    }

    pub fn down_links(
        records: &BTreeMap<NodeName, Observation>,
        nodes: &BTreeSet<NodeName>,
    ) -> BTreeSet<(NodeName, NodeName)> {
        let mut down = BTreeSet::new();
        for (i, u) in nodes.iter().enumerate() {
            for v in nodes.iter().skip(i + 1) {
                if !link_up(records, u, v) {
                    down.insert((u.clone(), v.clone()));
                }
            }
        }
        down
    }

    pub fn indirect(
        records: &BTreeMap<NodeName, Observation>,
        nodes: &BTreeSet<NodeName>,
        me: &str,
    ) -> BTreeSet<NodeName> {
        nodes
            .iter()
            .filter(|v| v.as_str() != me && !link_up(records, me, v))
            .cloned()
            .collect()
    }

    pub fn set_aside(
        records: &BTreeMap<NodeName, Observation>,
        nodes: &BTreeSet<NodeName>,
    ) -> BTreeSet<NodeName> {
        let mut left = nodes.clone();
        let mut aside = BTreeSet::new();
        loop {
            let down = down_links(records, &left);
            if down.is_empty() {
                return aside;
            }
            let mut count: BTreeMap<&NodeName, usize> = BTreeMap::new();
            for (u, v) in &down {
                *count.entry(u).or_default() += 1;
                *count.entry(v).or_default() += 1;
            }
            let Some((worst, _)) = count.into_iter().max_by_key(|(_, c)| *c) else {
                return aside;
            };
            let worst = worst.clone();
            left.remove(&worst);
            aside.insert(worst);
        }
    }
}

/// Records over up to `size` names, more than one word of links wide: some observers have no
/// record, a record may list its observer, nodes without a record, or a name nobody has.
fn any_wide_records(size: usize) -> impl Strategy<Value = BTreeMap<NodeName, Observation>> {
    (
        prop::collection::vec(any::<bool>(), size),
        prop::collection::vec((0usize..size + 2, 0usize..size + 2), 0..size * 4),
        0.0f64..1.0,
        any::<u64>(),
    )
        .prop_map(move |(present, extra, density, seed)| {
            let mut s = seed;
            let mut coin = move || {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) < density
            };
            let mut records: BTreeMap<NodeName, Observation> = (0..size)
                .filter(|i| present[*i])
                .map(|i| {
                    let reachable = (0..size).filter(|j| *j != i && coin()).map(n).collect();
                    first_record(i, reachable)
                })
                .collect();
            // Oddities: a record listing itself, or a name beyond every record.
            for (u, v) in extra {
                if let Some(r) = records.get_mut(&n(u)) {
                    r.reachable.insert(n(v));
                }
            }
            records
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The indexed links answer every question of the rule as the definition does, name by
    /// name: the component, the down links, the indirectly connected, the set-aside nodes.
    #[test]
    fn indexed_links_answer_as_the_definition(
        records in (1usize..80).prop_flat_map(any_wide_records),
        me in 0usize..82,
        subset in prop::collection::vec(0usize..82, 0..40),
    ) {
        let links = rule::Links::of(&records);
        let me = n(me);
        let comp = links.component_of(&me);
        prop_assert_eq!(&comp, &by_definition::component_of(&records, &me));
        let some: BTreeSet<NodeName> = subset.into_iter().map(n).collect();
        for nodes in [&comp, &some] {
            let down = by_definition::down_links(&records, nodes);
            prop_assert_eq!(&links.down_links(nodes), &down);
            prop_assert_eq!(links.is_clique(nodes), down.is_empty());
            prop_assert_eq!(links.indirect(nodes, &me), by_definition::indirect(&records, nodes, &me));
            prop_assert_eq!(links.set_aside(nodes), by_definition::set_aside(&records, nodes));
        }
        for u in some.iter().chain([&me]) {
            for v in &some {
                prop_assert_eq!(links.is_up(u, v), link_up(&records, u, v));
            }
        }
    }
}

#[test]
fn only_an_answer_to_the_record_of_the_drop_vouches_for_a_suspect() {
    // a lost its link to c (its record v2); b reaches both.
    let records = mesh(&["a", "b", "c"], &[("a", "c")]);
    let b_now = record("b", 5, &["a", "c"]);
    let a_drop = record("a", 2, &["b"]);
    // b's answer echoes a's record of the drop: it vouches for c.
    assert!(vouches(
        &[b_now.clone(), a_drop.clone()],
        "a",
        "b",
        "c",
        (1, 2),
        &records
    ));
    // The same record of b without the echo (written before b had a's record, arriving after
    // the drop) vouches for nothing; nor does an echo of a's record before the drop.
    assert!(!vouches(
        std::slice::from_ref(&b_now),
        "a",
        "b",
        "c",
        (1, 2),
        &records
    ));
    let a_before = record("a", 1, &["b", "c"]);
    assert!(!vouches(
        &[b_now, a_before],
        "a",
        "b",
        "c",
        (1, 2),
        &records
    ));
    // An answer whose record of b no longer lists c vouches for nothing.
    let b_lost = record("b", 6, &["a"]);
    assert!(!vouches(
        &[b_lost, a_drop.clone()],
        "a",
        "b",
        "c",
        (1, 2),
        &records
    ));
    // Nor for a suspect whose own record does not list b.
    let cut_cb = mesh(&["a", "b", "c"], &[("a", "c"), ("b", "c")]);
    let b_claims = record("b", 5, &["a", "c"]);
    assert!(!vouches(
        &[b_claims, a_drop],
        "a",
        "b",
        "c",
        (1, 2),
        &cut_cb
    ));
}

#[test]
fn a_record_lacking_a_peer_this_node_reaches_asks_for_a_vouch_unless_it_is_an_answer() {
    let own = record("b", 3, &["a", "c"]);
    let a_drop = record("a", 2, &["b"]);
    assert!(asks_to_vouch(std::slice::from_ref(&a_drop), "b", "a", &own));
    // An answer (it holds b's own record) is never answered.
    assert!(!asks_to_vouch(&[a_drop, own.clone()], "b", "a", &own));
    // Nothing lacking, or only someone else's record: no question.
    assert!(!asks_to_vouch(
        &[record("a", 3, &["b", "c"])],
        "b",
        "a",
        &own
    ));
    assert!(!asks_to_vouch(&[record("c", 3, &["b"])], "b", "a", &own));
}
