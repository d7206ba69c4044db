//! When the bindings of a node gone for good are reaped: after the starts that re-place its
//! children.
//!
//! The reap unbinds the gone node from every row it ran: a scan of the registry and a write
//! of each of those rows. The Registry takes writes in the order they come, so a reap sent
//! before the re-placement's starts held up every start's record, and with it the start's
//! answer and the peers' copies, by the whole reap (about a fifth of a failover after the
//! grace, measured at 30,000 children). A start's record drops the bindings of nodes that are
//! not members anyway ([`crate::core::registry_write::insert`]), so the reap waits until the
//! re-placement's starts answered, and then unbinds only what other owners re-placed and the
//! children no node took.

use std::collections::BTreeSet;

use crate::model::NodeName;

/// Reaps waiting for the starts of the pass that re-places the reaped nodes' children.
#[derive(Debug, Default)]
pub struct HeldReaps {
    held: Vec<Held>,
}

#[derive(Debug)]
struct Held {
    nodes: Vec<NodeName>,
    awaiting: BTreeSet<u64>,
}

impl HeldReaps {
    /// Holds the reap of `nodes` until the start requests `awaiting` answered. Answers the
    /// nodes to reap at once when there is nothing to wait for.
    pub fn hold(&mut self, nodes: Vec<NodeName>, awaiting: BTreeSet<u64>) -> Vec<NodeName> {
        if awaiting.is_empty() || nodes.is_empty() {
            return nodes;
        }
        self.held.push(Held { nodes, awaiting });
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
        let mut due = Vec::new();
        self.held.retain_mut(|held| {
            held.awaiting.retain(|id| !settled(*id));
            if held.awaiting.is_empty() {
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
            reaps.hold(nodes(&["c@h"]), BTreeSet::new()),
            nodes(&["c@h"])
        );
        assert!(reaps.is_empty());
    }

    #[test]
    fn a_reap_goes_when_the_last_of_its_starts_answered() {
        let mut reaps = HeldReaps::default();
        assert!(reaps
            .hold(nodes(&["c@h"]), BTreeSet::from([1, 2, 3]))
            .is_empty());
        assert!(reaps.hold(nodes(&["d@h"]), BTreeSet::from([4])).is_empty());
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
        reaps.hold(nodes(&["c@h", "d@h"]), BTreeSet::from([5, 6]));
        assert!(reaps.release(|id| id == 5).is_empty());
        assert_eq!(reaps.release(|_| true), nodes(&["c@h", "d@h"]));
        assert!(reaps.is_empty());
    }
}
