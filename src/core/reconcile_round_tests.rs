//! What a node's round promises, over every node of a toy three-node cluster.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::core::reconcile::{OrphanStart, RoundStats};
use crate::model::{ChildSpec, Metadata, Pid};

const NODES: [&str; 3] = ["n1", "n2", "n3"];
const IDS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// A toy ring: the owner is picked by the id's first byte.
fn owner(id: &ChildId) -> NodeName {
    let b = id.as_str().as_bytes()[0] as usize;
    NODES[b % NODES.len()].to_owned()
}

fn owners(id: &ChildId, _row: Option<&Row>) -> Vec<NodeName> {
    vec![owner(id)]
}

fn row(id: &str, durable: bool, bound: &[usize]) -> Row {
    let mut row = Row::authored(
        ChildSpec::new(id, "counter"),
        Metadata::new(),
        "n1",
        0,
        durable,
    )
    .unwrap();
    for i in bound {
        row.node_pids.insert(NODES[*i].to_owned(), *i as Pid + 10);
    }
    row
}

/// A declared subset of the ids, rows with a durable flag and bindings, the previous round's
/// pending set.
#[derive(Clone, Debug)]
struct World {
    declared: DeclaredList,
    rows: Vec<Row>,
    pending: BTreeSet<ChildId>,
}

fn world() -> impl Strategy<Value = World> {
    let ids = prop::collection::btree_set(prop::sample::select(IDS.to_vec()), 0..6);
    let rows = prop::collection::btree_map(
        prop::sample::select(IDS.to_vec()),
        (any::<bool>(), prop::collection::btree_set(0usize..3, 0..4)),
        0..6,
    );
    let pending = prop::collection::btree_set(prop::sample::select(IDS.to_vec()), 0..3);
    (ids, rows, pending).prop_map(|(ids, rows, pending)| {
        let mut declared = DeclaredList::new();
        for id in ids {
            declared
                .add(ChildSpec::new(id, "counter"), Metadata::new(), "n1")
                .unwrap();
        }
        let rows = rows
            .into_iter()
            .map(|(id, (durable, nodes))| row(id, durable, &nodes.into_iter().collect::<Vec<_>>()))
            .collect();
        World {
            declared,
            rows,
            pending: pending.into_iter().map(ChildId::from).collect(),
        }
    })
}

fn readiness() -> impl Strategy<Value = Readiness> {
    (
        proptest::bool::weighted(0.2),
        proptest::bool::weighted(0.2),
        proptest::option::weighted(0.2, prop::sample::select(NODES.to_vec())),
        proptest::option::weighted(0.2, prop::sample::select(NODES.to_vec())),
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            |(list_lost, scan_skipped, unheard, ahead, partitioned)| Readiness {
                list_lost,
                scan_skipped,
                unweighed: Unweighed::new(
                    unheard.into_iter().map(str::to_owned).collect(),
                    None,
                    ahead.into_iter().map(str::to_owned).collect(),
                ),
                partitioned,
            },
        )
}

fn plan_on(world: &World, local: &str, owner_first: bool, readiness: Readiness) -> ReconcilePlan {
    plan_at_work(world, local, owner_first, readiness, &idle_owners())
}

/// Previous rounds that saw every node idle for long enough: no owner counts as at work unless
/// its bindings grew since.
fn idle_owners() -> OwnerWork {
    OwnerWork {
        bindings: NODES
            .iter()
            .map(|n| ((*n).to_owned(), usize::MAX))
            .collect(),
        idle_rounds: NODES
            .iter()
            .map(|n| ((*n).to_owned(), OWNER_IDLE_ROUNDS))
            .collect(),
    }
}

/// Previous rounds that saw no node bound anywhere: every node bound now has grown.
fn owners_from_nothing() -> OwnerWork {
    OwnerWork {
        bindings: Bindings::new(),
        idle_rounds: NODES
            .iter()
            .map(|n| ((*n).to_owned(), OWNER_IDLE_ROUNDS))
            .collect(),
    }
}

fn plan_at_work(
    world: &World,
    local: &str,
    owner_first: bool,
    readiness: Readiness,
    previous: &OwnerWork,
) -> ReconcilePlan {
    let work = OwnerWork::after(previous, bindings_per_node(&world.rows));
    let view = RoundView {
        declared: &world.declared,
        local,
        previous_pending: &world.pending,
        owner_first,
        work: &work,
        readiness,
    };
    plan_local_round(&view, &world.rows, owners)
}

fn started(plan: &ReconcilePlan) -> Vec<&ChildId> {
    plan.starts.iter().map(|s| &s.child.spec.id).collect()
}

