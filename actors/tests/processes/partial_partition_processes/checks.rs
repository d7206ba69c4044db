//! What the partial-partition scenarios ask of the cluster and what they check after each heal:
//! durable starts and stops through every node, each answer judged against what the cluster
//! shows once it settled (`partition::answer`, `partition::outcome`).

use std::collections::BTreeMap;

use process_hub::core::placement::HashRing;
use process_hub::ChildId;
use process_hub_actors::harness::{wait_for, AdminClient};

use super::{Cluster, Expect, A, E, POLL};
use crate::partition::answer::{Answer, Op};
use crate::partition::outcome::Outcome;
use crate::partition::{tails, wait_whole, DEADLINE};
use process_hub_actors::harness::outage::counter_specs;

/// One durable request through one node's admin API, and its answer.
#[derive(Debug)]
pub(super) struct Request {
    /// The node asked (1-based).
    via: usize,
    op: Op,
    pub(super) id: String,
    answer: Option<Answer>,
}

/// One batch: three durable starts of new ids and one new id asked of both ends, and three
/// durable stops from `pool`, through the link's ends and the others in turn.
pub(super) fn plan(label: &str, batch: u32, pool: &mut Vec<String>) -> Vec<Request> {
    let request = |via, op, id| Request {
        via,
        op,
        id,
        answer: None,
    };
    let mut requests: Vec<Request> = [A, E, 3]
        .into_iter()
        .enumerate()
        .map(|(i, via)| request(via, Op::Start, format!("{label}-{batch}-{i}")))
        .collect();
    let both = format!("{label}-{batch}-both");
    requests.push(request(A, Op::Start, both.clone()));
    requests.push(request(E, Op::Start, both));
    for via in [A, E, 2] {
        if let Some(id) = pool.pop() {
            requests.push(request(via, Op::Stop, id));
        }
    }
    requests
}

/// Issues every request of `requests` at once (a thread each) and returns them answered.
pub(super) fn issue(clients: &[AdminClient], mut requests: Vec<Request>) -> Vec<Request> {
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
    requests
}

/// `start 200: 4, stop 202 pending: 1, ...`.
pub(super) fn summary(requests: &[Request]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in requests {
        let kind = r.answer.as_ref().map_or("none".into(), Answer::kind);
        *counts
            .entry(format!("{:?} {kind}", r.op).to_lowercase())
            .or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    parts.join(", ")
}

/// How this test judges what the cluster says after a heal (`partition::outcome`).
pub(super) trait PartialVerdict {
    /// Settled: the declared lists agree, every registry copy is the same, every plain child
    /// runs once, of the durable ids what is declared runs once, nothing else runs, and every
    /// child runs on its owner in `ring` (the node set aside has its children back).
    fn settled(&self, expect: &Expect, ring: &HashRing) -> bool;

    /// Why `request`'s answer does not match what happened, if it does not.
    fn contradicts(&self, request: &Request, all: &[Request]) -> Option<String>;
}

impl PartialVerdict for Outcome {
    fn settled(&self, expect: &Expect, ring: &HashRing) -> bool {
        let mut views = self.census.views.values();
        let Some(first) = views.next() else {
            return false;
        };
        let known = |id: &String| expect.plain.contains(id) || expect.universe.contains(id);
        self.lists_agree
            && views.all(|view| view == first)
            && first.keys().all(known)
            && self.census.all_run_once(&expect.plain)
            && expect.universe.iter().all(|id| {
                first.get(id).map_or(0, Vec::len) == usize::from(self.declared.contains(id))
            })
            && first.iter().all(|(id, hosts)| {
                ChildId::parse(id.as_str())
                    .is_ok_and(|id| hosts.len() == 1 && ring.owner(&id) == Some(&hosts[0]))
            })
    }

    fn contradicts(&self, request: &Request, all: &[Request]) -> Option<String> {
        let id = &request.id;
        let declared = self.declared.contains(id);
        let (once, nowhere) = (self.runs_once(id), self.runs_nowhere(id));
        let answer = request.answer.as_ref()?;
        let consistent = declared == once && (declared || nowhere);
        let ok = match (request.op, answer) {
            // Stopped, or undeclared for good with its stop carried out later.
            (Op::Stop, Answer::Done | Answer::Pending) => !declared && nowhere,
            // Nothing changed (no two requests stop the same id).
            (Op::Stop, Answer::Refused { .. }) => declared && once,
            (Op::Start, Answer::Done | Answer::Pending) => declared && once,
            // Another request of the same id may have declared it; it is checked on its own.
            (Op::Start, Answer::Refused { .. })
                if all.iter().any(|r| r.id == *id && r.via != request.via) =>
            {
                consistent
            }
            (Op::Start, Answer::Refused { .. }) => !declared && nowhere,
            (_, Answer::Unknown { .. }) => consistent,
        };
        (!ok).then(|| {
            format!(
                "via n{} {:?} {id}: answered {}, but declared {declared}, runs: {}",
                request.via,
                request.op,
                answer.kind(),
                self.census.describe(id)
            )
        })
    }
}

/// Waits until every node sees all five members, none partitioned, and the cluster settled
/// (see [`PartialVerdict::settled`]); panics with what differs and the nodes' logs if it does
/// not.
pub(super) fn settle(c: &Cluster, expect: &Expect, what: &str) -> Outcome {
    wait_whole(&c.nodes, &c.members, what);
    let ring = HashRing::new(c.members.iter().cloned());
    let settled = wait_for(what, DEADLINE, || {
        let outcome = Outcome::take(&c.named).filter(|o| o.settled(expect, &ring));
        if outcome.is_none() {
            std::thread::sleep(POLL);
        }
        outcome
    });
    settled.unwrap_or_else(|e| {
        let detail = match Outcome::take(&c.named) {
            Some(o) => {
                let wrong: Vec<String> = expect
                    .plain
                    .iter()
                    .chain(&expect.universe)
                    .filter(|id| {
                        let want = expect.plain.contains(*id) || o.declared.contains(*id);
                        if want {
                            let owner = ChildId::parse(id.as_str())
                                .ok()
                                .and_then(|id| ring.owner(&id).cloned());
                            !o.runs_once(id) || o.census.hosts(id) != owner.into_iter().collect()
                        } else {
                            !o.runs_nowhere(id)
                        }
                    })
                    .take(20)
                    .map(|id| format!("{id}: {}", o.census.describe(id)))
                    .collect();
                format!(
                    "declared lists agree: {}; children not as expected, or not on their \
                     owner (first 20):\n{}",
                    o.lists_agree,
                    wrong.join("\n")
                )
            }
            None => "some node did not answer".into(),
        };
        panic!("{e}\n{detail}\n{}", tails(&c.nodes))
    })
}
