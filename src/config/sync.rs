//! How registry changes reach the other nodes (`[sync]`): `pubsub` broadcasts each change to
//! every peer, `gossip` hands it to a few peers that pass it on. See `docs/strategies.md`
//! ("Synchronization") for when to pick which and what each costs.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `recipients` as in Elixir's ProcessHub: how many peers a change goes to first.
pub const DEFAULT_RECIPIENTS: usize = 3;

/// Largest `recipients`: past it a change's fan-out is a broadcast again.
pub const MAX_GOSSIP_RECIPIENTS: usize = 32;

/// A hub's synchronization strategy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", deny_unknown_fields)]
pub enum SyncStrategy {
    /// Every change goes to every peer at once, and every `sync_interval_ms` each node sends
    /// its whole set of observations to every peer: the fastest to agree, O(N) frames per
    /// change from its origin and O(N²) per sync period.
    #[default]
    #[serde(rename = "pubsub")]
    PubSub,
    /// A change goes to `recipients` peers, each of which passes it on to its share of the
    /// rest, so no node sends more than `recipients` frames for it; every `interval_ms` a round
    /// gathers each node's position in every other node's stream and brings back whoever is
    /// behind, and each node sends its whole set of observations to one peer in turn.
    Gossip {
        /// The period of a sync round, in ms (`sync_interval` in Elixir's ProcessHub). Range
        /// `100..=3_600_000`, default 15 000.
        #[serde(default = "default_interval_ms")]
        interval_ms: u64,
        /// How many peers a node hands each change and each round to. Range `1..=32`,
        /// default 3.
        #[serde(default = "default_recipients")]
        recipients: usize,
        /// Only the first member by name starts the periodic rounds (the default); with
        /// `false` every member starts one each period (more frames, no single starter).
        #[serde(default = "default_restricted_init")]
        restricted_init: bool,
    },
}

fn default_interval_ms() -> u64 {
    15_000
}

fn default_recipients() -> usize {
    DEFAULT_RECIPIENTS
}

fn default_restricted_init() -> bool {
    true
}

impl SyncStrategy {
    /// Gossip with Elixir's ProcessHub's defaults (15 s rounds, 3 recipients, restricted start).
    pub fn gossip() -> Self {
        SyncStrategy::Gossip {
            interval_ms: default_interval_ms(),
            recipients: default_recipients(),
            restricted_init: default_restricted_init(),
        }
    }
}

/// Checks the strategy's numbers against their ranges.
pub(crate) fn validate(strategy: &SyncStrategy) -> Result<(), ConfigError> {
    match strategy {
        SyncStrategy::PubSub => Ok(()),
        SyncStrategy::Gossip {
            interval_ms,
            recipients,
            ..
        } => {
            super::range(
                "sync.interval_ms",
                *interval_ms,
                100,
                3_600_000,
                "100..=3600000",
            )?;
            super::range(
                "sync.recipients",
                *recipients,
                1,
                MAX_GOSSIP_RECIPIENTS,
                "1..=32",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProcessHub;

    #[test]
    fn gossip_loads_from_toml_with_the_originals_defaults() {
        let cfg = ProcessHub::from_toml_str("hub_id = \"h\"\n[sync]\ntype = \"gossip\"\n").unwrap();
        assert_eq!(cfg.sync, SyncStrategy::gossip());
        cfg.validate().unwrap();
        let cfg = ProcessHub::from_toml_str(
            "hub_id = \"h\"\n[sync]\ntype = \"gossip\"\ninterval_ms = 500\nrecipients = 2\n\
             restricted_init = false\n",
        )
        .unwrap();
        assert_eq!(
            cfg.sync,
            SyncStrategy::Gossip {
                interval_ms: 500,
                recipients: 2,
                restricted_init: false
            }
        );
        let cfg = ProcessHub::from_toml_str("hub_id = \"h\"\n[sync]\ntype = \"pubsub\"\n").unwrap();
        assert_eq!(cfg.sync, SyncStrategy::PubSub);
        assert_eq!(ProcessHub::default().sync, SyncStrategy::PubSub);
    }

    #[test]
    fn bad_numbers_and_unknown_keys_are_named() {
        for (text, option) in [
            ("type = \"gossip\"\nrecipients = 0\n", "sync.recipients"),
            ("type = \"gossip\"\nrecipients = 33\n", "sync.recipients"),
            ("type = \"gossip\"\ninterval_ms = 99\n", "sync.interval_ms"),
        ] {
            let cfg =
                ProcessHub::from_toml_str(&format!("hub_id = \"h\"\n[sync]\n{text}")).unwrap();
            let err = cfg.validate().unwrap_err();
            assert!(err.to_string().contains(option), "{err}");
        }
        assert!(ProcessHub::from_toml_str(
            "hub_id = \"h\"\n[sync]\ntype = \"gossip\"\nfanout = 2\n"
        )
        .is_err());
        assert!(ProcessHub::from_toml_str("hub_id = \"h\"\n[sync]\ntype = \"flood\"\n").is_err());
    }
}