proptest! {
    /// A declared child that runs nowhere is planned for a start on its owner: by every node
    /// once, or after a boot by its owner alone. One registered but unbound waits one round
    /// (pending) first.
    #[test]
    fn an_orphan_is_started_on_its_owner_exactly_once(
        world in world(),
        owner_first in any::<bool>(),
        owners_grew in any::<bool>(),
    ) {
        // Either no owner is at work, or every node bound somewhere grew since the last round.
        let previous = if owners_grew { owners_from_nothing() } else { idle_owners() };
        let work = OwnerWork::after(&previous, bindings_per_node(&world.rows));
        let plans: Vec<ReconcilePlan> = NODES
            .iter()
            .map(|n| plan_at_work(&world, n, owner_first, Readiness::default(), &previous))
            .collect();
        for id in world.declared.children().keys() {
            let row = world.rows.iter().find(|r| r.id() == id);
            let bound = row.is_some_and(|r| !r.node_pids.is_empty());
            let waits = row.is_some() && !bound && !world.pending.contains(id);
            let owner = owner(id);
            let to_owner = if owner_first { row.is_none() } else { work.at_work(&owner) };
            let mut starters = Vec::new();
            for (node, plan) in NODES.iter().zip(&plans) {
                let starts: Vec<&OrphanStart> = plan.starts.iter().filter(|s| s.child.spec.id == *id).collect();
                prop_assert!(starts.len() <= 1, "{} started twice on {}", id, node);
                if let Some(start) = starts.first() {
                    prop_assert_eq!(&start.owner, &owner);
                    starters.push(*node);
                }
                // A registered orphan left to its owner at work waits another round here.
                let left_waiting = !bound && !waits && row.is_some() && to_owner
                    && !owner_first && *node != owner;
                prop_assert_eq!(plan.pending.contains(id), waits || left_waiting);
            }
            if bound || waits {
                prop_assert!(starters.is_empty(), "{} runs or waits, yet {:?} start it", id, starters);
            } else if to_owner {
                prop_assert_eq!(starters, vec![owner.as_str()]);
            } else {
                prop_assert_eq!(starters, NODES.to_vec());
            }
        }
    }

    /// An undeclared child is never started, and nothing is started twice in one round,
    /// whatever may park it.
    #[test]
    fn nothing_undeclared_and_nothing_twice(
        world in world(),
        local in 0usize..3,
        owner_first in any::<bool>(),
        readiness in readiness(),
    ) {
        let plan = plan_on(&world, NODES[local], owner_first, readiness);
        let ids = started(&plan);
        let distinct: BTreeSet<&&ChildId> = ids.iter().collect();
        prop_assert_eq!(distinct.len(), ids.len());
        for id in ids {
            prop_assert!(world.declared.contains(id));
        }
    }

    /// A round that is not ready (list lost, scan skipped, a copy unweighed or ahead, no quorum)
    /// starts, stops and removes nothing, carries its pending set unchanged, and keeps the
    /// owners first for the next round; a ready one always acts on its own copy.
    #[test]
    fn a_round_that_is_not_ready_acts_on_nothing(
        world in world(),
        local in 0usize..3,
        owner_first in any::<bool>(),
        readiness in readiness(),
    ) {
        let parked = readiness.parked();
        let expected = readiness.list_lost
            || readiness.scan_skipped
            || !readiness.unweighed.unheard.is_empty()
            || !readiness.unweighed.ahead.is_empty()
            || readiness.partitioned;
        prop_assert_eq!(parked, expected);
        let mut plan = plan_on(&world, NODES[local], owner_first, readiness);
        prop_assert_eq!(plan.parked, parked);
        let inputs = RoundInputs { declared_version: 1, registry_generation: 2, peers: vec![] };
        if parked {
            prop_assert!(plan.starts.is_empty() && plan.stops.is_empty() && plan.remove_rows.is_empty());
            let next = next_round(&mut plan, owner_first, inputs);
            prop_assert_eq!(next.pending, world.pending.clone());
            prop_assert_eq!(next.owner_first, owner_first);
            prop_assert!(next.quiet.is_none());
        } else {
            let next = next_round(&mut plan, owner_first, inputs);
            prop_assert!(!next.owner_first, "the owners go first once");
        }
    }

    /// The next round may stand on this one only if it planned nothing and carried nothing.
    #[test]
    fn only_a_quiet_round_is_stood_on(
        world in world(),
        local in 0usize..3,
        owner_first in any::<bool>(),
        readiness in readiness(),
        first in any::<bool>(),
        list_lost in any::<bool>(),
        generation in 0u64..3,
    ) {
        let mut plan = plan_on(&world, NODES[local], owner_first, readiness);
        let acts = !plan.starts.is_empty()
            || !plan.stops.is_empty()
            || !plan.duplicates.is_empty()
            || !plan.remove_rows.is_empty()
            || !plan.pending.is_empty()
            || !plan.deferred.is_empty()
            || plan.parked;
        let inputs = RoundInputs { declared_version: 1, registry_generation: 1, peers: vec!["n2".into()] };
        let next = next_round(&mut plan, owner_first, inputs.clone());
        prop_assert_eq!(next.quiet.is_some(), !acts);
        let previous = next.quiet.map(|inputs| QuietRound { inputs, stats: RoundStats::default() });
        let now = RoundInputs { registry_generation: generation, ..inputs };
        let reused = reuse_quiet(previous.clone(), first, list_lost, &now);
        prop_assert_eq!(
            reused.is_some(),
            previous.is_some() && !first && !list_lost && generation == 1
        );
    }

    /// Each duplicate instance this node stops names the keeper, which is another node.
    #[test]
    fn a_duplicate_stop_names_its_keeper(world in world(), local in 0usize..3) {
        let node = NODES[local];
        let plan = plan_on(&world, node, false, Readiness::default());
        for (stop, keep) in duplicate_stops(&plan) {
            prop_assert_eq!(stop.reason, StopReason::Duplicate);
            prop_assert!(!keep.is_empty());
            prop_assert_ne!(keep.as_str(), node);
            let row = world.rows.iter().find(|r| r.id() == &stop.id).unwrap();
            prop_assert!(row.node_pids.contains_key(keep.as_str()));
        }
    }

    /// The peers asked for at once are the unheard (the silent leader included), sorted, once
    /// each; the peers only ahead are awaited instead.
    #[test]
    fn the_unheard_are_solicited_and_the_ahead_awaited_once_each(
        unheard in prop::collection::vec(prop::sample::select(NODES.to_vec()), 0..4),
        leader in proptest::option::of(prop::sample::select(NODES.to_vec())),
        ahead in prop::collection::vec(prop::sample::select(NODES.to_vec()), 0..4),
    ) {
        let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<NodeName>>();
        let unweighed = Unweighed::new(own(&unheard), leader.map(str::to_owned), own(&ahead));
        let asked = unweighed.to_solicit();
        let awaited = unweighed.to_await();
        let expected: BTreeSet<&str> = unheard.iter().chain(&leader).copied().collect();
        prop_assert_eq!(asked.iter().map(String::as_str).collect::<Vec<_>>(), expected.iter().copied().collect::<Vec<_>>());
        // Every peer ahead is either asked at once (it is also unheard) or awaited, never both.
        let only_ahead: BTreeSet<&str> = ahead.iter().copied().filter(|p| !expected.contains(p)).collect();
        prop_assert_eq!(awaited.iter().map(String::as_str).collect::<Vec<_>>(), only_ahead.iter().copied().collect::<Vec<_>>());
        let all: BTreeSet<&str> = expected.iter().chain(&only_ahead).copied().collect();
        prop_assert_eq!(unweighed.is_empty(), all.is_empty());
    }
}

