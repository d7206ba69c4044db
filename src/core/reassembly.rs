//! Reassembly of a message sent in parts (a full sync, a declared-list offer).
//!
//! A node's `FullSync` lists every child it runs; past the frame budget that list travels as
//! numbered parts of one sync. The receiver must apply the sync **whole**: a full sync unbinds
//! the sender from every row it does not list, so applying a part alone would unbind the
//! children of the other parts. A declared-list copy is adopted whole for the same reason. This
//! keeps, per peer, the parts of its latest message until all have arrived; a part of another
//! message replaces an unfinished one (its parts were lost; links are FIFO, so a part of another
//! message means the sender moved on, or restarted and numbers its messages from 1 again), and
//! a peer that goes down is forgotten.
//!
//! What a peer can make this hold is bounded ([`PartLimits`]): the part count it announces is
//! checked before anything is kept and nothing is allocated for parts not received, the bytes
//! held across every unfinished message are capped, and so is the number of peers with an
//! unfinished message. A part past a bound is refused with a [`PartRefusal`], which the caller
//! logs and counts, and the peer's unfinished message is dropped with it.

use std::collections::{BTreeMap, HashMap};

use crate::model::NodeName;

/// The bounds on what unfinished messages may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartLimits {
    /// The most parts one message may announce.
    pub max_parts: u32,
    /// The most peers with an unfinished message at once.
    pub max_peers: usize,
    /// The most bytes held across every unfinished message.
    pub max_held_bytes: u64,
}

impl Default for PartLimits {
    /// 4,096 parts (of a 4 MiB budget each: 16 GiB, beyond any registry), 256 peers, 1 GiB held.
    fn default() -> Self {
        Self {
            max_parts: 4096,
            max_peers: 256,
            max_held_bytes: 1 << 30,
        }
    }
}

/// Why a part was refused (the peer's unfinished message, if any, is dropped).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartRefusal {
    /// `index` is not below `total`, or `total` is 0.
    #[error("part {index} of {total} is out of range")]
    OutOfRange {
        /// The part's index.
        index: u32,
        /// The announced count.
        total: u32,
    },
    /// The announced count is above [`PartLimits::max_parts`].
    #[error("{total} parts announced, more than the {max} accepted")]
    TooManyParts {
        /// The announced count.
        total: u32,
        /// The limit.
        max: u32,
    },
    /// Too many peers have an unfinished message.
    #[error("{max} peers already have an unfinished message")]
    TooManyPeers {
        /// The limit.
        max: usize,
    },
    /// Keeping the part would hold more than [`PartLimits::max_held_bytes`].
    #[error("keeping {bytes} more bytes would hold more than {max} bytes of unfinished parts")]
    TooManyBytes {
        /// The part's size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
}

struct Partial<T> {
    id: u64,
    total: u32,
    parts: BTreeMap<u32, Vec<T>>,
    bytes: u64,
}

/// The unfinished messages of every peer (at most one per peer).
pub struct PartAssembler<T> {
    partial: HashMap<NodeName, Partial<T>>,
    held_bytes: u64,
    limits: PartLimits,
}

/// The full syncs' assembler.
pub type SyncAssembler = PartAssembler<crate::model::Row>;

impl<T> Default for PartAssembler<T> {
    fn default() -> Self {
        Self::with_limits(PartLimits::default())
    }
}

impl<T> PartAssembler<T> {
    /// An assembler holding nothing, with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An assembler holding nothing, with `limits`.
    pub fn with_limits(limits: PartLimits) -> Self {
        Self {
            partial: HashMap::new(),
            held_bytes: 0,
            limits,
        }
    }

    /// Takes part `index` of `total` of `from`'s message `id`, weighing `bytes`; returns every
    /// item of the message once its last part arrived. A part of another message replaces the
    /// unfinished one; repeats are ignored (`Ok(None)`); a part past a bound is refused.
    pub fn accept(
        &mut self,
        from: &NodeName,
        id: u64,
        index: u32,
        total: u32,
        bytes: u64,
        items: Vec<T>,
    ) -> Result<Option<Vec<T>>, PartRefusal> {
        if total == 0 || index >= total {
            self.forget(from);
            return Err(PartRefusal::OutOfRange { index, total });
        }
        if total > self.limits.max_parts {
            self.forget(from);
            return Err(PartRefusal::TooManyParts {
                total,
                max: self.limits.max_parts,
            });
        }
        match self.partial.get(from) {
            Some(p) if id != p.id || p.total != total => self.forget(from),
            Some(_) => {}
            None if self.partial.len() >= self.limits.max_peers => {
                return Err(PartRefusal::TooManyPeers {
                    max: self.limits.max_peers,
                });
            }
            None => {}
        }
        if self.held_bytes.saturating_add(bytes) > self.limits.max_held_bytes {
            self.forget(from);
            return Err(PartRefusal::TooManyBytes {
                bytes,
                max: self.limits.max_held_bytes,
            });
        }
        let partial = self.partial.entry(from.clone()).or_insert_with(|| Partial {
            id,
            total,
            parts: BTreeMap::new(),
            bytes: 0,
        });
        if partial.parts.contains_key(&index) {
            return Ok(None);
        }
        partial.parts.insert(index, items);
        partial.bytes += bytes;
        self.held_bytes += bytes;
        if partial.parts.len() < partial.total as usize {
            return Ok(None);
        }
        let Some(done) = self.partial.remove(from) else {
            return Ok(None);
        };
        self.held_bytes -= done.bytes;
        Ok(Some(done.parts.into_values().flatten().collect()))
    }

