//! The simulator's `durable` registry backend: reads from memory, every write mirrored to a
//! [`SimulatedDisk`] in the registry's on-disk format and acknowledged once the disk applied it,
//! so a simulated node that restarts on its disk finds its rows (stale bindings, durable marks)
//! as a real `durable` node does.

use std::sync::Arc;

use super::memory::MemoryStorage;
use super::registry_file::{decode, encode_batch};
use super::{Commit, Mutation, SimulatedDisk, Storage, StorageError};
use crate::clock::Clock;
use crate::model::{ChildId, Row};

/// Registry storage in memory, mirrored to a simulated disk.
pub struct SimulatedDurableStorage {
    memory: MemoryStorage,
    disk: Arc<SimulatedDisk>,
    clock: Clock,
}

impl SimulatedDurableStorage {
    /// Opens the registry kept on `disk` and loads it into memory (an entry that does not
    /// decode is dropped, as a rotated store would lose it).
    pub fn open(disk: Arc<SimulatedDisk>, clock: Clock) -> Self {
        let memory = MemoryStorage::with_clock(clock.clone());
        let mut loaded = Vec::new();
        disk.for_each(|_, value| match decode(value) {
            Ok(stored) => loaded.push(stored),
            Err(e) => tracing::error!(error = %e, "undecodable registry entry on a simulated disk"),
        });
        for stored in loaded {
            let id = stored.row.spec.id.clone();
            memory.restore_stored(&id, Some(stored));
        }
        Self {
            memory,
            disk,
            clock,
        }
    }
}

impl Storage for SimulatedDurableStorage {
    fn name(&self) -> &'static str {
        "simulated-durable"
    }

    fn submit(&self, batch: Vec<Mutation>) -> Commit {
        let ops = match encode_batch(&batch, self.clock.now_ms()) {
            Ok(ops) => ops,
            Err(e) => return Commit::ready(Err(e)),
        };
        // Visible at once, durable when the commit resolves (the `durable` backend's promise; a
        // failed write here only comes with the node's crash, which takes the memory with it).
        self.memory.apply_owned(batch);
        let (sender, commit) = Commit::pending();
        if let Err(done) = self
            .disk
            .submit_with(ops, Box::new(move |outcome| sender.resolve(outcome)))
        {
            done(Err(StorageError::Closed));
        }
        commit
    }

    fn get(&self, id: &ChildId) -> Option<Row> {
        self.memory.get(id)
    }

    fn export_all(&self) -> Vec<Row> {
        self.memory.export_all()
    }

    fn len(&self) -> usize {
        self.memory.len()
    }

    fn expired_ids(&self) -> Vec<ChildId> {
        self.memory.expired_now()
    }

    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        self.memory.for_each_row(f)
    }

    fn for_each_placement(&self, f: &mut dyn FnMut(super::Placement<'_>)) {
        self.memory.for_each_placement(f)
    }

    fn page_after(&self, after: Option<&ChildId>, limit: usize) -> Vec<Row> {
        self.memory.page_after(after, limit)
    }

    fn contains(&self, id: &ChildId) -> bool {
        self.memory.contains(id)
    }

    fn counts(&self) -> Option<super::RegistryCounts> {
        Some(self.memory.counts_now())
    }

    fn binding_digest(&self, node: &str) -> Option<crate::core::sync_digest::BindingDigest> {
        Some(self.memory.digest_of(node))
    }

    fn rows_bound_to(&self, node: &str) -> Vec<Row> {
        self.memory.rows_on(node)
    }

    fn rows_where(&self, wanted: &mut dyn FnMut(super::Placement<'_>) -> bool) -> Vec<Row> {
        self.memory.rows_where(wanted)
    }

    fn generation(&self) -> Option<u64> {
        self.memory.generation()
    }
}
