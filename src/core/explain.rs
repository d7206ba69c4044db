//! Why a child is where it is: the answer behind `GET /v1/children/{id}/explain`.
//!
//! An operator looking at one child wants one word for its situation, not the inputs the hub
//! placed it by. Those inputs are already on every node — its registry row (where it is bound),
//! the members, the ring and the row's recorded placement (where it belongs), the declared list
//! (whether a round owes it a start) and the flags of partition mode and hot moves — so the word
//! is a pure function of them, decided the same way on every node that sees the same facts.
//!
//! The order of the checks is the order of precedence: a child that is not running is
//! explained by what keeps it from running (a split, a parked list, a round to come, a guided
//! node to come back); a child bound on a node that is down waits for that node's grace; a
//! child running is explained by the rule that put it there (its recorded placement, the ring,
//! its replicas), and a child running elsewhere than that rule says is moving.
//!
//! Pure: the admin API gathers the facts from the hub and shows the answer.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::core::guided::Guided;
use crate::model::NodeName;

/// Why a child is where it is (its snake_case name is the admin API's `why`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// It runs on its owner on the hash ring.
    RingOwner,
    /// It runs where its start recorded it (a guided start, or the load balancer's choice),
    /// or it waits for that node to come back.
    Guided,
    /// It runs as replicas on its owners (replication factor above 1); each instance's role
    /// says which one answers.
    Replica,
    /// The node it is bound on is down, and within its node-down grace: it is re-placed only
    /// if that node stays away past the grace.
    WaitingForGrace,
    /// It runs elsewhere than where it belongs now, or on two nodes at once, or a hot move of
    /// it is under way: a redistribution is moving it.
    Migrating,
    /// It is declared but not running: the next reconcile round starts it.
    DeclaredWaitingForRound,
    /// It is declared but not running, and the declared list is parked on this node: nothing
    /// starts it until the list is restored or an operator clears it.
    Parked,
    /// This node's side of a split has no quorum: its children are stopped until quorum returns.
    Partitioned,
    /// It is known but runs nowhere, and nothing above explains why (a stub left by a node
    /// that is gone, awaiting re-placement or expiry).
    NotRunning,
}

impl Why {
    /// Its name in JSON and in the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Why::RingOwner => "ring_owner",
            Why::Guided => "guided",
            Why::Replica => "replica",
            Why::WaitingForGrace => "waiting_for_grace",
            Why::Migrating => "migrating",
            Why::DeclaredWaitingForRound => "declared_waiting_for_round",
            Why::Parked => "parked",
            Why::Partitioned => "partitioned",
            Why::NotRunning => "not_running",
        }
    }
}

/// What the hub knows about one child, as of now, on the node asked.
#[derive(Clone, Debug, Default)]
pub struct ChildFacts<'a> {
    /// This node's registry copy holds a row for the child.
    pub in_registry: bool,
    /// The nodes its row binds (where it runs or ran), sorted.
    pub bound_on: Vec<NodeName>,
    /// The hub's members, this node included.
    pub members: BTreeSet<NodeName>,
    /// Where the child belongs now (`HubShared::owners_of`: its recorded placement if it has
    /// one, else its ring owners), the first one the active one.
    pub belongs_on: Vec<NodeName>,
    /// Its recorded placement, if its row has one.
    pub guided: Option<&'a Guided>,
    /// The hub's replication factor.
    pub replication_factor: usize,
    /// The child is in this node's copy of the declared list.
    pub declared: bool,
    /// This node's declared list is parked.
    pub parked: bool,
    /// This node is in partition mode.
    pub partitioned: bool,
    /// A hot move of it away from this node is under way.
    pub moving: bool,
}

/// The answer: one reason and a sentence for a human.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The reason.
    pub why: Why,
    /// What the reason means for this child, in one sentence.
    pub detail: String,
}

fn explained(why: Why, detail: String) -> Explanation {
    Explanation { why, detail }
}

fn list(nodes: &[NodeName]) -> String {
    if nodes.is_empty() {
        "no node".to_owned()
    } else {
        nodes.join(", ")
    }
}

