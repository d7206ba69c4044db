//! The declared-list payloads of the hub protocol: what a node asks of the declared list's
//! leader ([`DeclaredOp`], in [`WireMsg::DeclaredMutate`](super::WireMsg::DeclaredMutate)) and
//! why the leader refuses ([`DeclaredRefusal`]). They live apart from the message enum because
//! they are the recovery feature's vocabulary, shared with the DeclaredLeader, not transport.

use serde::{Deserialize, Serialize};

use crate::api::errors::RecoveryError;
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
    /// `no_leader`, `declared_parked`, `auto_recovery_disabled`, `storage` or `no_space`.
    pub code: String,
    /// Details.
    pub message: String,
}

impl From<&RecoveryError> for DeclaredRefusal {
    fn from(e: &RecoveryError) -> Self {
        let code = match e {
            RecoveryError::AutoRecoveryDisabled => "auto_recovery_disabled",
            RecoveryError::NoLeader { .. } => "no_leader",
            RecoveryError::DeclaredParked => "declared_parked",
            RecoveryError::Storage { .. } => "storage",
            RecoveryError::NoSpace { .. } => "no_space",
            RecoveryError::HubUnavailable { .. } => "hub_unavailable",
        };
        Self {
            code: code.into(),
            message: e.to_string(),
        }
    }
}

impl From<DeclaredRefusal> for RecoveryError {
    /// An unknown code (a newer peer) is reported as `no_leader`: the mutation did not happen.
    fn from(r: DeclaredRefusal) -> Self {
        match r.code.as_str() {
            "auto_recovery_disabled" => RecoveryError::AutoRecoveryDisabled,
            "declared_parked" => RecoveryError::DeclaredParked,
            "storage" => RecoveryError::Storage { message: r.message },
            "no_space" => RecoveryError::NoSpace { message: r.message },
            "hub_unavailable" => RecoveryError::HubUnavailable { reason: r.message },
            _ => RecoveryError::NoLeader { reason: r.message },
        }
    }
}
