//! The rule, a pure function of the table: every member computes it, and members holding the
//! same records get the same answers.
//!
//! - The link `u`-`v` is **up** when both ends vouch for it: `u`'s record lists `v` and `v`'s
//!   lists `u`. A link one end does not list (a cut, a one-way drop, a peer never connected, a
//!   record that is missing) is down.
//! - **My component**: the nodes reached from me over up links. It grows only through nodes
//!   already in it, so the records of nodes I cannot reach at all (stale: their authors are gone
//!   or cut off) never bring anyone in; and since a link is up only when both records say so,
//!   a node's own stale record cannot keep it in either. Nodes outside it are down for me.
//! - **Indirectly connected**: a member of my component whose link to me is down. It stays a
//!   member: its children are not re-placed.
//! - **Set aside** ([`set_aside`]): of a component that is not a clique, the nodes to take out
//!   so that the rest is one, chosen greedily and deterministically.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::observation::Observation;
use super::table::ReachTable;
use crate::model::NodeName;

/// Whether the link `u`-`v` is up: each end's record lists the other.
pub fn link_up(records: &BTreeMap<NodeName, Observation>, u: &str, v: &str) -> bool {
    let lists = |a: &str, b: &str| records.get(a).is_some_and(|r| r.reachable.contains(b));
    u != v && lists(u, v) && lists(v, u)
}

/// Whether a frame of records from member `from` asks this node (`me`) to vouch for what it
/// reaches: it holds `from`'s own record, not missing from the frame's answer list (an answer
/// holds this node's record, and is never answered, so two nodes never answer each other in
/// turn), and that record lacks a peer this node reaches (`own`, `from` aside).
pub fn asks_to_vouch(frame: &[Observation], me: &str, from: &str, own: &Observation) -> bool {
    if frame.iter().any(|r| r.observer == me) {
        return false;
    }
    frame.iter().any(|r| {
        r.observer == from
            && own
                .reachable
                .iter()
                .any(|p| p != from && !r.reachable.contains(p))
    })
}

/// Whether a frame of records from member `from` vouches for suspect `x`, which this node (`me`)
/// suspected when its own record was at `suspected_at` (incarnation, version): the frame
/// answers this node's record of the drop or a later one (it echoes this node's record at
/// `suspected_at` or later, so `from` wrote it after it had that record), `from`'s own record
/// in it lists `x`, and `x`'s record held here (`records`) lists `from`. A record of `from`
/// written before it learnt of the drop, even one that arrives after it, vouches for nothing:
/// `from` may have lost `x` in the same split since.
pub fn vouches(
    frame: &[Observation],
    me: &str,
    from: &str,
    x: &str,
    suspected_at: (u64, u64),
    records: &BTreeMap<NodeName, Observation>,
) -> bool {
    let answers = frame
        .iter()
        .any(|r| r.observer == me && r.key() >= suspected_at);
    let lists_x = frame
        .iter()
        .any(|r| r.observer == from && r.reachable.contains(x));
    let x_lists_from = records.get(x).is_some_and(|r| r.reachable.contains(from));
    answers && lists_x && x_lists_from && from != x
}

/// The component of `me`: nodes reached from `me` over up links (`me` included).
pub fn component_of(records: &BTreeMap<NodeName, Observation>, me: &str) -> BTreeSet<NodeName> {
    Links::of(records).component_of(me)
}

/// This node's component in its table.
pub fn component(table: &ReachTable) -> BTreeSet<NodeName> {
    component_of(table.records(), table.me())
}

/// The down links among `nodes`, each once as `(lesser, greater)`.
pub fn down_links(
    records: &BTreeMap<NodeName, Observation>,
    nodes: &BTreeSet<NodeName>,
) -> BTreeSet<(NodeName, NodeName)> {
    Links::of(records).down_links(nodes)
}

/// The members of `nodes` not directly linked to `me` (indirectly connected when `nodes` is
/// `me`'s component).
pub fn indirect(
    records: &BTreeMap<NodeName, Observation>,
    nodes: &BTreeSet<NodeName>,
    me: &str,
) -> BTreeSet<NodeName> {
    Links::of(records).indirect(nodes, me)
}

