//! The settings of one `process-hub node`: from flags, from a TOML file, or both (flags win).
//!
//! Kept apart from the code that runs the node so that every rule about what a valid node
//! configuration is can be tested without starting anything.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use process_hub::cluster::gateway::WirePolicy;
use process_hub::cluster::wire::seal::{COMPACT_VERSION, OPEN_VERSION, SEALED_VERSION};
use serde::Deserialize;

use super::secrets::CookieSource;

/// Which registry backend the node uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// In memory; rebuilt from peers after a restart.
    #[default]
    Memory,
    /// LMDB on disk.
    Lmdb,
    /// Memory reads, synchronous LMDB mirror.
    Durable,
}

/// `process-hub node` flags. Every flag may also come from `--config FILE.toml` (same names,
/// with underscores); a flag given on the command line wins over the file.
#[derive(Args, Debug, Clone, Default)]
pub struct NodeFlags {
    /// The hub id: nodes with the same hub id form one hub.
    #[arg(long)]
    pub hub: Option<String>,
    /// This node's name; the node's identity is NAME@HOST, HOST taken from --listen.
    #[arg(long)]
    pub name: Option<String>,
    /// Where the cluster listener binds (HOST:PORT).
    #[arg(long)]
    pub listen: Option<String>,
    /// Where the admin HTTP API binds (HOST:PORT; loopback by default).
    #[arg(long)]
    pub admin: Option<String>,
    /// Seed nodes to join (HOST:PORT,...).
    #[arg(long, value_delimiter = ',')]
    pub join: Vec<String>,
    /// Directory for the disk backends and the declared list.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The shared secret every node of the cluster must present (visible in the process
    /// list: prefer --cookie-file). Default: $HOME/.process-hub.cookie, created when missing.
    #[arg(long)]
    pub cookie: Option<String>,
    /// A file holding the cookie (mode 0600: a file group or others can read is refused).
    #[arg(long)]
    pub cookie_file: Option<PathBuf>,
    /// A file holding the admin API's bearer token (mode 0600); every request must then
    /// carry `Authorization: Bearer <token>`. Required to bind --admin beyond loopback.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// Mutual TLS for the cluster transport: this node's certificate chain (PEM).
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// Mutual TLS: this node's private key (PEM).
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: the CA that signed every node's certificate (PEM).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Mutual TLS: the DNS name (or IP) every node's certificate is issued for.
    #[arg(long)]
    pub tls_server_name: Option<String>,
    /// Registry backend.
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// A TOML file with any of these settings.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// How long a node that went down may come back before its children are re-placed, in ms
    /// (the hub's `nodedown_grace_ms`; default 1000).
    #[arg(long)]
    pub nodedown_grace_ms: Option<u64>,
    /// How new children are placed: `consistent-hash` (default: on their ring owner),
    /// `guided` (on the node each start names; a start without one is refused per child) or
    /// `load-balanced` (in proportion to each node's spare capacity, as the leader gathers it;
    /// timing in the file's `[load_balancer]` table).
    #[arg(long, value_parser = parse_distribution)]
    pub distribution: Option<process_hub::Distribution>,
    /// With --distribution load-balanced: how often loads are reported, in ms (default 5000).
    #[arg(long)]
    pub load_push_interval_ms: Option<u64>,
    /// With --distribution load-balanced: move children when the busiest and the idlest
    /// node's children differ by more than this percentage of the mean (default 0: never).
    #[arg(long)]
    pub load_rebalance_threshold_percent: Option<u32>,
    /// What a side of a split without quorum does: `divergence` (default: both sides keep
    /// running), `static-quorum:N[:confirm]`, `dynamic-quorum:PERCENT:MS` or
    /// `majority-quorum[:N]` (the side without quorum stops its children and answers
    /// `partitioned` until quorum returns; the file's `[partition_tolerance]` table says the
    /// same).
    #[arg(long, value_parser = super::partition_tolerance::parse_partition_tolerance)]
    pub partition_tolerance: Option<process_hub::PartitionTolerance>,
    /// How registry changes reach the other nodes: `pubsub` (default: every change to every
    /// peer) or `gossip[:INTERVAL_MS[:RECIPIENTS[:all]]]` (each change to a few peers that pass
    /// it on; for large clusters; the file's `[sync]` table says the same).
    #[arg(long, value_parser = super::sync::parse_sync)]
    pub sync: Option<process_hub::SyncStrategy>,
    /// Record no metrics and serve none (`GET /metrics` answers 404 `metrics_off`); by
    /// default the node records them and serves them to Prometheus.
    #[arg(long)]
    pub no_metrics: bool,
    /// Keep what the allocator freed after a burst instead of returning it to the operating
    /// system (by default a watcher thread returns it once a burst is over; see
    /// `process_hub::memory_release`).
    #[arg(long)]
    pub no_memory_release: bool,
    /// How children move when nodes join or leave: `cold` (default: stopped, then started
    /// elsewhere) or `hot` (kinds that hand over, like counter and kv_shard, keep their state;
    /// timing in the file's `[hot_swap]` table).
    #[arg(long)]
    pub migration: Option<process_hub::Migration>,
    /// How many nodes run each child (its first k ring owners; 1..=8, default 1). With 2 or
    /// more, a child survives the loss of a node without a restart.
    #[arg(long)]
    pub replication_factor: Option<usize>,
    /// With --replication-factor 2 or more: `active-passive` (default: one replica answers,
    /// the others stand by) or `active-active` (every replica is active).
    #[arg(long)]
    pub replication_model: Option<process_hub::ReplicationModel>,
    /// Which replicas are told their role when it changes: none (default), active, passive,
    /// all (kinds that opt in with `ChildKinds::redundancy`).
    #[arg(long)]
    pub redundancy_signal: Option<process_hub::RedundancySignal>,
    /// Restart intensity: at most this many restarts of this node's children within
    /// --max-seconds; one more escalates to the hub supervisor (default 100).
    #[arg(long)]
    pub max_restarts: Option<u32>,
    /// The window of --max-restarts and --hub-max-restarts, in seconds (default 4).
    #[arg(long)]
    pub max_seconds: Option<u32>,
    /// How many failed hub actors the hub restarts within --max-seconds before it stops for
    /// good, and with it the process (exit 1) (default 3).
    #[arg(long)]
    pub hub_max_restarts: Option<u32>,
    /// Keep a durable declared list and bring every declared child back after any outage.
    #[arg(long)]
    pub auto_recovery: bool,
    /// Delay before the first reconcile round, in ms (default 30000, range [50, 600000]).
    #[arg(long)]
    pub reconcile_grace_ms: Option<u64>,
    /// Minimum spacing between reconcile rounds, in ms (default 15000, range [1000, 600000]).
    #[arg(long)]
    pub reconcile_interval_ms: Option<u64>,
    /// An off-cluster copy of the declared list: a directory path or `s3://BUCKET/PREFIX`.
    #[arg(long)]
    pub remote_manifest: Option<String>,
    /// Admission control: sustained recovery starts per second on this node (bursts up to one
    /// second's worth; default 100000, range [1, 10000000]).
    #[arg(long)]
    pub recovery_starts_per_second: Option<u32>,
    /// Admission control: most recovery starts one reconcile round submits from this node; the
    /// rest wait for the next round (default unlimited, range [1, 10000000]).
    #[arg(long)]
    pub recovery_starts_per_round: Option<u32>,
    /// Benchmarking/compat knob: commit the declared list with one fsync per mutation instead
    /// of group commit (the baseline of `bench recovery`). Needs --auto-recovery.
    #[arg(long, hide = true)]
    pub declared_fsync_per_mutation: bool,
    /// Refuse peers that speak only wire version 1 (builds before sealed frames), whose frames
    /// cannot be checked for their sender. Set it once every node of the cluster is upgraded.
    #[arg(long)]
    pub refuse_open_peers: bool,
    /// Testing knob: the newest wire version this node speaks (1 behaves as a build before
    /// sealed frames, 2 as one before compact frames, to rehearse a rolling upgrade; default 3).
    #[arg(long, hide = true)]
    pub max_wire_version: Option<u16>,
}

