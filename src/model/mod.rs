//! The row model: what a child is, what the registry stores about it, and how two copies of a
//! row written on different nodes are reconciled.
//!
//! Everything here is pure (no actors, no IO) so that the merge rules can be property-tested and
//! every node can run them and reach the same answer.

mod child;
mod down;
mod hashing;
mod limits;
mod merge;
mod row;

pub use child::{ChildArgs, ChildId, ChildSpec, InvalidChildId, Restart, Shutdown};
pub use down::DownReason;
pub(crate) use hashing::{FastHashMap, FastHashSet, TableHasher};
pub use limits::{
    child_bytes, validate_child, validate_row, validate_stored_child, InvalidChild,
    MAX_CHILD_BYTES, MAX_KIND_LEN, MAX_ROW_NODES,
};
pub use merge::{
    apply_observation, merge_authored, merge_into, merge_rows, merge_rows_owned, stamp_cmp,
    AuthoredOrder,
};
pub use row::{HubMeta, Metadata, NodeName, Pid, ReservedMetadataKey, Row, RESERVED_METADATA_KEY};
