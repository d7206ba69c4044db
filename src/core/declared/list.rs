//! The declared list: the versioned, whole-list record of the children that SHALL exist
//! (docs/recovery.md, "The declared list").
//!
//! A durable start adds a child's spec to the list; a deliberate stop removes it; nothing else
//! writes it. Only the hub's leader mutates the list, and every mutation moves the version up by
//! exactly one, so "which copy is newer" is one integer comparison and a node adopts a newer copy
//! whole, never entry by entry. A child's absence from the list is its stop record: it never
//! expires, so a node may come back after any absence without resurrecting a stopped child.
//!
//! Two copies can carry the same version with different content after a partition in which
//! both sides mutated (the default divergence strategy lets them). Such a tie resolves to the copy
//! last mutated by the lexicographically lowest node, and the resolution is reported so the hub
//! can fire `declared_tiebreak`. [`precedence`] is a total order, so every node reaches the same
//! winner whatever order it hears the copies in.
//!
//! The children live in a persistent map ([`imbl::OrdMap`]): cloning a copy is O(1) and a
//! mutation copies only the path to the changed entry, so the snapshots handed to the persist,
//! publish, broadcast and ship steps cost nothing per mutation whatever the list's size. Each
//! copy also keeps a [`DeclaredList::digest`] of its content, updated per entry, so a peer can
//! check that a delta's base (`crate::core::declared::delta`) is exactly its own copy.
//!
//! Pure: no IO, no clock. The store that persists a copy is `crate::storage::declared_store`.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use imbl::OrdMap;
use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher13;

use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Restart, Row, RESERVED_METADATA_KEY};

/// Why a child cannot enter the declared list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclaredError {
    /// Only a permanent child may be durable: a transient or temporary child may finish on its
    /// own node, and no other node could tell "finished" from "lost".
    #[error("child {id} cannot be durable: durable requires restart permanent, not {restart:?}")]
    DurableRequiresPermanent {
        /// The child.
        id: ChildId,
        /// The restart type it asked for.
        restart: Restart,
    },
    /// The caller's metadata used the key reserved for the hub's bookkeeping.
    #[error("child {id}: metadata key {RESERVED_METADATA_KEY:?} is reserved for the hub")]
    ReservedMetadataKey {
        /// The child.
        id: ChildId,
    },
    /// This node's list is lost and its reconcile parked: it cannot mutate a list it does not
    /// have. An operator restores it (peer, manifest) or clears it.
    #[error("the declared list is lost on this node and parked; restore or clear it first")]
    Parked,
}

/// One declared child: what to start when it is found missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredChild {
    /// The spec the child is (re)started with.
    pub spec: ChildSpec,
    /// The caller's metadata, restored on the started row.
    #[serde(default)]
    pub metadata: Metadata,
}

/// A node's copy of the declared list as the API shows it (`Hub::declared_children`,
/// `HubMsg::DeclaredChildren`), as last persisted there.
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

/// What one mutation did, so the store can persist just that change (one entry and the header)
/// instead of rewriting the whole list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeclaredChange {
    /// The child was added, or its spec or metadata replaced; the version moved up by one.
    Put(ChildId),
    /// The child was removed; the version moved up by one.
    Removed(ChildId),
    /// Every child was removed; the version moved up by one.
    Cleared,
    /// Nothing changed (the same entry was already declared, or the child was not declared);
    /// the version did not move.
    Unchanged,
}

/// A version tie between two copies with different content, and how it was resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiebreak {
    /// The tied version.
    pub version: u64,
    /// The node that last mutated the winning copy.
    pub winner: Option<NodeName>,
    /// The node that last mutated the losing copy.
    pub loser: Option<NodeName>,
}

/// The outcome of offering a copy to [`DeclaredList::adopt`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Adoption {
    /// The local copy stays; the offered copy was older (or the same).
    Kept {
        /// Set when the versions tied with different content and the local copy won.
        tiebreak: Option<Tiebreak>,
    },
    /// The offered copy replaced the local one whole.
    Replaced {
        /// The local version before the replacement.
        previous_version: u64,
        /// Set when the versions tied with different content and the offered copy won.
        tiebreak: Option<Tiebreak>,
    },
}