/// The same settings as read from a TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSettings {
    hub: Option<String>,
    name: Option<String>,
    listen: Option<String>,
    admin: Option<String>,
    #[serde(default)]
    join: Vec<String>,
    data_dir: Option<PathBuf>,
    cookie: Option<String>,
    cookie_file: Option<PathBuf>,
    admin_token_file: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    tls_server_name: Option<String>,
    backend: Option<BackendChoice>,
    nodedown_grace_ms: Option<u64>,
    distribution: Option<process_hub::Distribution>,
    migration: Option<process_hub::Migration>,
    replication_factor: Option<usize>,
    replication_model: Option<process_hub::ReplicationModel>,
    redundancy_signal: Option<process_hub::RedundancySignal>,
    hot_swap: Option<process_hub::HotSwapConfig>,
    load_balancer: Option<process_hub::LoadBalancerConfig>,
    partition_tolerance: Option<process_hub::PartitionTolerance>,
    sync: Option<process_hub::SyncStrategy>,
    max_restarts: Option<u32>,
    max_seconds: Option<u32>,
    hub_max_restarts: Option<u32>,
    #[serde(default)]
    auto_recovery: bool,
    reconcile_grace_ms: Option<u64>,
    reconcile_interval_ms: Option<u64>,
    remote_manifest: Option<String>,
    recovery_starts_per_second: Option<u32>,
    recovery_starts_per_round: Option<u32>,
    #[serde(default)]
    declared_fsync_per_mutation: bool,
    #[serde(default)]
    refuse_open_peers: bool,
    max_wire_version: Option<u16>,
}

