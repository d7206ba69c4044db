//! The hub's configuration: the `ProcessHub` struct, its builder, and its validation.
//!
//! Everything a hub needs to know before it boots lives here, as plain data that loads from TOML
//! or JSON (`serde`) or is built in code ([`ProcessHub::builder`]). Hooks are not part of it:
//! closures do not serialize, so they are registered on the builder of [`crate::Hub`] or on a
//! running hub's handle.
//!
//! Validation happens once, when the hub is spawned ([`ProcessHub::validate`]): a bad value is a
//! [`ConfigError`] naming the option and the range it must lie in, never a panic or a silent clamp.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod distribution;
pub mod elector;
pub mod load_balancer;
pub mod migration;
pub mod partition;
pub mod recovery;
pub mod registry_backend;
pub mod replication;
pub mod sync;

pub use distribution::Distribution;
pub use elector::LeaderElector;
pub use load_balancer::LoadBalancerConfig;
pub use migration::{HotSwapConfig, Migration};
pub use partition::PartitionTolerance;
pub use recovery::{
    AutoRecoveryConfig, AutoRecoveryConfigError, ConfigWarning, DeclaredCommit, ManifestLocation,
    StartBudget,
};
pub use registry_backend::BackendConfig;
pub use replication::{RedundancySignal, ReplicationModel, MAX_REPLICATION_FACTOR};
pub use sync::SyncStrategy;

use crate::model::{ChildId, ChildSpec, NodeName};

/// A configuration value outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A numeric or duration option is out of range.
    #[error("option `{option}` is {value}, allowed range is {allowed}")]
    OutOfRange {
        /// The option's name as written in the config file.
        option: &'static str,
        /// The rejected value, as text.
        value: String,
        /// The allowed range, as text (`1..=10000`, `> 0 ms`, ...).
        allowed: &'static str,
    },
    /// A text option is malformed (an empty hub id, a node name without `@`, ...).
    #[error("option `{option}` is invalid ({value:?}): {reason}")]
    Invalid {
        /// The option's name.
        option: &'static str,
        /// The rejected value.
        value: String,
        /// What is expected.
        reason: &'static str,
    },
    /// Two static child specs share an id.
    #[error("option `child_specs` names child {id} twice")]
    DuplicateChildSpec {
        /// The repeated id.
        id: ChildId,
    },
    /// The config file could not be parsed.
    #[error("cannot parse the hub configuration: {0}")]
    Parse(String),
    /// An `auto_recovery` option is out of range or unusable.
    #[error(transparent)]
    AutoRecovery(#[from] AutoRecoveryConfigError),
}

