//! The hot-move tables of one node (`core::handover`): which local children are moving away
//! and their old instances, and the states received for children about to start here. The
//! Coordinator runs the moves; the routing over these tables is
//! [`super::handoff_routing`].

use std::sync::Mutex;

use ractor::ActorCell;

use crate::core::handover::{Handoff, PendingImports};
use crate::model::{ChildId, TableHasher};

/// The hot-move tables of one hub on one node.
#[derive(Default)]
pub(crate) struct Handoffs {
    pub moving: dashmap::DashMap<ChildId, Handoff, TableHasher>,
    /// The old instances of the children moving away, until their move completes or is
    /// abandoned: a Coordinator that restarts mid-move routes them here again.
    pub(super) cells: dashmap::DashMap<ChildId, ActorCell, TableHasher>,
    /// The children among them whose state went to the new node: the start follows in the
    /// same turn, so a move of these cut short has an unknown outcome (the new node may run
    /// the child with its state).
    pub(super) sent: dashmap::DashSet<ChildId, TableHasher>,
    pub imports: Mutex<PendingImports>,
}
