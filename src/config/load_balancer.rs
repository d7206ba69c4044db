//! The load-based placement's timing and rebalance (`[load_balancer]`, read with `distribution =
//! "load_balanced"`): the options of Elixir's ProcessHub's `CentralizedLoadBalancer`.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// How loads are gathered and when children are moved to even them out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadBalancerConfig {
    /// How often each node reports its load to the leader, and the leader sends the table back (and
    /// considers a rebalance), in ms. Range `100..=600_000`, default 5 000 (Elixir's ProcessHub
    /// pushes every 10 000).
    pub push_interval_ms: u64,
    /// The share of a node's load history kept at each report, in percent: 0 reads only the newest
    /// report, 90 is Elixir's ProcessHub's `weight_decay_factor`. Range `0..=99`, default 50, so a
    /// node that took a burst of children weighs it within two reports.
    pub decay_percent: u8,
    /// Move children when the busiest and the idlest member's children differ by more than
    /// this percentage of the mean; 0 (the default) never moves a child for load. A child moves
    /// as a hot swap under `migration = "hot"`. Range `0..=10_000`.
    pub rebalance_threshold_percent: u32,
    /// At most this many children move per report interval. Range `1..=100_000`, default 100.
    pub rebalance_batch: u32,
}

impl Default for LoadBalancerConfig {
    fn default() -> Self {
        Self {
            push_interval_ms: 5_000,
            decay_percent: 50,
            rebalance_threshold_percent: 0,
            rebalance_batch: 100,
        }
    }
}

impl LoadBalancerConfig {
    /// Checks every option against its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        super::range(
            "load_balancer.push_interval_ms",
            self.push_interval_ms,
            100,
            600_000,
            "100..=600000",
        )?;
        super::range(
            "load_balancer.decay_percent",
            self.decay_percent,
            0,
            99,
            "0..=99",
        )?;
        super::range(
            "load_balancer.rebalance_threshold_percent",
            self.rebalance_threshold_percent,
            0,
            10_000,
            "0..=10000",
        )?;
        super::range(
            "load_balancer.rebalance_batch",
            self.rebalance_batch,
            1,
            100_000,
            "1..=100000",
        )
    }

    /// The decay as a fraction.
    pub fn decay(&self) -> f64 {
        f64::from(self.decay_percent) / 100.0
    }

    /// The rebalance threshold as a fraction of the mean, `None` when off.
    pub fn rebalance_threshold(&self) -> Option<f64> {
        (self.rebalance_threshold_percent > 0)
            .then(|| f64::from(self.rebalance_threshold_percent) / 100.0)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Distribution, ProcessHub};

    #[test]
    fn load_balanced_reads_from_toml_with_its_options() {
        let config = ProcessHub::from_toml_str(
            "hub_id = \"h\"\ndistribution = \"load_balanced\"\n[load_balancer]\npush_interval_ms = 500\nrebalance_threshold_percent = 40\n",
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.distribution, Distribution::LoadBalanced);
        assert_eq!(config.load_balancer.push_interval_ms, 500);
        assert_eq!(config.load_balancer.rebalance_threshold(), Some(0.4));
        assert_eq!(config.load_balancer.decay_percent, 50);
        assert_eq!(
            ProcessHub::new("h").load_balancer.rebalance_threshold(),
            None
        );
        assert!(ProcessHub::from_toml_str("hub_id = \"h\"\n[load_balancer]\npush = 1\n").is_err());
    }

    #[test]
    fn the_options_are_range_checked() {
        let mut config = ProcessHub::new("h");
        config.load_balancer.decay_percent = 100;
        let err = config.validate().unwrap_err();
        assert!(err.to_string().contains("decay_percent"), "{err}");
        config.load_balancer.decay_percent = 0;
        config.load_balancer.push_interval_ms = 10;
        let err = config.validate().unwrap_err();
        assert!(err.to_string().contains("push_interval_ms"), "{err}");
    }
}
