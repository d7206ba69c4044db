//! What a node does at boot with the registry rows its backend kept on disk (`recovery_replay`).
//!
//! A disk backend (`lmdb`, `durable`) gives the hub back every row it held when the node went
//! down: rows of the children this node ran (their pids died with it), and its copies of the
//! rows of its peers' children. What the node may do with them depends on who restores
//! children after an outage (docs/storage.md, docs/recovery.md "What survives"):
//!
//! - **`recovery_replay: false`** (the hub runs auto-recovery): "restoration flows through the
//!   reconcile, never through the backend open, so a returning node cannot republish its stale
//!   view as fact". What runs after an outage is exactly the declared list. A row of a plain
//!   (non-durable) child is therefore removed at open, whichever node it names: nothing declares
//!   it, and a kept row would be re-placed by the cluster's redistribution, or linger in
//!   lookups. A durable row is kept: it is the evidence that durable children existed (a
//!   missing declared list is then parked, never read as empty; a first boot seeds the list
//!   from such rows), and once this node's reconcile has run, a row that says where a declared
//!   child ran. The rows of the children this node ran are held from its redistribution passes
//!   until its first reconcile round completed: restoring them is the round's work, and the
//!   round knows the stops this node missed.
//! - **`recovery_replay: true`** (no auto-recovery): the rows are the only record, and the disk
//!   backends are a "restart-survival on a single node". Every row is kept; the
//!   children this node ran are restarted (re-placed on their ring owner) once the node has
//!   heard its peers: after [`BootHold::due_ms`] and once every peer that came up has delivered
//!   its registry. In that order, a child that a peer re-placed while this node was down (it
//!   runs there now, as the peer's registry says) is not started a second time. A node given
//!   seeds ([`BootHold::needs_peer`]) also waits until at least one peer delivered its registry,
//!   however long that takes: a node that has heard nobody cannot tell "my cluster is gone" from
//!   "my cluster runs without me" (a wrong cookie, a partition, a TLS misconfiguration), and in
//!   the second case its cluster re-placed these children already, so restarting them would
//!   run each twice. Being judged isolated does not end the wait; a node meant to run alone is
//!   started without seeds.
//!
//! Either way this node's bindings are dropped at open: they name processes of a previous run;
//! and every row whose TTL ran out is removed ([`BootRows::remove_expired`]): the store keeps it
//! until removed, and a wall clock set back would make it live again.
//!
//! Pure: the Registry applies [`plan_boot_rows`] to the store before it takes any write; the
//! Coordinator keeps the [`BootHold`] and carries out [`plan_replay`].

use std::collections::BTreeSet;

use crate::core::placement::HashRing;
use crate::core::redistribution::{
    plan_replicated_redistribution, DeclaredKnowledge, Liveness, RedistributionPlan,
};
use crate::model::{ChildId, NodeName, Row};

/// Whether a hub restores children from the rows its registry backend kept (the seed's
/// `recovery_replay`): `true` without auto-recovery, `false` with it.
pub fn recovery_replay(auto_recovery: bool) -> bool {
    !auto_recovery
}

/// What to do with the rows a backend kept, decided once at open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootRows {
    /// Rows kept without this node's binding (its pids died with its previous run).
    pub unbind: Vec<ChildId>,
    /// Rows removed from the store (plain children's rows when replay is off).
    pub remove: Vec<ChildId>,
    /// The kept rows of the children this node ran: held from this node's redistribution
    /// passes until [`BootHold::released`], then (replay on) restarted by [`plan_replay`].
    pub hosted: BTreeSet<ChildId>,
}

impl BootRows {
    /// Whether the store needs no change.
    pub fn is_empty(&self) -> bool {
        self.unbind.is_empty() && self.remove.is_empty()
    }

