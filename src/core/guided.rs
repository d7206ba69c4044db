//! Guided placement: a child whose start named its node runs there, not on its ring owner.
//!
//! Some children must run where something else is: a device session on the gateway that holds
//! the device's socket, a shard next to its disk. A start names their node
//! (`StartOptions::child_mapping`), and the choice travels with the child: it is written into
//! the row's hub-reserved metadata ([`RESERVED_METADATA_KEY`], which callers cannot set), so
//! every node, every registry copy and the declared list know it without a second table, and an
//! older node that does not read it still keeps and forwards it.
//!
//! The rules, as in Elixir's ProcessHub's `Guided` strategy:
//! - a guided child starts on its node, which must be a member when the start is made;
//! - it never migrates when nodes join (its node is its owner whoever else joins);
//! - when its node is gone, it is re-placed on its ring owner only if its start allowed it
//!   (`fallback`); otherwise it waits for its node to come back.
//!
//! The number of nodes named must be the replication factor (one child, one node, today).
//! Pure: the Coordinator and the Reconciler ask [`Guided::owner`] where a child belongs.

use serde::{Deserialize, Serialize};

use crate::model::{ChildId, Metadata, NodeName, RESERVED_METADATA_KEY};

/// A guided child's placement, as its row keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guided {
    /// The nodes it runs on, in order of preference.
    pub nodes: Vec<NodeName>,
    /// Whether the ring may place it when every one of its nodes is gone.
    #[serde(default)]
    pub fallback: bool,
    /// The hub chose the nodes by load (`core::load`), not the caller: a rebalance may move
    /// the child.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_load: bool,
}

/// Where a child belongs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner<'a> {
    /// On this node.
    Node(&'a NodeName),
    /// Nowhere for now: a guided child whose nodes are all gone and may not fall back.
    Waiting,
}

/// What is wrong with a start's mapping (Elixir's ProcessHub's errors).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// The hub places every child by mapping, and this one has none.
    #[error("the hub's distribution is guided and the start names no node for the child")]
    Missing,
    /// A node named is not a member, or is named twice.
    #[error("the mapping names {node:?}, {why}")]
    Invalid {
        /// The node.
        node: NodeName,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The mapping names a different number of nodes than the replication factor.
    #[error("the mapping names {got} nodes; the replication factor is {expected}")]
    Mismatch {
        /// The replication factor.
        expected: usize,
        /// The nodes named.
        got: usize,
    },
}

/// The longest value the hub's metadata key may hold for a placement (a few node names).
const MAX_GUIDED_BYTES: usize = 4096;

impl Guided {
    /// The placement written in `metadata`, if the hub wrote one. A value that does not parse
    /// (a peer's garbage) is no placement: the child is placed by the ring.
    pub fn of(metadata: &Metadata) -> Option<Guided> {
        let value = metadata.get(RESERVED_METADATA_KEY)?;
        if value.len() > MAX_GUIDED_BYTES {
            return None;
        }
        let guided: Guided = serde_json::from_str(value).ok()?;
        (!guided.nodes.is_empty()).then_some(guided)
    }

    /// Writes this placement into `metadata` (under the hub's key).
    pub fn write(&self, metadata: &mut Metadata) {
        if let Ok(value) = serde_json::to_string(self) {
            metadata.insert(RESERVED_METADATA_KEY.to_owned(), value);
        }
    }