/// The nodes to set aside so that the rest of `nodes` is a clique: repeatedly the node with
/// the most down links among those left, the greatest name on a tie, until no link among the
/// rest is down. Deterministic: the same records and nodes give the same set on every member.
/// A single cut link `a`-`e` sets aside one end (`e`); a node cut from two others goes before
/// either of them.
pub fn set_aside(
    records: &BTreeMap<NodeName, Observation>,
    nodes: &BTreeSet<NodeName>,
) -> BTreeSet<NodeName> {
    Links::of(records).set_aside(nodes)
}

/// The up links of a table's records, indexed once: the observers in name order, and for each
/// a bit per observer it has an up link with ([`link_up`]). Every node computes the rule on
/// every change of its table, and a 50-node table holds 2,500 names: looking each link up by
/// name in the records' sets (four ordered-set searches of string keys per pair, for every
/// pair, several times per decision, and once per pair left at each set-aside pick) made the
/// rule the largest cost of a large cluster. Built in one ordered walk of each record's set;
/// every answer is the same as the name-by-name definition's (property-tested against it).
#[derive(Clone, Debug)]
pub struct Links<'a> {
    /// The observers that have a record, in name order (a link is up only between two of them).
    names: Vec<&'a NodeName>,
    /// Words per row.
    words: usize,
    /// Row `i` (`words` words): bit `j` set when the link between `names[i]` and `names[j]` is
    /// up.
    up: Vec<u64>,
}

fn bit(row: &[u64], j: usize) -> bool {
    row[j / 64] & (1 << (j % 64)) != 0
}

impl<'a> Links<'a> {
    /// The up links of `records`.
    pub fn of(records: &'a BTreeMap<NodeName, Observation>) -> Self {
        let names: Vec<&NodeName> = records.keys().collect();
        let (n, words) = (names.len(), names.len().div_ceil(64));
        // Row `i` of `lists`: the observers `names[i]`'s record lists (a merge of two ordered
        // walks).
        let mut lists = vec![0u64; n * words];
        for (i, record) in records.values().enumerate() {
            let row = &mut lists[i * words..(i + 1) * words];
            let mut j = 0;
            for listed in &record.reachable {
                while j < n && names[j] < listed {
                    j += 1;
                }
                if j == n {
                    break;
                }
                if names[j] == listed && j != i {
                    row[j / 64] |= 1 << (j % 64);
                }
            }
        }
        let mut up = vec![0u64; n * words];
        for i in 0..n {
            for j in i + 1..n {
                if bit(&lists[i * words..], j) && bit(&lists[j * words..], i) {
                    up[i * words + j / 64] |= 1 << (j % 64);
                    up[j * words + i / 64] |= 1 << (i % 64);
                }
            }
        }
        Self { names, words, up }
    }

    fn index(&self, node: &str) -> Option<usize> {
        self.names.binary_search_by(|n| n.as_str().cmp(node)).ok()
    }

    fn up_at(&self, i: usize, j: usize) -> bool {
        bit(&self.up[i * self.words..], j)
    }

    /// Whether the link `u`-`v` is up ([`link_up`]).
    pub fn is_up(&self, u: &str, v: &str) -> bool {
        match (self.index(u), self.index(v)) {
            (Some(i), Some(j)) => self.up_at(i, j),
            _ => false,
        }
    }

    /// The component of `me` ([`component_of`]).
    pub fn component_of(&self, me: &str) -> BTreeSet<NodeName> {
        let mut component = BTreeSet::from([me.to_owned()]);
        let Some(start) = self.index(me) else {
            return component;
        };
        let mut seen = vec![false; self.names.len()];
        seen[start] = true;
        let mut frontier = VecDeque::from([start]);
        while let Some(u) = frontier.pop_front() {
            for (v, reached) in seen.iter_mut().enumerate() {
                if !*reached && self.up_at(u, v) {
                    *reached = true;
                    frontier.push_back(v);
                }
            }
        }
        component.extend(
            seen.iter()
                .enumerate()
                .filter(|(_, s)| **s)
                .map(|(i, _)| self.names[i].clone()),
        );
        component
    }