/// A node configuration that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSettings {
    /// The hub id.
    pub hub: String,
    /// `NAME@HOST`.
    pub node_name: String,
    /// Cluster listener address.
    pub listen: SocketAddr,
    /// Admin API address.
    pub admin: SocketAddr,
    /// Seeds to join.
    pub join: Vec<SocketAddr>,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Where the cluster cookie comes from (read when the node starts).
    pub cookie: CookieSource,
    /// The admin API's bearer token file, if any (read when the node starts).
    pub admin_token_file: Option<PathBuf>,
    /// Mutual TLS for the cluster transport; `None` for plain TCP.
    pub tls: Option<TlsFiles>,
    /// Registry backend.
    pub backend: BackendChoice,
    /// The hub's `nodedown_grace_ms`, when set (validated by the hub's config).
    pub nodedown_grace_ms: Option<u64>,
    /// The hub's `distribution` (flag, else file; default consistent hash).
    pub distribution: Option<process_hub::Distribution>,
    /// The hub's `migration` (flag, else file; default cold).
    pub migration: Option<process_hub::Migration>,
    /// The hub's `replication_factor` (flag, else file; default 1; validated by the hub).
    pub replication_factor: Option<usize>,
    /// The hub's `replication_model` (flag, else file; default active-passive).
    pub replication_model: Option<process_hub::ReplicationModel>,
    /// The hub's `redundancy_signal` (flag, else file; default none).
    pub redundancy_signal: Option<process_hub::RedundancySignal>,
    /// The hub's `hot_swap` timing from the file (validated by the hub's config).
    pub hot_swap: Option<process_hub::HotSwapConfig>,
    /// The hub's `load_balancer` options: the file's table with the flags over it (validated
    /// by the hub's config).
    pub load_balancer: Option<process_hub::LoadBalancerConfig>,
    /// The hub's `partition_tolerance` (flag, else file; default divergence).
    pub partition_tolerance: Option<process_hub::PartitionTolerance>,
    /// The hub's `sync` strategy (flag, else file; default pubsub).
    pub sync: Option<process_hub::SyncStrategy>,
    /// Whether the node records and serves metrics (`--no-metrics` turns them off).
    pub metrics: bool,
    /// Whether the node returns the memory a burst freed to the operating system
    /// (`--no-memory-release` turns it off).
    pub memory_release: bool,
    /// The hub's restart intensity (`max_restarts`, `max_seconds`, `hub_max_restarts`), each
    /// when set (validated by the hub's config).
    pub restart_intensity: RestartIntensitySettings,
    /// Durable declared children and orphan recovery; `None` when off.
    pub auto_recovery: Option<AutoRecoverySettings>,
    /// Which wire versions the node speaks and accepts.
    pub wire: WirePolicy,
}