/// The configuration of one hub on one node (`%ProcessHub{}` in Elixir's ProcessHub).
///
/// Only `hub_id` has no sensible default. Durations are written in milliseconds in files
/// (`*_ms` fields) so that TOML and JSON stay readable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProcessHub {
    /// The hub's name. Hubs with the same id on connected nodes form one cluster, and a node may
    /// run several hubs with different ids. Non-empty, at most 128 bytes, no `/`.
    pub hub_id: String,
    /// The local node's identity `name@host`, the key of this node's entries in a row's
    /// `node_pids`. Default `local@localhost`.
    pub node_name: NodeName,
    /// Children started (awaited) when the hub boots; boot fails if any cannot start.
    pub child_specs: Vec<ChildSpec>,
    /// Where the registry copy lives. Default: memory.
    pub registry_backend: BackendConfig,
    /// Base directory of the disk backends' default path (`<data_dir>/process_hub/<hub_id>/`).
    /// Default `./data`.
    pub data_dir: PathBuf,
    /// Restart intensity: at most this many restarts of local children ... Range `0..=1_000_000`,
    /// default 100.
    pub max_restarts: u32,
    /// ... within this many seconds; more escalates to the hub supervisor. Range `1..=3600`,
    /// default 4.
    pub max_seconds: u32,
    /// How many times the hub supervisor restarts a failed hub actor within `max_seconds`
    /// before it gives up and stops the hub. Range `0..=1000`, default 3.
    pub hub_max_restarts: u32,
    /// Time allowed for a graceful shutdown of the whole hub (children included), in ms.
    /// Range `1..=3_600_000`, default 60 000 (`dsup_shutdown_timeout` in Elixir's ProcessHub).
    pub shutdown_timeout_ms: u64,
    /// Default `timeout` of start and stop requests, in ms. Range `0..=3_600_000`,
    /// default 10 000.
    pub default_timeout_ms: u64,
    /// Period of the janitor's sweep of expired TTL rows, in ms. Range `10..=86_400_000`,
    /// default 15 000 (`storage_purge_interval` in Elixir's ProcessHub).
    pub storage_purge_interval_ms: u64,
    /// Durable children and orphan recovery (`docs/recovery.md`). `None` (the default): off,
    /// `durable: true` starts are refused and the recovery state is `normal` from the start.
    pub auto_recovery: Option<AutoRecoveryConfig>,
    /// Cluster: period of the full registry sync each node sends its peers (heals lost
    /// deltas), in ms. Range `100..=3_600_000`, default 15 000 (Elixir's ProcessHub's
    /// `sync_interval`).
    pub sync_interval_ms: u64,
    /// Cluster: how long a node that went down may come back (a flap) before the survivors
    /// re-place its children, in ms. Range `0..=600_000`, default 1 000: heartbeats already
    /// waited for the failure detector's timeout, so the grace only absorbs short flaps.
    pub nodedown_grace_ms: u64,
    /// Cluster: a partial partition (a member reached by some members and not by others) is
    /// resolved only once the cluster's reachability has been stable this long, and a node set
    /// aside by the resolution comes back once fully connected this long (doubled per repeat
    /// within ten minutes, at most five minutes), in ms. Range `100..=600_000`, default 5 000.
    /// See `docs/cluster.md`, "Reachability".
    pub stable_after_ms: u64,
    /// Disk backends without auto-recovery (`recovery_replay`): how long a booting node waits,
    /// at least, before it restarts the children its kept rows say it ran, in ms; it also
    /// waits until every peer that came up meanwhile delivered its registry, so that a child a
    /// peer re-placed while this node was down is not started twice, and, on a node given
    /// seeds, until at least one peer did (an isolated node's cluster may run them without it).
    /// Long enough for the node's peers to connect. Range `0..=600_000`, default 3 000. See
    /// `docs/recovery.md`, "What survives".
    pub recovery_replay_wait_ms: u64,
    /// Cluster: membership events are batched; a pass runs this long after the last event, in
    /// ms. Range `0..=60_000`, default 200.
    pub membership_debounce_ms: u64,
    /// Cluster: ... but never later than this after the first event of a batch, in ms. Range
    /// `membership_debounce_ms..=600_000`, default 2 000.
    pub membership_max_wait_ms: u64,
    /// Cluster: a failed migration or re-placement is retried after this long, in ms. Range
    /// `10..=600_000`, default 1 000.
    pub migration_retry_ms: u64,
    /// Cluster: a row left with no binding when its node died is kept this long (so lookups and
    /// re-placement find its spec) and then swept, in ms. Range `100..=86_400_000`,
    /// default 60 000.
    pub stub_ttl_ms: u64,
    /// Cluster: how new children are placed: `consistent_hash` (default) or `guided` (every
    /// start names each child's node). See `docs/strategies.md`.
    pub distribution: Distribution,
    /// Cluster: how children move when the members change, `cold` (the default) or `hot`
    /// (state handover for kinds that opt in; see [`Migration`]).
    pub migration: Migration,
    /// Cluster: the hot swap's timing (read with `migration = "hot"`).
    pub hot_swap: HotSwapConfig,
    /// Cluster: how loads are gathered and children rebalanced (read with
    /// `distribution = "load_balanced"`).
    pub load_balancer: LoadBalancerConfig,
    /// Cluster: how many nodes run each child (its first k ring owners). Range `1..=8`,
    /// default 1 (one instance per child). See [`replication`].
    pub replication_factor: usize,
    /// Cluster: with a factor above 1, whether only one replica is active (the default) or all.
    pub replication_model: ReplicationModel,
    /// Cluster: which replicas are told their role when it changes (default: none).
    pub redundancy_signal: RedundancySignal,
    /// Cluster: what a side of a split without quorum does: `divergence` (the default: both
    /// sides keep running) or a quorum strategy (the side without quorum stops its children
    /// and refuses work until quorum returns). See `docs/strategies.md`.
    pub partition_tolerance: PartitionTolerance,
    /// Cluster: how registry changes reach the other nodes: `pubsub` (the default: each change
    /// to every peer) or `gossip` (each change to a few peers that pass it on; for large
    /// clusters). See `docs/strategies.md`.
    pub sync: SyncStrategy,
}

