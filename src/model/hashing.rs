//! The hasher of the hub's in-memory tables.
//!
//! Child ids, kind and node names come from callers and peers, so every table is keyed with a
//! random seed per process, as std's tables are. The hash is foldhash rather than std's SipHash:
//! a start and a stop look each child up in some thirty tables on their way through the hub,
//! and with SipHash the hashing alone was about a seventh of a start's instructions.

/// A hash map keyed with a per-process random seed, for the hub's per-child tables.
pub(crate) type FastHashMap<K, V> = std::collections::HashMap<K, V, TableHasher>;

/// A hash set keyed like [`FastHashMap`].
pub(crate) type FastHashSet<T> = std::collections::HashSet<T, TableHasher>;

/// The seeded hasher of [`FastHashMap`], [`FastHashSet`] and the stores' own hash tables.
pub(crate) type TableHasher = foldhash::fast::RandomState;