    /// Adds to [`BootRows::remove`] the rows the backend still stores although their TTL ran
    /// out (`expired`, [`crate::storage::Storage::expired_ids`]), whatever the mode. Such a row
    /// (a stub left by a reap or a handover) was already gone in the previous run, but the
    /// store keeps it until it is removed, and a wall clock set back past its expiry makes it
    /// live again: a plain child's stub would then be re-placed after a whole-cluster outage,
    /// where only the declared list may return. An id the plan decided on already (it turned
    /// live or expired between the two reads) keeps that decision.
    pub fn remove_expired(&mut self, expired: impl IntoIterator<Item = ChildId>) {
        let decided: BTreeSet<ChildId> = self
            .remove
            .iter()
            .chain(self.unbind.iter())
            .cloned()
            .collect();
        let mut expired: Vec<ChildId> = expired
            .into_iter()
            .filter(|id| !decided.contains(id))
            .collect();
        expired.sort_unstable();
        expired.dedup();
        self.remove.append(&mut expired);
    }
}

/// Decides what happens to each row `me`'s backend kept (see the module doc).
///
/// Promises: with `replay` off no plain row is kept; no durable row is ever removed; every row
/// bound to `me` that is kept is in `hosted` and in `unbind`; a row not bound to `me` is
/// never unbound; an id appears in at most one of `unbind` and `remove`.
pub fn plan_boot_rows<'a>(
    rows: impl IntoIterator<Item = &'a Row>,
    me: &NodeName,
    replay: bool,
) -> BootRows {
    let mut plan = BootRows::default();
    for row in rows {
        let id = &row.spec.id;
        if !replay && !row.hub.durable {
            plan.remove.push(id.clone());
        } else if row.node_pids.contains_key(me) {
            plan.unbind.push(id.clone());
            plan.hosted.insert(id.clone());
        }
    }
    plan
}

/// The children a booting node ran, held from its redistribution passes until it may restore
/// them (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootHold {
    /// The children held.
    pub hosted: BTreeSet<ChildId>,
    /// `recovery_replay`: whether this node restarts them itself when the hold ends.
    pub replay: bool,
    /// With replay on: the earliest time (ms, the hub's clock) the hold may end, so that peers
    /// that are up have had time to connect and deliver their registries.
    pub due_ms: u64,
    /// With replay on: the node was given seeds, so it replays only once it heard a peer (see
    /// the module doc). `false` for a node without seeds (a deliberate single node, for which
    /// the rows are the only record) or on a network that has no seeds to miss.
    pub needs_peer: bool,
    /// Whether a peer delivered its registry since the node booted.
    pub peer_heard: bool,
    /// Whether the wait for a peer past [`BootHold::due_ms`] was logged (once).
    pub wait_logged: bool,
}

impl BootHold {
    /// A hold of `plan.hosted`, due `wait_ms` after `now_ms`, that waits for a peer when
    /// `needs_peer`; `None` when nothing is held.
    pub fn new(
        plan: &BootRows,
        replay: bool,
        now_ms: u64,
        wait_ms: u64,
        needs_peer: bool,
    ) -> Option<Self> {
        (!plan.hosted.is_empty()).then(|| Self {
            hosted: plan.hosted.clone(),
            replay,
            due_ms: now_ms.saturating_add(wait_ms),
            needs_peer,
            peer_heard: false,
            wait_logged: false,
        })
    }

    /// A peer's registry was merged: the node has heard its cluster.
    pub fn heard_peer(&mut self) {
        self.peer_heard = true;
    }

    /// Whether the hold ends now. With replay on: once it is due, every peer that is up has
    /// delivered its registry (`settled`), so a child a peer runs by now is seen running there,
    /// and, for a node given seeds, at least one peer was heard. With replay off: once this
    /// node's first reconcile round completed (`recovered`), which restored every declared
    /// child and knows the stops the rows do not.
    pub fn released(&self, now_ms: u64, settled: bool, recovered: bool) -> bool {
        if self.replay {
            now_ms >= self.due_ms && settled && !self.waits_for_peer()
        } else {
            recovered
        }
    }

    /// Whether the replay waits for a peer only: the node was given seeds and heard none yet
    /// (it is joining, or isolated).
    pub fn waits_for_peer(&self) -> bool {
        self.replay && self.needs_peer && !self.peer_heard
    }
}