impl Adoption {
    /// Whether the local copy changed (and must be persisted).
    pub fn replaced(&self) -> bool {
        matches!(self, Adoption::Replaced { .. })
    }

    /// The tie-break, if the adoption resolved one (the hub fires `declared_tiebreak`).
    pub fn tiebreak(&self) -> Option<&Tiebreak> {
        match self {
            Adoption::Kept { tiebreak } | Adoption::Replaced { tiebreak, .. } => tiebreak.as_ref(),
        }
    }
}

/// The declared children by id: a persistent map, so a clone is O(1) (see the module doc).
/// It serializes exactly as the `BTreeMap` it replaced (a length-prefixed map in key order).
pub type DeclaredChildren = OrdMap<ChildId, DeclaredChild>;

/// A node's copy of the declared list.
///
/// Version 0 is the empty list nobody ever mutated (a fresh node); every mutation by the leader
/// moves the version up by one.
///
/// The serialized form (wire, store tests, manifest round trips) is the version, the children
/// and the last mutator, as before; the digest is not serialized but recomputed on decode.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "ListRepr")]
pub struct DeclaredList {
    version: u64,
    children: DeclaredChildren,
    last_mutated_by: Option<NodeName>,
    /// [`content_digest`] of `children`, kept up to date by every mutation.
    #[serde(skip)]
    digest: u64,
}

/// The serialized fields of a [`DeclaredList`], in their order.
#[derive(Deserialize)]
struct ListRepr {
    version: u64,
    #[serde(deserialize_with = "children_entry_by_entry")]
    children: DeclaredChildren,
    last_mutated_by: Option<NodeName>,
}

/// Reads the children one entry at a time. `imbl`'s own `Deserialize` reserves room for as many
/// entries as the length prefix claims before reading any, so a damaged frame or file claiming
/// billions of entries would abort the process on the allocation; read entry by entry, it ends
/// with an error at the end of the input instead.
fn children_entry_by_entry<'de, D>(deserializer: D) -> Result<DeclaredChildren, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Children;
    impl<'de> serde::de::Visitor<'de> for Children {
        type Value = DeclaredChildren;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of declared children")
        }

        fn visit_map<A>(self, mut map: A) -> Result<Self::Value, A::Error>
        where
            A: serde::de::MapAccess<'de>,
        {
            let mut children = DeclaredChildren::new();
            while let Some((id, child)) = map.next_entry()? {
                children.insert(id, child);
            }
            Ok(children)
        }
    }
    deserializer.deserialize_map(Children)
}

impl From<ListRepr> for DeclaredList {
    fn from(repr: ListRepr) -> Self {
        DeclaredList::from_parts(repr.version, repr.children, repr.last_mutated_by)
    }
}

impl PartialEq for DeclaredList {
    /// The stamp and the digest first (cheap), then the content.
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version
            && self.last_mutated_by == other.last_mutated_by
            && self.digest == other.digest
            && self.children == other.children
    }
}

impl Eq for DeclaredList {}

/// The digest of one entry: SipHash-1-3 with fixed keys over its bincode encoding, so every
/// node of every build that speaks the same wire format computes the same value.
fn entry_digest(id: &ChildId, child: &DeclaredChild) -> u64 {
    use std::hash::Hasher;

    struct HashWriter(SipHasher13);
    impl std::io::Write for HashWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.write(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut writer = HashWriter(SipHasher13::new_with_keys(
        0x6465_636c_6172_6564,
        0x6c69_7374,
    ));
    // Encoding into a hasher cannot fail for these plain types; a failure would only weaken
    // the digest of this entry, never panic.
    let _ = bincode::serialize_into(&mut writer, &(id, child));
    writer.0.finish()
}

/// The order-independent digest of a set of children: the wrapping sum of their entries'
/// digests, so adding or removing one entry updates it in O(1). Two copies with the same stamp
/// (version, last mutator) but different content, which a node that lost its disk can produce,
/// are told apart by it (up to a 2^-64 chance).
pub fn content_digest<'a>(
    children: impl IntoIterator<Item = (&'a ChildId, &'a DeclaredChild)>,
) -> u64 {
    children.into_iter().fold(0u64, |sum, (id, child)| {
        sum.wrapping_add(entry_digest(id, child))
    })
}

