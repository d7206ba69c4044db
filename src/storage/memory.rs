//! The default backend: an in-memory concurrent map, the counterpart of ETS.
//!
//! Readers never wait on a writer for long (a write locks one shard of the map), which keeps
//! `child_lookup` on the hot path cheap. Nothing survives a restart: the node rebuilds its copy
//! from its peers.

use dashmap::DashMap;

use super::{Commit, Mutation, Storage, StoredRow};
use crate::clock::Clock;
use crate::model::{ChildId, Row};

/// In-memory registry storage.
#[derive(Default)]
pub struct MemoryStorage {
    rows: DashMap<ChildId, StoredRow>,
    /// The time of day TTLs are measured with.
    clock: Clock,
}

impl MemoryStorage {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose TTLs follow `clock`.
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            rows: DashMap::new(),
            clock,
        }
    }

    /// Applies a batch; infallible in memory. Shared with the `durable` backend, which keeps its
    /// read copy here.
    pub fn apply_in_memory(&self, batch: &[Mutation]) {
        let now = self.clock.now_ms();
        for mutation in batch {
            match mutation {
                Mutation::Put { row, ttl } => {
                    let expires_at_ms = ttl.map(|ttl| now + ttl.as_millis() as u64);
                    self.rows.insert(
                        row.spec.id.clone(),
                        StoredRow {
                            row: row.clone(),
                            expires_at_ms,
                        },
                    );
                }
                Mutation::Remove(id) => {
                    self.rows.remove(id);
                }
                Mutation::Clear => self.rows.clear(),
            }
        }
    }

    /// Applies a batch it owns: like [`MemoryStorage::apply_in_memory`] but moves the rows in
    /// instead of cloning them (a row is half a dozen small allocations; every registry write
    /// of every node goes through here).
    pub fn apply_owned(&self, batch: Vec<Mutation>) {
        let now = self.clock.now_ms();
        for mutation in batch {
            match mutation {
                Mutation::Put { row, ttl } => {
                    let expires_at_ms = ttl.map(|ttl| now + ttl.as_millis() as u64);
                    self.rows
                        .insert(row.spec.id.clone(), StoredRow { row, expires_at_ms });
                }
                Mutation::Remove(id) => {
                    self.rows.remove(&id);
                }
                Mutation::Clear => self.rows.clear(),
            }
        }
    }

    /// The stored entry, expired or not (used to roll back a failed disk write).
    pub fn get_stored(&self, id: &ChildId) -> Option<StoredRow> {
        self.rows.get(id).map(|e| e.value().clone())
    }

    /// Replaces or removes the stored entry verbatim.
    pub fn restore_stored(&self, id: &ChildId, stored: Option<StoredRow>) {
        match stored {
            Some(stored) => {
                self.rows.insert(id.clone(), stored);
            }
            None => {
                self.rows.remove(id);
            }
        }
    }

    /// Every stored entry, expired or not.
    pub fn export_stored(&self) -> Vec<StoredRow> {
        self.rows.iter().map(|e| e.value().clone()).collect()
    }
}

impl Storage for MemoryStorage {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn submit(&self, batch: Vec<Mutation>) -> Commit {
        self.apply_owned(batch);
        Commit::ready(Ok(()))
    }

    fn get(&self, id: &ChildId) -> Option<Row> {
        let now = self.clock.now_ms();
        self.rows
            .get(id)
            .filter(|e| e.is_live(now))
            .map(|e| e.row.clone())
    }

    fn export_all(&self) -> Vec<Row> {
        let now = self.clock.now_ms();
        let mut rows: Vec<Row> = self
            .rows
            .iter()
            .filter(|e| e.is_live(now))
            .map(|e| e.row.clone())
            .collect();
        rows.sort_unstable_by(|a, b| a.spec.id.cmp(&b.spec.id));
        rows
    }

    fn len(&self) -> usize {
        let now = self.clock.now_ms();
        self.rows.iter().filter(|e| e.is_live(now)).count()
    }

    fn for_each_row(&self, f: &mut dyn FnMut(&Row)) {
        let now = self.clock.now_ms();
        for entry in self.rows.iter().filter(|e| e.is_live(now)) {
            f(&entry.row);
        }
    }

    fn contains(&self, id: &ChildId) -> bool {
        let now = self.clock.now_ms();
        self.rows.get(id).is_some_and(|e| e.is_live(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};
    use std::time::Duration;

    fn row(id: &str) -> Row {
        Row::authored(ChildSpec::new(id, "k"), Metadata::new(), "n@h", 0, false).unwrap()
    }

    #[test]
    fn put_get_remove_clear() {
        let s = MemoryStorage::new();
        s.insert(row("a")).unwrap();
        s.insert(row("b")).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(&"a".into()).unwrap().spec.id.as_str(), "a");
        s.remove(&"a".into()).unwrap();
        assert!(!s.contains(&"a".into()));
        s.clear_all().unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn expired_rows_are_filtered_on_read() {
        let s = MemoryStorage::new();
        s.apply(vec![
            Mutation::Put {
                row: row("short"),
                ttl: Some(Duration::from_millis(0)),
            },
            Mutation::Put {
                row: row("long"),
                ttl: Some(Duration::from_secs(3600)),
            },
        ])
        .unwrap();
        assert!(s.get(&"short".into()).is_none());
        assert!(s.get(&"long".into()).is_some());
        assert_eq!(s.len(), 1);
        assert_eq!(s.export_all().len(), 1);
        // The expired entry is still stored (swept by the janitor), just not visible.
        assert!(s.get_stored(&"short".into()).is_some());
    }
}