impl Default for ProcessHub {
    fn default() -> Self {
        Self {
            hub_id: String::new(),
            node_name: "local@localhost".to_owned(),
            child_specs: Vec::new(),
            registry_backend: BackendConfig::Memory,
            data_dir: PathBuf::from("./data"),
            max_restarts: 100,
            max_seconds: 4,
            hub_max_restarts: 3,
            shutdown_timeout_ms: 60_000,
            default_timeout_ms: 10_000,
            storage_purge_interval_ms: 15_000,
            auto_recovery: None,
            sync_interval_ms: 15_000,
            nodedown_grace_ms: 1_000,
            stable_after_ms: 5_000,
            recovery_replay_wait_ms: 3_000,
            membership_debounce_ms: 200,
            membership_max_wait_ms: 2_000,
            migration_retry_ms: 1_000,
            stub_ttl_ms: 60_000,
            distribution: Distribution::ConsistentHash,
            migration: Migration::Cold,
            hot_swap: HotSwapConfig::default(),
            load_balancer: LoadBalancerConfig::default(),
            replication_factor: 1,
            replication_model: ReplicationModel::ActivePassive,
            redundancy_signal: RedundancySignal::None,
            partition_tolerance: PartitionTolerance::Divergence,
            sync: SyncStrategy::PubSub,
        }
    }
}

pub(crate) fn range<T: PartialOrd + ToString>(
    option: &'static str,
    value: T,
    lo: T,
    hi: T,
    allowed: &'static str,
) -> Result<(), ConfigError> {
    if value < lo || value > hi {
        return Err(ConfigError::OutOfRange {
            option,
            value: value.to_string(),
            allowed,
        });
    }
    Ok(())
}

impl ProcessHub {
    /// The period of the periodic sync: `sync_interval_ms`, or the gossip round's
    /// `interval_ms` with `sync = gossip`.
    pub fn sync_period_ms(&self) -> u64 {
        match self.sync {
            SyncStrategy::PubSub => self.sync_interval_ms,
            SyncStrategy::Gossip { interval_ms, .. } => interval_ms,
        }
    }

    /// `recovery_replay`: whether the hub restores children from the rows its
    /// registry backend kept on disk. Off with auto-recovery, whose reconcile restores exactly
    /// the declared list (a returning node must not republish its stale view as fact); on
    /// without it, where the disk backends give restart-survival. See `core::boot_rows`.
    pub fn recovery_replay(&self) -> bool {
        self.auto_recovery.is_none()
    }

    /// A config with defaults for everything but the hub id.
    pub fn new(hub_id: impl Into<String>) -> Self {
        Self {
            hub_id: hub_id.into(),
            ..Self::default()
        }
    }

    /// A builder starting from [`ProcessHub::new`].
    pub fn builder(hub_id: impl Into<String>) -> ProcessHubBuilder {
        ProcessHubBuilder(Self::new(hub_id))
    }

