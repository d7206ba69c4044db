//! What one operation of a Registry write turn does to one child's row: the row to store (or
//! remove, or keep as an expiring stub), what the hooks and events report once it is committed,
//! and what this node tells its peers of its own observation.
//!
//! The Registry actor is the single writer of its node's copy. It reads each row as it stands
//! after the turn's earlier operations (its overlay), asks this module what the operation does
//! to it, and records the answer before the next operation reads the row again; it owns the
//! storage, the clock (a stub's expiry), the wire and the hooks. The rules the copies of all
//! nodes rely on are here, each a function of the row and the operation:
//! - a node speaks for its own observations only: what it tells its peers is its own binding
//!   ([`own_view`]), and a peer's upsert changes only that peer's binding ([`merge_upsert`]);
//! - re-authoring a known child makes a version that wins every merge (a higher epoch);
//! - a row nobody runs goes when its child was stopped on purpose, and stays as a stub that
//!   expires when it was handed over or its node is gone (the re-placement pass still finds its
//!   spec);
//! - a write that changes nothing is not made (a disk backend would fsync for nothing every sync
//!   interval).
//!
//! Pure: rows, ids and durations in, a [`RowChange`] out.

use std::cmp::Ordering;
use std::time::Duration;

use crate::model::{
    apply_observation, merge_into, merge_rows_owned, stamp_cmp, ChildId, HubMeta, NodeName, Pid,
    Row,
};

/// What happened to a row, reported (hooks, events) once the turn is committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowEffect {
    /// `node` runs the child as `pid` (`new_row`: the row did not exist before).
    Bound {
        /// The child.
        id: ChildId,
        /// The node that runs it.
        node: NodeName,
        /// Its instance there.
        pid: Pid,
        /// The row is new.
        new_row: bool,
    },
    /// `node` runs the child as another instance.
    PidUpdated {
        /// The child.
        id: ChildId,
        /// The node.
        node: NodeName,
        /// The instance before.
        old: Pid,
        /// The instance now.
        new: Pid,
    },
    /// `node` no longer runs the child.
    Unbound {
        /// The child.
        id: ChildId,
        /// The node.
        node: NodeName,
    },
    /// The row is gone.
    Removed {
        /// The child.
        id: ChildId,
    },
}

/// How the row is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowWrite {
    /// The row, kept.
    Put(Row),
    /// The row, expiring after the duration unless written again (a stub nobody runs).
    Stub(Row, Duration),
    /// The row goes.
    Remove(ChildId),
}

impl RowWrite {
    /// The child written.
    pub fn id(&self) -> &ChildId {
        match self {
            Self::Put(row) | Self::Stub(row, _) => &row.spec.id,
            Self::Remove(id) => id,
        }
    }
}

/// What this node tells its peers of its own observation of a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Told {
    /// The row with this node's binding only ([`own_view`]).
    Upsert(Row),
    /// This node handed the child over: its binding goes, the row stays until the new owner's
    /// upsert arrives.
    Unbind(ChildId),
    /// This node stopped the child on purpose: the row goes once nobody runs it.
    Removed {
        /// The child.
        id: ChildId,
        /// The stamp of the row it removed.
        hub: HubMeta,
    },
}

/// What one operation does to one row. Empty: nothing at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowChange {
    /// How the row is stored, if it is written.
    pub write: Option<RowWrite>,
    /// What is reported once committed, in order.
    pub effects: Vec<RowEffect>,
    /// What this node tells its peers.
    pub told: Option<Told>,
}

/// What every operation of a turn shares.
#[derive(Clone, Copy, Debug)]
pub struct WriteRules<'a> {
    /// This node.
    pub local: &'a str,
    /// The node has peers to tell.
    pub clustered: bool,
    /// How long a row handed over or released stays as a stub nobody runs.
    pub stub_ttl: Duration,
}

impl WriteRules<'_> {
    fn tell(&self, told: impl FnOnce() -> Told) -> Option<Told> {
        self.clustered.then(told)
    }

    fn tell_own(&self, node: &str, told: impl FnOnce() -> Told) -> Option<Told> {
        (self.clustered && node == self.local).then(told)
    }
}

/// `row` as this node reports it to peers: only its own observation.
pub fn own_view(row: &Row, local: &str) -> Row {
    let mut row = row.clone();
    row.node_pids.retain(|node, _| node == local);
    row
}