/// The restarts of a released hold with replay on: each held child that no live node runs (as
/// the rows read now, after the peers' registries were merged) is started on its owner among
/// the members, as a re-placement would. `rows` are the current rows of the held children
/// (a child whose row is gone, stopped meanwhile, is simply absent).
///
/// Promises: only children in `rows` are started; a child bound to a live node (this one, a
/// peer that is up or within its grace) is not started; each child goes to its owners.
pub fn plan_replay<'a>(
    rows: impl IntoIterator<Item = &'a Row>,
    ring: &HashRing,
    factor: usize,
    live: Liveness<'_>,
) -> RedistributionPlan {
    let mut plan = plan_replicated_redistribution(
        rows,
        ring,
        factor,
        live,
        DeclaredKnowledge::Off,
        &BTreeSet::new(),
    );
    // A held child is unbound from this node; anything this node still runs is not the
    // replay's business (a later pass moves it).
    plan.migrations.clear();
    plan.excess.clear();
    plan
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::{ChildSpec, Metadata, Pid};

    fn row(id: &str, durable: bool, bound: &[&str]) -> Row {
        let mut row = Row::authored(
            ChildSpec::new(id, "counter"),
            Metadata::new(),
            "a@h",
            0,
            durable,
        )
        .unwrap();
        for (i, node) in bound.iter().enumerate() {
            row.node_pids.insert((*node).to_owned(), i as Pid + 1);
        }
        row
    }

    fn ids(list: &[&str]) -> Vec<ChildId> {
        list.iter().map(|i| ChildId::from(*i)).collect()
    }

    fn rows() -> Vec<Row> {
        vec![
            row("plain-mine", false, &["a@h"]),
            row("plain-peer", false, &["b@h"]),
            row("plain-stub", false, &[]),
            row("durable-mine", true, &["a@h"]),
            row("durable-peer", true, &["b@h"]),
        ]
    }

    #[test]
    fn with_auto_recovery_plain_rows_go_and_durable_rows_stay_unbound_from_this_node() {
        let me = "a@h".to_owned();
        let plan = plan_boot_rows(&rows(), &me, recovery_replay(true));
        assert_eq!(
            plan.remove,
            ids(&["plain-mine", "plain-peer", "plain-stub"])
        );
        assert_eq!(plan.unbind, ids(&["durable-mine"]));
        assert_eq!(plan.hosted, ids(&["durable-mine"]).into_iter().collect());
    }

    #[test]
    fn without_auto_recovery_every_row_stays_and_this_nodes_children_are_hosted() {
        let me = "a@h".to_owned();
        let plan = plan_boot_rows(&rows(), &me, recovery_replay(false));
        assert!(plan.remove.is_empty());
        assert_eq!(plan.unbind, ids(&["plain-mine", "durable-mine"]));
        assert_eq!(plan.hosted.len(), 2);
    }

    #[test]
    fn expired_rows_are_removed_in_either_mode_and_decided_ids_keep_their_decision() {
        let me = "a@h".to_owned();
        for replay in [false, true] {
            let mut plan = plan_boot_rows(&rows(), &me, replay);
            let before = plan.clone();
            plan.remove_expired(ids(&[
                "stub-z",
                "plain-mine",
                "durable-mine",
                "stub-y",
                "stub-z",
            ]));
            let mut want = before.remove.clone();
            want.extend(ids(&["stub-y", "stub-z"]));
            assert_eq!(plan.remove, want, "replay {replay}");
            assert_eq!(plan.unbind, before.unbind, "replay {replay}");
            assert_eq!(plan.hosted, before.hosted, "replay {replay}");
        }
        // Only expired rows kept: the store still needs the change.
        let mut plan = plan_boot_rows(&[], &me, false);
        plan.remove_expired(ids(&["stub"]));
        assert!(!plan.is_empty());
        assert_eq!(BootHold::new(&plan, false, 0, 100, true), None);
    }

    #[test]
    fn an_empty_store_holds_nothing() {
        let me = "a@h".to_owned();
        let plan = plan_boot_rows(&[], &me, true);
        assert!(plan.is_empty());
        assert_eq!(BootHold::new(&plan, true, 0, 100, true), None);
    }

    #[test]
    fn replay_waits_for_its_time_and_for_every_peer_registry() {
        let plan = plan_boot_rows(&rows(), &"a@h".to_owned(), true);
        let hold = BootHold::new(&plan, true, 1_000, 500, false).unwrap();
        assert!(!hold.released(1_200, true, false), "not due yet");
        assert!(
            !hold.released(1_500, false, false),
            "a peer's registry is missing"
        );
        assert!(hold.released(1_500, true, false));
    }

    #[test]
    fn a_node_given_seeds_replays_only_once_it_heard_a_peer_however_long_it_is_isolated() {
        let plan = plan_boot_rows(&rows(), &"a@h".to_owned(), true);
        let mut hold = BootHold::new(&plan, true, 1_000, 500, true).unwrap();
        assert!(hold.waits_for_peer());
        // Due, no peer up (so `settled` holds vacuously), isolated long since: still held,
        // since its cluster may run these children without it (a wrong cookie).
        assert!(!hold.released(1_500, true, false));
        assert!(!hold.released(u64::MAX, true, true));
        hold.heard_peer();
        assert!(!hold.waits_for_peer());
        assert!(!hold.released(1_200, true, false), "still not due");
        assert!(
            !hold.released(1_500, false, false),
            "another peer's registry is missing"
        );
        assert!(hold.released(1_500, true, false));
        // Without replay the hold never waits for a peer: the reconcile decides.
        let hold = BootHold::new(&plan, false, 1_000, 500, true).unwrap();
        assert!(!hold.waits_for_peer());
        assert!(hold.released(1_000, true, true));
    }

    #[test]
    fn without_replay_the_hold_ends_with_the_first_reconcile_round() {
        let plan = plan_boot_rows(&rows(), &"a@h".to_owned(), false);
        let hold = BootHold::new(&plan, false, 1_000, 0, true).unwrap();
        assert!(!hold.released(10_000, true, false));
        assert!(hold.released(1_000, false, true));
    }

    #[test]
    fn replay_starts_a_hosted_child_on_its_owner_unless_a_live_node_runs_it() {
        let me = "a@h".to_owned();
        let up: BTreeSet<NodeName> = ["b@h".to_owned()].into_iter().collect();
        let ring = HashRing::new([me.clone(), "b@h".to_owned()]);
        let live = Liveness {
            me: &me,
            up: &up,
            in_grace: &BTreeSet::new(),
        };
        // Hosted rows as they read after the boot sync: one unbound (nobody runs it), one
        // that a peer re-placed while this node was down, one bound to a node that is gone.
        let rows = [
            row("lost", false, &[]),
            row("moved", false, &["b@h"]),
            row("gone", false, &["c@h"]),
        ];
        let plan = plan_replay(&rows, &ring, 1, live);
        let started: BTreeMap<NodeName, Vec<ChildId>> = plan
            .replacements
            .iter()
            .map(|(n, rows)| (n.clone(), rows.iter().map(|r| r.spec.id.clone()).collect()))
            .collect();
        let all: BTreeSet<ChildId> = started.values().flatten().cloned().collect();
        assert_eq!(all, ids(&["gone", "lost"]).into_iter().collect());
        for (node, children) in &started {
            for id in children {
                assert_eq!(ring.owner(id), Some(node), "{id} goes to its owner");
            }
        }
        assert!(plan.migrations.is_empty() && plan.excess.is_empty());
    }

    #[test]
    fn a_lone_node_replays_every_unbound_hosted_child_on_itself() {
        let me = "a@h".to_owned();
        let ring = HashRing::new([me.clone()]);
        let none = BTreeSet::new();
        let live = Liveness {
            me: &me,
            up: &none,
            in_grace: &none,
        };
        let rows = [row("x", false, &[]), row("y", true, &[])];
        let plan = plan_replay(&rows, &ring, 1, live);
        assert_eq!(plan.replacing(), 2);
        assert_eq!(plan.replacements.keys().collect::<Vec<_>>(), vec![&me]);
    }
}