#[test]
fn a_round_that_will_park_skips_the_scan() {
    let n2 = ["n2".to_owned()];
    assert!(parks_before_scan(true, &[], &[]));
    assert!(parks_before_scan(false, &n2, &[]));
    assert!(parks_before_scan(false, &[], &n2));
    assert!(!parks_before_scan(false, &[], &[]));
}

#[test]
fn children_declared_since_the_last_round_wait_one_round_before_the_round_starts_them() {
    let mut previous = DeclaredList::new();
    previous
        .add(ChildSpec::new("old", "counter"), Metadata::new(), "n1")
        .unwrap();
    let mut declared = previous.clone();
    for id in ["new", "moved"] {
        declared
            .add(ChildSpec::new(id, "counter"), Metadata::new(), "n1")
            .unwrap();
    }
    // "moved" has a row bound nowhere (registered): the two-round rule already holds it.
    let rows = vec![row("moved", true, &[])];
    let plan_now = |previous: Option<&DeclaredList>, pending: &BTreeSet<ChildId>| {
        let mut plan = plan_replicated_round(&declared, &rows, owners, "n1", pending, false);
        let held = hold_new_declarations(&mut plan, previous);
        (plan, held)
    };
    let started = |plan: &ReconcilePlan| -> Vec<String> {
        plan.starts
            .iter()
            .map(|s| s.child.spec.id.to_string())
            .collect()
    };

    // After a boot (no previous copy) every orphan is the recovery's: all started at once.
    let (plan, held) = plan_now(None, &BTreeSet::new());
    assert_eq!(held, 0);
    assert_eq!(started(&plan), vec!["new", "old"]);

    // A round after one that read `previous`: "new" is given a round, "old" is started.
    let (plan, held) = plan_now(Some(&previous), &BTreeSet::new());
    assert_eq!(held, 1);
    assert_eq!(started(&plan), vec!["old"]);
    assert!(plan.pending.contains(&ChildId::from("new")));
    assert_eq!(plan.stats.started, 1);

    // The round after: "new" was declared before the last round read its copy, and runs
    // nowhere still: started.
    let (plan, held) = plan_now(Some(&declared), &plan.pending);
    assert_eq!(held, 0);
    assert!(started(&plan).contains(&"new".to_owned()));
}

