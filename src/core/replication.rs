//! Replicas: which nodes run a child when the replication factor is above 1, which of them is
//! active, and which replicas must be told that their role changed.
//!
//! Every node decides alone, from its registry copy and the ring, and reaches the same answer
//! as the others once they see the same members (and, for a child placed by its metadata, the
//! same version of its row): the **owners** of a child are its first k members on the ring (a
//! guided child's own nodes), and the **active** role belongs to the
//! first owner, in that order, that is reachable. When the active replica's node goes down it
//! leaves the ring, and the next owner — which already runs a replica — is active at once: a
//! replicated child is unavailable for the failure detection time, never for a restart.
//!
//! The role goes to the owner, not to the first instance that happens to run: while the first
//! owner's instance is still starting, the others stay passive, so two nodes that agree on the
//! members never both call their replica active. Messages, which need an instance, go to the
//! best-ranked running one ([`ranked`]): the active owner's once it runs.
//!
//! Pure: the Coordinator and the routing read it; nothing here does IO.

use std::collections::BTreeMap;

use crate::config::ReplicationModel;
use crate::core::guided::Guided;
use crate::core::placement::HashRing;
use crate::model::{ChildId, Metadata, NodeName};

pub use crate::types::Role;

/// The nodes that should run child `id`, in order of preference (the first is the one that
/// would be active): its first `factor` ring owners, or a guided child's nodes that are
/// members (its ring owners when none is and its start allowed the fallback).
pub fn owners_of(
    ring: &HashRing,
    id: &ChildId,
    factor: usize,
    metadata: Option<&Metadata>,
    is_member: impl Fn(&NodeName) -> bool,
) -> Vec<NodeName> {
    if let Some(guided) = metadata.and_then(Guided::of) {
        let live: Vec<NodeName> = guided
            .nodes
            .iter()
            .filter(|n| is_member(n))
            .cloned()
            .collect();
        if !live.is_empty() || !guided.fallback {
            return live;
        }
    }
    ring.owners(id, factor.max(1))
        .into_iter()
        .cloned()
        .collect()
}

/// The nodes running a child, ranked the way messages pick among them: its owners in order,
/// then any other node running it (a replica about to move), lowest name first.
pub fn ranked<'a>(
    owners: &[NodeName],
    bound: impl IntoIterator<Item = &'a NodeName>,
) -> Vec<NodeName> {
    let mut bound: Vec<&NodeName> = bound.into_iter().collect();
    bound.sort_by_key(|n| {
        (
            owners.iter().position(|o| o == *n).unwrap_or(usize::MAX),
            (*n).clone(),
        )
    });
    bound.into_iter().cloned().collect()
}

/// Where a message goes: the best-ranked node running the child that `reachable` accepts.
pub fn first_reachable(ranked: &[NodeName], reachable: impl Fn(&str) -> bool) -> Option<&NodeName> {
    ranked.iter().find(|n| reachable(n))
}

/// The node holding the active role: the first owner that `reachable` accepts, whether or not
/// its instance runs yet.
pub fn active_owner(owners: &[NodeName], reachable: impl Fn(&str) -> bool) -> Option<&NodeName> {
    owners.iter().find(|n| reachable(n))
}

/// The role of the replica on `node` when `active` is the active replica.
pub fn role_of(node: &str, active: Option<&NodeName>, model: ReplicationModel) -> Role {
    match model {
        ReplicationModel::ActiveActive => Role::Active,
        ReplicationModel::ActivePassive if active.is_some_and(|a| a == node) => Role::Active,
        ReplicationModel::ActivePassive => Role::Passive,
    }
}

/// What a node knows of a child's row when a peer's start names it: the row's placement
/// (`nodes`, from its metadata), who authored that version, and its owners now.
pub struct KnownPlacement<'a> {
    /// The nodes the row's metadata places the child on.
    pub nodes: &'a [NodeName],
    /// The node that authored this version of the row.
    pub author: &'a NodeName,
    /// Its owners among the members ([`owners_of`] over the row's metadata).
    pub owners: &'a [NodeName],
}

