//! Load-based placement: where a new child goes when the nodes are not equally busy, and how
//! many children move when they drift apart.
//!
//! Each node samples its own load ([`LoadSample`]: children, scheduler busy time, run-queue
//! backlog, memory) and reports it to the leader, which keeps an exponentially weighted average per
//! node ([`LoadAverage`], as Elixir's ProcessHub's history with a decay factor) and sends the table
//! back to every member. A node starting a child turns the table into each member's **spare
//! capacity** ([`spare_capacity`]) and picks the child's nodes by weighted rendezvous hashing
//! ([`place`]): a node is chosen with a probability proportional to its spare capacity, and the
//! same child id with the same table gives the same nodes on every node. A proportional choice,
//! rather than "the least loaded node gets it", keeps a burst of starts between two reports from
//! all landing on one node.
//!
//! The leader may also move children ([`plan_rebalance`]) when the children per node drift
//! further apart than a threshold (nodes joined, or children stopped unevenly).
//!
//! Pure: the Coordinator samples, sends and moves; nothing here does IO.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::core::placement::stable_hash;
use crate::model::{ChildId, NodeName};

/// One node's load at one moment, as it reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSample {
    /// Children running on the node.
    pub children: u64,
    /// The share of time the node's scheduler threads were busy since its last sample, in
    /// thousandths (0..=1000).
    pub busy_permille: u64,
    /// Tasks waiting in the scheduler's global queue.
    pub run_queue: u64,
    /// Resident memory of the process, in bytes.
    pub memory_bytes: u64,
    /// Children with a move under way on the node (not a load figure: while any member reports
    /// one, the leader plans no rebalance, since counts taken mid-move would move children
    /// twice).
    #[serde(default)]
    pub moving: u64,
}

impl LoadSample {
    /// The sample with every figure clamped to what a real node can report, so a peer's
    /// absurd figures weigh no more than a very busy node.
    pub fn bounded(self) -> LoadSample {
        LoadSample {
            children: self.children.min(1 << 40),
            busy_permille: self.busy_permille.min(1000),
            run_queue: self.run_queue.min(1 << 40),
            memory_bytes: self.memory_bytes.min(1 << 50),
            moving: self.moving.min(1 << 40),
        }
    }
}

/// How much each figure weighs in a node's load score (Elixir's ProcessHub's weights: scheduler
/// 0.4, run queue 0.3, processes 0.2, memory 0.1).
const WEIGHTS: [f64; 4] = [0.4, 0.3, 0.2, 0.1];

/// The spare capacity of the busiest node: it still takes a few children, so a cluster where
/// one node is busy in every figure never refuses to place on it outright.
pub const MIN_SPARE: f64 = 0.05;

/// A node's load, exponentially weighted over its reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadAverage {
    figures: [f64; 4],
}

impl LoadAverage {
    /// The average of a single report.
    pub fn first(sample: LoadSample) -> LoadAverage {
        LoadAverage {
            figures: figures(sample.bounded()),
        }
    }

    /// Folds in a new report: `decay` of the history is kept (0 = only the newest report,
    /// close to 1 = a long memory).
    pub fn update(&mut self, sample: LoadSample, decay: f64) {
        let decay = decay.clamp(0.0, 0.99);
        for (avg, new) in self.figures.iter_mut().zip(figures(sample.bounded())) {
            *avg = *avg * decay + new * (1.0 - decay);
        }
    }

    /// The average as a sample (rounded), for the table the leader sends.
    pub fn sample(&self) -> LoadSample {
        let [busy, queue, children, memory] = self.figures.map(|f| f.round().max(0.0) as u64);
        LoadSample {
            children,
            busy_permille: busy,
            run_queue: queue,
            memory_bytes: memory,
            moving: 0,
        }
    }
}

fn figures(s: LoadSample) -> [f64; 4] {
    [
        s.busy_permille as f64,
        s.run_queue as f64,
        s.children as f64,
        s.memory_bytes as f64,
    ]
}

