//! A node's bindings in 24 bytes: what the periodic sync sends instead of every row.
//!
//! Each node is the only writer of its own observations, and a peer holds a copy of them. The
//! periodic sync used to send them all (a `FullSync` of every row the sender runs), which costs
//! every node all its rows every `sync_interval`, whether or not anything was lost: at a
//! million children that is the work that grows faster than linearly (docs/performance.md).
//!
//! Instead, each store keeps, per node, a [`BindingDigest`] of the bindings it holds on that
//! node, updated as rows change (one [`binding_hash`] added and one taken away per write, so
//! it costs O(changes), never O(rows)). The sender sends the digest of its own observations;
//! the receiver compares it with its digest of the rows bound to the sender ([`compare`]), and
//! only on a difference asks for the full sync, which heals what was lost as it always did.
//!
//! What a binding's hash covers is what a full sync would change on the receiver: the child,
//! the sender's pid, and the row's authored version (epoch and author), so a lost delta that
//! re-authored a row is seen as a difference too. A digest that matches while the copies differ
//! needs two different sets of bindings whose 128-bit hashes sum to the same value and whose
//! counts agree: a hash collision, nothing less. A difference that is not one (the receiver
//! holds a newer version authored by a third node, a delta still in flight) costs one full
//! sync, what every periodic sync cost before.
//!
//! The hash is SipHash-1-3 (128 bits) with fixed keys, so every node, whatever its build,
//! computes the same value. Pure: the stores and the Registry call it; nothing here does IO.

use serde::{Deserialize, Serialize};
use siphasher::sip128::{Hasher128, SipHasher13};
use std::hash::Hasher;

use crate::model::Pid;

/// The keys of [`binding_hash`]: fixed, so that every node hashes alike.
const KEYS: (u64, u64) = (0x7072_6f63_6573_735f, 0x6875_625f_6469_6765);

/// The hash of one binding: child `id` runs as `pid` on the node whose digest this is, in the
/// row version `epoch` authored by `changed_by`.
pub fn binding_hash(id: &str, pid: Pid, epoch: u64, changed_by: &str) -> u128 {
    let mut h = SipHasher13::new_with_keys(KEYS.0, KEYS.1);
    // Lengths first, so that no two different (id, author) pairs feed the same bytes.
    h.write_u64(id.len() as u64);
    h.write(id.as_bytes());
    h.write_u64(pid);
    h.write_u64(epoch);
    h.write_u64(changed_by.len() as u64);
    h.write(changed_by.as_bytes());
    h.finish128().as_u128()
}

/// The bindings of one node as a count and a sum of their hashes (wrapping), maintained as
/// they change: adding and removing commute, so the digest depends only on the set of
/// bindings, not on the order of the writes that made it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BindingDigest {
    /// How many bindings.
    pub count: u64,
    /// The wrapping sum of their [`binding_hash`]es.
    pub sum: u128,
}

impl BindingDigest {
    /// Counts one binding in.
    pub fn add(&mut self, hash: u128) {
        self.count = self.count.wrapping_add(1);
        self.sum = self.sum.wrapping_add(hash);
    }

    /// Takes one binding out (one that was added).
    pub fn remove(&mut self, hash: u128) {
        self.count = self.count.wrapping_sub(1);
        self.sum = self.sum.wrapping_sub(hash);
    }

    /// The digest of a set of bindings, computed from scratch.
    pub fn of(hashes: impl IntoIterator<Item = u128>) -> Self {
        let mut digest = Self::default();
        for hash in hashes {
            digest.add(hash);
        }
        digest
    }

    /// Whether it digests no binding.
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.sum == 0
    }

    /// The sum as it travels (two u64, low half first).
    pub fn sum_words(&self) -> [u64; 2] {
        [self.sum as u64, (self.sum >> 64) as u64]
    }

    /// A digest from its count and its sum as it travels ([`Self::sum_words`]).
    pub fn from_words(count: u64, sum: [u64; 2]) -> Self {
        Self {
            count,
            sum: u128::from(sum[0]) | (u128::from(sum[1]) << 64),
        }
    }
}

/// What a node does with a peer's digest of its own bindings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// This node holds exactly the bindings the peer reports: everything the peer had sent is
    /// applied here (a proof of being in sync, like a full sync applied).
    InSync,
    /// Something differs (or this node keeps no digest): ask the peer for its full sync.
    AskFullSync,
}