/// The files of `--tls-cert`, `--tls-key`, `--tls-ca` and the name of `--tls-server-name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This node's certificate chain.
    pub cert: PathBuf,
    /// This node's private key.
    pub key: PathBuf,
    /// The CA of every node's certificate.
    pub ca: PathBuf,
    /// The name every node's certificate is issued for.
    pub server_name: String,
}

/// How often children and hub actors may fail before the node gives up on them; `None` keeps
/// the hub's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestartIntensitySettings {
    /// `--max-restarts`.
    pub max_restarts: Option<u32>,
    /// `--max-seconds`.
    pub max_seconds: Option<u32>,
    /// `--hub-max-restarts`.
    pub hub_max_restarts: Option<u32>,
}

/// The recovery settings of a node started with `--auto-recovery` (ranges are checked by the
/// hub's config at spawn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoRecoverySettings {
    /// `--reconcile-grace-ms`.
    pub reconcile_grace_ms: Option<u64>,
    /// `--reconcile-interval-ms`.
    pub reconcile_interval_ms: Option<u64>,
    /// `--remote-manifest`, parsed.
    pub remote_manifest: Option<process_hub::ManifestLocation>,
    /// `--recovery-starts-per-second`.
    pub recovery_starts_per_second: Option<u32>,
    /// `--recovery-starts-per-round`.
    pub recovery_starts_per_round: Option<u32>,
    /// `--declared-fsync-per-mutation` (hidden): one fsync per declared-list mutation.
    pub declared_fsync_per_mutation: bool,
}

/// Why a node configuration was refused. Each variant names the setting at fault.
#[derive(Debug, thiserror::Error)]
pub enum NodeSettingsError {
    /// A wire setting is out of range.
    #[error("{0}")]
    BadWire(String),
    /// A required setting is missing from both the flags and the file.
    #[error("missing --{0} (give it as a flag or in the --config file)")]
    Missing(&'static str),
    /// An address does not parse as HOST:PORT with an IP host.
    #[error("--{setting}: {value:?} is not HOST:PORT with an IP address host ({reason})")]
    BadAddress {
        /// The setting.
        setting: &'static str,
        /// The rejected value.
        value: String,
        /// The parser's reason.
        reason: String,
    },
    /// A name or hub id contains characters that cannot appear in a node identity.
    #[error("--{setting}: {value:?} must be 1-64 characters of [A-Za-z0-9_.-]")]
    BadName {
        /// The setting.
        setting: &'static str,
        /// The rejected value.
        value: String,
    },
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// A recovery setting was given without `--auto-recovery`, or the manifest location does
    /// not parse.
    #[error("--{setting}: {reason}")]
    BadRecovery {
        /// The setting.
        setting: &'static str,
        /// Why.
        reason: String,
    },
    /// Settings that contradict each other, or one that needs another.
    #[error("--{setting}: {reason}")]
    Invalid {
        /// The setting.
        setting: &'static str,
        /// Why.
        reason: String,
    },
    /// The config file is not valid TOML for these settings.
    #[error("config file {path} is invalid: {source}")]
    ParseConfig {
        /// The file.
        path: PathBuf,
        /// The TOML error.
        source: toml::de::Error,
    },
}

fn check_name(setting: &'static str, value: String) -> Result<String, NodeSettingsError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(value)
    } else {
        Err(NodeSettingsError::BadName { setting, value })
    }
}

fn parse_addr(setting: &'static str, value: &str) -> Result<SocketAddr, NodeSettingsError> {
    value
        .parse::<SocketAddr>()
        .map_err(|e| NodeSettingsError::BadAddress {
            setting,
            value: value.to_owned(),
            reason: e.to_string(),
        })
}

fn read_file(path: &Path) -> Result<FileSettings, NodeSettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| NodeSettingsError::ReadConfig {
        path: path.to_owned(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| NodeSettingsError::ParseConfig {
        path: path.to_owned(),
        source,
    })
}

