//! The declared list as the API shows it (`Hub::declared_children`, `HubMsg::DeclaredChildren`).

use serde::{Deserialize, Serialize};

use crate::core::declared_list::DeclaredChild;
use crate::hub::HubShared;
use crate::model::NodeName;

/// This node's copy of the declared list, as last persisted here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredView {
    /// The list's version (the number of mutations behind it; 0 = never mutated).
    pub version: u64,
    /// The node that authored the latest mutation.
    pub last_mutated_by: Option<NodeName>,
    /// The declared children, by id.
    pub children: Vec<DeclaredChild>,
    /// The list is lost on this node and its reconcile parked (no starts, no stops) until a
    /// copy is restored or an operator clears it; `children` is then empty and means nothing.
    pub parked: bool,
}

pub(crate) fn declared_children(hub: &HubShared) -> Option<DeclaredView> {
    let snapshot = hub.recovery.as_ref()?.snapshot();
    Some(DeclaredView {
        version: snapshot.list.version(),
        last_mutated_by: snapshot.list.last_mutated_by().map(str::to_owned),
        children: snapshot.list.children().values().cloned().collect(),
        parked: snapshot.parked,
    })
}