/// What a start's record keeps of the row it writes over: its authored version and its
/// bindings (a store reads these without unpacking the row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// The row's authored version.
    pub epoch: u64,
    /// Its bindings, by node.
    pub node_pids: Vec<(NodeName, Pid)>,
}

impl Standing {
    /// What `row` holds of it.
    pub fn of(row: &Row) -> Self {
        Self {
            epoch: row.hub.epoch,
            node_pids: row
                .node_pids
                .iter()
                .map(|(node, pid)| (node.clone(), *pid))
                .collect(),
        }
    }
}

/// A start recorded `row` (bound on this node). Re-authoring a known child: the new version
/// wins every merge, and the other members' bindings (a child briefly on two nodes during a
/// handover or after a partition) are kept, for they speak for their own observations.
pub fn insert(
    rules: &WriteRules<'_>,
    current: Option<Standing>,
    mut row: Row,
    is_member: impl Fn(&str) -> bool,
) -> RowChange {
    let new_row = current.is_none();
    if let Some(current) = current {
        row.hub.epoch = row.hub.epoch.max(current.epoch + 1);
        for (node, pid) in current.node_pids {
            if node != rules.local && is_member(&node) {
                row.node_pids.entry(node).or_insert(pid);
            }
        }
    }
    let id = &row.spec.id;
    let effects = row
        .node_pids
        .iter()
        .map(|(node, pid)| RowEffect::Bound {
            id: id.clone(),
            node: node.clone(),
            pid: *pid,
            new_row,
        })
        .collect();
    RowChange {
        told: rules.tell(|| Told::Upsert(own_view(&row, rules.local))),
        effects,
        write: Some(RowWrite::Put(row)),
    }
}

/// A new version of a known child's authored part (its bindings as they stand); none for a
/// child without a row.
pub fn reauthor(rules: &WriteRules<'_>, current: Option<Row>, mut row: Row) -> Option<RowChange> {
    let current = current?;
    row.hub.epoch = row.hub.epoch.max(current.hub.epoch + 1);
    row.hub.changed_by = rules.local.to_owned();
    row.node_pids = current.node_pids;
    Some(RowChange {
        told: rules.tell(|| Told::Upsert(own_view(&row, rules.local))),
        effects: Vec::new(),
        write: Some(RowWrite::Put(row)),
    })
}

/// `node` runs the child as `pid` (a restart); none for a child without a row.
pub fn set_pid(
    rules: &WriteRules<'_>,
    current: Option<Row>,
    node: &str,
    pid: Pid,
) -> Option<RowChange> {
    let mut row = current?;
    let old = row.node_pids.get(node).copied();
    apply_observation(&mut row, node, Some(pid));
    let told = rules.tell_own(node, || Told::Upsert(own_view(&row, rules.local)));
    let (id, node) = (row.spec.id.clone(), node.to_owned());
    let effect = match old {
        Some(old) => RowEffect::PidUpdated {
            id,
            node,
            old,
            new: pid,
        },
        None => RowEffect::Bound {
            id,
            node,
            pid,
            new_row: false,
        },
    };
    Some(RowChange {
        told,
        effects: vec![effect],
        write: Some(RowWrite::Put(row)),
    })
}

/// `node` let the child go without stopping it for good (a move, partition mode): its binding
/// goes, and a row left with none stays as a stub. None for a child without a row.
pub fn release(rules: &WriteRules<'_>, current: Option<Row>, node: &str) -> Option<RowChange> {
    let row = current?;
    let told = rules.tell_own(node, || Told::Unbind(row.spec.id.clone()));
    let mut change = unbind_row(row, node, Some(rules.stub_ttl));
    change.told = told;
    Some(change)
}

/// `node` stopped the child on purpose: its binding goes, and a row left with none goes too.
/// The row is written even when `node` did not run it. None for a child without a row.
pub fn unbind(rules: &WriteRules<'_>, current: Option<Row>, node: &str) -> Option<RowChange> {
    let mut row = current?;
    let id = row.spec.id.clone();
    let told = rules.tell_own(node, || Told::Removed {
        id: id.clone(),
        hub: row.hub.clone(),
    });
    let mut effects = Vec::new();
    if row.node_pids.contains_key(node) {
        effects.push(RowEffect::Unbound {
            id: id.clone(),
            node: node.to_owned(),
        });
    }
    apply_observation(&mut row, node, None);
    let write = if row.node_pids.is_empty() {
        effects.push(RowEffect::Removed { id: id.clone() });
        RowWrite::Remove(id)
    } else {
        RowWrite::Put(row)
    };
    Some(RowChange {
        write: Some(write),
        effects,
        told,
    })
}