impl DeclaredList {
    /// The empty list at version 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuilds a list from its parts (a store's or a manifest's decoded contents). O(n): the
    /// digest is computed over every child.
    pub fn from_parts(
        version: u64,
        children: impl Into<DeclaredChildren>,
        last_mutated_by: Option<NodeName>,
    ) -> Self {
        let children = children.into();
        let digest = content_digest(children.iter());
        Self {
            version,
            children,
            last_mutated_by,
            digest,
        }
    }

    /// The version: the number of mutations behind this copy.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The node that authored the latest mutation (`None` for version 0).
    pub fn last_mutated_by(&self) -> Option<&str> {
        self.last_mutated_by.as_deref()
    }

    /// The declared children by id.
    pub fn children(&self) -> &DeclaredChildren {
        &self.children
    }

    /// The digest of the children ([`content_digest`]): equal content, equal digest.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Puts or replaces one entry, keeping the digest; the version is not touched (the caller
    /// stamps the mutation).
    pub(crate) fn put_entry(&mut self, child: DeclaredChild) {
        let id = child.spec.id.clone();
        let added = entry_digest(&id, &child);
        if let Some(old) = self.children.insert(id.clone(), child) {
            self.digest = self.digest.wrapping_sub(entry_digest(&id, &old));
        }
        self.digest = self.digest.wrapping_add(added);
    }

    /// Removes one entry, keeping the digest; true when it was there.
    pub(crate) fn remove_entry(&mut self, id: &ChildId) -> bool {
        match self.children.remove(id) {
            Some(old) => {
                self.digest = self.digest.wrapping_sub(entry_digest(id, &old));
                true
            }
            None => false,
        }
    }

    /// Removes every entry (the digest of nothing is 0).
    pub(crate) fn clear_entries(&mut self) {
        self.children = DeclaredChildren::new();
        self.digest = 0;
    }

    /// Sets the stamp of the mutation(s) just applied.
    pub(crate) fn set_stamp(&mut self, version: u64, by: Option<NodeName>) {
        self.version = version;
        self.last_mutated_by = by;
    }

    /// The declared child with this id.
    pub fn get(&self, id: &ChildId) -> Option<&DeclaredChild> {
        self.children.get(id)
    }

    /// Whether the child is declared.
    pub fn contains(&self, id: &ChildId) -> bool {
        self.children.contains_key(id)
    }

    /// The number of declared children.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Declares a child (the leader's half of a durable start, committed before the start).
    ///
    /// Rejects a child that is not [`Restart::Permanent`] and metadata using the reserved key.
    /// Declaring an identical entry again changes nothing and keeps the version; a different
    /// spec or metadata for a declared id replaces the entry.
    pub fn add(
        &mut self,
        spec: ChildSpec,
        metadata: Metadata,
        by: &str,
    ) -> Result<DeclaredChange, DeclaredError> {
        check_durable(&spec, &metadata)?;
        let id = spec.id.clone();
        let entry = DeclaredChild { spec, metadata };
        if self.children.get(&id) == Some(&entry) {
            return Ok(DeclaredChange::Unchanged);
        }
        self.put_entry(entry);
        self.bump(by);
        Ok(DeclaredChange::Put(id))
    }

    /// Undeclares a child (the leader's half of a deliberate stop, committed before the
    /// terminate). Undeclaring a child that is not declared changes nothing.
    pub fn remove(&mut self, id: &ChildId, by: &str) -> DeclaredChange {
        if !self.remove_entry(id) {
            return DeclaredChange::Unchanged;
        }
        self.bump(by);
        DeclaredChange::Removed(id.clone())
    }

    /// Undeclares every child in one mutation: the operator's `clear`, which also ends a parked
    /// hub's wait. The version still moves up, so the cleared list wins over the copy it
    /// replaces everywhere it is adopted.
    pub fn clear(&mut self, by: &str) -> DeclaredChange {
        self.clear_entries();
        self.bump(by);
        DeclaredChange::Cleared
    }

    fn bump(&mut self, by: &str) {
        self.version = self.version.saturating_add(1);
        self.last_mutated_by = Some(by.to_owned());
    }

