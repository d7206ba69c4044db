//! Replicas being stopped on purpose, so that redistribution does not re-create them.
//!
//! A deliberate stop of a replicated child unbinds its replicas one node at a time: between the
//! first unbind and the last, the row looks like a child with replicas missing, which a
//! redistribution pass would start again on their owners — a stopped child must stay stopped.
//! So a node that sees a replica unbound on purpose (a local stop, or a peer's `Removed`) while
//! other replicas still run notes the child here, and redistribution leaves it alone until its
//! row is gone, it is started anew, or a stop's own timeout (`default_timeout`) passes: a stop
//! that did not reach every replica (a partition kept one away) leaves that replica to be
//! placed as usual, not stranded off its owners.
//!
//! The table is a leaf `HubShared` holds; noting, forgetting and reading it are methods of
//! `HubShared` in [`super::replication`].

use dashmap::DashMap;

use crate::model::ChildId;

/// Children with a replica stopped on purpose, with the monotonic ms it was seen.
#[derive(Default)]
pub(crate) struct ReplicaStops(pub(super) DashMap<ChildId, u64, crate::model::TableHasher>);
