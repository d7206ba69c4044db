//! Replicas being stopped on purpose, so that redistribution does not re-create them.
//!
//! A deliberate stop of a replicated child unbinds its replicas one node at a time: between the
//! first unbind and the last, the row looks like a child with replicas missing, which a
//! redistribution pass would start again on their owners — a stopped child must stay stopped.
//! So a node that sees a replica unbound on purpose (a local stop, or a peer's `Removed`) while
//! other replicas still run notes the child here, and redistribution leaves it alone until its
//! row is gone, it is started anew, or a stop's own timeout (`default_timeout`) passes: a stop
//! that did not reach every replica (a partition kept one away) leaves that replica to be
//! placed as usual, not stranded off its owners.

use dashmap::DashMap;

use super::HubShared;
use crate::model::{ChildId, Row};

/// Children with a replica stopped on purpose, with the monotonic ms it was seen.
#[derive(Default)]
pub(crate) struct ReplicaStops(DashMap<ChildId, u64>);

impl HubShared {
    /// Notes that `node`'s replica of `row` is being stopped on purpose, if others still run.
    pub(crate) fn note_replica_stopping(&self, row: &Row, node: &str) {
        if self.config.replication_factor <= 1 {
            return;
        }
        if row.node_pids.keys().any(|n| n != node) {
            self.replica_stops
                .0
                .insert(row.spec.id.clone(), self.mono_ms());
        }
    }

    /// The child's row is gone or it was started anew: its stop is over.
    pub(crate) fn forget_replica_stop(&self, id: &ChildId) {
        if !self.replica_stops.0.is_empty() {
            self.replica_stops.0.remove(id);
        }
    }

    /// The children redistribution must not re-create now (their stop is under way).
    pub(crate) fn replicas_stopping(&self) -> Vec<ChildId> {
        let stop_timeout = match self.config.default_timeout() {
            t if t.is_zero() => std::time::Duration::from_secs(10),
            t => t,
        };
        let ttl = stop_timeout.min(self.config.stub_ttl()).as_millis() as u64;
        let now = self.mono_ms();
        self.replica_stops
            .0
            .retain(|_, seen| now.saturating_sub(*seen) < ttl);
        self.replica_stops
            .0
            .iter()
            .map(|e| e.key().clone())
            .collect()
    }
}