    /// The indices of `nodes` (`None` for a node without a record: every link of it is down).
    fn indices(&self, nodes: &BTreeSet<NodeName>) -> Vec<Option<usize>> {
        // One ordered walk: `nodes` and `names` are both in name order.
        let mut j = 0;
        nodes
            .iter()
            .map(|node| {
                while j < self.names.len() && self.names[j] < node {
                    j += 1;
                }
                (j < self.names.len() && self.names[j] == node).then_some(j)
            })
            .collect()
    }

    fn up_between(&self, a: Option<usize>, b: Option<usize>) -> bool {
        match (a, b) {
            (Some(i), Some(j)) => self.up_at(i, j),
            _ => false,
        }
    }

    /// The down links among `nodes` as positions in `nodes`' order, each once as
    /// `(lesser, greater)`: [`Self::down_links`] without a copy of any name (what a decision
    /// compares from one table to the next).
    pub fn down_positions(&self, nodes: &BTreeSet<NodeName>) -> Vec<(u32, u32)> {
        let at = self.indices(nodes);
        let mut down = Vec::new();
        for a in 0..at.len() {
            for b in a + 1..at.len() {
                if !self.up_between(at[a], at[b]) {
                    down.push((a as u32, b as u32));
                }
            }
        }
        down
    }

    /// The down links among `nodes` ([`down_links`]).
    pub fn down_links(&self, nodes: &BTreeSet<NodeName>) -> BTreeSet<(NodeName, NodeName)> {
        let names: Vec<&NodeName> = nodes.iter().collect();
        self.down_positions(nodes)
            .into_iter()
            .map(|(a, b)| (names[a as usize].clone(), names[b as usize].clone()))
            .collect()
    }

    /// Whether every link among `nodes` is up (no [`Self::down_links`]).
    pub fn is_clique(&self, nodes: &BTreeSet<NodeName>) -> bool {
        let at = self.indices(nodes);
        (0..at.len()).all(|a| (a + 1..at.len()).all(|b| self.up_between(at[a], at[b])))
    }

    /// The members of `nodes` not directly linked to `me` ([`indirect`]).
    pub fn indirect(&self, nodes: &BTreeSet<NodeName>, me: &str) -> BTreeSet<NodeName> {
        let mine = self.index(me);
        let at = self.indices(nodes);
        nodes
            .iter()
            .zip(at)
            .filter(|(v, i)| v.as_str() != me && !self.up_between(mine, *i))
            .map(|(v, _)| v.clone())
            .collect()
    }

    /// The nodes to set aside so that the rest of `nodes` is a clique ([`set_aside`]). The
    /// down links per node are counted once, and each pick takes its own off its neighbours'
    /// counts.
    pub fn set_aside(&self, nodes: &BTreeSet<NodeName>) -> BTreeSet<NodeName> {
        let at = self.indices(nodes);
        let names: Vec<&NodeName> = nodes.iter().collect();
        let len = names.len();
        let mut count = vec![0usize; len];
        for a in 0..len {
            for b in a + 1..len {
                if !self.up_between(at[a], at[b]) {
                    count[a] += 1;
                    count[b] += 1;
                }
            }
        }
        let mut left = vec![true; len];
        let mut aside = BTreeSet::new();
        loop {
            // Most down links first, then the greatest name (the last maximum in name order).
            let mut worst: Option<usize> = None;
            for (i, c) in count.iter().enumerate() {
                if left[i] && *c > 0 && worst.is_none_or(|w| *c >= count[w]) {
                    worst = Some(i);
                }
            }
            let Some(worst) = worst else {
                return aside;
            };
            left[worst] = false;
            for other in 0..len {
                if left[other] && !self.up_between(at[worst], at[other]) {
                    count[other] -= 1;
                }
            }
            aside.insert(names[worst].clone());
        }
    }
}
