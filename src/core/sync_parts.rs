//! Reassembly of a full sync sent in parts.
//!
//! A node's `FullSync` lists every child it runs; past a few tens of thousands of children that
//! list outgrows one wire frame, so it travels as numbered parts of one sync. The receiver must
//! apply the sync **whole**: a full sync unbinds the sender from every row it does not list, so
//! applying a part alone would unbind the children of the other parts. This keeps, per peer, the
//! parts of its newest sync until all have arrived; a newer sync replaces an unfinished older
//! one (its parts were lost), and a peer that goes down is forgotten.

use std::collections::HashMap;

use crate::model::{NodeName, Row};

struct Partial {
    sync_id: u64,
    parts: Vec<Option<Vec<Row>>>,
    received: usize,
}

/// The unfinished syncs of every peer (at most one per peer).
#[derive(Default)]
pub struct SyncAssembler {
    partial: HashMap<NodeName, Partial>,
}

impl SyncAssembler {
    /// An assembler holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes part `index` of `total` of `from`'s sync `sync_id`; returns every row of the sync
    /// once its last part arrived. Parts of an older sync than the one being assembled, a part
    /// number out of range, and repeats are ignored.
    pub fn accept(
        &mut self,
        from: &NodeName,
        sync_id: u64,
        index: u32,
        total: u32,
        rows: Vec<Row>,
    ) -> Option<Vec<Row>> {
        if total == 0 || index >= total {
            tracing::warn!(peer = %from, index, total, "full sync part out of range; dropped");
            return None;
        }
        let partial = self.partial.entry(from.clone()).or_insert_with(|| Partial {
            sync_id,
            parts: vec![None; total as usize],
            received: 0,
        });
        if sync_id < partial.sync_id {
            return None;
        }
        if sync_id > partial.sync_id || partial.parts.len() != total as usize {
            *partial = Partial {
                sync_id,
                parts: vec![None; total as usize],
                received: 0,
            };
        }
        let slot = &mut partial.parts[index as usize];
        if slot.is_none() {
            *slot = Some(rows);
            partial.received += 1;
        }
        if partial.received < partial.parts.len() {
            return None;
        }
        let done = self.partial.remove(from)?;
        Some(done.parts.into_iter().flatten().flatten().collect())
    }

    /// `peer` went down: its unfinished sync will never complete.
    pub fn forget(&mut self, peer: &str) {
        self.partial.remove(peer);
    }

    /// Peers with an unfinished sync (diagnostics).
    pub fn pending(&self) -> usize {
        self.partial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ChildSpec;

    fn rows(ids: &[&str]) -> Vec<Row> {
        ids.iter()
            .map(|id| {
                Row::authored(
                    ChildSpec::new(*id, "counter"),
                    Default::default(),
                    "b@h",
                    0,
                    false,
                )
                .unwrap()
            })
            .collect()
    }

    fn ids(rows: &[Row]) -> Vec<String> {
        let mut ids: Vec<String> = rows.iter().map(|r| r.id().to_string()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn a_sync_is_applied_only_once_every_part_arrived_in_any_order() {
        let mut a = SyncAssembler::new();
        let from = "b@h".to_string();
        assert!(a.accept(&from, 7, 2, 3, rows(&["e"])).is_none());
        assert!(a.accept(&from, 7, 0, 3, rows(&["a", "b"])).is_none());
        // A repeat changes nothing.
        assert!(a.accept(&from, 7, 0, 3, rows(&["zzz"])).is_none());
        let all = a.accept(&from, 7, 1, 3, rows(&["c", "d"])).unwrap();
        assert_eq!(ids(&all), ["a", "b", "c", "d", "e"]);
        assert_eq!(a.pending(), 0);
    }

    #[test]
    fn a_newer_sync_replaces_an_unfinished_one_and_older_parts_are_ignored() {
        let mut a = SyncAssembler::new();
        let from = "b@h".to_string();
        assert!(a.accept(&from, 1, 0, 2, rows(&["old"])).is_none());
        assert!(a.accept(&from, 2, 0, 2, rows(&["a"])).is_none());
        assert!(a.accept(&from, 1, 1, 2, rows(&["stale"])).is_none());
        let all = a.accept(&from, 2, 1, 2, rows(&["b"])).unwrap();
        assert_eq!(ids(&all), ["a", "b"]);
    }

    #[test]
    fn peers_assemble_apart_and_a_peer_that_goes_down_is_forgotten() {
        let mut a = SyncAssembler::new();
        let (b, c) = ("b@h".to_string(), "c@h".to_string());
        assert!(a.accept(&b, 1, 0, 2, rows(&["b1"])).is_none());
        assert!(a.accept(&c, 1, 0, 2, rows(&["c1"])).is_none());
        a.forget(&b);
        assert_eq!(a.pending(), 1);
        // b's second part alone does not complete anything.
        assert!(a.accept(&b, 1, 1, 2, rows(&["b2"])).is_none());
        assert_eq!(
            ids(&a.accept(&c, 1, 1, 2, rows(&["c2"])).unwrap()),
            ["c1", "c2"]
        );
    }

    #[test]
    fn a_part_out_of_range_is_dropped() {
        let mut a = SyncAssembler::new();
        let from = "b@h".to_string();
        assert!(a.accept(&from, 1, 3, 3, rows(&["x"])).is_none());
        assert!(a.accept(&from, 1, 0, 0, rows(&["x"])).is_none());
        assert_eq!(
            a.accept(&from, 1, 0, 1, rows(&["y"])).map(|r| r.len()),
            Some(1)
        );
    }
}
