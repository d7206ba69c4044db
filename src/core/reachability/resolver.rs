//! The rule over time: a component that is not a clique is resolved only once its shape has
//! been stable for `stable_after`, and a set-aside node comes back only once it has been fully
//! connected for `stable_after`, doubled for each set-aside of the same node within the flap
//! window (capped), so a flapping link does not move children back and forth at its rhythm.

use std::collections::{BTreeMap, BTreeSet};

use super::rule::{component, down_links, indirect, link_up, set_aside};
use super::table::ReachTable;
use crate::model::NodeName;

/// The resolver's timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolverConfig {
    /// How long the component's shape (its nodes and its down links) must stay the same before
    /// a non-clique is resolved, and the least a set-aside node must stay fully connected
    /// before it comes back, in ms.
    pub stable_after_ms: u64,
    /// The most a set-aside node is ever asked to stay connected before it comes back, in ms.
    pub max_stable_ms: u64,
    /// A node set aside again within this long of its previous set-aside doubles its required
    /// stable time, in ms.
    pub flap_window_ms: u64,
}

impl ResolverConfig {
    /// The defaults around a `stable_after`: at most 5 minutes of required stability, a flap
    /// window of 10 minutes.
    pub fn new(stable_after_ms: u64) -> Self {
        Self {
            stable_after_ms,
            max_stable_ms: (5 * 60 * 1000).max(stable_after_ms),
            flap_window_ms: 10 * 60 * 1000,
        }
    }
}

/// What this node does with the members now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// My component: the nodes that are not down for me (this node included). Nodes outside
    /// it are down: their children are re-placed after the grace.
    pub component: BTreeSet<NodeName>,
    /// Members of the component set aside by the resolution: out of the ring everywhere, their
    /// children stopped on them and re-placed by the others after the grace.
    pub set_aside: BTreeSet<NodeName>,
    /// Members of the component (not set aside) that this node does not reach directly: they
    /// stay in the ring, their children stay where they are.
    pub indirect: BTreeSet<NodeName>,
    /// The component minus the set-aside nodes is not a clique yet: a resolution is pending
    /// (it waits for the shape to be stable; a flapping link never is).
    pub unresolved: bool,
    /// When to decide again although nothing arrived (a stability deadline), in the caller's
    /// milliseconds.
    pub next_check_at: Option<u64>,
}

impl Decision {
    /// Whether `node` is a member now: in the component and not set aside.
    pub fn is_member(&self, node: &str) -> bool {
        self.component.contains(node) && !self.set_aside.contains(node)
    }
}

/// A component's shape: its nodes and its down links.
type Shape = (BTreeSet<NodeName>, BTreeSet<(NodeName, NodeName)>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Aside {
    strikes: u32,
    connected_since: Option<u64>,
}

/// The resolution's memory: when the component's shape last changed, which nodes are set aside
/// and how often each was.
#[derive(Clone, Debug)]
pub struct Resolver {
    config: ResolverConfig,
    shape: Option<Shape>,
    changed_at: u64,
    aside: BTreeMap<NodeName, Aside>,
    /// Per node: set-asides within the flap window, and the last one's time.
    history: BTreeMap<NodeName, (u32, u64)>,
}

impl Resolver {
    /// A resolver that has seen nothing yet.
    pub fn new(config: ResolverConfig) -> Self {
        Self {
            config,
            shape: None,
            changed_at: 0,
            aside: BTreeMap::new(),
            history: BTreeMap::new(),
        }
    }

    /// Its timing.
    pub fn config(&self) -> ResolverConfig {
        self.config
    }

    /// How long `strikes` set-asides in a row ask a node to stay connected before it comes
    /// back: `stable_after` doubled per strike after the first, capped.
    pub fn required_ms(&self, strikes: u32) -> u64 {
        required_ms(&self.config, strikes)
    }

    /// How many times `node` was set aside within the flap window (0: never).
    pub fn strikes(&self, node: &str) -> u32 {
        self.history.get(node).map_or(0, |(s, _)| *s)
    }

    /// Decides from `table` at `now_ms` (monotonic): the component, who is set aside, who is
    /// indirectly connected, and when to look again.
    pub fn decide(&mut self, table: &ReachTable, now_ms: u64) -> Decision {
        let records = table.records();
        let comp = component(table);
        let down = down_links(records, &comp);
        let shape = (comp.clone(), down);
        if self.shape.as_ref() != Some(&shape) {
            self.shape = Some(shape);
            self.changed_at = now_ms;
        }
        let window = self.config.flap_window_ms;
        self.history
            .retain(|_, (_, at)| now_ms.saturating_sub(*at) < window);
        // A set-aside node that left the component is down anyway: nothing to come back from.
        self.aside.retain(|node, _| comp.contains(node));
        let mut next: Option<u64> = None;
        let mut back = Vec::new();
        for (node, aside) in &mut self.aside {
            let linked = comp
                .iter()
                .all(|other| other == node || link_up(records, node, other));
            if !linked {
                aside.connected_since = None;
                continue;
            }
            let since = *aside.connected_since.get_or_insert(now_ms);
            let required = required_ms(&self.config, aside.strikes);
            let due = since.saturating_add(required);
            if now_ms >= due {
                back.push(node.clone());
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        for node in back {
            self.aside.remove(&node);
        }
        let rest: BTreeSet<NodeName> = comp
            .iter()
            .filter(|n| !self.aside.contains_key(*n))
            .cloned()
            .collect();
        let mut unresolved = !down_links(records, &rest).is_empty();
        if unresolved {
            let due = self.changed_at.saturating_add(self.config.stable_after_ms);
            if now_ms >= due {
                for node in set_aside(records, &rest) {
                    let strikes = match self.history.get(&node) {
                        Some((strikes, _)) => strikes.saturating_add(1),
                        None => 1,
                    };
                    self.history.insert(node.clone(), (strikes, now_ms));
                    self.aside.insert(
                        node,
                        Aside {
                            strikes,
                            connected_since: None,
                        },
                    );
                }
                unresolved = false;
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        let members: BTreeSet<NodeName> = comp
            .iter()
            .filter(|n| !self.aside.contains_key(*n))
            .cloned()
            .collect();
        Decision {
            indirect: indirect(records, &members, table.me()),
            set_aside: self.aside.keys().cloned().collect(),
            component: comp,
            unresolved,
            next_check_at: next,
        }
    }
}

fn required_ms(config: &ResolverConfig, strikes: u32) -> u64 {
    let doublings = strikes.saturating_sub(1).min(32);
    config
        .stable_after_ms
        .saturating_mul(1u64 << doublings)
        .min(config.max_stable_ms)
}