#[test]
fn orphans_of_an_owner_at_work_are_left_to_it_until_its_bindings_stand_still() {
    // Owners in the toy ring: a, d on n2; b, e on n3; c, f on n1 (this node).
    let mut declared = DeclaredList::new();
    for id in IDS {
        declared
            .add(ChildSpec::new(id, "counter"), Metadata::new(), "n1")
            .unwrap();
    }
    // "a" has a row bound nowhere, seen by the previous round; the others have no row.
    let rows = vec![row("a", true, &[])];
    let pending: BTreeSet<ChildId> = [ChildId::from("a")].into_iter().collect();
    let bindings = |n2: usize, n3: usize| -> Bindings {
        [("n2".to_owned(), n2), ("n3".to_owned(), n3)]
            .into_iter()
            .collect()
    };
    let started = |plan: &ReconcilePlan| -> Vec<String> {
        plan.starts
            .iter()
            .map(|s| s.child.spec.id.to_string())
            .collect()
    };
    // n3 stood still for as many rounds as an idle owner may; n2 started children since.
    let mut work = OwnerWork::after(&OwnerWork::default(), bindings(5, 7));
    for _ in 0..OWNER_IDLE_ROUNDS {
        work = OwnerWork::after(&work, bindings(5, 7));
    }
    assert!(!work.at_work("n2") && !work.at_work("n3"));
    let work = OwnerWork::after(&work, bindings(6, 7));
    assert!(work.at_work("n2"));
    assert!(!work.at_work("n3"));
    assert!(!work.at_work("n9"), "a node bound nowhere starts nothing");

    let mut plan = plan_replicated_round(&declared, &rows, owners, "n1", &pending, false);
    assert_eq!(defer_to_working_owners(&mut plan, "n1", &work), 2);
    assert_eq!(started(&plan), vec!["b", "c", "e", "f"]);
    assert_eq!(plan.stats.started, 4);
    assert_eq!(plan.stats.deferred_to_owner, 2);
    assert!(
        plan.pending.contains(&ChildId::from("a")),
        "registered: stays pending"
    );
    assert!(plan.deferred.contains(&ChildId::from("d")));
    assert!(!plan.is_quiet());

    // n2 stands still from now on: its orphans wait while it may be behind in this view, then
    // every node submits them.
    let mut work = work;
    for round in 1..=OWNER_IDLE_ROUNDS {
        work = OwnerWork::after(&work, bindings(6, 7));
        let mut next = plan_replicated_round(&declared, &rows, owners, "n1", &plan.pending, false);
        let deferred = defer_to_working_owners(&mut next, "n1", &work);
        if round < OWNER_IDLE_ROUNDS {
            assert_eq!(deferred, 2, "round {round}");
        } else {
            assert_eq!(deferred, 0);
            assert_eq!(started(&next), vec!["a", "b", "c", "d", "e", "f"]);
        }
    }

    // Before any count, every bound node counts as at work.
    let first = OwnerWork::after(&OwnerWork::default(), bindings(6, 7));
    assert!(first.at_work("n2") && first.at_work("n3"));

    // A replica top-up and a parked plan are left as they are.
    let mut top_up = ReconcilePlan::default();
    top_up.starts.push(OrphanStart {
        child: declared.get(&ChildId::from("a")).unwrap().clone(),
        owner: "n2".into(),
        unregistered: false,
        top_up: true,
    });
    top_up.stats.started = 1;
    assert_eq!(defer_to_working_owners(&mut top_up, "n1", &first), 0);
    let mut parked = plan_replicated_round(&declared, &rows, owners, "n1", &pending, true);
    assert_eq!(defer_to_working_owners(&mut parked, "n1", &first), 0);
}

#[test]
fn bindings_count_every_node_a_row_is_bound_on() {
    let rows = vec![
        row("a", true, &[0, 1]),
        row("b", false, &[1]),
        row("c", true, &[]),
    ];
    let counted = bindings_per_node(&rows);
    assert_eq!(counted.get("n1"), Some(&1));
    assert_eq!(counted.get("n2"), Some(&2));
    assert_eq!(counted.get("n3"), None);
}