    /// Parses a TOML document (unknown keys are rejected so that typos do not pass silently).
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// Parses a JSON document.
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        serde_json::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// Checks every option against its range. Called by `Hub::spawn`; callable earlier to
    /// report a bad file before doing anything else.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.hub_id.is_empty() || self.hub_id.len() > 128 || self.hub_id.contains('/') {
            return Err(ConfigError::Invalid {
                option: "hub_id",
                value: self.hub_id.clone(),
                reason: "must be 1..=128 bytes without '/'",
            });
        }
        let valid_node = self.node_name.split_once('@').is_some_and(|(name, host)| {
            !name.is_empty() && !host.is_empty() && !host.contains('@')
        });
        if !valid_node {
            return Err(ConfigError::Invalid {
                option: "node_name",
                value: self.node_name.clone(),
                reason: "must be `name@host` with both parts non-empty",
            });
        }
        range(
            "max_restarts",
            self.max_restarts,
            0,
            1_000_000,
            "0..=1000000",
        )?;
        range("max_seconds", self.max_seconds, 1, 3600, "1..=3600")?;
        range(
            "hub_max_restarts",
            self.hub_max_restarts,
            0,
            1000,
            "0..=1000",
        )?;
        range(
            "shutdown_timeout_ms",
            self.shutdown_timeout_ms,
            1,
            3_600_000,
            "1..=3600000",
        )?;
        range(
            "default_timeout_ms",
            self.default_timeout_ms,
            0,
            3_600_000,
            "0..=3600000",
        )?;
        range(
            "storage_purge_interval_ms",
            self.storage_purge_interval_ms,
            10,
            86_400_000,
            "10..=86400000",
        )?;
        range(
            "sync_interval_ms",
            self.sync_interval_ms,
            100,
            3_600_000,
            "100..=3600000",
        )?;
        range(
            "nodedown_grace_ms",
            self.nodedown_grace_ms,
            0,
            600_000,
            "0..=600000",
        )?;
        range(
            "stable_after_ms",
            self.stable_after_ms,
            100,
            600_000,
            "100..=600000",
        )?;
        range(
            "recovery_replay_wait_ms",
            self.recovery_replay_wait_ms,
            0,
            600_000,
            "0..=600000",
        )?;
        range(
            "membership_debounce_ms",
            self.membership_debounce_ms,
            0,
            60_000,
            "0..=60000",
        )?;
        range(
            "membership_max_wait_ms",
            self.membership_max_wait_ms,
            self.membership_debounce_ms,
            600_000,
            "membership_debounce_ms..=600000",
        )?;
        range(
            "migration_retry_ms",
            self.migration_retry_ms,
            10,
            600_000,
            "10..=600000",
        )?;
        range(
            "stub_ttl_ms",
            self.stub_ttl_ms,
            100,
            86_400_000,
            "100..=86400000",
        )?;
        self.hot_swap.validate()?;
        self.load_balancer.validate()?;
        partition::validate(&self.partition_tolerance)?;
        sync::validate(&self.sync)?;
        replication::validate_factor(self.replication_factor)?;
        let mut seen = std::collections::HashSet::new();
        for spec in &self.child_specs {
            if ChildId::parse(spec.id.as_str()).is_err() {
                return Err(ConfigError::Invalid {
                    option: "child_specs",
                    value: spec.id.to_string(),
                    reason: "child ids must be 1..=480 bytes",
                });
            }
            if !seen.insert(&spec.id) {
                return Err(ConfigError::DuplicateChildSpec {
                    id: spec.id.clone(),
                });
            }
        }
        if let Some(recovery) = &self.auto_recovery {
            // Logs the init warnings (grace vs sync interval, deprecated keys) at WARN.
            recovery.validate(self.sync_period_ms())?;
        }
        Ok(())
    }

    /// The shutdown budget as a duration.
    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_millis(self.shutdown_timeout_ms)
    }

    /// The default request timeout as a duration.
    pub fn default_timeout(&self) -> Duration {
        Duration::from_millis(self.default_timeout_ms)
    }

    /// The life of a binding-less row of a dead or moving child, as a duration.
    pub fn stub_ttl(&self) -> Duration {
        Duration::from_millis(self.stub_ttl_ms)
    }

    /// The janitor's period as a duration.
    pub fn storage_purge_interval(&self) -> Duration {
        Duration::from_millis(self.storage_purge_interval_ms)
    }
}

/// Builds a [`ProcessHub`] in code; `build` validates.
#[derive(Clone, Debug)]
pub struct ProcessHubBuilder(ProcessHub);

impl ProcessHubBuilder {
    /// Sets the local node's `name@host`.
    pub fn node_name(mut self, name: impl Into<NodeName>) -> Self {
        self.0.node_name = name.into();
        self
    }

    /// Adds a static child started at boot.
    pub fn child_spec(mut self, spec: ChildSpec) -> Self {
        self.0.child_specs.push(spec);
        self
    }