/// Why the child of `facts` is where it is.
pub fn explain(facts: &ChildFacts<'_>) -> Explanation {
    let live: Vec<&NodeName> = facts
        .bound_on
        .iter()
        .filter(|n| facts.members.contains(*n))
        .collect();
    let down: Vec<NodeName> = facts
        .bound_on
        .iter()
        .filter(|n| !facts.members.contains(*n))
        .cloned()
        .collect();
    if live.is_empty() && down.is_empty() {
        return not_running(facts);
    }
    if live.is_empty() {
        return explained(
            Why::WaitingForGrace,
            format!(
                "it is bound on {}, which is down: it is re-placed on {} only if that node stays \
                 away past its node-down grace",
                list(&down),
                list(&facts.belongs_on)
            ),
        );
    }
    if facts.moving {
        return explained(
            Why::Migrating,
            "a hot move of it away from this node is under way".into(),
        );
    }
    let factor = facts.replication_factor.max(1);
    if live.len() > factor {
        return explained(
            Why::Migrating,
            format!(
                "it runs on {} nodes ({}) where {factor} belong: a move is under way and the \
                 old instance is about to stop",
                live.len(),
                list(&facts.bound_on)
            ),
        );
    }
    let misplaced: Vec<NodeName> = live
        .iter()
        .filter(|n| !facts.belongs_on.contains(n))
        .map(|n| (*n).clone())
        .collect();
    if !misplaced.is_empty() {
        return explained(
            Why::Migrating,
            format!(
                "it runs on {} but belongs on {} now: a redistribution moves it",
                list(&misplaced),
                list(&facts.belongs_on)
            ),
        );
    }
    if factor > 1 {
        let waiting = if down.is_empty() {
            String::new()
        } else {
            format!("; its replica on {} is down, within its grace", list(&down))
        };
        return explained(
            Why::Replica,
            format!(
                "it runs as replicas on its owners {} (replication factor {factor}){waiting}",
                list(&facts.belongs_on)
            ),
        );
    }
    match facts.guided {
        Some(guided) if live.iter().all(|n| guided.nodes.contains(n)) => {
            let by = if guided.by_load {
                "the load balancer placed it there (by load)"
            } else {
                "its start named that node"
            };
            explained(
                Why::Guided,
                format!("it runs on {}: {by}", list(&facts.bound_on)),
            )
        }
        Some(guided) => explained(
            Why::RingOwner,
            format!(
                "its recorded node{} {} {} gone and it may fall back: it runs on its ring owner {}",
                if guided.nodes.len() > 1 { "s" } else { "" },
                list(&guided.nodes),
                if guided.nodes.len() > 1 { "are" } else { "is" },
                list(&facts.bound_on)
            ),
        ),
        None => explained(
            Why::RingOwner,
            format!(
                "it runs on its owner on the hash ring, {}",
                list(&facts.bound_on)
            ),
        ),
    }
}

