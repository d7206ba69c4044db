//! Real network splits between real `process-hub node` processes: five nodes, each in a network
//! namespace of its own, joined by a bridge (see `partition/mod.rs`); a split is made of
//! blackhole routes inside the nodes' namespaces, so established connections die as they would
//! on a real network.
//!
//! Under `--partition-tolerance majority-quorum:5` a 3/2 split leaves every child running exactly
//! once, on the majority; the minority answers `partitioned` (503) and reports it in health; after
//! the heal every child runs once, on its owner. And with `--auto-recovery`, every durable stop
//! and start asked of either side during the split answers what happened: checked per answer
//! once the split healed.
//!
//! Needs root (network namespaces), as CI has.

use crate::partition;

use std::collections::{BTreeMap, BTreeSet};

use partition::answer::{Answer, Op};
use partition::outcome::Outcome;
use partition::{spawn, tails, wait_whole, Network, Node, DEADLINE};
use process_hub::admin::StartSpec;
use process_hub::core::placement::HashRing;
use process_hub::ChildId;
use process_hub_actors::harness::outage::counter_specs;
use process_hub_actors::harness::{wait_for, AdminClient};

const NODES: usize = 5;
const CHILDREN: usize = 60;
/// The durable children of the answers test, started before the split.
const DURABLE_CHILDREN: usize = 40;

fn specs(prefix: &str, n: usize) -> Vec<StartSpec> {
    (0..n)
        .map(|i| StartSpec::new(format!("{prefix}-{i:03}"), "counter"))
        .collect()
}

/// Child -> hosts, from one node's registry copy.
fn placement(client: &AdminClient) -> Option<BTreeMap<String, Vec<String>>> {
    let children = client.children().ok()?;
    Some(
        children
            .into_iter()
            .map(|c| (c.id, c.nodes.into_iter().map(|n| n.node).collect()))
            .collect(),
    )
}

/// Every node of `side` places each of `ids` once, on a node of `side`, all agreeing.
fn once_on(nodes: &[&Node], ids: &BTreeSet<String>, side: &BTreeSet<String>) -> Option<()> {
    let views: Vec<_> = nodes
        .iter()
        .map(|n| placement(&n.client()))
        .collect::<Option<_>>()?;
    let first = views.first()?;
    let ok = first.keys().cloned().collect::<BTreeSet<_>>() == *ids
        && first
            .values()
            .all(|hosts| hosts.len() == 1 && side.contains(&hosts[0]));
    (ok && views.iter().all(|v| v == first)).then_some(())
}