    /// Sets the registry backend.
    pub fn registry_backend(mut self, backend: BackendConfig) -> Self {
        self.0.registry_backend = backend;
        self
    }

    /// Sets the data directory.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.0.data_dir = dir.into();
        self
    }

    /// Sets the restart intensity of local children.
    pub fn restart_intensity(mut self, max_restarts: u32, max_seconds: u32) -> Self {
        self.0.max_restarts = max_restarts;
        self.0.max_seconds = max_seconds;
        self
    }

    /// Sets how often the hub supervisor restarts a failed hub actor before giving up.
    pub fn hub_max_restarts(mut self, n: u32) -> Self {
        self.0.hub_max_restarts = n;
        self
    }

    /// Sets the graceful shutdown budget.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.0.shutdown_timeout_ms = timeout.as_millis() as u64;
        self
    }

    /// Sets the default request timeout.
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.0.default_timeout_ms = timeout.as_millis() as u64;
        self
    }

    /// Sets the janitor's sweep period.
    pub fn storage_purge_interval(mut self, period: Duration) -> Self {
        self.0.storage_purge_interval_ms = period.as_millis() as u64;
        self
    }

    /// Turns on durable children and orphan recovery.
    pub fn auto_recovery(mut self, config: AutoRecoveryConfig) -> Self {
        self.0.auto_recovery = Some(config);
        self
    }

    /// Sets the cluster's timing: full-sync period, node-down grace, and the membership batch
    /// (debounce, cap).
    pub fn cluster_timing(
        mut self,
        sync_interval: Duration,
        nodedown_grace: Duration,
        debounce: Duration,
        max_wait: Duration,
    ) -> Self {
        self.0.sync_interval_ms = sync_interval.as_millis() as u64;
        self.0.nodedown_grace_ms = nodedown_grace.as_millis() as u64;
        self.0.membership_debounce_ms = debounce.as_millis() as u64;
        self.0.membership_max_wait_ms = max_wait.as_millis() as u64;
        self
    }

    /// Sets `stable_after_ms`: how long reachability must be stable before a partial
    /// partition is resolved (and a set-aside node must stay connected before it comes back).
    pub fn stable_after(mut self, stable_after: Duration) -> Self {
        self.0.stable_after_ms = stable_after.as_millis() as u64;
        self
    }

    /// Sets `recovery_replay_wait_ms`: how long a node booting on a disk backend without
    /// auto-recovery waits for its peers before it restarts the children its rows say it ran.
    pub fn recovery_replay_wait(mut self, wait: Duration) -> Self {
        self.0.recovery_replay_wait_ms = wait.as_millis() as u64;
        self
    }

    /// Sets the distribution strategy.
    pub fn distribution(mut self, distribution: Distribution) -> Self {
        self.0.distribution = distribution;
        self
    }

    /// Sets the retry delay of failed migrations.
    pub fn migration_retry(mut self, delay: Duration) -> Self {
        self.0.migration_retry_ms = delay.as_millis() as u64;
        self
    }

    /// Sets the migration strategy (`hot`: state handover for kinds that opt in).
    pub fn migration(mut self, migration: Migration) -> Self {
        self.0.migration = migration;
        self
    }

    /// Runs each child on `factor` nodes, with `model` deciding whether one or all of them are
    /// active.
    pub fn replication(mut self, factor: usize, model: ReplicationModel) -> Self {
        self.0.replication_factor = factor;
        self.0.replication_model = model;
        self
    }

    /// Tells replicas their role when it changes (kinds opt in with `ChildKinds::redundancy`).
    pub fn redundancy_signal(mut self, signal: RedundancySignal) -> Self {
        self.0.redundancy_signal = signal;
        self
    }

    /// Sets how loads are gathered and children rebalanced (with `Distribution::LoadBalanced`).
    pub fn load_balancer(mut self, load_balancer: LoadBalancerConfig) -> Self {
        self.0.load_balancer = load_balancer;
        self
    }

    /// Sets what a side of a split without quorum does.
    pub fn partition_tolerance(mut self, strategy: PartitionTolerance) -> Self {
        self.0.partition_tolerance = strategy;
        self
    }

    /// Sets how registry changes reach the other nodes.
    pub fn sync(mut self, strategy: SyncStrategy) -> Self {
        self.0.sync = strategy;
        self
    }

    /// Sets the hot swap's timing.
    pub fn hot_swap(mut self, hot_swap: HotSwapConfig) -> Self {
        self.0.hot_swap = hot_swap;
        self
    }

    /// Sets how long a binding-less row of a dead node is kept.
    pub fn stub_ttl(mut self, ttl: Duration) -> Self {
        self.0.stub_ttl_ms = ttl.as_millis() as u64;
        self
    }

    /// Validates and returns the config.
    pub fn build(self) -> Result<ProcessHub, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }

    /// Returns the config without validating (`Hub::spawn` validates anyway).
    pub fn build_unchecked(self) -> ProcessHub {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_once_an_id_is_given() {
        assert!(ProcessHub::new("h").validate().is_ok());
        assert!(matches!(
            ProcessHub::default().validate(),
            Err(ConfigError::Invalid {
                option: "hub_id",
                ..
            })
        ));
    }

    #[test]
    fn out_of_range_options_name_the_option() {
        let err = ProcessHub::builder("h")
            .restart_intensity(5, 0)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::OutOfRange {
                    option: "max_seconds",
                    ..
                }
            ),
            "{err}"
        );
        let err = ProcessHub::builder("h")
            .node_name("nohost")
            .build()
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::Invalid {
                option: "node_name",
                ..
            }
        ));
        let err = ProcessHub::builder("h")
            .storage_purge_interval(Duration::from_millis(1))
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("storage_purge_interval_ms"));
    }

    #[test]
    fn cluster_timing_is_validated() {
        let ms = Duration::from_millis;
        let cases = [
            (ms(10), ms(1000), ms(200), ms(2000), "sync_interval_ms"),
            (
                ms(15_000),
                ms(700_000),
                ms(200),
                ms(2000),
                "nodedown_grace_ms",
            ),
            (
                ms(15_000),
                ms(1000),
                ms(70_000),
                ms(80_000),
                "membership_debounce_ms",
            ),
            (
                ms(15_000),
                ms(1000),
                ms(500),
                ms(100),
                "membership_max_wait_ms",
            ),
        ];
        for (sync, grace, debounce, max_wait, option) in cases {
            let err = ProcessHub::builder("h")
                .cluster_timing(sync, grace, debounce, max_wait)
                .build()
                .unwrap_err();
            assert!(err.to_string().contains(option), "{option}: {err}");
        }
        let err = ProcessHub::builder("h")
            .migration_retry(ms(1))
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("migration_retry_ms"));
        let err = ProcessHub::builder("h")
            .stub_ttl(ms(1))
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("stub_ttl_ms"));
        let text = "hub_id = \"h\"\nsync_interval_ms = 500\nnodedown_grace_ms = 0\n";
        let cfg = ProcessHub::from_toml_str(text).unwrap();
        assert_eq!((cfg.sync_interval_ms, cfg.nodedown_grace_ms), (500, 0));
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn duplicate_static_children_are_rejected() {
        let err = ProcessHub::builder("h")
            .child_spec(ChildSpec::new("a", "counter"))
            .child_spec(ChildSpec::new("a", "counter"))
            .build()
            .unwrap_err();
        assert_eq!(err, ConfigError::DuplicateChildSpec { id: "a".into() });
    }

    #[test]
    fn loads_from_toml_and_json() {
        let cfg = ProcessHub::from_toml_str(
            r#"
            hub_id = "orders"
            node_name = "a@127.0.0.1"
            max_restarts = 10
            registry_backend = { type = "durable", path = "/tmp/x" }
            [[child_specs]]
            id = "c1"
            kind = "counter"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.hub_id, "orders");
        assert_eq!(cfg.max_restarts, 10);
        assert_eq!(cfg.max_seconds, 4);
        assert_eq!(cfg.child_specs.len(), 1);
        assert!(matches!(
            cfg.registry_backend,
            BackendConfig::Durable { .. }
        ));
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(ProcessHub::from_json_str(&json).unwrap(), cfg);
        assert!(matches!(
            ProcessHub::from_toml_str("hub_id = \"x\"\nmax_restart = 3"),
            Err(ConfigError::Parse(_))
        ));
    }
}