    /// Offers another node's (or the manifest's) copy: the higher version replaces this copy
    /// whole; a tie with different content goes to the copy last mutated by the lowest node (see
    /// [`precedence`]), reported as a [`Tiebreak`].
    pub fn adopt(&mut self, offered: &DeclaredList) -> Adoption {
        let tiebreak = tiebreak_between(self, offered);
        if precedence(offered, self) == Ordering::Greater {
            let previous_version = self.version;
            *self = offered.clone();
            Adoption::Replaced {
                previous_version,
                tiebreak,
            }
        } else {
            Adoption::Kept { tiebreak }
        }
    }

    /// The first-boot seed (docs/recovery.md, "Boot": a missing list is never empty truth): version
    /// 1 holding every durable registry row, so an existing deployment's children carry over.
    /// Durable rows whose restart type is not permanent cannot be declared and are returned apart.
    /// With no declarable row the result is the empty list at version 0, so that any real list a
    /// peer holds wins without a tie.
    pub fn seed_from_rows<'a>(
        rows: impl IntoIterator<Item = &'a Row>,
        by: &str,
    ) -> (DeclaredList, Vec<ChildId>) {
        let mut children = BTreeMap::new();
        let mut rejected = Vec::new();
        for row in rows.into_iter().filter(|r| r.hub.durable) {
            match check_durable(&row.spec, &row.metadata) {
                Ok(()) => {
                    children.insert(
                        row.spec.id.clone(),
                        DeclaredChild {
                            spec: row.spec.clone(),
                            metadata: row.metadata.clone(),
                        },
                    );
                }
                Err(_) => rejected.push(row.spec.id.clone()),
            }
        }
        if children.is_empty() {
            return (DeclaredList::new(), rejected);
        }
        let list = DeclaredList::from_parts(1, children, Some(by.to_owned()));
        (list, rejected)
    }
}

/// The highest version a copy may carry: 2^53. Every mutation adds one, so this leaves more
/// room to increment than any hub will use, and it is the largest integer every JSON reader
/// of a manifest holds exactly. A copy above it (a forged offer, a hand-edited manifest) would
/// outrank every real change and saturate its increments: it is refused.
pub const MAX_DECLARED_VERSION: u64 = 1 << 53;

/// How far past the local copy an offered copy may be: 2^40 mutations (a thousand a second for
/// thirty years). Copies diverge by the mutations one side missed, never by more; a larger
/// jump is not a copy any leader made, and adopting it would make it outrank every real
/// change made after it.
pub const MAX_VERSION_JUMP: u64 = 1 << 40;

/// Why an offered copy's version was refused (see [`check_version`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImplausibleVersion {
    /// The version leaves no room to increment.
    #[error("declared version {version} is above the {max} a list may reach")]
    NoRoom {
        /// The offered version.
        version: u64,
        /// [`MAX_DECLARED_VERSION`].
        max: u64,
    },
    /// The version is further past the local copy than any real divergence.
    #[error("declared version {version} is more than {max_jump} past this copy's {local}")]
    Jump {
        /// The offered version.
        version: u64,
        /// The local copy's version.
        local: u64,
        /// [`MAX_VERSION_JUMP`].
        max_jump: u64,
    },
}

/// Checks an offered version (a peer's offer, delta or announcement, a manifest) against the
/// local copy's `local` version: at most [`MAX_DECLARED_VERSION`], and at most
/// [`MAX_VERSION_JUMP`] past `local`.
pub fn check_version(local: u64, offered: u64) -> Result<(), ImplausibleVersion> {
    if offered > MAX_DECLARED_VERSION {
        return Err(ImplausibleVersion::NoRoom {
            version: offered,
            max: MAX_DECLARED_VERSION,
        });
    }
    if offered.saturating_sub(local) > MAX_VERSION_JUMP {
        return Err(ImplausibleVersion::Jump {
            version: offered,
            local,
            max_jump: MAX_VERSION_JUMP,
        });
    }
    Ok(())
}