    /// Where the child belongs: its first node that is a member; when none is, the ring's owner
    /// if it may fall back, else nowhere until one comes back.
    pub fn owner<'a>(
        &'a self,
        is_member: impl Fn(&NodeName) -> bool,
        ring_owner: Option<&'a NodeName>,
    ) -> Option<Owner<'a>> {
        if let Some(node) = self.nodes.iter().find(|n| is_member(n)) {
            return Some(Owner::Node(node));
        }
        if self.fallback {
            return ring_owner.map(Owner::Node);
        }
        Some(Owner::Waiting)
    }

    /// The slot of this placement that node `me` gives up when the leader asks it to move the
    /// child for load: its own, or (it runs the child by fallback) the slot of a node it knows
    /// does not run it (`known_idle`: a member it sees unbound, or a node it saw go down and not
    /// come back). A node it never saw may run the child out of its sight, behind a partial
    /// partition or from before this node booted: naming a new node in that slot makes a
    /// second first owner while the first still runs, and two nodes that see the same members
    /// could each hold the active replica.
    pub fn load_slot(
        &self,
        me: &NodeName,
        known_idle: impl Fn(&NodeName) -> bool,
    ) -> Option<usize> {
        match self.nodes.iter().position(|n| n == me) {
            Some(i) => Some(i),
            None => self.nodes.iter().position(known_idle),
        }
    }
}

/// Checks a start's mapping for one child: `nodes` named (if any), whether the hub's
/// distribution requires one, the replication factor, and who is a member. With `fallback` a
/// node that is not a member is accepted: the child starts on its ring owner until then.
pub fn check_mapping(
    nodes: Option<&Vec<NodeName>>,
    required: bool,
    replication_factor: usize,
    fallback: bool,
    is_member: impl Fn(&NodeName) -> bool,
) -> Result<Option<Vec<NodeName>>, MappingError> {
    let Some(nodes) = nodes else {
        return if required {
            Err(MappingError::Missing)
        } else {
            Ok(None)
        };
    };
    if nodes.len() != replication_factor {
        return Err(MappingError::Mismatch {
            expected: replication_factor,
            got: nodes.len(),
        });
    }
    for (i, node) in nodes.iter().enumerate() {
        if nodes[..i].contains(node) {
            return Err(MappingError::Invalid {
                node: node.clone(),
                why: "named twice",
            });
        }
        if !fallback && !is_member(node) {
            return Err(MappingError::Invalid {
                node: node.clone(),
                why: "not a member of the hub",
            });
        }
    }
    Ok(Some(nodes.clone()))
}

impl crate::types::StartOptions {
    /// The metadata child `id` is stored with: the request's, plus the hub's record of its
    /// placement when the mapping names it.
    pub(crate) fn metadata_for(&self, id: &ChildId) -> Metadata {
        let mut metadata = self.metadata.clone();
        if let Some(nodes) = self.child_mapping.get(id) {
            let by_load = self.placed_by_load.contains(id);
            Guided {
                nodes: nodes.clone(),
                fallback: self.guided_fallback || by_load,
                by_load,
            }
            .write(&mut metadata);
        }
        metadata
    }
}

