//! Placement: which node owns a child, decided by consistent hashing.
//!
//! Every node must compute the same owner for the same child from nothing but the member set,
//! without talking to anyone: that is what lets a start be routed straight to its owner and lets
//! every survivor of a node failure agree on who restarts what. So the ring is a pure function of
//! the members (order of insertion is irrelevant) and of a hash that is stable across processes,
//! machines and Rust versions — std's `DefaultHasher` is randomly keyed per process and is
//! therefore not usable here; SipHash-1-3 with fixed keys is.
//!
//! Each member is placed on the ring at [`HashRing::DEFAULT_VNODES`] pseudo-random points ("virtual
//! nodes", as Elixir's ProcessHub's 1024) so that load spreads evenly. A child is owned by the
//! member of the first point clockwise from the child's hash. Adding a member only takes the arcs
//! just before its own points, so it moves about 1/N of the children and only to itself; removing a
//! member hands only its own arcs to their next points.
//!
//! Rendezvous hashing would give the same movement guarantees with no ring to build, but costs
//! O(members) hashes per lookup; with a few thousand points a ring lookup is one hash and one
//! binary search, which matters when 100k children are re-placed on every membership change.

use std::collections::BTreeSet;

use siphasher::sip::SipHasher13;
use std::hash::Hasher;

use crate::model::{ChildId, NodeName};

/// Fixed SipHash keys: changing them re-places every child in a running cluster, so they are
/// part of the wire contract, like the protocol version.
const HASH_KEYS: (u64, u64) = (0x7072_6f63_6573_735f, 0x6875_625f_7269_6e67);

/// A 64-bit hash of `bytes` that is identical on every node, process and platform.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut hasher = SipHasher13::new_with_keys(HASH_KEYS.0, HASH_KEYS.1);
    hasher.write(bytes);
    hasher.finish()
}

/// The ring was asked for zero virtual nodes per member (nothing could be placed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a hash ring needs at least one virtual node per member (got {0})")]
pub struct InvalidVnodes(pub u32);

/// A consistent-hash ring over the hub's members.
///
/// Cheap to clone for small clusters; rebuilt (sorted) on every membership change, which is rare
/// compared to lookups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashRing {
    vnodes: u32,
    members: BTreeSet<NodeName>,
    /// `(point, member index into `names`)`, sorted by point then by name so that a collision of
    /// two members' points still resolves the same way everywhere.
    points: Vec<(u64, u32)>,
    names: Vec<NodeName>,
}

impl Default for HashRing {
    fn default() -> Self {
        Self::new(std::iter::empty::<NodeName>())
    }
}

impl HashRing {
    /// Virtual nodes per member by default: enough that with 3–10 members each one's share of the
    /// ring is within a few percent of 1/N.
    pub const DEFAULT_VNODES: u32 = 256;