/// Whether node `me` refuses a start of a child placed by its metadata, sent by `origin` with
/// the placement `asked` (which names `me`), because `me`'s own row places it elsewhere in a
/// way the start cannot be newer than. A start names no authored version, and a start
/// re-authors a known row: from a peer whose row is older it would author the old placement
/// again over the newer one, and until every node heard the result two nodes would each be the
/// first owner in their own row (two active replicas among nodes that see the same members).
/// Refused when `me` is not an owner in its row and either
/// - `me` authored that version: its own move away, which only another node's newer version
///   could undo; or
/// - every owner in it runs the child (`running`), and the start is not `origin` moving its
///   own slot to `me` (a cold move's start may overtake its re-authored row; a hot move's start
///   is what authors the move).
pub fn refuse_start_placed_elsewhere(
    me: &NodeName,
    origin: &NodeName,
    asked: &[NodeName],
    known: &KnownPlacement<'_>,
    running: impl Fn(&NodeName) -> bool,
) -> bool {
    if known.owners.contains(me) {
        return false;
    }
    if known.author == me {
        return true;
    }
    let moved_here = known.nodes.iter().map(|n| if n == origin { me } else { n });
    if asked.iter().eq(moved_here) {
        return false;
    }
    known.owners.iter().all(running)
}