impl From<MappingError> for crate::types::ChildStartError {
    fn from(e: MappingError) -> Self {
        match e {
            MappingError::Missing => Self::ChildMappingMissing,
            MappingError::Invalid { .. } => Self::ChildMappingInvalid {
                reason: e.to_string(),
            },
            MappingError::Mismatch { expected, got } => Self::ChildMappingMismatch {
                expected: expected as u32,
                got: got as u32,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: &NodeName) -> bool {
        n == "a@h" || n == "b@h"
    }

    #[test]
    fn a_placement_round_trips_through_metadata_and_garbage_is_none() {
        let guided = Guided {
            nodes: vec!["a@h".into()],
            fallback: true,
            by_load: false,
        };
        let mut metadata = Metadata::from([("tag".to_owned(), "x".to_owned())]);
        guided.write(&mut metadata);
        assert_eq!(Guided::of(&metadata), Some(guided));
        metadata.insert(RESERVED_METADATA_KEY.into(), "{not json".into());
        assert_eq!(Guided::of(&metadata), None);
        metadata.insert(RESERVED_METADATA_KEY.into(), r#"{"nodes":[]}"#.into());
        assert_eq!(Guided::of(&metadata), None);
        metadata.insert(
            RESERVED_METADATA_KEY.into(),
            "x".repeat(MAX_GUIDED_BYTES + 1),
        );
        assert_eq!(Guided::of(&metadata), None);
        assert_eq!(Guided::of(&Metadata::new()), None);
    }

    #[test]
    fn a_guided_child_belongs_on_its_node_then_the_ring_only_if_allowed() {
        let ring_owner: NodeName = "b@h".into();
        let mut guided = Guided {
            nodes: vec!["a@h".into()],
            fallback: false,
            by_load: false,
        };
        assert_eq!(
            guided.owner(member, Some(&ring_owner)),
            Some(Owner::Node(&"a@h".to_owned()))
        );
        let gone = |n: &NodeName| n == "b@h";
        assert_eq!(guided.owner(gone, Some(&ring_owner)), Some(Owner::Waiting));
        guided.fallback = true;
        assert_eq!(
            guided.owner(gone, Some(&ring_owner)),
            Some(Owner::Node(&ring_owner))
        );
        assert_eq!(guided.owner(gone, None), None);
    }

    #[test]
    fn a_load_move_takes_its_own_slot_or_one_it_knows_is_idle() {
        let guided = Guided {
            nodes: vec!["a@h".into(), "b@h".into()],
            fallback: true,
            by_load: true,
        };
        let none = |_: &NodeName| false;
        assert_eq!(guided.load_slot(&"b@h".into(), none), Some(1));
        // Running by fallback: a node it never saw keeps its slot.
        assert_eq!(guided.load_slot(&"c@h".into(), none), None);
        let b_idle = |n: &NodeName| n == "b@h";
        assert_eq!(guided.load_slot(&"c@h".into(), b_idle), Some(1));
    }

    #[test]
    fn a_mapping_is_checked_as_the_original_checks_it() {
        let one = vec!["a@h".to_owned()];
        assert_eq!(check_mapping(None, false, 1, false, member), Ok(None));
        assert_eq!(
            check_mapping(None, true, 1, false, member),
            Err(MappingError::Missing)
        );
        assert_eq!(
            check_mapping(Some(&one), true, 1, false, member),
            Ok(Some(one.clone()))
        );
        let two = vec!["a@h".to_owned(), "b@h".to_owned()];
        assert_eq!(
            check_mapping(Some(&two), false, 1, false, member),
            Err(MappingError::Mismatch {
                expected: 1,
                got: 2
            })
        );
        let stranger = vec!["z@h".to_owned()];
        assert!(matches!(
            check_mapping(Some(&stranger), false, 1, false, member),
            Err(MappingError::Invalid { .. })
        ));
        // Allowed to fall back, a node that is not a member (yet) is accepted.
        assert_eq!(
            check_mapping(Some(&stranger), false, 1, true, member),
            Ok(Some(stranger.clone()))
        );
        let twice = vec!["a@h".to_owned(), "a@h".to_owned()];
        assert!(matches!(
            check_mapping(Some(&twice), false, 2, true, member),
            Err(MappingError::Invalid {
                why: "named twice",
                ..
            })
        ));
        assert!(matches!(
            check_mapping(Some(&Vec::new()), false, 1, false, member),
            Err(MappingError::Mismatch { got: 0, .. })
        ));
    }
}

#[cfg(test)]
mod cost {
    use super::*;
    use crate::model::{child_bytes, ChildSpec};

    /// What guided placement adds to a child on the wire and in every registry copy: the record
    /// in the row's metadata, and nothing else (no table, no message of its own).
    #[test]
    fn the_placement_record_costs_a_few_dozen_bytes_per_row() {
        let spec = ChildSpec::new("device-000001", "session");
        let plain = child_bytes(&spec, &Metadata::new());
        let mut metadata = Metadata::new();
        Guided {
            nodes: vec!["gateway-3@10.0.0.3".into()],
            fallback: false,
            by_load: false,
        }
        .write(&mut metadata);
        let guided = child_bytes(&spec, &metadata);
        let added = guided - plain;
        // The map's entry: key (15 bytes) and JSON value (49), each behind an 8-byte length.
        assert_eq!(added, 80, "{plain} -> {guided}");
    }
}