/// Checks that a child may be durable: permanent, and no reserved metadata key but the hub's
/// own placement record (`core::guided`).
pub fn check_durable(spec: &ChildSpec, metadata: &Metadata) -> Result<(), DeclaredError> {
    if spec.restart != Restart::Permanent {
        return Err(DeclaredError::DurableRequiresPermanent {
            id: spec.id.clone(),
            restart: spec.restart,
        });
    }
    if metadata.contains_key(RESERVED_METADATA_KEY)
        && crate::core::guided::Guided::of(metadata).is_none()
    {
        return Err(DeclaredError::ReservedMetadataKey {
            id: spec.id.clone(),
        });
    }
    Ok(())
}

/// The total order of copies: `Greater` when `a` wins over `b`.
///
/// Higher version first; on a tie, the copy last mutated by the lexicographically lower node
/// (a copy with no mutator, version 0 or a seed of unknown origin, ranks below a named one);
/// then, for the rarest case of one node having authored two different copies of one version
/// (it lost its disk), the lower encoded content, so the order stays total and deterministic.
pub fn precedence(a: &DeclaredList, b: &DeclaredList) -> Ordering {
    stamp_order(
        (a.version, a.last_mutated_by.as_deref()),
        (b.version, b.last_mutated_by.as_deref()),
    )
    .then_with(|| {
        // Equal content (the usual case: a copy heard back) needs no encoding.
        if a.digest == b.digest && a.children == b.children {
            return Ordering::Equal;
        }
        content_key(b).cmp(&content_key(a))
    })
}

/// How two copies' stamps rank, `(version, last mutator)` each: the higher version first, then
/// a mutator's copy above a copy nobody mutated, then the lower mutator's name. The one order
/// behind [`precedence`], [`announced_ahead`] and the summaries' verdict.
pub fn stamp_order(a: (u64, Option<&str>), b: (u64, Option<&str>)) -> Ordering {
    a.0.cmp(&b.0).then_with(|| match (a.1, b.1) {
        (Some(x), Some(y)) => y.cmp(x),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => Ordering::Equal,
    })
}

/// Whether a peer's announced `version` and `last_mutated_by` rank above `mine` (see
/// [`precedence`]): then `mine` is outdated, or lost a tie, and the peer's copy must be fetched
/// before `mine` is acted on. Equal announcements are not ahead (the rare same-version,
/// same-mutator conflict of a lost disk is settled when the copies are next exchanged).
pub fn announced_ahead(mine: &DeclaredList, version: u64, last_mutated_by: Option<&str>) -> bool {
    stamp_order(
        (version, last_mutated_by),
        (mine.version, mine.last_mutated_by.as_deref()),
    ) == Ordering::Greater
}

fn content_key(list: &DeclaredList) -> Vec<u8> {
    bincode::serialize(&list.children).unwrap_or_default()
}

/// The tie-break two copies would resolve, if they tie on version with different content.
pub fn tiebreak_between(a: &DeclaredList, b: &DeclaredList) -> Option<Tiebreak> {
    if a.version != b.version || (a.digest == b.digest && a.children == b.children) {
        return None;
    }
    let (winner, loser) = if precedence(a, b) == Ordering::Greater {
        (a, b)
    } else {
        (b, a)
    };
    Some(Tiebreak {
        version: a.version,
        winner: winner.last_mutated_by.clone(),
        loser: loser.last_mutated_by.clone(),
    })
}

/// The copy to adopt among several (boot adoption: the local copy, the peers' copies, the
/// remote manifest), with every tie-break met on the way. `None` when there is no copy at all.
pub fn highest<'a>(
    copies: impl IntoIterator<Item = &'a DeclaredList>,
) -> Option<(&'a DeclaredList, Vec<Tiebreak>)> {
    let mut best: Option<&DeclaredList> = None;
    let mut tiebreaks = Vec::new();
    for copy in copies {
        best = Some(match best {
            None => copy,
            Some(current) => {
                match tiebreak_between(current, copy) {
                    Some(t) if !tiebreaks.contains(&t) => tiebreaks.push(t),
                    _ => {}
                }
                if precedence(copy, current) == Ordering::Greater {
                    copy
                } else {
                    current
                }
            }
        });
    }
    best.map(|b| (b, tiebreaks))
}

#[cfg(test)]
#[path = "list_tests.rs"]
mod tests;