/// The local replicas whose role differs from the one they were last told (`told`), with
/// their new role. A replica never told before counts as changed: it learns its role at start.
pub fn role_changes(
    told: &BTreeMap<ChildId, Role>,
    now: &BTreeMap<ChildId, Role>,
) -> Vec<(ChildId, Role)> {
    now.iter()
        .filter(|(id, role)| told.get(*id) != Some(*role))
        .map(|(id, role)| (id.clone(), *role))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(v: &[&str]) -> Vec<NodeName> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn owners_are_the_first_k_on_the_ring() {
        let ring = HashRing::new(["a", "b", "c", "d"]);
        let id = ChildId::from("x");
        let owners = owners_of(&ring, &id, 3, None, |_| true);
        assert_eq!(owners.len(), 3);
        assert_eq!(owners[0], *ring.owner(&id).unwrap());
        let expected: Vec<NodeName> = ring.owners(&id, 3).into_iter().cloned().collect();
        assert_eq!(owners, expected);
    }

    #[test]
    fn a_guided_child_is_owned_by_its_member_nodes() {
        let ring = HashRing::new(["a", "b", "c"]);
        let mut metadata = Metadata::new();
        Guided {
            nodes: names(&["c", "z"]),
            fallback: false,
            by_load: false,
        }
        .write(&mut metadata);
        let owners = owners_of(&ring, &ChildId::from("x"), 2, Some(&metadata), |n| {
            ring.contains(n)
        });
        assert_eq!(owners, names(&["c"]));
    }

    #[test]
    fn owners_rank_first_then_the_others_by_name() {
        let owners = names(&["c", "a"]);
        let bound = names(&["a", "z", "b", "c"]);
        assert_eq!(ranked(&owners, &bound), names(&["c", "a", "b", "z"]));
    }

    #[test]
    fn messages_go_to_the_first_reachable_running_replica() {
        let ranked = names(&["c", "a", "b"]);
        assert_eq!(first_reachable(&ranked, |_| true), Some(&"c".to_string()));
        assert_eq!(
            first_reachable(&ranked, |n| n != "c"),
            Some(&"a".to_string())
        );
        assert_eq!(first_reachable(&ranked, |_| false), None);
    }

    #[test]
    fn the_active_role_is_the_first_reachable_owners_even_before_it_runs() {
        let owners = names(&["c", "a"]);
        assert_eq!(active_owner(&owners, |_| true), Some(&"c".to_string()));
        assert_eq!(active_owner(&owners, |n| n != "c"), Some(&"a".to_string()));
    }

    #[test]
    fn roles_follow_the_model() {
        let a = "a".to_string();
        assert_eq!(
            role_of("a", Some(&a), ReplicationModel::ActivePassive),
            Role::Active
        );
        assert_eq!(
            role_of("b", Some(&a), ReplicationModel::ActivePassive),
            Role::Passive
        );
        assert_eq!(
            role_of("b", Some(&a), ReplicationModel::ActiveActive),
            Role::Active
        );
    }

    #[test]
    fn only_changed_or_new_roles_are_told() {
        let told = BTreeMap::from([
            (ChildId::from("x"), Role::Active),
            (ChildId::from("y"), Role::Passive),
        ]);
        let now = BTreeMap::from([
            (ChildId::from("x"), Role::Active),
            (ChildId::from("y"), Role::Active),
            (ChildId::from("z"), Role::Passive),
        ]);
        assert_eq!(
            role_changes(&told, &now),
            vec![
                (ChildId::from("y"), Role::Active),
                (ChildId::from("z"), Role::Passive)
            ]
        );
    }

    #[test]
    fn a_start_from_an_older_placement_is_refused_a_move_is_not() {
        let (a, b, c, d) = (
            "a".to_string(),
            "b".to_string(),
            "c".to_string(),
            "d".to_string(),
        );
        let placed = names(&["b", "c"]);
        let asked = names(&["a", "c"]);
        let (author_a, author_c): (&NodeName, &NodeName) = (&a, &c);
        let all_run = |_: &NodeName| true;
        // `a` moved the child to [b, c] itself: an older start naming it is refused.
        let mine = by_ref(&placed, author_a);
        assert!(refuse_start_placed_elsewhere(&a, &d, &asked, &mine, |_| {
            false
        }));
        // Another node's placement, running on every owner: refused...
        let theirs = by_ref(&placed, author_c);
        assert!(refuse_start_placed_elsewhere(
            &a, &d, &asked, &theirs, all_run
        ));
        // ...unless the start is `b` moving its own slot to `a` (a move for load).
        assert!(!refuse_start_placed_elsewhere(
            &a, &b, &asked, &theirs, all_run
        ));
        // Not every owner runs it: the start may be what re-creates a replica.
        assert!(!refuse_start_placed_elsewhere(
            &a,
            &d,
            &asked,
            &theirs,
            |n| *n == c
        ));
        // An owner in its own row takes the start.
        assert!(!refuse_start_placed_elsewhere(
            &b, &d, &placed, &theirs, all_run
        ));
    }

    fn by_ref<'a>(placed: &'a [NodeName], author: &'a NodeName) -> KnownPlacement<'a> {
        KnownPlacement {
            nodes: placed,
            author,
            owners: placed,
        }
    }

    proptest! {
        /// Whatever subset of nodes runs a child and whatever each node can reach: at most one
        /// running replica is active, and it is a reachable owner; a message goes to a running,
        /// reachable node, an owner whenever a reachable owner runs it.
        #[test]
        fn at_most_one_active_replica_per_view(
            members in proptest::collection::btree_set("[a-f]", 1..6),
            bound_mask in 0u8..64,
            down_mask in 0u8..64,
            child in "[a-z]{1,6}",
            k in 1usize..4,
        ) {
            let ring = HashRing::new(members.iter().cloned());
            let id = ChildId::from(child.as_str());
            let owners = owners_of(&ring, &id, k, None, |_| true);
            let all: Vec<NodeName> = members.iter().cloned().collect();
            let bound: Vec<NodeName> = all.iter().enumerate()
                .filter(|(i, _)| bound_mask & (1 << i) != 0).map(|(_, n)| n.clone()).collect();
            let down: Vec<NodeName> = all.iter().enumerate()
                .filter(|(i, _)| down_mask & (1 << i) != 0).map(|(_, n)| n.clone()).collect();
            let reachable = |n: &str| !down.iter().any(|d| d == n);
            let act = active_owner(&owners, reachable);
            let actives: Vec<&NodeName> = bound.iter()
                .filter(|n| role_of(n, act, ReplicationModel::ActivePassive) == Role::Active)
                .collect();
            prop_assert!(actives.len() <= 1);
            for a in actives {
                prop_assert!(owners.contains(a));
                prop_assert!(reachable(a));
            }
            let ranked = ranked(&owners, &bound);
            match first_reachable(&ranked, reachable) {
                Some(to) => {
                    prop_assert!(bound.contains(to) && reachable(to));
                    if bound.iter().any(|b| owners.contains(b) && reachable(b)) {
                        prop_assert!(owners.contains(to));
                    }
                }
                None => prop_assert!(bound.iter().all(|b| !reachable(b))),
            }
        }
    }
}