    /// `peer` went down (or broke a bound): its unfinished message will never complete.
    pub fn forget(&mut self, peer: &str) {
        if let Some(p) = self.partial.remove(peer) {
            self.held_bytes -= p.bytes;
        }
    }

    /// Peers with an unfinished message (diagnostics).
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Bytes held by unfinished messages (diagnostics).
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Row};

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
        assert!(a.accept(&from, 7, 2, 3, 1, rows(&["e"])).unwrap().is_none());
        assert!(a
            .accept(&from, 7, 0, 3, 1, rows(&["a", "b"]))
            .unwrap()
            .is_none());
        // A repeat changes nothing.
        assert!(a
            .accept(&from, 7, 0, 3, 1, rows(&["zzz"]))
            .unwrap()
            .is_none());
        let all = a
            .accept(&from, 7, 1, 3, 1, rows(&["c", "d"]))
            .unwrap()
            .unwrap();
        assert_eq!(ids(&all), ["a", "b", "c", "d", "e"]);
        assert_eq!(a.pending(), 0);
    }

    #[test]
    fn a_part_of_another_sync_replaces_an_unfinished_one() {
        let mut a = SyncAssembler::new();
        let from = "b@h".to_string();
        assert!(a
            .accept(&from, 9, 0, 2, 1, rows(&["old"]))
            .unwrap()
            .is_none());
        // The peer restarted: its syncs are numbered from 1 again.
        assert!(a.accept(&from, 1, 0, 2, 1, rows(&["a"])).unwrap().is_none());
        let all = a.accept(&from, 1, 1, 2, 1, rows(&["b"])).unwrap().unwrap();
        assert_eq!(ids(&all), ["a", "b"]);
        assert_eq!(a.held_bytes(), 0);
    }

    #[test]
    fn peers_assemble_apart_and_a_peer_that_goes_down_is_forgotten() {
        let mut a = SyncAssembler::new();
        let (b, c) = ("b@h".to_string(), "c@h".to_string());
        assert!(a.accept(&b, 1, 0, 2, 1, rows(&["b1"])).unwrap().is_none());
        assert!(a.accept(&c, 1, 0, 2, 1, rows(&["c1"])).unwrap().is_none());
        a.forget(&b);
        assert_eq!(a.pending(), 1);
        // b's second part alone does not complete anything.
        assert!(a.accept(&b, 1, 1, 2, 1, rows(&["b2"])).unwrap().is_none());
        assert_eq!(
            ids(&a.accept(&c, 1, 1, 2, 1, rows(&["c2"])).unwrap().unwrap()),
            ["c1", "c2"]
        );
    }

    #[test]
    fn a_part_out_of_range_is_refused() {
        let mut a = SyncAssembler::new();
        let from = "b@h".to_string();
        assert_eq!(
            a.accept(&from, 1, 3, 3, 1, rows(&["x"])),
            Err(PartRefusal::OutOfRange { index: 3, total: 3 })
        );
        assert!(a.accept(&from, 1, 0, 0, 1, rows(&["x"])).is_err());
        assert_eq!(
            a.accept(&from, 1, 0, 1, 1, rows(&["y"]))
                .unwrap()
                .map(|r| r.len()),
            Some(1)
        );
    }

    /// A forged part count of `u32::MAX` allocates nothing and is refused; so is a peer past
    /// the peer bound and a part past the byte bound, which drops that peer's unfinished sync.
    #[test]
    fn what_a_peer_can_make_it_hold_is_bounded() {
        let limits = PartLimits {
            max_parts: 8,
            max_peers: 2,
            max_held_bytes: 100,
        };
        let mut a = SyncAssembler::with_limits(limits);
        let (b, c, d) = ("b@h".to_string(), "c@h".to_string(), "d@h".to_string());
        assert_eq!(
            a.accept(&b, 1, 0, u32::MAX, 1, rows(&["x"])),
            Err(PartRefusal::TooManyParts {
                total: u32::MAX,
                max: 8
            })
        );
        assert_eq!(a.pending(), 0);
        assert!(a.accept(&b, 1, 0, 2, 60, rows(&["b1"])).unwrap().is_none());
        assert!(a.accept(&c, 1, 0, 2, 30, rows(&["c1"])).unwrap().is_none());
        assert_eq!(
            a.accept(&d, 1, 0, 2, 1, rows(&["d1"])),
            Err(PartRefusal::TooManyPeers { max: 2 })
        );
        assert_eq!(
            a.accept(&c, 1, 1, 2, 20, rows(&["c2"])),
            Err(PartRefusal::TooManyBytes {
                bytes: 20,
                max: 100
            })
        );
        assert_eq!((a.pending(), a.held_bytes()), (1, 60));
        let all = a.accept(&b, 1, 1, 2, 40, rows(&["b2"])).unwrap().unwrap();
        assert_eq!(ids(&all), ["b1", "b2"]);
        assert_eq!((a.pending(), a.held_bytes()), (0, 0));
    }
}
