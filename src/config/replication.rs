//! How many nodes run each child, and which of them answers: `replication_factor`,
//! `replication_model` and `redundancy_signal` (Elixir's ProcessHub's `Replication` strategy).
//!
//! With a factor k above 1 each child runs on its first k owners on the ring. One of them is the
//! **active** replica: the first owner, in ring order, that runs an instance and is reachable.
//! Messages by id and typed references go to it. When its node goes down the next owner is
//! active as soon as the failure is detected, without a restart. See `docs/strategies.md`,
//! "Replication".

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The most replicas a child may have: every replica is a running actor on every owner, and
/// more than a handful buys no availability a cluster of this size can use.
pub const MAX_REPLICATION_FACTOR: usize = 8;

/// Whether the replicas that are not active also serve (`replication_model` in Elixir's
/// ProcessHub).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicationModel {
    /// One replica is active, the others stand by (the default): for children that must not act
    /// twice (a scheduler, a session that writes).
    #[default]
    ActivePassive,
    /// Every replica is active: for children whose work is idempotent or read-only, where every
    /// copy may serve.
    ActiveActive,
}

impl ReplicationModel {
    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ReplicationModel::ActivePassive => "active_passive",
            ReplicationModel::ActiveActive => "active_active",
        }
    }
}

impl std::str::FromStr for ReplicationModel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "active_passive" | "active-passive" => Ok(ReplicationModel::ActivePassive),
            "active_active" | "active-active" => Ok(ReplicationModel::ActiveActive),
            other => Err(format!(
                "replication model must be `active-passive` or `active-active`, not {other:?}"
            )),
        }
    }
}

/// Which replicas are told their role (`redundancy_signal` in Elixir's ProcessHub): a kind that
/// opts in (`ChildKinds::redundancy`) gets a message at start and whenever its role changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RedundancySignal {
    /// Nobody is told (the default).
    #[default]
    None,
    /// Only replicas that become active.
    Active,
    /// Only replicas that become passive.
    Passive,
    /// Every replica, whatever its new role.
    All,
}

impl RedundancySignal {
    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RedundancySignal::None => "none",
            RedundancySignal::Active => "active",
            RedundancySignal::Passive => "passive",
            RedundancySignal::All => "all",
        }
    }

    /// Whether a replica that now has `role` is told.
    pub fn tells(self, role: crate::types::Role) -> bool {
        use crate::types::Role;
        match self {
            RedundancySignal::None => false,
            RedundancySignal::All => true,
            RedundancySignal::Active => role == Role::Active,
            RedundancySignal::Passive => role == Role::Passive,
        }
    }
}

impl std::str::FromStr for RedundancySignal {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(RedundancySignal::None),
            "active" => Ok(RedundancySignal::Active),
            "passive" => Ok(RedundancySignal::Passive),
            "all" => Ok(RedundancySignal::All),
            other => Err(format!(
                "redundancy signal must be one of none, active, passive, all, not {other:?}"
            )),
        }
    }
}

/// Checks a replication factor.
pub(crate) fn validate_factor(factor: usize) -> Result<(), ConfigError> {
    super::range(
        "replication_factor",
        factor,
        1,
        MAX_REPLICATION_FACTOR,
        "1..=8",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Role;

    #[test]
    fn names_parse_back() {
        for model in [
            ReplicationModel::ActivePassive,
            ReplicationModel::ActiveActive,
        ] {
            assert_eq!(model.name().parse::<ReplicationModel>(), Ok(model));
        }
        for signal in [
            RedundancySignal::None,
            RedundancySignal::Active,
            RedundancySignal::Passive,
            RedundancySignal::All,
        ] {
            assert_eq!(signal.name().parse::<RedundancySignal>(), Ok(signal));
        }
        assert!("both".parse::<RedundancySignal>().is_err());
        assert!("primary".parse::<ReplicationModel>().is_err());
    }

    #[test]
    fn a_signal_tells_only_the_roles_it_names() {
        assert!(!RedundancySignal::None.tells(Role::Active));
        assert!(RedundancySignal::Active.tells(Role::Active));
        assert!(!RedundancySignal::Active.tells(Role::Passive));
        assert!(RedundancySignal::Passive.tells(Role::Passive));
        assert!(RedundancySignal::All.tells(Role::Passive));
    }

    #[test]
    fn factor_is_bounded() {
        assert!(validate_factor(0).is_err());
        assert!(validate_factor(1).is_ok());
        assert!(validate_factor(MAX_REPLICATION_FACTOR).is_ok());
        assert!(validate_factor(MAX_REPLICATION_FACTOR + 1).is_err());
    }
}
