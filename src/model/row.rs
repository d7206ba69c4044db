//! A registry row: the spec of a child, where it runs, the caller's metadata, and the hub's own
//! bookkeeping that decides which copy of the row wins when nodes disagree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::child::{ChildId, ChildSpec};

/// A node's cluster identity, `name@host`.
pub type NodeName = String;

/// A node-local actor id (the `pid` of `ActorId::Local`). Only meaningful with the node it was
/// observed on, which is why rows keep it keyed by node.
pub type Pid = u64;

/// The metadata key reserved for the hub (`:__process_hub__` in Elixir's ProcessHub).
pub const RESERVED_METADATA_KEY: &str = "__process_hub__";

/// Caller metadata: free-form string pairs. The `tag` key drives `tag_query`.
///
/// Strings rather than arbitrary JSON so that rows encode compactly and identically with bincode
/// on the wire and on disk.
pub type Metadata = BTreeMap<String, String>;

/// Caller metadata tried to set the key the hub reserves for itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata key {RESERVED_METADATA_KEY:?} is reserved for the hub's bookkeeping")]
pub struct ReservedMetadataKey;

/// The hub-owned part of a row. Caller metadata can never set it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HubMeta {
    /// Incremented by every write that authors the row. A counter, never a clock: a node that
    /// boots with a bogus time must still merge correctly.
    pub epoch: u64,
    /// The node that authored this version; breaks epoch ties (lower wins).
    pub changed_by: NodeName,
    /// Wall-clock milliseconds of the write, for diagnostics only; never compared.
    pub changed_at_ms: u64,
    /// The child is in the declared list (it must survive a whole-cluster outage).
    pub durable: bool,
}

/// One child as the registry records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// What to start.
    pub spec: ChildSpec,
    /// Where it runs: one observation per node, owned by the node it names.
    pub node_pids: BTreeMap<NodeName, Pid>,
    /// The caller's metadata.
    pub metadata: Metadata,
    /// The hub's bookkeeping.
    pub hub: HubMeta,
}

impl Row {
    /// A fresh row authored by `node` at epoch 1, with no observations yet.
    ///
    /// Fails if the caller's metadata uses the reserved key.
    pub fn authored(
        spec: ChildSpec,
        metadata: Metadata,
        node: &str,
        now_ms: u64,
        durable: bool,
    ) -> Result<Self, ReservedMetadataKey> {
        if metadata.contains_key(RESERVED_METADATA_KEY) {
            return Err(ReservedMetadataKey);
        }
        Ok(Self {
            spec,
            node_pids: BTreeMap::new(),
            metadata,
            hub: HubMeta {
                epoch: 1,
                changed_by: node.to_owned(),
                changed_at_ms: now_ms,
                durable,
            },
        })
    }

    /// The child's id.
    pub fn id(&self) -> &ChildId {
        &self.spec.id
    }

    /// Authors a new version of this row on `node`: the epoch moves past `self`'s so the new
    /// version wins every merge against the old one.
    pub fn reauthor(&mut self, node: &str, now_ms: u64) {
        self.hub.epoch += 1;
        self.hub.changed_by = node.to_owned();
        self.hub.changed_at_ms = now_ms;
    }

    /// The caller's `tag`, if any.
    pub fn tag(&self) -> Option<&str> {
        self.metadata.get("tag").map(String::as_str)
    }
}
