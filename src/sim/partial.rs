//! Partial network faults: the cluster stays connected through some path, but not every node
//! reaches every other. Real networks fail in parts more often than in halves.
//!
//! - **partial cut**: one or a few links cut both ways, each end still reaching the others;
//! - **one-way drop**: one direction of one link loses everything; its receiver takes the
//!   sender for down (its failure detector hears no heartbeat), the sender still hears the
//!   receiver ([`crate::cluster::in_process::InProcessCluster::cut_one_way`]);
//! - **lossy link**: both directions of one link lose a large share of their frames, no one's
//!   membership changes;
//! - **flapping link**: one link cut and healed again every few seconds.
//!
//! A run draws them from its own generator ([`PartialFaults`]), seeded from the run's seed, so
//! that the workload's draws stay those of the seed: one run in three draws them
//! ([`partial_faults_of`]), `--partial-partitions` forces them on every seed. Each fault heals
//! by itself after a time drawn with it (or earlier, with any heal of the run); quiescence heals
//! whatever is left.

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::trace::short;
use crate::model::NodeName;

/// Whether seed `seed`'s run draws partial faults when the options do not say: one run in
/// three, from a mix of the seed's bits (not a residue: the other strategies are drawn from
/// `seed % n`, and partial faults should fall on every combination of them).
pub fn partial_faults_of(seed: u64) -> bool {
    mix(seed ^ 0x9a27_1a1f_a017_5eed).is_multiple_of(3)
}

/// SplitMix64's finaliser: every bit of `x` moves every bit of the result.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// One partial fault.
#[derive(Clone, Debug, PartialEq)]
pub enum PartialFault {
    /// These links are cut both ways (each end still reaches the other nodes).
    Cut {
        /// The links.
        links: Vec<(NodeName, NodeName)>,
    },
    /// Every frame from `from` to `to` is lost; `to` takes `from` for down.
    OneWay {
        /// The sender whose frames are lost.
        from: NodeName,
        /// The receiver that no longer hears it.
        to: NodeName,
    },
    /// Both directions of the link lose each frame with `drop_probability`.
    Lossy {
        /// One end.
        a: NodeName,
        /// The other end.
        b: NodeName,
        /// The share of frames lost.
        drop_probability: f64,
    },
    /// The link is cut for `down`, restored for `up`, and so on until the fault heals.
    Flap {
        /// One end.
        a: NodeName,
        /// The other end.
        b: NodeName,
        /// How long each cut lasts.
        down: Duration,
        /// How long the link works between two cuts.
        up: Duration,
    },
}

impl fmt::Display for PartialFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialFault::Cut { links } => {
                let links: Vec<String> = links
                    .iter()
                    .map(|(a, b)| format!("{}-{}", short(a), short(b)))
                    .collect();
                write!(f, "partial cut {}", links.join(" "))
            }
            PartialFault::OneWay { from, to } => {
                write!(f, "one-way drop {}->{}", short(from), short(to))
            }
            PartialFault::Lossy {
                a,
                b,
                drop_probability,
            } => write!(
                f,
                "lossy link {}-{} drops {drop_probability:.2}",
                short(a),
                short(b)
            ),
            PartialFault::Flap { a, b, down, up } => write!(
                f,
                "flapping link {}-{}: cut {} ms, up {} ms",
                short(a),
                short(b),
                down.as_millis(),
                up.as_millis()
            ),
        }
    }
}

/// A run's draws of partial faults: their own generator, so that a run with them draws the
/// same workload as without.
pub struct PartialFaults {
    rng: StdRng,
    /// The fault in force, and the virtual time it heals at.
    pub active: Option<(PartialFault, u64)>,
}

/// The chance, at each step without a partial fault, that one strikes.
const STRIKE: f64 = 0.2;

