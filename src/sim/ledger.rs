//! What a run asked the cluster, what it was told, and what the declared list's leaders decided.
//!
//! Requests run as tasks while the run goes on (faults strike while they are in flight), so
//! their answers land here whenever they come. The leaders' decisions come from the hubs'
//! observer (`Observation::Authored`): together they say which acknowledged durable starts
//! and stops the final declared list must reflect (see [`super::invariants`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::core::declared::delta::ListStamp;
use crate::hub::simulation::Observation;
use crate::model::{ChildId, NodeName};

/// One request of the run.
#[derive(Clone, Debug)]
pub struct Request {
    /// What was asked, for messages.
    pub what: String,
    /// Through which node.
    pub node: NodeName,
    /// When (virtual ms).
    pub issued_ms: u64,
    /// How many answers arrived (exactly one is the promise).
    pub answers: u32,
}

/// A durable start or stop the cluster acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acknowledged {
    /// The request.
    pub request: u64,
    /// `true` for a durable start, `false` for a stop.
    pub start: bool,
    /// Its children.
    pub ids: Vec<ChildId>,
}

/// What an answer to a durable start or stop said about one child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Told {
    /// It took effect (started, or stopped).
    TookEffect,
    /// The list's change is committed, the rest not confirmed.
    Pending,
    /// Refused, or failed: nothing changed. The code says which.
    Refused(String),
    /// The node could not tell.
    Unknown,
}

/// One child's answer to a durable start or stop, and when the request was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableAnswer {
    /// The request.
    pub request: u64,
    /// `true` for a start, `false` for a stop.
    pub start: bool,
    /// The child.
    pub id: ChildId,
    /// What the answer said.
    pub told: Told,
    /// How many leader decisions had been observed when the request was made: the ones after
    /// are those it may have caused.
    pub decisions_before: usize,
}

/// A leader's decision, as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The leader.
    pub author: NodeName,
    /// The copy before.
    pub base: ListStamp,
    /// The copy after (the same stamp when nothing changed).
    pub result: ListStamp,
    /// Children declared.
    pub declared: Vec<ChildId>,
    /// Children undeclared.
    pub undeclared: Vec<ChildId>,
    /// Named, but not changed (already as asked in this copy).
    pub untouched: Vec<ChildId>,
    /// The operator's clear.
    pub cleared: bool,
}

impl Decision {
    /// Whether the decision named `id`.
    pub fn names(&self, id: &ChildId) -> bool {
        self.declared.contains(id) || self.undeclared.contains(id) || self.untouched.contains(id)
    }
}

/// The run's ledger.
#[derive(Default)]
pub struct Ledger {
    requests: BTreeMap<u64, Request>,
    next: u64,
    /// Every child the run started durably (whatever the answer).
    pub durable: BTreeSet<ChildId>,
    /// Every child the run started without `durable`.
    pub plain: BTreeSet<ChildId>,
    /// Durable starts and stops acknowledged, in the order of their answers.
    pub acknowledged: Vec<Acknowledged>,
    /// The leaders' decisions, in the order they were made.
    pub decisions: Vec<Decision>,
    /// The handovers of leaving nodes: who handed children to whom, in order.
    pub handovers: Vec<(NodeName, Vec<NodeName>)>,
    /// Requests acknowledged (something started or stopped) by a node that had been without
    /// quorum for longer than the detection bound when they were made (quorum runs).
    pub minority_acks: Vec<u64>,
    /// Every durable start's and stop's answer, per child (`answers_truthful`).
    pub durable_answers: Vec<DurableAnswer>,
}

/// A ledger shared by the run and its request tasks.
pub type SharedLedger = Arc<Mutex<Ledger>>;

impl Ledger {
    /// Records a request and returns its number.
    pub fn issue(&mut self, what: String, node: &str, now_ms: u64) -> u64 {
        self.next += 1;
        self.requests.insert(
            self.next,
            Request {
                what,
                node: node.to_owned(),
                issued_ms: now_ms,
                answers: 0,
            },
        );
        self.next
    }

    /// Records an answer to request `id`.
    pub fn answered(&mut self, id: u64) {
        if let Some(request) = self.requests.get_mut(&id) {
            request.answers += 1;
        }
    }

    /// The requests not answered exactly once.
    pub fn unanswered(&self) -> Vec<(u64, &Request)> {
        self.requests
            .iter()
            .filter(|(_, r)| r.answers != 1)
            .map(|(id, r)| (*id, r))
            .collect()
    }

    /// Requests answered more than once.
    pub fn answered_twice(&self) -> Vec<(u64, &Request)> {
        self.requests
            .iter()
            .filter(|(_, r)| r.answers > 1)
            .map(|(id, r)| (*id, r))
            .collect()
    }

    /// How many requests were made.
    pub fn requests(&self) -> usize {
        self.requests.len()
    }

    /// Records an observation of a hub.
    pub fn observe(&mut self, observation: Observation) {
        match observation {
            Observation::Authored {
                author,
                base,
                result,
                declared,
                undeclared,
                untouched,
                cleared,
            } => self.decisions.push(Decision {
                author,
                base,
                result,
                declared,
                undeclared,
                untouched,
                cleared,
            }),
            Observation::HandedOver { from, to } => self.handovers.push((from, to)),
        }
    }
}
