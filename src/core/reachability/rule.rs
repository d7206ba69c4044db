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

/// The component of `me`: nodes reached from `me` over up links (`me` included).
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

/// This node's component in its table.
pub fn component(table: &ReachTable) -> BTreeSet<NodeName> {
    component_of(table.records(), table.me())
}

/// The down links among `nodes`, each once as `(lesser, greater)`.
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

/// The members of `nodes` not directly linked to `me` (indirectly connected when `nodes` is
/// `me`'s component).
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

/// The nodes to set aside so that the rest of `nodes` is a clique: repeatedly the node with
/// the most down links among those left, the greatest name on a tie, until no link among the
/// rest is down. Deterministic: the same records and nodes give the same set on every member.
/// A single cut link `a`-`e` sets aside one end (`e`); a node cut from two others goes before
/// either of them.
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
        // Most down links first, then the greatest name (`max_by_key` keeps the last maximum,
        // and the map iterates names in ascending order).
        let Some((worst, _)) = count.into_iter().max_by_key(|(_, c)| *c) else {
            return aside;
        };
        let worst = worst.clone();
        left.remove(&worst);
        aside.insert(worst);
    }
}