/// [`unbind`] of the row's only binding, `node`'s, on a node that tells its peers nothing
/// (not clustered): the row goes. What a stop of a child that ran on one node does, planned
/// from the row's bindings alone, without reading its spec, arguments and metadata.
pub fn unbind_sole(rules: &WriteRules<'_>, id: ChildId, node: &str) -> Option<RowChange> {
    if rules.clustered {
        // A clustered node tells its peers the row's authored part (`Told::Removed`).
        return None;
    }
    Some(RowChange {
        effects: vec![
            RowEffect::Unbound {
                id: id.clone(),
                node: node.to_owned(),
            },
            RowEffect::Removed { id: id.clone() },
        ],
        write: Some(RowWrite::Remove(id)),
        told: None,
    })
}

/// Tells the peers this node's observation of the row again; writes nothing.
pub fn announce(rules: &WriteRules<'_>, current: Option<&Row>) -> RowChange {
    RowChange {
        told: current.and_then(|row| rules.tell(|| Told::Upsert(own_view(row, rules.local)))),
        ..RowChange::default()
    }
}

/// Why a stale row is not removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// There is no such row.
    Absent,
    /// A node runs the child by now.
    BoundMeanwhile,
}

/// A stale row (durable, undeclared, bound nowhere) goes, unless a node runs it by now.
pub fn remove_unbound(rules: &WriteRules<'_>, current: Option<Row>) -> Result<RowChange, Kept> {
    let row = current.ok_or(Kept::Absent)?;
    if !row.node_pids.is_empty() {
        return Err(Kept::BoundMeanwhile);
    }
    let told = rules.tell(|| Told::Removed {
        id: row.spec.id.clone(),
        hub: row.hub.clone(),
    });
    Ok(RowChange {
        told,
        ..removal(row.spec.id)
    })
}

/// Removes `node`'s binding of `row`; the row goes when no binding is left, or becomes a stub
/// expiring after `stub_ttl` when given. Nothing when `node` did not run it.
pub fn unbind_row(mut row: Row, node: &str, stub_ttl: Option<Duration>) -> RowChange {
    if !row.node_pids.contains_key(node) {
        return RowChange::default();
    }
    let id = row.spec.id.clone();
    let mut effects = vec![RowEffect::Unbound {
        id: id.clone(),
        node: node.to_owned(),
    }];
    apply_observation(&mut row, node, None);
    let write = if !row.node_pids.is_empty() {
        RowWrite::Put(row)
    } else if let Some(ttl) = stub_ttl {
        RowWrite::Stub(row, ttl)
    } else {
        effects.push(RowEffect::Removed { id: id.clone() });
        RowWrite::Remove(id)
    };
    RowChange {
        write: Some(write),
        effects,
        told: None,
    }
}

/// Peer `from`'s upsert of `row` merged into `current` ([`merge_rows_owned`]: the authored
/// part to the winner, `from`'s binding from the upsert, every other binding as it stands).
/// `stub`: `current` is a stub waiting to expire, which the write renews. The bindings of nodes
/// `gone` for good (past their grace, their reap due) go in the same write, as the reap would
/// unbind them, when a binding stays. None when the merge changes nothing.
pub fn merge_upsert(
    current: Option<Row>,
    row: Row,
    from: &str,
    stub: bool,
    gone: impl Fn(&str) -> bool,
) -> Option<RowChange> {
    let new_row = current.is_none();
    let old = current
        .as_ref()
        .and_then(|r| r.node_pids.get(from).copied());
    let (merged, changed) = match current {
        None => (merge_rows_owned(None, row, &from.to_owned()), true),
        Some(mut local) => {
            let changed = merge_into(&mut local, row, from);
            (local, changed)
        }
    };
    settle_merge(merged, changed, (old, new_row), from, stub, gone)
}