    /// A ring with [`Self::DEFAULT_VNODES`] points per member.
    pub fn new<I, S>(members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<NodeName>,
    {
        let mut ring = Self {
            vnodes: Self::DEFAULT_VNODES,
            members: members.into_iter().map(Into::into).collect(),
            points: Vec::new(),
            names: Vec::new(),
        };
        ring.rebuild();
        ring
    }

    /// A ring with `vnodes` points per member. Every node of a hub must use the same value.
    pub fn with_vnodes<I, S>(vnodes: u32, members: I) -> Result<Self, InvalidVnodes>
    where
        I: IntoIterator<Item = S>,
        S: Into<NodeName>,
    {
        if vnodes == 0 {
            return Err(InvalidVnodes(vnodes));
        }
        let mut ring = Self {
            vnodes,
            members: members.into_iter().map(Into::into).collect(),
            points: Vec::new(),
            names: Vec::new(),
        };
        ring.rebuild();
        Ok(ring)
    }

    fn rebuild(&mut self) {
        self.names = self.members.iter().cloned().collect();
        self.points.clear();
        self.points.reserve(self.names.len() * self.vnodes as usize);
        for (index, name) in self.names.iter().enumerate() {
            let mut key = Vec::with_capacity(name.len() + 5);
            for vnode in 0..self.vnodes {
                key.clear();
                key.extend_from_slice(name.as_bytes());
                key.push(0);
                key.extend_from_slice(&vnode.to_le_bytes());
                self.points.push((stable_hash(&key), index as u32));
            }
        }
        // Names are sorted, so ordering by (point, index) is ordering by (point, name).
        self.points.sort_unstable();
    }

    /// Virtual nodes per member.
    pub fn vnodes(&self) -> u32 {
        self.vnodes
    }

    /// The members, sorted.
    pub fn members(&self) -> impl Iterator<Item = &NodeName> {
        self.members.iter()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// No members: nothing can be placed.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `node` is a member.
    pub fn contains(&self, node: &str) -> bool {
        self.members.contains(node)
    }

    /// Adds a member; returns `false` (and changes nothing) if it was already there.
    pub fn add(&mut self, node: impl Into<NodeName>) -> bool {
        let added = self.members.insert(node.into());
        if added {
            self.rebuild();
        }
        added
    }

    /// Removes a member; returns `false` if it was not there.
    pub fn remove(&mut self, node: &str) -> bool {
        let removed = self.members.remove(node);
        if removed {
            self.rebuild();
        }
        removed
    }

    /// Index into `points` of the first point at or after the child's hash, wrapping around.
    fn start(&self, id: &ChildId) -> usize {
        let hash = stable_hash(id.as_str().as_bytes());
        let at = self.points.partition_point(|(point, _)| *point < hash);
        if at == self.points.len() {
            0
        } else {
            at
        }
    }

    /// The node that owns `id`, `None` only when the ring is empty.
    pub fn owner(&self, id: &ChildId) -> Option<&NodeName> {
        if self.points.is_empty() {
            return None;
        }
        let (_, index) = self.points[self.start(id)];
        Some(&self.names[index as usize])
    }

    /// The first `n` distinct owners of `id` walking clockwise: the primary first, then the
    /// replicas. Fewer than `n` when the ring has fewer members.
    pub fn owners(&self, id: &ChildId, n: usize) -> Vec<&NodeName> {
        let want = n.min(self.names.len());
        let mut out: Vec<&NodeName> = Vec::with_capacity(want);
        if want == 0 {
            return out;
        }
        let start = self.start(id);
        let total = self.points.len();
        for step in 0..total {
            let (_, index) = self.points[(start + step) % total];
            let name = &self.names[index as usize];
            if !out.contains(&name) {
                out.push(name);
                if out.len() == want {
                    break;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(n: usize) -> Vec<ChildId> {
        (0..n)
            .map(|i| ChildId::from(format!("child-{i}")))
            .collect()
    }

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node{i}@10.0.0.{i}")).collect()
    }

    #[test]
    fn stable_hash_is_fixed_across_builds() {
        // A change here re-places every child of a running cluster: it must be deliberate.
        assert_eq!(stable_hash(b""), stable_hash(b""));
        assert_ne!(stable_hash(b"a"), stable_hash(b"b"));
        assert_eq!(stable_hash(b"child-0"), 14_983_304_925_350_218_950);
    }

    #[test]
    fn empty_ring_owns_nothing() {
        let ring = HashRing::default();
        assert_eq!(ring.owner(&ChildId::from("x")), None);
        assert!(ring.owners(&ChildId::from("x"), 3).is_empty());
        assert_eq!(HashRing::with_vnodes(0, nodes(2)), Err(InvalidVnodes(0)));
    }

    #[test]
    fn owners_are_distinct_and_start_with_owner() {
        let ring = HashRing::new(nodes(4));
        for id in ids(500) {
            let owners = ring.owners(&id, 3);
            assert_eq!(owners.len(), 3);
            assert_eq!(Some(owners[0]), ring.owner(&id));
            let set: BTreeSet<_> = owners.iter().collect();
            assert_eq!(set.len(), 3);
        }
        assert_eq!(ring.owners(&ChildId::from("a"), 10).len(), 4);
    }

    #[test]
    fn load_is_roughly_even() {
        let ring = HashRing::new(nodes(3));
        let mut counts = std::collections::BTreeMap::new();
        for id in ids(10_000) {
            *counts
                .entry(ring.owner(&id).unwrap().clone())
                .or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 3);
        for (node, count) in counts {
            assert!(
                (2_000..=4_700).contains(&count),
                "{node} owns {count} of 10000"
            );
        }
    }

    #[test]
    fn adding_a_node_moves_about_one_nth_only_to_it() {
        for n in [1usize, 2, 3, 5, 8] {
            let before = HashRing::new(nodes(n));
            let mut after = before.clone();
            let newcomer = format!("new@10.1.0.{n}");
            assert!(after.add(newcomer.clone()));
            let mut moved = 0usize;
            let all = ids(10_000);
            for id in &all {
                let (a, b) = (before.owner(id).unwrap(), after.owner(id).unwrap());
                if a != b {
                    moved += 1;
                    assert_eq!(
                        b, &newcomer,
                        "{id} moved from {a} to {b}, not to the newcomer"
                    );
                }
            }
            let bound = 2 * all.len() / (n + 1);
            assert!(
                moved > 0 && moved < bound,
                "n={n}: moved {moved}, bound {bound}"
            );
        }
    }

    #[test]
    fn removing_a_node_moves_only_its_children() {
        let before = HashRing::new(nodes(5));
        let mut after = before.clone();
        let gone = nodes(5)[2].clone();
        assert!(after.remove(&gone));
        assert!(!after.remove(&gone));
        for id in ids(10_000) {
            let (a, b) = (before.owner(&id).unwrap(), after.owner(&id).unwrap());
            if a != &gone {
                assert_eq!(a, b, "{id} moved although its owner stayed");
            } else {
                assert_ne!(b, &gone);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn insertion_order_does_not_matter(
            members in proptest::collection::btree_set("[a-z]{1,6}@[a-z]{1,4}", 1..7),
            seed in any::<u64>(),
        ) {
            let sorted: Vec<String> = members.iter().cloned().collect();
            let mut shuffled = sorted.clone();
            // A deterministic shuffle from the seed.
            let mut state = seed | 1;
            for i in (1..shuffled.len()).rev() {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                shuffled.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let a = HashRing::new(sorted);
            let mut b = HashRing::default();
            for m in shuffled { b.add(m); }
            prop_assert_eq!(&a, &b);
            for id in ids(200) {
                prop_assert_eq!(a.owners(&id, 2), b.owners(&id, 2));
            }
        }
    }
}
