//! The rule over time: a component that is not a clique is resolved only once its shape has
//! been stable for `stable_after` (in the view of the node the rule picks, which sets itself
//! aside and says so in its record), and a set-aside node comes back only once the rule has
//! not picked it for `stable_after`, doubled for each set-aside of the same node within the
//! flap window (capped), so a flapping link does not move children back and forth at its
//! rhythm.

use std::collections::BTreeSet;

use super::rule::Links;
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
    /// Members of the component that are set aside: those whose own record says they set
    /// themselves aside and released their children, and this node when [`Self::me_aside`].
    /// Out of the ring; the others re-place their children after the grace.
    pub set_aside: BTreeSet<NodeName>,
    /// Whether this node is to be set aside now (its own record is to say so once its
    /// children are released).
    pub me_aside: bool,
    /// Members of the component (not set aside) that this node does not reach directly: they
    /// stay in the ring, their children stay where they are.
    pub indirect: BTreeSet<NodeName>,
    /// The component minus the set-aside nodes is not a clique yet: a resolution is pending
    /// (it waits for the node the rule picks to see the shape stable; a flapping link never
    /// is).
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

/// A component's shape: its nodes and its down links (as positions in the nodes' order, so the
/// same shape is the same value).
type Shape = (BTreeSet<NodeName>, Vec<(u32, u32)>);

/// This node's resolution over time. Which nodes the rule picks is a function of the table
/// ([`set_aside`] over the component); each node decides only about *itself* (whether it sets
/// itself aside, when it comes back), with its own timers, and says so in its own record. The
/// others follow the records: a node is set aside for everyone once its record says so, and
/// not before, so no member ever re-places the children of a node that has not released them,
/// whatever the timing of each node's view.
#[derive(Clone, Debug)]
pub struct Resolver {
    config: ResolverConfig,
    shape: Option<Shape>,
    changed_at: u64,
    /// While this node is set aside and the rule no longer picks it: since when.
    clear_since: Option<u64>,
    /// This node's set-asides within the flap window, and the last one's time.
    history: Option<(u32, u64)>,
}

impl Resolver {
    /// A resolver that has seen nothing yet.
    pub fn new(config: ResolverConfig) -> Self {
        Self {
            config,
            shape: None,
            changed_at: 0,
            clear_since: None,
            history: None,
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

    /// How many times this node set itself aside within the flap window (0: never).
    pub fn strikes(&self) -> u32 {
        self.history.map_or(0, |(s, _)| s)
    }

    /// Decides from `table` at `now_ms` (monotonic): the component, who is set aside, whether
    /// this node is to be, who is indirectly connected, and when to look again.
    ///
    /// This node sets itself aside when the rule picks it and its component's shape has not
    /// changed for `stable_after`; it comes back once the rule has not picked it for
    /// `stable_after` doubled per set-aside within the flap window (capped). Another node is
    /// set aside when its own record says so.
    pub fn decide(&mut self, table: &ReachTable, now_ms: u64) -> Decision {
        let records = table.records();
        let me = table.me();
        // The records indexed once for every question below (a table changes far less often
        // than it is decided on, but each decision asks about every pair of members).
        let links = Links::of(records);
        let comp = links.component_of(me);
        let down = links.down_positions(&comp);
        let picked = !down.is_empty() && links.set_aside(&comp).contains(me);
        let shape = (comp.clone(), down);
        if self.shape.as_ref() != Some(&shape) {
            self.shape = Some(shape);
            self.changed_at = now_ms;
        }
        let window = self.config.flap_window_ms;
        if self
            .history
            .is_some_and(|(_, at)| now_ms.saturating_sub(at) >= window)
        {
            self.history = None;
        }
        let mut next: Option<u64> = None;
        let me_aside = if table.own().aside {
            if picked {
                self.clear_since = None;
                true
            } else {
                let since = *self.clear_since.get_or_insert(now_ms);
                let due = since.saturating_add(required_ms(&self.config, self.strikes()));
                if now_ms >= due {
                    self.clear_since = None;
                    false
                } else {
                    next = Some(due);
                    true
                }
            }
        } else {
            self.clear_since = None;
            let due = self.changed_at.saturating_add(self.config.stable_after_ms);
            if !picked {
                false
            } else if now_ms >= due {
                let strikes = self.strikes().saturating_add(1);
                self.history = Some((strikes, now_ms));
                true
            } else {
                next = Some(due);
                false
            }
        };
        let set_aside: BTreeSet<NodeName> = comp
            .iter()
            .filter(|n| {
                if *n == me {
                    me_aside
                } else {
                    records.get(*n).is_some_and(|r| r.aside)
                }
            })
            .cloned()
            .collect();
        let members: BTreeSet<NodeName> = comp.difference(&set_aside).cloned().collect();
        Decision {
            indirect: links.indirect(&members, me),
            unresolved: !links.is_clique(&members),
            set_aside,
            me_aside,
            component: comp,
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
