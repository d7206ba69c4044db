//! The declared-list payloads of the hub protocol: what a node asks of the declared list's
//! leader ([`DeclaredOp`], in [`WireMsg::DeclaredMutate`](super::WireMsg::DeclaredMutate)) and
//! why the leader refuses ([`DeclaredRefusal`]). They live apart from the message enum because
//! they are the recovery feature's vocabulary, shared with the DeclaredLeader, not transport.

use serde::{Deserialize, Serialize};

use crate::model::{ChildId, ChildSpec, Metadata};

/// A mutation of the declared list routed to the leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeclaredOp {
    /// Declare these children (a durable start, before the start).
    Declare {
        /// The children with their metadata.
        children: Vec<(ChildSpec, Metadata)>,
    },
    /// Undeclare these children (a deliberate stop, before the terminate).
    Undeclare {
        /// The children.
        ids: Vec<ChildId>,
    },
    /// The operator's clear.
    Clear,
}

/// Why the leader refused a [`WireMsg::DeclaredMutate`](super::WireMsg::DeclaredMutate).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredRefusal {
    /// `no_leader`, `declared_parked`, `auto_recovery_disabled` or `storage`.
    pub code: String,
    /// Details.
    pub message: String,
}