/// A child bound nowhere: what keeps it from running.
fn not_running(facts: &ChildFacts<'_>) -> Explanation {
    if facts.partitioned {
        return explained(
            Why::Partitioned,
            "this node's side of the cluster has no quorum: its children are stopped until \
             quorum returns"
                .into(),
        );
    }
    if facts.declared && facts.parked {
        return explained(
            Why::Parked,
            "it is declared, but the declared list is parked on this node: nothing starts it \
             until the list is restored or an operator clears it"
                .into(),
        );
    }
    if let Some(guided) = facts.guided {
        let waiting = !guided.fallback && !guided.nodes.iter().any(|n| facts.members.contains(n));
        if waiting {
            return explained(
                Why::Guided,
                format!(
                    "it waits for its node {} to come back (its start allowed no fallback)",
                    list(&guided.nodes)
                ),
            );
        }
    }
    if facts.declared {
        return explained(
            Why::DeclaredWaitingForRound,
            format!(
                "it is declared and not running: the next reconcile round starts it on {}",
                list(&facts.belongs_on)
            ),
        );
    }
    let detail = if facts.in_registry {
        format!(
            "its row is bound on no node (a stub of a node that is gone): it is re-placed on {} \
             or expires",
            list(&facts.belongs_on)
        )
    } else {
        "this node's registry holds no row for it".to_owned()
    };
    explained(Why::NotRunning, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<NodeName> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    /// A child of a three-node hub, bound on `bound`, belonging on `belongs`.
    fn facts(bound: &[&str], belongs: &[&str]) -> ChildFacts<'static> {
        ChildFacts {
            in_registry: true,
            bound_on: nodes(bound),
            members: nodes(&["a", "b", "c"]).into_iter().collect(),
            belongs_on: nodes(belongs),
            replication_factor: 1,
            ..ChildFacts::default()
        }
    }

    #[test]
    fn a_child_on_its_ring_owner_is_there_because_of_the_ring() {
        let e = explain(&facts(&["b"], &["b"]));
        assert_eq!(e.why, Why::RingOwner);
        assert!(e.detail.contains('b'), "{}", e.detail);
    }

    #[test]
    fn a_child_on_its_recorded_node_is_guided_and_says_who_chose() {
        let named = Guided {
            nodes: nodes(&["c"]),
            fallback: false,
            by_load: false,
        };
        let mut f = facts(&["c"], &["c"]);
        f.guided = Some(&named);
        let e = explain(&f);
        assert_eq!(e.why, Why::Guided);
        assert!(e.detail.contains("named"), "{}", e.detail);

        let by_load = Guided {
            by_load: true,
            ..named.clone()
        };
        f.guided = Some(&by_load);
        assert!(explain(&f).detail.contains("load"));
    }

    #[test]
    fn a_guided_child_that_fell_back_runs_on_its_ring_owner() {
        let gone = Guided {
            nodes: nodes(&["z"]),
            fallback: true,
            by_load: false,
        };
        let mut f = facts(&["a"], &["a"]);
        f.guided = Some(&gone);
        assert_eq!(explain(&f).why, Why::RingOwner);
    }

    #[test]
    fn a_guided_child_whose_node_is_gone_without_fallback_waits_for_it() {
        let gone = Guided {
            nodes: nodes(&["z"]),
            fallback: false,
            by_load: false,
        };
        let mut f = facts(&[], &["z"]);
        f.guided = Some(&gone);
        let e = explain(&f);
        assert_eq!(e.why, Why::Guided);
        assert!(e.detail.contains("waits"), "{}", e.detail);
    }

    #[test]
    fn replicas_on_their_owners_are_replicas_even_with_one_down() {
        let mut f = facts(&["a", "b"], &["a", "b"]);
        f.replication_factor = 2;
        assert_eq!(explain(&f).why, Why::Replica);
        f.bound_on = nodes(&["a", "gone"]);
        let e = explain(&f);
        assert_eq!(e.why, Why::Replica);
        assert!(e.detail.contains("gone"), "{}", e.detail);
    }

    #[test]
    fn a_child_bound_only_on_a_down_node_waits_for_its_grace() {
        let e = explain(&facts(&["gone"], &["a"]));
        assert_eq!(e.why, Why::WaitingForGrace);
        assert!(e.detail.contains("gone"), "{}", e.detail);
    }

    #[test]
    fn a_child_away_from_its_owner_or_on_two_nodes_or_handed_over_is_migrating() {
        assert_eq!(explain(&facts(&["a"], &["b"])).why, Why::Migrating);
        assert_eq!(explain(&facts(&["a", "b"], &["b"])).why, Why::Migrating);
        let mut f = facts(&["b"], &["b"]);
        f.moving = true;
        assert_eq!(explain(&f).why, Why::Migrating);
    }

    #[test]
    fn a_declared_child_not_running_waits_for_a_round_unless_the_list_is_parked() {
        let mut f = facts(&[], &["a"]);
        f.in_registry = false;
        f.declared = true;
        assert_eq!(explain(&f).why, Why::DeclaredWaitingForRound);
        f.parked = true;
        assert_eq!(explain(&f).why, Why::Parked);
        f.partitioned = true;
        assert_eq!(explain(&f).why, Why::Partitioned, "a split explains first");
    }

    #[test]
    fn a_stub_nothing_owes_a_start_is_not_running() {
        let e = explain(&facts(&[], &["a"]));
        assert_eq!(e.why, Why::NotRunning);
        assert!(e.detail.contains("stub"), "{}", e.detail);
    }

    #[test]
    fn names_are_the_serde_names() {
        for why in [
            Why::RingOwner,
            Why::Guided,
            Why::Replica,
            Why::WaitingForGrace,
            Why::Migrating,
            Why::DeclaredWaitingForRound,
            Why::Parked,
            Why::Partitioned,
            Why::NotRunning,
        ] {
            assert_eq!(serde_json::to_value(why).unwrap(), why.name());
        }
    }
}