/// Whether a peer's upsert `row` outranks the stored row of epoch `stored`: a newer epoch,
/// whose authored part wins the merge whatever the stored spec, arguments and metadata are (a
/// re-placement, a move or a restart re-authors the row with the next epoch). Such an upsert
/// needs only the stored row's version and bindings ([`merge_outranking`]).
pub fn outranks(row: &Row, stored: u64) -> bool {
    row.hub.epoch > stored
}

/// [`merge_upsert`] of an upsert that [`outranks`] the stored row, from the stored row's
/// version and bindings alone: the same change, without reading the stored row's authored
/// part, which the upsert replaces.
pub fn merge_outranking(
    current: Standing,
    row: Row,
    from: &str,
    stub: bool,
    gone: impl Fn(&str) -> bool,
) -> Option<RowChange> {
    debug_assert!(
        outranks(&row, current.epoch),
        "the upsert must outrank the stored row"
    );
    let old = current
        .node_pids
        .iter()
        .find(|(node, _)| node == from)
        .map(|(_, pid)| *pid);
    let pid = row.node_pids.get(from).copied();
    let mut merged = Row {
        node_pids: current.node_pids.into_iter().collect(),
        ..row
    };
    apply_observation(&mut merged, from, pid);
    settle_merge(merged, true, (old, false), from, stub, gone)
}

/// The write and effects of a merged row: `old` is `from`'s binding before the merge, and
/// `new_row` whether there was no row.
fn settle_merge(
    mut merged: Row,
    changed: bool,
    (old, new_row): (Option<Pid>, bool),
    from: &str,
    stub: bool,
    gone: impl Fn(&str) -> bool,
) -> Option<RowChange> {
    let id = merged.spec.id.clone();
    let mut reaped = Vec::new();
    // A lone binding stays whoever holds it (the sender's, or the only one left), so `gone` is
    // asked only of rows bound twice or more: not of a fresh child's row.
    if merged.node_pids.len() > 1 && merged.node_pids.keys().any(|n| !gone(n)) {
        merged.node_pids.retain(|node, _| {
            // The sender speaks for itself, even in a late frame.
            let keep = node == from || !gone(node);
            if !keep {
                reaped.push(node.clone());
            }
            keep
        });
    }
    if !changed && !stub && reaped.is_empty() {
        return None;
    }
    let node = from.to_owned();
    let mut effects = match (old, merged.node_pids.get(from).copied()) {
        (None, Some(pid)) => vec![RowEffect::Bound {
            id: id.clone(),
            node,
            pid,
            new_row,
        }],
        (Some(old), Some(new)) if old != new => vec![RowEffect::PidUpdated {
            id: id.clone(),
            node,
            old,
            new,
        }],
        _ => Vec::new(),
    };
    effects.extend(reaped.into_iter().map(|node| RowEffect::Unbound {
        id: id.clone(),
        node,
    }));
    Some(RowChange {
        write: Some(RowWrite::Put(merged)),
        effects,
        told: None,
    })
}

/// The row goes: nobody runs the child, and it was stopped on purpose.
pub fn removal(id: ChildId) -> RowChange {
    RowChange {
        effects: vec![RowEffect::Removed { id: id.clone() }],
        write: Some(RowWrite::Remove(id)),
        told: None,
    }
}

/// What peer `from`'s deliberate removal (stamped `hub`) does to this node's copy of the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRemoval {
    /// `from` ran the child: its binding goes ([`unbind_row`] without a stub), and the row
    /// with it when nobody else runs it.
    Unbind,
    /// A stub nobody runs that its sender removed on purpose (a stop of a row no process backs,
    /// a stale durable row) goes here too ([`removal`]), or this node would re-place a child
    /// that was stopped.
    RemoveStub,
    /// Nothing: another node runs the child, or the row is newer than the removal.
    Keep,
}

/// Peer `from` removed the child on purpose, stamped `hub`; `row` is this node's copy.
pub fn removed_by_peer(row: &Row, from: &str, hub: &HubMeta) -> PeerRemoval {
    if row.node_pids.contains_key(from) {
        PeerRemoval::Unbind
    } else if row.node_pids.is_empty() && stamp_cmp(&row.hub, hub) != Ordering::Greater {
        PeerRemoval::RemoveStub
    } else {
        PeerRemoval::Keep
    }
}

#[cfg(test)]
#[path = "registry_write_tests.rs"]
mod tests;
