//! Telling local replicas their role (`redundancy_signal`, `ChildKinds::redundancy`).
//!
//! A replica's role follows from the ring and its row's bindings (`core::replication`), so it
//! can change when the members change (published by the Coordinator) or when another replica
//! of the same child starts or stops (a registry binding). Both call [`HubShared::tell_roles`];
//! only replicas whose role differs from the one they were last told are told, so a topology
//! change reaches only the replicas it concerns. A new instance of a child (a restart, a move)
//! counts as never told.

use crate::hub::shared::HubShared;
use crate::model::ChildId;

impl HubShared {
    /// Whether this hub tells replicas their role: a factor above 1 and a signal other than
    /// `none`.
    pub(crate) fn signals_roles(&self) -> bool {
        self.config.replication_factor > 1
            && self.config.redundancy_signal != crate::config::RedundancySignal::None
    }

    /// Tells the local instances among `ids` (every local child when `None`) whose role
    /// changed since they were last told, if the signal names their new role.
    pub(crate) fn tell_roles(&self, ids: Option<Vec<ChildId>>) {
        if !self.signals_roles() {
            return;
        }
        let ring = self.ring();
        let full_scan = ids.is_none();
        let ids = ids.unwrap_or_else(|| {
            self.local_children
                .iter()
                .map(|e| e.key().clone())
                .collect()
        });
        let mut told = self.told_roles.0.lock().unwrap_or_else(|e| e.into_inner());
        if full_scan {
            told.retain(|id, _| self.local_children.contains_key(id));
        }
        for id in ids {
            let Some(cell) = self.local_children.get(&id).map(|c| c.value().clone()) else {
                continue;
            };
            let Some(row) = self.storage.get(&id) else {
                continue;
            };
            if !row.node_pids.contains_key(&self.node) {
                // Not bound here yet: told once the registry records it.
                continue;
            }
            let roles = self.replica_roles(&ring, &id, Some(&row.metadata), row.node_pids.keys());
            let Some(role) = roles.iter().find(|(n, _)| *n == self.node).map(|(_, r)| *r) else {
                continue;
            };
            let instance = cell.get_id();
            if told.get(&id) == Some(&(instance, role)) {
                continue;
            }
            told.insert(id.clone(), (instance, role));
            if self.config.redundancy_signal.tells(role) {
                match self.kinds.tell_role(&row.spec.kind, &cell, role) {
                    Some(true) => {
                        tracing::debug!(child = %id, role = role.name(), "replica told its role")
                    }
                    Some(false) => {
                        tracing::debug!(child = %id, role = role.name(), "replica role not delivered (the child is stopping or of another message type)")
                    }
                    None => {}
                }
            }
        }
    }
}