/// Compares the digest the peer sent of its own bindings (`theirs`) with this node's digest
/// of the rows bound to that peer (`mine`; `None` when this node's store keeps none).
pub fn compare(mine: Option<BindingDigest>, theirs: BindingDigest) -> Verdict {
    match mine {
        Some(mine) if mine == theirs => Verdict::InSync,
        _ => Verdict::AskFullSync,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// `binding_hash("c1", 7, 2, "a@h")`, pinned.
    const PINNED: u128 = 0x7e77_2997_1647_d402_2603_fe7f_dfb4_6eeb;

    #[test]
    fn the_hash_is_the_same_on_every_node_and_covers_each_field() {
        let base = binding_hash("c1", 7, 2, "a@h");
        // A fixed value: a change of the hash function would make mixed builds disagree.
        assert_eq!(base, binding_hash("c1", 7, 2, "a@h"));
        assert_eq!(base, PINNED, "{base:#x}");
        for other in [
            binding_hash("c2", 7, 2, "a@h"),
            binding_hash("c1", 8, 2, "a@h"),
            binding_hash("c1", 7, 3, "a@h"),
            binding_hash("c1", 7, 2, "b@h"),
            binding_hash("c1a", 7, 2, "@h"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn a_digest_travels_as_two_words() {
        let d = BindingDigest::of([u128::MAX, 5, 1 << 70]);
        let back = BindingDigest::from_words(d.count, d.sum_words());
        assert_eq!(back, d);
        assert!(!d.is_empty() && BindingDigest::default().is_empty());
    }

    #[test]
    fn only_an_equal_digest_is_in_sync() {
        let d = BindingDigest::of([binding_hash("x", 1, 1, "a")]);
        assert_eq!(compare(Some(d), d), Verdict::InSync);
        assert_eq!(
            compare(Some(BindingDigest::default()), d),
            Verdict::AskFullSync
        );
        assert_eq!(compare(None, d), Verdict::AskFullSync);
        // A lost re-authoring: same child, same pid, another version.
        let newer = BindingDigest::of([binding_hash("x", 1, 2, "a")]);
        assert_eq!(compare(Some(d), newer), Verdict::AskFullSync);
    }

    /// One write to a model registry of one node's bindings: child -> (pid, epoch, author).
    #[derive(Clone, Debug)]
    enum Write {
        Put(u8, u64, u64, u8),
        Remove(u8),
    }

    fn write() -> impl Strategy<Value = Write> {
        prop_oneof![
            (0u8..24, 0u64..4, 1u64..4, 0u8..3).prop_map(|(c, p, e, a)| Write::Put(c, p, e, a)),
            (0u8..24).prop_map(Write::Remove),
        ]
    }

    fn hash_of(id: u8, (pid, epoch, author): (u64, u64, u8)) -> u128 {
        binding_hash(&format!("c{id}"), pid, epoch, &format!("n{author}"))
    }

    proptest! {
        /// Whatever the writes, the digest kept up to date write by write (the old binding's
        /// hash out, the new one's in) equals the digest computed from scratch over the
        /// bindings that remain; and two sequences that end with the same bindings agree.
        #[test]
        fn the_incremental_digest_equals_the_digest_from_scratch(
            writes in proptest::collection::vec(write(), 0..80),
            shuffle_seed in any::<u64>(),
        ) {
            let mut rows: BTreeMap<u8, (u64, u64, u8)> = BTreeMap::new();
            let mut digest = BindingDigest::default();
            for w in &writes {
                match *w {
                    Write::Put(c, p, e, a) => {
                        if let Some(old) = rows.insert(c, (p, e, a)) {
                            digest.remove(hash_of(c, old));
                        }
                        digest.add(hash_of(c, (p, e, a)));
                    }
                    Write::Remove(c) => {
                        if let Some(old) = rows.remove(&c) {
                            digest.remove(hash_of(c, old));
                        }
                    }
                }
            }
            let scratch = BindingDigest::of(rows.iter().map(|(c, b)| hash_of(*c, *b)));
            prop_assert_eq!(digest, scratch);
            prop_assert_eq!(digest.count, rows.len() as u64);
            // The same final set, reached in another order, digests alike.
            let mut entries: Vec<_> = rows.iter().map(|(c, b)| hash_of(*c, *b)).collect();
            let n = entries.len().max(1);
            entries.rotate_left((shuffle_seed as usize) % n);
            prop_assert_eq!(BindingDigest::of(entries), digest);
        }

        /// Any single binding more, less or changed is seen.
        #[test]
        fn one_binding_more_less_or_changed_differs(
            ids in proptest::collection::btree_set(0u8..40, 1..20),
            pid in 0u64..5,
        ) {
            let set: Vec<u128> = ids.iter().map(|c| hash_of(*c, (pid, 1, 0))).collect();
            let full = BindingDigest::of(set.iter().copied());
            let less = BindingDigest::of(set.iter().skip(1).copied());
            prop_assert_eq!(compare(Some(less), full), Verdict::AskFullSync);
            let first = *ids.iter().next().unwrap();
            let changed = BindingDigest::of(
                set.iter().skip(1).copied().chain([hash_of(first, (pid + 1, 1, 0))]),
            );
            prop_assert_eq!(compare(Some(changed), full), Verdict::AskFullSync);
        }
    }
}
