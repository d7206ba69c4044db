//! The declared-list payloads of the hub protocol: what a node asks of the declared list's
//! leader ([`DeclaredOp`], in [`WireMsg::DeclaredMutate`](super::WireMsg::DeclaredMutate)) and
//! why the leader refuses ([`DeclaredRefusal`]). They live apart from the message enum because
//! they are the recovery feature's vocabulary, shared with the DeclaredLeader, not transport.

use serde::{Deserialize, Serialize};

use crate::model::{ChildId, ChildSpec, Metadata};
use crate::types::RecoveryError;

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

impl DeclaredOp {
    /// The op cut into ops of at most `budget` encoded bytes of children each, in order, so
    /// that each crosses the wire in one frame (see [`super::budget`]). `Clear` and an op
    /// that fits stay whole.
    pub fn split_by_bytes(self, budget: u64) -> Vec<DeclaredOp> {
        use super::budget::chunk_by_bytes;
        match self {
            DeclaredOp::Declare { children } => chunk_by_bytes(children, budget)
                .into_iter()
                .map(|children| DeclaredOp::Declare { children })
                .collect(),
            DeclaredOp::Undeclare { ids } => chunk_by_bytes(ids, budget)
                .into_iter()
                .map(|ids| DeclaredOp::Undeclare { ids })
                .collect(),
            DeclaredOp::Clear => vec![DeclaredOp::Clear],
        }
    }
}

/// Why the leader refused a [`WireMsg::DeclaredMutate`](super::WireMsg::DeclaredMutate).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredRefusal {
    /// `no_leader`, `declared_parked`, `auto_recovery_disabled`, `storage`, `no_space`,
    /// `hub_unavailable` or `outcome_unknown`.
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
            RecoveryError::OutcomeUnknown { .. } => "outcome_unknown",
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
            "outcome_unknown" => RecoveryError::OutcomeUnknown { reason: r.message },
            _ => RecoveryError::NoLeader { reason: r.message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::wire::budget::encoded_len;

    fn declare(n: usize, arg_bytes: usize) -> DeclaredOp {
        DeclaredOp::Declare {
            children: (0..n)
                .map(|i| {
                    let spec = ChildSpec::new(format!("c{i}"), "k")
                        .with_args(&"x".repeat(arg_bytes))
                        .expect("a string encodes");
                    (spec, Metadata::default())
                })
                .collect(),
        }
    }

    #[test]
    fn a_declare_is_cut_into_parts_under_the_budget_keeping_every_child_in_order() {
        let op = declare(40, 1000);
        let whole = encoded_len(&op);
        let parts = op.clone().split_by_bytes(whole / 4);
        assert!(parts.len() >= 4, "{} parts", parts.len());
        let mut ids = Vec::new();
        for part in &parts {
            assert!(encoded_len(part) <= whole / 4 + 64);
            let DeclaredOp::Declare { children } = part else {
                panic!("a declare splits into declares")
            };
            ids.extend(children.iter().map(|(s, _)| s.id.clone()));
        }
        let DeclaredOp::Declare { children } = op else {
            unreachable!()
        };
        let expected: Vec<ChildId> = children.into_iter().map(|(s, _)| s.id).collect();
        assert_eq!(ids, expected);
    }

    #[test]
    fn an_op_that_fits_and_a_clear_stay_whole() {
        let op = declare(3, 10);
        assert_eq!(op.clone().split_by_bytes(1 << 20), vec![op]);
        assert_eq!(DeclaredOp::Clear.split_by_bytes(1), vec![DeclaredOp::Clear]);
        let ids: Vec<ChildId> = (0..1000)
            .map(|i| ChildId::from(format!("id-{i}")))
            .collect();
        let parts = DeclaredOp::Undeclare { ids: ids.clone() }.split_by_bytes(1000);
        assert!(parts.len() > 1);
        let back: Vec<ChildId> = parts
            .into_iter()
            .flat_map(|p| match p {
                DeclaredOp::Undeclare { ids } => ids,
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(back, ids);
    }
}
