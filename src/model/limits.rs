//! What a child may weigh, and the one check every way in applies to it.
//!
//! A child's spec and metadata travel whole in every frame that carries it (a start, a full
//! sync, a declared offer) and sit whole in one storage value, so one child larger than a frame
//! could never be replicated, re-placed or recovered: the hub would accept it and then fail on
//! every retry. [`MAX_CHILD_BYTES`] is therefore a hard limit, checked when a child is started
//! and again when a peer's frame or a manifest brings one in, so that input from outside the
//! process is held to exactly the rules the API applies ([`validate_child`]). One invalid child
//! rejects itself, never the batch it came in.

use bincode::Options;

use super::child::{ChildId, ChildSpec};
use super::row::{Metadata, Row, RESERVED_METADATA_KEY};

/// The largest encoded child (spec and metadata, as bincode encodes them on the wire): 2 MiB.
///
/// A quarter of a frame's byte budget is left for everything else a frame carries, so a child
/// of this size still crosses the wire alone in any message (see `cluster::wire::budget`).
pub const MAX_CHILD_BYTES: u64 = 2 * 1024 * 1024;

/// The longest kind name accepted.
pub const MAX_KIND_LEN: usize = 256;

/// The most nodes a row may name in `node_pids`: more than any cluster has members.
pub const MAX_ROW_NODES: usize = 1024;

/// Why a child (or a row) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidChild {
    /// The id is empty or too long to be a key.
    #[error("{0}")]
    Id(#[from] super::child::InvalidChildId),
    /// The kind is empty or longer than [`MAX_KIND_LEN`].
    #[error("child {id}: kind must be 1 to {MAX_KIND_LEN} bytes, not {len}")]
    Kind {
        /// The child.
        id: ChildId,
        /// The kind's length.
        len: usize,
    },
    /// The metadata used the key the hub reserves for itself.
    #[error("child {id}: metadata key {RESERVED_METADATA_KEY:?} is reserved for the hub")]
    ReservedMetadataKey {
        /// The child.
        id: ChildId,
    },
    /// The spec and metadata together encode larger than [`MAX_CHILD_BYTES`].
    #[error("child {id} encodes to {bytes} bytes, more than the {max} a child may weigh")]
    TooLarge {
        /// The child.
        id: ChildId,
        /// Its encoded size.
        bytes: u64,
        /// [`MAX_CHILD_BYTES`].
        max: u64,
    },
    /// A row names more nodes than [`MAX_ROW_NODES`], or an empty node name.
    #[error("row {id}: {reason}")]
    Row {
        /// The child.
        id: ChildId,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The encoded size of a child (spec and metadata) as the wire's bincode encodes it; `u64::MAX`
/// if it cannot be encoded at all.
pub fn child_bytes(spec: &ChildSpec, metadata: &Metadata) -> u64 {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .serialized_size(&(spec, metadata))
        .unwrap_or(u64::MAX)
}

/// Checks a child as the API does: a valid id, a kind of sensible length, no reserved
/// metadata key, and no more than [`MAX_CHILD_BYTES`] encoded.
pub fn validate_child(spec: &ChildSpec, metadata: &Metadata) -> Result<(), InvalidChild> {
    if metadata.contains_key(RESERVED_METADATA_KEY) {
        return Err(InvalidChild::ReservedMetadataKey {
            id: spec.id.clone(),
        });
    }
    validate_stored_child(spec, metadata)
}

/// Checks a child as a hub wrote it (a peer's row or start item, a declared entry): as
/// [`validate_child`], except that the metadata may carry the hub's own key (its placement,
/// `core::guided`, read with bounds wherever it is used).
pub fn validate_stored_child(spec: &ChildSpec, metadata: &Metadata) -> Result<(), InvalidChild> {
    ChildId::parse(spec.id.as_str())?;
    if spec.kind.is_empty() || spec.kind.len() > MAX_KIND_LEN {
        return Err(InvalidChild::Kind {
            id: spec.id.clone(),
            len: spec.kind.len(),
        });
    }
    let bytes = child_bytes(spec, metadata);
    if bytes > MAX_CHILD_BYTES {
        return Err(InvalidChild::TooLarge {
            id: spec.id.clone(),
            bytes,
            max: MAX_CHILD_BYTES,
        });
    }
    Ok(())
}

/// Checks a row a peer sent: its child as [`validate_child`], and a sane `node_pids` (no
/// empty node name, at most [`MAX_ROW_NODES`] entries).
pub fn validate_row(row: &Row) -> Result<(), InvalidChild> {
    validate_stored_child(&row.spec, &row.metadata)?;
    if row.node_pids.len() > MAX_ROW_NODES {
        return Err(InvalidChild::Row {
            id: row.spec.id.clone(),
            reason: "names more nodes than any cluster has",
        });
    }
    if row.node_pids.keys().any(String::is_empty) || row.hub.changed_by.is_empty() {
        return Err(InvalidChild::Row {
            id: row.spec.id.clone(),
            reason: "names an empty node",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_within_the_limits_passes() {
        let spec = ChildSpec::new("a", "counter");
        assert_eq!(validate_child(&spec, &Metadata::new()), Ok(()));
    }

    #[test]
    fn each_rule_refuses_with_its_own_error() {
        let meta = Metadata::new();
        assert!(matches!(
            validate_child(&ChildSpec::new("", "counter"), &meta),
            Err(InvalidChild::Id(_))
        ));
        assert!(matches!(
            validate_child(&ChildSpec::new("x".repeat(700), "counter"), &meta),
            Err(InvalidChild::Id(_))
        ));
        assert!(matches!(
            validate_child(&ChildSpec::new("a", ""), &meta),
            Err(InvalidChild::Kind { len: 0, .. })
        ));
        assert!(matches!(
            validate_child(&ChildSpec::new("a", "k".repeat(MAX_KIND_LEN + 1)), &meta),
            Err(InvalidChild::Kind { .. })
        ));
        let reserved = Metadata::from([(RESERVED_METADATA_KEY.to_owned(), String::new())]);
        assert!(matches!(
            validate_child(&ChildSpec::new("a", "k"), &reserved),
            Err(InvalidChild::ReservedMetadataKey { .. })
        ));
    }

    #[test]
    fn the_size_limit_counts_spec_and_metadata_together() {
        let spec = ChildSpec::new("a", "counter");
        let half = "x".repeat((MAX_CHILD_BYTES / 2) as usize);
        let one = Metadata::from([("m".to_owned(), half.clone())]);
        assert_eq!(validate_child(&spec, &one), Ok(()));
        let big = spec.clone().with_args(&half).unwrap();
        let err = validate_child(&big, &one).unwrap_err();
        assert!(
            matches!(err, InvalidChild::TooLarge { max: MAX_CHILD_BYTES, bytes, .. } if bytes > MAX_CHILD_BYTES)
        );
    }

    #[test]
    fn a_row_naming_an_empty_node_is_refused() {
        let mut row =
            Row::authored(ChildSpec::new("a", "k"), Metadata::new(), "n@h", 0, false).unwrap();
        assert_eq!(validate_row(&row), Ok(()));
        row.node_pids.insert(String::new(), 1);
        assert!(matches!(validate_row(&row), Err(InvalidChild::Row { .. })));
    }
}