/// Each member's spare capacity, in `MIN_SPARE..=1 + MIN_SPARE`: one minus its load score,
/// where the score weighs each figure against the busiest member's ([`WEIGHTS`]), so the
/// busiest member in every figure has no spare capacity but [`MIN_SPARE`]. A member with
/// no report yet (it just joined) counts as idle. Members are returned in their given order.
pub fn spare_capacity(
    loads: &BTreeMap<NodeName, LoadSample>,
    members: &[NodeName],
) -> Vec<(NodeName, f64)> {
    let mut max = [0.0f64; 4];
    for node in members {
        if let Some(sample) = loads.get(node) {
            for (m, f) in max.iter_mut().zip(figures(sample.bounded())) {
                *m = m.max(f);
            }
        }
    }
    // A figure no member reports (all zero: nodes that share a process report children only)
    // weighs nothing; its weight is shared among the others.
    let weighed: f64 = max
        .iter()
        .zip(WEIGHTS)
        .filter(|(m, _)| **m > 0.0)
        .map(|(_, w)| w)
        .sum();
    members
        .iter()
        .map(|node| {
            let score: f64 = loads.get(node).map_or(0.0, |sample| {
                figures(sample.bounded())
                    .iter()
                    .zip(max)
                    .zip(WEIGHTS)
                    .map(|((f, m), w)| if m > 0.0 { w * f / m } else { 0.0 })
                    .sum::<f64>()
                    / weighed.max(f64::MIN_POSITIVE)
            });
            (node.clone(), (1.0 - score).max(0.0) + MIN_SPARE)
        })
        .collect()
}

/// The `k` nodes for child `id`, best first: weighted rendezvous hashing over `spare`, so each
/// node is first with a probability proportional to its spare capacity, and only a change of
/// the table or of the members changes the answer. Fewer than `k` when there are fewer nodes.
pub fn place(id: &ChildId, spare: &[(NodeName, f64)], k: usize) -> Vec<NodeName> {
    let mut keyed: Vec<(f64, &NodeName)> = spare
        .iter()
        .filter(|(_, weight)| weight.is_finite() && *weight > 0.0)
        .map(|(node, weight)| {
            let mut bytes = Vec::with_capacity(id.as_str().len() + node.len() + 1);
            bytes.extend_from_slice(id.as_str().as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(node.as_bytes());
            // A uniform draw in (0, 1) from the top 53 bits; -ln(u) / w is exponentially
            // distributed with rate w, and the smallest of those wins with probability
            // w / sum(w).
            let u = ((stable_hash(&bytes) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            (-u.ln() / weight, node)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    keyed.into_iter().take(k).map(|(_, n)| n.clone()).collect()
}

/// A move the leader asks for: `from` hands `count` of its load-placed children to `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rebalance {
    /// The node with the most children.
    pub from: NodeName,
    /// The node with the fewest.
    pub to: NodeName,
    /// How many children move.
    pub count: u64,
}

/// The move that evens out the busiest and the idlest member, when their children differ by
/// more than `threshold` times the mean (and by at least two): half the difference, at most
/// `max_moves`. `None` when the cluster is even enough. Ties go to the lowest node name.
pub fn plan_rebalance(
    children: &BTreeMap<NodeName, u64>,
    threshold: f64,
    max_moves: u64,
) -> Option<Rebalance> {
    if children.len() < 2 || max_moves == 0 {
        return None;
    }
    let total: u64 = children.values().sum();
    let mean = total as f64 / children.len() as f64;
    // Highest count first, then lowest name; lowest count first, then lowest name.
    let (from, most) = children
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
    let (to, least) = children
        .iter()
        .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))?;
    let spread = most - least;
    if spread < 2 || mean <= 0.0 || (spread as f64) <= threshold * mean {
        return None;
    }
    Some(Rebalance {
        from: from.clone(),
        to: to.clone(),
        count: (spread / 2).min(max_moves),
    })
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
