//! When the bindings of a node gone for good are reaped: after the starts that re-place its
//! children, and after the other owners recorded the children left to them.
//!
//! The reap unbinds the gone node from every row it ran: a scan of the registry and a write
//! of each of those rows. The Registry takes writes in the order they come, so a reap sent
//! before the re-placement's starts held up every start's record, and with it the start's
//! answer and the peers' copies, by the whole reap (about a fifth of a failover after the
//! grace, measured at 30,000 children). A reap sent when this node's own starts answered still
//! found the rows the other survivors re-place bound to the gone node (their records had not
//! come yet): it unbound them, the owners' records replaced them a moment later, and the
//! merges of those records waited behind the reap. Until the reap, the node is marked gone and
//! every row the Registry writes drops its binding anyway, so the
//! reap waits also until the stubs left to other owners were looked at for the last time
//! ([`crate::core::left_to_owner::LeftToOwners`]), and then finds only the children no node
//! took. A node up again before its reap is struck from it: what it binds from then on runs.

use std::collections::BTreeSet;

use crate::model::NodeName;

/// Reaps waiting for the starts of the pass that re-places the reaped nodes' children, and for
/// the other owners to take the children left to them.
#[derive(Debug, Default)]
pub struct HeldReaps {
    held: Vec<Held>,
}

#[derive(Debug)]
struct Held {
    nodes: Vec<NodeName>,
    awaiting: BTreeSet<u64>,
    owners: bool,
}

impl Held {
    fn due(&self) -> bool {
        self.awaiting.is_empty() && !self.owners
    }
}

impl HeldReaps {
    /// Holds the reap of `nodes` until the start requests `awaiting` answered and, when
    /// `owners` (stubs are left to other owners), until [`HeldReaps::owners_done`]. Answers
    /// the nodes to reap at once when there is nothing to wait for.
    pub fn hold(
        &mut self,
        nodes: Vec<NodeName>,
        awaiting: BTreeSet<u64>,
        owners: bool,
    ) -> Vec<NodeName> {
        let held = Held {
            nodes,
            awaiting,
            owners,
        };
        if held.due() || held.nodes.is_empty() {
            return held.nodes;
        }
        self.held.push(held);
        Vec::new()
    }

    /// Start request `request` answered (or failed): the nodes whose reap waited for it last,
    /// to reap now.
    pub fn answered(&mut self, request: u64) -> Vec<NodeName> {
        self.release(|id| id == request)
    }

    /// Releases what waits only for requests `settled` says are no longer pending (a request
    /// dropped without an answer, for instance when the node leaves): the nodes to reap now.
    pub fn release(&mut self, settled: impl Fn(u64) -> bool) -> Vec<NodeName> {
        for held in &mut self.held {
            held.awaiting.retain(|id| !settled(*id));
        }
        self.take_due()
    }

    /// The last look at the stubs left to other owners is over (each is run by some node, or
    /// sent to its owner): the nodes whose reap waited only for that, to reap now.
    pub fn owners_done(&mut self) -> Vec<NodeName> {
        for held in &mut self.held {
            held.owners = false;
        }
        self.take_due()
    }

    /// `node` is up again: its reap is off (the children it binds from now on run).
    pub fn strike(&mut self, node: &NodeName) {
        for held in &mut self.held {
            held.nodes.retain(|n| n != node);
        }
        self.held.retain(|held| !held.nodes.is_empty());
    }

    fn take_due(&mut self) -> Vec<NodeName> {
        let mut due = Vec::new();
        self.held.retain_mut(|held| {
            if held.due() {
                due.append(&mut held.nodes);
                return false;
            }
            true
        });
        due
    }

    /// Whether a reap waits.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<NodeName> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_reap_with_no_start_to_wait_for_goes_at_once() {
        let mut reaps = HeldReaps::default();
        assert_eq!(
            reaps.hold(nodes(&["c@h"]), BTreeSet::new(), false),
            nodes(&["c@h"])
        );
        assert!(reaps.is_empty());
    }

    #[test]
    fn a_reap_goes_when_the_last_of_its_starts_answered() {
        let mut reaps = HeldReaps::default();
        assert!(reaps
            .hold(nodes(&["c@h"]), BTreeSet::from([1, 2, 3]), false)
            .is_empty());
        assert!(reaps
            .hold(nodes(&["d@h"]), BTreeSet::from([4]), false)
            .is_empty());
        assert!(reaps.answered(2).is_empty());
        assert!(reaps.answered(1).is_empty());
        assert!(
            reaps.answered(9).is_empty(),
            "not a request a reap waits for"
        );
        assert_eq!(reaps.answered(4), nodes(&["d@h"]));
        assert_eq!(reaps.answered(3), nodes(&["c@h"]));
        assert!(reaps.is_empty());
        assert!(reaps.answered(3).is_empty(), "each reap is answered once");
    }

    #[test]
    fn a_reap_whose_starts_were_dropped_is_released() {
        let mut reaps = HeldReaps::default();
        reaps.hold(nodes(&["c@h", "d@h"]), BTreeSet::from([5, 6]), false);
        assert!(reaps.release(|id| id == 5).is_empty());
        assert_eq!(reaps.release(|_| true), nodes(&["c@h", "d@h"]));
        assert!(reaps.is_empty());
    }

    #[test]
    fn a_reap_waits_for_the_owners_as_well_as_its_starts() {
        let mut reaps = HeldReaps::default();
        assert!(reaps
            .hold(nodes(&["c@h"]), BTreeSet::from([1]), true)
            .is_empty());
        assert!(reaps.answered(1).is_empty(), "the owners are still at work");
        assert_eq!(reaps.owners_done(), nodes(&["c@h"]));
        assert!(reaps.is_empty());

        assert!(reaps
            .hold(nodes(&["d@h"]), BTreeSet::new(), true)
            .is_empty());
        assert!(reaps.release(|_| true).is_empty());
        assert_eq!(reaps.owners_done(), nodes(&["d@h"]));

        reaps.hold(nodes(&["e@h"]), BTreeSet::from([2]), true);
        assert!(reaps.owners_done().is_empty(), "its start has not answered");
        assert_eq!(reaps.answered(2), nodes(&["e@h"]));
    }

    #[test]
    fn a_node_up_again_is_struck_from_its_reap() {
        let mut reaps = HeldReaps::default();
        reaps.hold(nodes(&["c@h", "d@h"]), BTreeSet::from([1]), true);
        reaps.hold(nodes(&["c@h"]), BTreeSet::from([2]), false);
        reaps.strike(&"c@h".to_owned());
        assert!(reaps.answered(2).is_empty(), "nothing left of that reap");
        assert!(reaps.answered(1).is_empty());
        assert_eq!(reaps.owners_done(), nodes(&["d@h"]));
        reaps.hold(nodes(&["c@h"]), BTreeSet::from([3]), false);
        reaps.strike(&"c@h".to_owned());
        assert!(reaps.is_empty());
    }
}