#[test]
fn a_five_node_cluster_split_three_two_runs_every_child_once_on_the_majority() {
    let net = Network::create(NODES)
        .unwrap_or_else(|e| panic!("network namespaces are needed (run as root, as CI does): {e}"));
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--partition-tolerance",
        "majority-quorum:5",
        "--nodedown-grace-ms",
        "300",
    ];
    let nodes: Vec<Node> = (1..=NODES)
        .map(|k| spawn(&net, k, dir.path(), "split", &flags))
        .collect();
    let all_names: BTreeSet<String> = (1..=NODES)
        .map(|k| format!("n{k}@{}", net.addr(k)))
        .collect();
    let expected: Vec<String> = all_names.iter().cloned().collect();
    wait_whole(
        &nodes,
        &expected,
        "five members everywhere, none partitioned",
    );

    let mut ids: BTreeSet<String> = BTreeSet::new();
    let batch = specs("s", CHILDREN);
    ids.extend(batch.iter().map(|s| s.id.clone()));
    let started = nodes[4].client().start(&batch).expect("start");
    assert_eq!(started.started.len(), CHILDREN, "{:?}", started.errors);
    let everyone: Vec<&Node> = nodes.iter().collect();
    wait_for("every child placed once", DEADLINE, || {
        once_on(&everyone, &ids, &all_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let before = placement(&nodes[0].client()).unwrap();
    let on_minority = before
        .values()
        .filter(|h| h[0].starts_with("n4@") || h[0].starts_with("n5@"))
        .count();
    assert!(
        on_minority > 0,
        "the minority ran some children before the split"
    );

    let (majority, minority) = ([1, 2, 3], [4, 5]);
    let split_at = std::time::Instant::now();
    net.split(&majority, &minority).unwrap();
    let majority_names: BTreeSet<String> = majority
        .iter()
        .map(|k| format!("n{k}@{}", net.addr(*k)))
        .collect();
    wait_for("the minority is partitioned", DEADLINE, || {
        minority
            .iter()
            .all(|k| nodes[k - 1].client().health().is_ok_and(|h| h.partitioned))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let partitioned_ms = split_at.elapsed().as_millis();
    let majority_nodes: Vec<&Node> = majority.iter().map(|k| &nodes[k - 1]).collect();
    wait_for("every child once, on the majority", DEADLINE, || {
        once_on(&majority_nodes, &ids, &majority_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let majority_ms = split_at.elapsed().as_millis();
    // The minority runs nothing: its own registry binds no child anywhere it can see.
    for k in minority {
        let client = nodes[k - 1].client();
        let health = client.health().unwrap();
        assert_eq!(health.status, "partitioned");
        wait_for("the minority binds nothing", DEADLINE, || {
            let summary = client.registry_summary().ok()?;
            (summary.placed == 0).then_some(())
        })
        .unwrap_or_else(|e| panic!("n{k}: {e}\n{}", tails(&nodes)));
        // It answers starts and stops `partitioned`, 503.
        let refused = client
            .start(&specs(&format!("minority{k}"), 1))
            .unwrap_err();
        assert_eq!(refused.status(), Some(503), "{refused}");
        assert!(refused.to_string().contains("partitioned"), "{refused}");
        let refused = client.stop(ids.iter().next().unwrap()).unwrap_err();
        assert_eq!(refused.status(), Some(503), "{refused}");
    }
    // The majority keeps taking work.
    let more = specs("m", 10);
    ids.extend(more.iter().map(|s| s.id.clone()));
    let started = nodes[1]
        .client()
        .start(&more)
        .expect("start on the majority");
    assert_eq!(started.started.len(), 10, "{:?}", started.errors);
    wait_for("the new children once, on the majority", DEADLINE, || {
        once_on(&majority_nodes, &ids, &majority_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));

    let heal_at = std::time::Instant::now();
    net.heal(&majority, &minority).unwrap();
    wait_whole(&nodes, &expected, "five members again, none partitioned");
    wait_for("every child once, everywhere agreeing", DEADLINE, || {
        once_on(&everyone, &ids, &all_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    // On their owners: the ring of all five gives the minority its children back.
    let ring = HashRing::new(all_names.iter().cloned());
    wait_for("every child on its ring owner", DEADLINE, || {
        let after = placement(&nodes[0].client())?;
        after
            .iter()
            .all(|(id, hosts)| {
                let id = ChildId::parse(id).expect("a valid id");
                hosts.len() == 1 && ring.owner(&id) == Some(&hosts[0])
            })
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    eprintln!(
        "split 3/2: minority partitioned after {partitioned_ms} ms, every child once on the \
         majority after {majority_ms} ms; heal: every child on its owner after {} ms",
        heal_at.elapsed().as_millis()
    );
    // And every child answers, asked through a node of the former minority.
    for id in &ids {
        nodes[3]
            .client()
            .call(
                id,
                &serde_json::json!({"kind": "counter", "command": {"op": "get"}}),
                5_000,
            )
            .unwrap_or_else(|e| panic!("{id}: {e}"));
    }
}

/// One durable request through one node's admin API, and its answer.
#[derive(Debug)]
struct Request {
    /// `A` (issued the moment the links went down) or `B` (once both sides knew of the split).
    phase: char,
    /// The node asked (1-based).
    via: usize,
    op: Op,
    id: String,
    /// Where the child ran before the split as seen from `via`: `other side`, `same side`, or
    /// `new` for an id that was not started.
    target: &'static str,
    answer: Option<Answer>,
}

/// Issues every request of `requests` at once (a thread each) and records the answers.
fn issue(clients: &[AdminClient], requests: &mut [Request]) {
    std::thread::scope(|scope| {
        for request in requests.iter_mut() {
            let client = &clients[request.via - 1];
            scope.spawn(move || {
                request.answer = Some(match request.op {
                    Op::Stop => Answer::of(
                        client.stop(&request.id),
                        |r| !r.pending.is_empty(),
                        |r| !r.errors.is_empty(),
                    ),
                    Op::Start => {
                        let spec = &counter_specs(std::slice::from_ref(&request.id), true)[0];
                        Answer::of(
                            client.start_one(spec),
                            |r| !r.pending.is_empty(),
                            |r| !r.errors.is_empty(),
                        )
                    }
                });
            });
        }
    });
}

/// The requests of one phase: through each side's nodes in turn, durable stops of children
/// the other side ran, of children the same side ran, and durable starts of new ids (some of
/// them asked of both sides). Ids to stop are taken from the pools so that no id is stopped
/// twice.
fn plan(
    phase: char,
    majority: &[usize],
    minority: &[usize],
    on_majority: &mut Vec<String>,
    on_minority: &mut Vec<String>,
) -> Vec<Request> {
    let mut requests = Vec::new();
    let sides = [(majority, "maj", 3, 2), (minority, "min", 2, 2)];
    for (side, label, other_stops, same_stops) in sides {
        let mut via = side.iter().copied().cycle();
        let (other, same) = if label == "maj" {
            (&mut *on_minority, &mut *on_majority)
        } else {
            (&mut *on_majority, &mut *on_minority)
        };
        let mut push = |op, id: String, target| {
            requests.push(Request {
                phase,
                via: via.next().expect("a side has nodes"),
                op,
                id,
                target,
                answer: None,
            })
        };
        for _ in 0..other_stops {
            if let Some(id) = other.pop() {
                push(Op::Stop, id, "other side");
            }
        }
        for _ in 0..same_stops {
            if let Some(id) = same.pop() {
                push(Op::Stop, id, "same side");
            }
        }
        for i in 0..2 {
            push(Op::Start, format!("{phase}-{label}-{i}"), "new");
            // The same new id asked of both sides.
            push(Op::Start, format!("{phase}-both-{i}"), "new");
        }
    }
    requests
}

/// How this test judges what the cluster says once the split healed (`partition::outcome`).
trait SplitVerdict {
    /// Settled: the lists agree, and of `universe` what is declared runs once and nothing else
    /// runs.
    fn settled(&self, universe: &BTreeSet<String>) -> bool;

    /// Why `request`'s answer does not match what happened, if it does not.
    fn contradicts(&self, request: &Request, all: &[Request]) -> Option<String>;
}

impl SplitVerdict for Outcome {
    fn settled(&self, universe: &BTreeSet<String>) -> bool {
        self.lists_agree
            && self.census.views.values().all(|view| {
                universe.iter().all(|id| {
                    view.get(id).map_or(0, Vec::len) == usize::from(self.declared.contains(id))
                })
            })
    }

    fn contradicts(&self, request: &Request, all: &[Request]) -> Option<String> {
        let id = &request.id;
        let declared = self.declared.contains(id);
        let (once, nowhere) = (self.runs_once(id), self.runs_nowhere(id));
        let answer = request.answer.as_ref().expect("every request was answered");
        let ok = match (request.op, answer) {
            // Stopped, or undeclared for good with its stop carried out later.
            (Op::Stop, Answer::Done | Answer::Pending) => !declared && nowhere,
            // Nothing changed (no two requests stop the same id).
            (Op::Stop, Answer::Refused { .. }) => declared && once,
            (Op::Start, Answer::Done | Answer::Pending) => declared && once,
            (Op::Start, Answer::Refused { .. }) => {
                let others = all
                    .iter()
                    .filter(|r| r.id == *id && !std::ptr::eq(*r, request))
                    .filter_map(|r| r.answer.as_ref());
                let mut others = others.peekable();
                if others.peek().is_some() {
                    // Another request of the same id decides it; it is checked on its own.
                    declared == once && (declared || nowhere)
                } else {
                    !declared && nowhere
                }
            }
            (_, Answer::Unknown { .. }) => declared == once && (declared || nowhere),
        };
        (!ok).then(|| {
            format!(
                "{} via n{} {:?} {id} ({}): answered {}, but declared {declared}, runs: {}",
                request.phase,
                request.via,
                request.op,
                request.target,
                answer.kind(),
                self.census.describe(id)
            )
        })
    }
}

/// Durable stops and starts through the admin API of nodes on both sides of a real split, and
/// what each answer promised checked against what happened once the split healed: a 200 or 202
/// stop leaves the child undeclared and running nowhere, an error leaves it declared and running
/// once, a 200 or 202 start leaves it declared and running once, an error start declares nothing
/// (unless another request of the same id was accepted), and a 504 `outcome_unknown` leaves the
/// child declared exactly when it runs.
///
/// The nodes run `--auto-recovery` under `--partition-tolerance majority-quorum:5`: the one
/// strategy under which durable stops can be answered on both sides and every answer kept. The
/// majority carries them out (200, or 202 while the host of an instance is out of reach) and the
/// minority refuses them (503 `partitioned`), and in the window before either side knows of the
/// split the requests meet unreachable hosts and an unreachable leader (202 pending, 504
/// `outcome_unknown`). Under the default `divergence` both sides would commit to their own copy of
/// the declared list and the heal keeps one copy whole (the higher version, docs/recovery.md
/// "Versions, ties and partitions"), so a success answered on the side whose copy loses is
/// undone by design; a quorum strategy refuses that situation outright.
#[test]
fn under_a_real_split_every_durable_stop_and_start_answers_what_happened() {
    let net = Network::create(NODES)
        .unwrap_or_else(|e| panic!("network namespaces are needed (run as root, as CI does): {e}"));
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--auto-recovery",
        "--reconcile-grace-ms",
        "500",
        "--reconcile-interval-ms",
        "1000",
        "--partition-tolerance",
        "majority-quorum:5",
        "--nodedown-grace-ms",
        "300",
    ];
    let nodes: Vec<Node> = (1..=NODES)
        .map(|k| spawn(&net, k, dir.path(), "split-answers", &flags))
        .collect();
    let expected: Vec<String> = (1..=NODES).map(|k| net.name(k)).collect();
    wait_whole(
        &nodes,
        &expected,
        "five members everywhere, none partitioned",
    );
    let clients: Vec<AdminClient> = nodes.iter().map(Node::client).collect();
    let named: Vec<(String, AdminClient)> = (1..=NODES)
        .map(|k| (net.name(k), clients[k - 1].clone()))
        .collect();
    wait_for("every node to be normal", DEADLINE, || {
        clients
            .iter()
            .all(|c| c.health().is_ok_and(|h| h.recovery_state == "normal"))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));

    let ids: Vec<String> = (0..DURABLE_CHILDREN).map(|i| format!("d-{i:03}")).collect();
    let started = clients[1]
        .start(&counter_specs(&ids, true))
        .expect("durable start");
    assert_eq!(started.started.len(), ids.len(), "{started:?}");
    let everyone: Vec<&Node> = nodes.iter().collect();
    let all_names: BTreeSet<String> = expected.iter().cloned().collect();
    let id_set: BTreeSet<String> = ids.iter().cloned().collect();
    wait_for("every child placed once", DEADLINE, || {
        once_on(&everyone, &id_set, &all_names)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));

    let (majority, minority) = ([1, 2, 3], [4, 5]);
    let minority_names: BTreeSet<String> = minority.iter().map(|k| net.name(*k)).collect();
    let before = placement(&clients[0]).expect("placement");
    let (mut on_minority, mut on_majority): (Vec<String>, Vec<String>) = ids
        .iter()
        .cloned()
        .partition(|id| minority_names.contains(&before[id][0]));

    net.split(&majority, &minority).unwrap();
    // At once: neither side knows yet, hosts and the leader are out of reach.
    let mut requests = plan(
        'A',
        &majority,
        &minority,
        &mut on_majority,
        &mut on_minority,
    );
    issue(&clients, &mut requests);
    let majority_members: Vec<String> = majority.iter().map(|k| net.name(*k)).collect();
    wait_for("both sides to know of the split", DEADLINE, || {
        let minority_knows = minority
            .iter()
            .all(|k| clients[k - 1].health().is_ok_and(|h| h.partitioned));
        let majority_knows = majority.iter().all(|k| {
            clients[k - 1]
                .health()
                .is_ok_and(|h| h.members == majority_members && !h.partitioned)
        });
        (minority_knows && majority_knows).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", tails(&nodes)));
    let mut later = plan(
        'B',
        &majority,
        &minority,
        &mut on_majority,
        &mut on_minority,
    );
    issue(&clients, &mut later);
    requests.extend(later);

    net.heal(&majority, &minority).unwrap();
    wait_whole(&nodes, &expected, "five members again, none partitioned");
    let universe: BTreeSet<String> = ids
        .iter()
        .cloned()
        .chain(requests.iter().map(|r| r.id.clone()))
        .collect();
    let settled = wait_for("the cluster to settle", DEADLINE, || {
        Outcome::take(&named).filter(|o| o.settled(&universe))
    });
    let after = match settled {
        Ok(after) => after,
        // Judge what there is: the answers' contradictions say more than the timeout.
        Err(e) => {
            eprintln!("{e}");
            Outcome::take(&named).expect("every node answers after the heal")
        }
    };

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &requests {
        let answer = r.answer.as_ref().expect("answered");
        eprintln!(
            "{} via n{} {:?} {} ({}): {}",
            r.phase,
            r.via,
            r.op,
            r.id,
            r.target,
            answer.kind()
        );
        *counts
            .entry(format!("{:?} {}", r.op, answer.kind()).to_lowercase())
            .or_default() += 1;
    }
    let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let unknown: Vec<&Request> = requests
        .iter()
        .filter(|r| matches!(r.answer, Some(Answer::Unknown { .. })))
        .collect();
    let took_effect = unknown
        .iter()
        .filter(|r| (r.op == Op::Start) == after.declared.contains(&r.id))
        .count();
    eprintln!(
        "answers under the split: {}; of the {} unknown, {took_effect} ended as asked",
        summary.join(", "),
        unknown.len()
    );
    let mut contradictions: Vec<String> = requests
        .iter()
        .filter_map(|r| after.contradicts(r, &requests))
        .collect();
    // What no request touched is as it was.
    for id in ids
        .iter()
        .filter(|id| !requests.iter().any(|r| r.id == **id))
    {
        if !(after.declared.contains(id) && after.runs_once(id)) {
            contradictions.push(format!(
                "untouched {id}: declared {}, runs: {}",
                after.declared.contains(id),
                after.census.describe(id)
            ));
        }
    }
    assert!(
        contradictions.is_empty(),
        "answers that do not match what happened:\n{}\n(lists agree: {})\n{}",
        contradictions.join("\n"),
        after.lists_agree,
        tails(&nodes)
    );
    assert!(
        after.lists_agree,
        "the declared lists differ\n{}",
        tails(&nodes)
    );
    // Not vacuous: the split made the hub answer pending or an error somewhere.
    assert!(
        requests
            .iter()
            .any(|r| matches!(r.answer, Some(Answer::Pending | Answer::Refused { .. }))),
        "no answer was pending or an error: the split exercised nothing"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.answer.as_ref().is_some_and(Answer::accepted)),
        "nothing was accepted: the majority took no work"
    );
}