impl PartialFaults {
    /// The draws of seed `seed`'s run.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed ^ 0x0a27_1a1f_a017_0001),
            active: None,
        }
    }

    /// What happens to the partial faults at `now_ms`, with `up` the nodes that are up: the
    /// fault in force heals when its time is up ([`Change::Heal`]); else, with no fault in
    /// force, one may strike ([`Change::Strike`]).
    pub fn next(&mut self, now_ms: u64, up: &[NodeName]) -> Option<Change> {
        if let Some((fault, until)) = &self.active {
            if now_ms >= *until {
                let fault = fault.clone();
                self.active = None;
                return Some(Change::Heal(fault));
            }
            return None;
        }
        if up.len() < 3 || !self.rng.gen_bool(STRIKE) {
            return None;
        }
        let fault = draw(&mut self.rng, up);
        // Long enough for the hub to see the fault settle and resolve it (its stable time is
        // seconds), short enough to heal within the run.
        let lasts = self.rng.gen_range(4_000..30_000);
        self.active = Some((fault.clone(), now_ms + lasts));
        Some(Change::Strike(fault))
    }

    /// The fault in force was healed by the run (a heal of everything).
    pub fn healed(&mut self) {
        self.active = None;
    }
}

/// A change of the partial faults ([`PartialFaults::next`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A fault strikes.
    Strike(PartialFault),
    /// The fault in force heals.
    Heal(PartialFault),
}

/// Draws a fault among `up` (at least three nodes).
fn draw(rng: &mut StdRng, up: &[NodeName]) -> PartialFault {
    let mut nodes = up.to_vec();
    nodes.shuffle(rng);
    let (a, b) = (nodes[0].clone(), nodes[1].clone());
    match rng.gen_range(0..4) {
        0 => {
            // One link, or a few: each further link from the first node (a star of cuts
            // leaves the others connected) while at least two nodes stay whole.
            let extra = rng.gen_range(0..=nodes.len().saturating_sub(3).min(2));
            let links = std::iter::once((a.clone(), b))
                .chain(nodes[2..2 + extra].iter().map(|n| (a.clone(), n.clone())))
                .collect();
            PartialFault::Cut { links }
        }
        1 => PartialFault::OneWay { from: a, to: b },
        2 => PartialFault::Lossy {
            a,
            b,
            drop_probability: rng.gen_range(0.5..0.95),
        },
        _ => PartialFault::Flap {
            a,
            b,
            down: Duration::from_millis(rng.gen_range(1_000..4_000)),
            up: Duration::from_millis(rng.gen_range(1_000..4_000)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<NodeName> {
        (1..=n).map(|i| format!("n{i}@sim")).collect()
    }

    #[test]
    fn a_third_of_the_seeds_draw_partial_faults_apart_from_the_other_draws() {
        let drawn = (0..3_000).filter(|s| partial_faults_of(*s)).count();
        assert!((800..1_200).contains(&drawn), "{drawn}");
        // Every residue of the quorum runs' draw gets some.
        for r in 0..7 {
            assert!((0..300).any(|s| s % 7 == r && partial_faults_of(s)));
        }
    }

    #[test]
    fn faults_strike_heal_on_time_and_replay_from_the_seed() {
        let up = nodes(4);
        let run = |seed| {
            let mut faults = PartialFaults::new(seed);
            let mut changes = Vec::new();
            for t in 0..200 {
                if let Some(c) = faults.next(t * 1_000, &up) {
                    changes.push((t, c));
                }
            }
            changes
        };
        let changes = run(7);
        assert_eq!(changes, run(7));
        assert!(changes.len() >= 4, "{changes:?}");
        // Strikes and heals alternate, each heal the fault that struck.
        for pair in changes.chunks(2) {
            if let [(t0, Change::Strike(f)), (t1, Change::Heal(g))] = pair {
                assert_eq!(f, g);
                assert!((4..=30).contains(&(t1 - t0)), "{t0} {t1}");
            } else if pair.len() == 2 {
                panic!("{pair:?}");
            }
        }
        // Fewer than three nodes up: nothing strikes.
        let mut faults = PartialFaults::new(7);
        assert!((0..100).all(|t| faults.next(t * 1_000, &nodes(2)).is_none()));
    }

    #[test]
    fn a_partial_cut_leaves_two_nodes_whole() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..200 {
            if let PartialFault::Cut { links } = draw(&mut rng, &nodes(5)) {
                assert!((1..=3).contains(&links.len()));
                let first = &links[0].0;
                assert!(links.iter().all(|(a, b)| a == first && a != b));
            }
        }
    }
}