/// All four TLS settings, or none.
fn tls_files(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
    server_name: Option<String>,
) -> Result<Option<TlsFiles>, NodeSettingsError> {
    match (cert, key, ca, server_name) {
        (None, None, None, None) => Ok(None),
        (Some(cert), Some(key), Some(ca), Some(server_name)) => Ok(Some(TlsFiles {
            cert,
            key,
            ca,
            server_name,
        })),
        (cert, key, ca, name) => {
            let missing = [
                ("tls-cert", cert.is_none()),
                ("tls-key", key.is_none()),
                ("tls-ca", ca.is_none()),
                ("tls-server-name", name.is_none()),
            ]
            .into_iter()
            .find(|(_, missing)| *missing)
            .map_or("tls-cert", |(setting, _)| setting);
            Err(NodeSettingsError::Invalid {
                setting: missing,
                reason: "mutual TLS needs --tls-cert, --tls-key, --tls-ca and --tls-server-name together".into(),
            })
        }
    }
}

impl NodeFlags {
    /// Merges the flags over the config file (if any) and validates the result.
    pub fn resolve(self) -> Result<NodeSettings, NodeSettingsError> {
        let file = match &self.config {
            Some(path) => read_file(path)?,
            None => FileSettings::default(),
        };
        let hub = check_name(
            "hub",
            self.hub
                .or(file.hub)
                .ok_or(NodeSettingsError::Missing("hub"))?,
        )?;
        let name = check_name(
            "name",
            self.name
                .or(file.name)
                .ok_or(NodeSettingsError::Missing("name"))?,
        )?;
        let listen_raw = self
            .listen
            .or(file.listen)
            .ok_or(NodeSettingsError::Missing("listen"))?;
        let listen = parse_addr("listen", &listen_raw)?;
        let admin = match self.admin.or(file.admin) {
            Some(raw) => parse_addr("admin", &raw)?,
            None => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let join_raw = if self.join.is_empty() {
            file.join
        } else {
            self.join
        };
        let join = join_raw
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| parse_addr("join", s.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        let data_dir = self
            .data_dir
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from("./data").join(&name));
        let cookie = match (
            self.cookie.or(file.cookie),
            self.cookie_file.or(file.cookie_file),
        ) {
            (Some(_), Some(_)) => {
                return Err(NodeSettingsError::Invalid {
                    setting: "cookie",
                    reason: "give --cookie or --cookie-file, not both".into(),
                })
            }
            (Some(cookie), None) if cookie.trim().is_empty() => {
                return Err(NodeSettingsError::Invalid {
                    setting: "cookie",
                    reason: "must not be empty".into(),
                })
            }
            (Some(cookie), None) => CookieSource::Given(cookie),
            (None, Some(path)) => CookieSource::File(path),
            (None, None) => CookieSource::Home,
        };
        let tls = tls_files(
            self.tls_cert.or(file.tls_cert),
            self.tls_key.or(file.tls_key),
            self.tls_ca.or(file.tls_ca),
            self.tls_server_name.or(file.tls_server_name),
        )?;
        let reconcile_grace_ms = self.reconcile_grace_ms.or(file.reconcile_grace_ms);
        let reconcile_interval_ms = self.reconcile_interval_ms.or(file.reconcile_interval_ms);
        let remote_manifest = self.remote_manifest.or(file.remote_manifest);
        let recovery_starts_per_second = self
            .recovery_starts_per_second
            .or(file.recovery_starts_per_second);
        let recovery_starts_per_round = self
            .recovery_starts_per_round
            .or(file.recovery_starts_per_round);
        let declared_fsync_per_mutation =
            self.declared_fsync_per_mutation || file.declared_fsync_per_mutation;
        let auto_recovery = if self.auto_recovery || file.auto_recovery {
            let remote_manifest = remote_manifest
                .map(|raw| {
                    raw.parse::<process_hub::ManifestLocation>().map_err(|e| {
                        NodeSettingsError::BadRecovery {
                            setting: "remote-manifest",
                            reason: e.to_string(),
                        }
                    })
                })
                .transpose()?;
            Some(AutoRecoverySettings {
                reconcile_grace_ms,
                reconcile_interval_ms,
                remote_manifest,
                recovery_starts_per_second,
                recovery_starts_per_round,
                declared_fsync_per_mutation,
            })
        } else {
            let given = [
                ("reconcile-grace-ms", reconcile_grace_ms.is_some()),
                ("reconcile-interval-ms", reconcile_interval_ms.is_some()),
                ("remote-manifest", remote_manifest.is_some()),
                (
                    "recovery-starts-per-second",
                    recovery_starts_per_second.is_some(),
                ),
                (
                    "recovery-starts-per-round",
                    recovery_starts_per_round.is_some(),
                ),
                ("declared-fsync-per-mutation", declared_fsync_per_mutation),
            ];
            if let Some((setting, _)) = given.into_iter().find(|(_, set)| *set) {
                return Err(NodeSettingsError::BadRecovery {
                    setting,
                    reason: "only meaningful with --auto-recovery".into(),
                });
            }
            None
        };
        let max_version = self
            .max_wire_version
            .or(file.max_wire_version)
            .unwrap_or(COMPACT_VERSION);
        if !(OPEN_VERSION..=COMPACT_VERSION).contains(&max_version) {
            return Err(NodeSettingsError::BadWire(format!(
                "--max-wire-version must be {OPEN_VERSION}, {SEALED_VERSION} or {COMPACT_VERSION}, not {max_version}"
            )));
        }
        let wire = WirePolicy {
            max_version,
            refuse_open_peers: self.refuse_open_peers || file.refuse_open_peers,
        };
        Ok(NodeSettings {
            wire,
            auto_recovery,
            node_name: format!("{name}@{}", listen.ip()),
            hub,
            listen,
            admin,
            join,
            data_dir,
            cookie,
            admin_token_file: self.admin_token_file.or(file.admin_token_file),
            tls,
            backend: self.backend.or(file.backend).unwrap_or_default(),
            nodedown_grace_ms: self.nodedown_grace_ms.or(file.nodedown_grace_ms),
            distribution: self.distribution.or(file.distribution),
            migration: self.migration.or(file.migration),
            replication_factor: self.replication_factor.or(file.replication_factor),
            replication_model: self.replication_model.or(file.replication_model),
            redundancy_signal: self.redundancy_signal.or(file.redundancy_signal),
            hot_swap: file.hot_swap.clone(),
            load_balancer: load_balancer(
                file.load_balancer.clone(),
                self.load_push_interval_ms,
                self.load_rebalance_threshold_percent,
            ),
            partition_tolerance: self
                .partition_tolerance
                .or(file.partition_tolerance.clone()),
            sync: self.sync.or(file.sync.clone()),
            metrics: !self.no_metrics,
            memory_release: !self.no_memory_release,
            restart_intensity: RestartIntensitySettings {
                max_restarts: self.max_restarts.or(file.max_restarts),
                max_seconds: self.max_seconds.or(file.max_seconds),
                hub_max_restarts: self.hub_max_restarts.or(file.hub_max_restarts),
            },
        })
    }
}

/// The file's `[load_balancer]` table with the flags over it; `None` when neither sets one.
fn load_balancer(
    file: Option<process_hub::LoadBalancerConfig>,
    push_interval_ms: Option<u64>,
    rebalance_threshold_percent: Option<u32>,
) -> Option<process_hub::LoadBalancerConfig> {
    if file.is_none() && push_interval_ms.is_none() && rebalance_threshold_percent.is_none() {
        return None;
    }
    let mut config = file.unwrap_or_default();
    if let Some(ms) = push_interval_ms {
        config.push_interval_ms = ms;
    }
    if let Some(percent) = rebalance_threshold_percent {
        config.rebalance_threshold_percent = percent;
    }
    Some(config)
}

/// `--distribution`: the strategies' names as the original spells them, dashed.
pub fn parse_distribution(value: &str) -> Result<process_hub::Distribution, String> {
    match value {
        "consistent-hash" | "consistent_hash" => Ok(process_hub::Distribution::ConsistentHash),
        "guided" => Ok(process_hub::Distribution::Guided),
        "load-balanced" | "load_balanced" => Ok(process_hub::Distribution::LoadBalanced),
        other => Err(format!(
            "unknown distribution {other:?}; one of consistent-hash, guided, load-balanced"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> NodeFlags {
        NodeFlags {
            hub: Some("h".into()),
            name: Some("a".into()),
            listen: Some("127.0.0.1:4000".into()),
            ..Default::default()
        }
    }

    #[test]
    fn node_name_is_name_at_listen_host() {
        let s = flags().resolve().unwrap();
        assert_eq!(s.node_name, "a@127.0.0.1");
        assert_eq!(s.admin.ip().to_string(), "127.0.0.1");
        assert_eq!(s.backend, BackendChoice::Memory);
        assert_eq!(s.cookie, CookieSource::Home, "no built-in cookie");
        assert_eq!(s.tls, None);
    }

    #[test]
    fn cookie_sources_exclude_each_other_and_tls_comes_whole() {
        let mut f = flags();
        f.cookie = Some("c".into());
        f.cookie_file = Some("/etc/cookie".into());
        assert!(f.resolve().unwrap_err().to_string().contains("--cookie"));
        let mut f = flags();
        f.cookie = Some(" ".into());
        assert!(f.resolve().is_err());
        let mut f = flags();
        f.cookie_file = Some("/etc/cookie".into());
        assert_eq!(
            f.resolve().unwrap().cookie,
            CookieSource::File("/etc/cookie".into())
        );
        let mut f = flags();
        f.tls_cert = Some("c.pem".into());
        f.tls_key = Some("k.pem".into());
        let err = f.clone().resolve().unwrap_err().to_string();
        assert!(err.contains("--tls-ca"), "{err}");
        f.tls_ca = Some("ca.pem".into());
        f.tls_server_name = Some("node.example".into());
        let tls = f.resolve().unwrap().tls.expect("tls on");
        assert_eq!(tls.server_name, "node.example");
    }

    #[test]
    fn the_wire_version_defaults_to_compact_and_is_bounded() {
        assert_eq!(flags().resolve().unwrap().wire.max_version, COMPACT_VERSION);
        for version in [OPEN_VERSION, SEALED_VERSION, COMPACT_VERSION] {
            let mut f = flags();
            f.max_wire_version = Some(version);
            assert_eq!(f.resolve().unwrap().wire.max_version, version);
        }
        for version in [0, COMPACT_VERSION + 1] {
            let mut f = flags();
            f.max_wire_version = Some(version);
            let err = f.resolve().unwrap_err().to_string();
            assert!(err.contains("--max-wire-version"), "{err}");
        }
    }

    #[test]
    fn missing_and_bad_values_name_the_flag() {
        let mut f = flags();
        f.hub = None;
        assert!(matches!(
            f.resolve(),
            Err(NodeSettingsError::Missing("hub"))
        ));
        let mut f = flags();
        f.listen = Some("localhost".into());
        let err = f.resolve().unwrap_err().to_string();
        assert!(err.contains("--listen"), "{err}");
        let mut f = flags();
        f.name = Some("a b".into());
        assert!(f.resolve().unwrap_err().to_string().contains("--name"));
        let mut f = flags();
        f.join = vec!["127.0.0.1:1".into(), "nope".into()];
        assert!(f.resolve().unwrap_err().to_string().contains("--join"));
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "hub = \"filehub\"\nname = \"b\"\nlisten = \"127.0.0.1:5000\"\njoin = [\"127.0.0.1:4000\"]\nbackend = \"lmdb\"\n",
        )
        .unwrap();
        let s = NodeFlags {
            name: Some("c".into()),
            config: Some(path.clone()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(s.hub, "filehub");
        assert_eq!(s.node_name, "c@127.0.0.1");
        assert_eq!(s.join.len(), 1);
        assert_eq!(s.backend, BackendChoice::Lmdb);

        std::fs::write(&path, "hub = \"h\"\nunknown_key = 1\n").unwrap();
        let err = NodeFlags {
            config: Some(path),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(
            matches!(err, NodeSettingsError::ParseConfig { .. }),
            "{err}"
        );
    }

    #[test]
    fn replication_comes_from_the_flags_else_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "hub = \"h\"\nname = \"a\"\nlisten = \"127.0.0.1:4000\"\nreplication_factor = 3\nreplication_model = \"active_active\"\nredundancy_signal = \"all\"\n",
        )
        .unwrap();
        let s = NodeFlags {
            config: Some(path.clone()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(s.replication_factor, Some(3));
        assert_eq!(
            s.replication_model,
            Some(process_hub::ReplicationModel::ActiveActive)
        );
        assert_eq!(
            s.redundancy_signal,
            Some(process_hub::RedundancySignal::All)
        );
        let s = NodeFlags {
            config: Some(path),
            replication_factor: Some(2),
            replication_model: Some(process_hub::ReplicationModel::ActivePassive),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(s.replication_factor, Some(2));
        assert_eq!(
            s.replication_model,
            Some(process_hub::ReplicationModel::ActivePassive)
        );
    }

    #[test]
    fn load_balancing_comes_from_the_file_with_the_flags_over_it() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            flags: NodeFlags,
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "hub = \"h\"\nname = \"a\"\nlisten = \"127.0.0.1:4000\"\ndistribution = \"load_balanced\"\n[load_balancer]\npush_interval_ms = 700\nrebalance_batch = 9\n",
        )
        .unwrap();
        let file_only = NodeFlags {
            config: Some(path.clone()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            file_only.distribution,
            Some(process_hub::Distribution::LoadBalanced)
        );
        let lb = file_only.load_balancer.unwrap();
        assert_eq!((lb.push_interval_ms, lb.rebalance_batch), (700, 9));
        assert_eq!(lb.rebalance_threshold_percent, 0);

        let cli = Cli::try_parse_from([
            "node",
            "--config",
            path.to_str().unwrap(),
            "--load-push-interval-ms",
            "250",
            "--load-rebalance-threshold-percent",
            "40",
        ])
        .unwrap();
        let lb = cli.flags.resolve().unwrap().load_balancer.unwrap();
        assert_eq!(lb.push_interval_ms, 250, "the flag over the file");
        assert_eq!(lb.rebalance_threshold_percent, 40);
        assert_eq!(lb.rebalance_batch, 9, "the file's other options kept");

        assert!(flags().resolve().unwrap().load_balancer.is_none());
        let cli = Cli::try_parse_from(["node", "--distribution", "load-balanced"]).unwrap();
        assert_eq!(
            cli.flags.distribution,
            Some(process_hub::Distribution::LoadBalanced)
        );
        let err = Cli::try_parse_from(["node", "--distribution", "least-loaded"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("load-balanced"), "{err}");
    }

    #[test]
    fn replication_flags_parse_and_refuse_unknown_values() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            flags: NodeFlags,
        }
        let cli = Cli::try_parse_from([
            "node",
            "--replication-factor",
            "2",
            "--replication-model",
            "active-passive",
            "--redundancy-signal",
            "active",
        ])
        .unwrap();
        assert_eq!(cli.flags.replication_factor, Some(2));
        assert_eq!(
            cli.flags.redundancy_signal,
            Some(process_hub::RedundancySignal::Active)
        );
        let err = Cli::try_parse_from(["node", "--replication-model", "primary"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("active-passive"), "{err}");
        assert!(Cli::try_parse_from(["node", "--replication-factor", "two"]).is_err());
    }

    #[test]
    fn partition_tolerance_comes_from_the_file_table_or_the_flag_over_it() {
        use clap::Parser;
        use process_hub::PartitionTolerance;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            flags: NodeFlags,
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "hub = \"h\"\nname = \"a\"\nlisten = \"127.0.0.1:4000\"\n[partition_tolerance]\ntype = \"static_quorum\"\nquorum_size = 2\n",
        )
        .unwrap();
        let file_only = NodeFlags {
            config: Some(path.clone()),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            file_only.partition_tolerance,
            Some(PartitionTolerance::StaticQuorum {
                quorum_size: 2,
                startup_confirm: false
            })
        );
        let cli = Cli::try_parse_from([
            "node",
            "--config",
            path.to_str().unwrap(),
            "--partition-tolerance",
            "majority-quorum:5",
        ])
        .unwrap();
        assert_eq!(
            cli.flags.resolve().unwrap().partition_tolerance,
            Some(PartitionTolerance::MajorityQuorum {
                initial_cluster_size: 5,
                track_max_size: true
            })
        );
        assert!(flags().resolve().unwrap().partition_tolerance.is_none());
        let err = Cli::try_parse_from(["node", "--partition-tolerance", "quorum"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("unknown partition tolerance"), "{err}");
    }
}
