//! The settings of one `process-hub node`: from flags, from a TOML file, or both (flags win).
//!
//! Kept apart from the code that runs the node so that every rule about what a valid node
//! configuration is can be tested without starting anything.
//!
//! `flags` holds the inputs (the flags and the file), `error` why settings are refused; this
//! file the settings that passed and the rules that make them.

mod error;
mod flags;
mod name_template;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use process_hub::cluster::gateway::WirePolicy;
use process_hub::cluster::wire::seal::{COMPACT_VERSION, OPEN_VERSION, SEALED_VERSION};

use super::secrets::CookieSource;
pub use error::NodeSettingsError;
use flags::FileSettings;
pub use flags::{BackendChoice, LogFormat, NodeFlags};

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
    /// Seeds from DNS (`--discovery`), beside `join`.
    pub discovery: Option<process_hub::Discovery>,
    /// The nameserver of `discovery` (`--dns-server`); `None` for the system's.
    pub dns_server: Option<SocketAddr>,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Where the cluster cookie comes from (read when the node starts).
    pub cookie: CookieSource,
    /// The admin API's bearer token file, if any (read when the node starts).
    pub admin_token_file: Option<PathBuf>,
    /// Where the unauthenticated probe routes are served (`--probe`); `None`: not served.
    pub probe: Option<SocketAddr>,
    /// Mutual TLS for the cluster transport; `None` for plain TCP.
    pub tls: Option<TlsFiles>,
    /// Registry backend.
    pub backend: BackendChoice,
    /// The hub's `nodedown_grace_ms`, when set (validated by the hub's config).
    pub nodedown_grace_ms: Option<u64>,
    /// The hub's `stable_after_ms`, when set (validated by the hub's config).
    pub stable_after_ms: Option<u64>,
    /// The failure detector's timing (`--heartbeat-ms`, `--failure-timeout-ms`).
    pub heartbeat: process_hub::core::failure_detector::DetectorConfig,
    /// The hub's `recovery_replay_wait_ms`, when set (validated by the hub's config).
    pub recovery_replay_wait_ms: Option<u64>,
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
    /// How log lines are written (`--log-format`).
    pub log_format: LogFormat,
    /// How long without an authenticated peer makes a node with seeds isolated
    /// (`--isolated-after-ms`).
    pub isolated_after: std::time::Duration,
}

/// The range of `--isolated-after-ms`: long enough not to flap during a seed's restart, short
/// enough to tell a misconfigured node within the hour.
pub const ISOLATED_AFTER_MS: std::ops::RangeInclusive<u64> = 100..=3_600_000;

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
        let name_template = self
            .name
            .or(file.name)
            .ok_or(NodeSettingsError::Missing("name"))?;
        let listen_raw = self
            .listen
            .or(file.listen)
            .ok_or(NodeSettingsError::Missing("listen"))?;
        let listen = parse_addr("listen", &listen_raw)?;
        let name = check_name(
            "name",
            name_template::expand(&name_template, listen, name_template::hostname).map_err(
                |reason| NodeSettingsError::Invalid {
                    setting: "name",
                    reason,
                },
            )?,
        )?;
        let (discovery, dns_server) = discovery(
            self.discovery.or(file.discovery),
            self.discovery_interval_ms.or(file.discovery_interval_ms),
            self.dns_server.or(file.dns_server),
        )?;
        let admin = match self.admin.or(file.admin) {
            Some(raw) => parse_addr("admin", &raw)?,
            None => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let probe = self
            .probe
            .or(file.probe)
            .map(|raw| parse_addr("probe", &raw))
            .transpose()?;
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
        let isolated_after_ms = self
            .isolated_after_ms
            .or(file.isolated_after_ms)
            .unwrap_or(process_hub::core::isolation::DEFAULT_ISOLATED_AFTER.as_millis() as u64);
        if !ISOLATED_AFTER_MS.contains(&isolated_after_ms) {
            return Err(NodeSettingsError::Invalid {
                setting: "isolated-after-ms",
                reason: format!(
                    "{isolated_after_ms} is outside [{}, {}]",
                    ISOLATED_AFTER_MS.start(),
                    ISOLATED_AFTER_MS.end()
                ),
            });
        }
        let mut heartbeat = process_hub::core::failure_detector::DetectorConfig::default();
        if let Some(ms) = self.heartbeat_ms.or(file.heartbeat_ms) {
            if !(10..=60_000).contains(&ms) {
                return Err(NodeSettingsError::Invalid {
                    setting: "heartbeat-ms",
                    reason: format!("{ms} is outside [10, 60000]"),
                });
            }
            heartbeat.interval = std::time::Duration::from_millis(ms);
            heartbeat.suspect_after = heartbeat.interval * 2;
        }
        if let Some(ms) = self.failure_timeout_ms.or(file.failure_timeout_ms) {
            let least = heartbeat.interval.as_millis() as u64 * 2;
            if !(least..=600_000).contains(&ms) {
                return Err(NodeSettingsError::Invalid {
                    setting: "failure-timeout-ms",
                    reason: format!("{ms} is outside [{least}, 600000] (at least two heartbeats)"),
                });
            }
            heartbeat.timeout = std::time::Duration::from_millis(ms);
        }
        if heartbeat.timeout < heartbeat.interval * 2 {
            return Err(NodeSettingsError::Invalid {
                setting: "heartbeat-ms",
                reason: format!(
                    "{} ms leaves fewer than two heartbeats in the failure timeout ({} ms)",
                    heartbeat.interval.as_millis(),
                    heartbeat.timeout.as_millis()
                ),
            });
        }
        Ok(NodeSettings {
            heartbeat,
            stable_after_ms: self.stable_after_ms.or(file.stable_after_ms),
            wire,
            log_format: self.log_format.or(file.log_format).unwrap_or_default(),
            isolated_after: std::time::Duration::from_millis(isolated_after_ms),
            auto_recovery,
            node_name: format!("{name}@{}", listen.ip()),
            hub,
            listen,
            admin,
            join,
            discovery,
            dns_server,
            data_dir,
            cookie,
            admin_token_file: self.admin_token_file.or(file.admin_token_file),
            probe,
            tls,
            backend: self.backend.or(file.backend).unwrap_or_default(),
            nodedown_grace_ms: self.nodedown_grace_ms.or(file.nodedown_grace_ms),
            recovery_replay_wait_ms: self
                .recovery_replay_wait_ms
                .or(file.recovery_replay_wait_ms),
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

/// `--discovery`, `--discovery-interval-ms` and `--dns-server`: the last two only with the
/// first.
fn discovery(
    spec: Option<String>,
    interval_ms: Option<u64>,
    server: Option<String>,
) -> Result<(Option<process_hub::Discovery>, Option<SocketAddr>), NodeSettingsError> {
    let Some(spec) = spec else {
        if let Some(setting) = [
            ("discovery-interval-ms", interval_ms.is_some()),
            ("dns-server", server.is_some()),
        ]
        .into_iter()
        .find_map(|(setting, given)| given.then_some(setting))
        {
            return Err(NodeSettingsError::Invalid {
                setting,
                reason: "only meaningful with --discovery".into(),
            });
        }
        return Ok((None, None));
    };
    let interval = interval_ms.map_or(
        process_hub::cluster::discovery::DEFAULT_DISCOVERY_INTERVAL,
        std::time::Duration::from_millis,
    );
    let discovery = process_hub::Discovery::parse(spec.trim(), interval).map_err(|e| {
        let setting = match e {
            process_hub::cluster::DiscoveryError::Interval { .. } => "discovery-interval-ms",
            _ => "discovery",
        };
        NodeSettingsError::Invalid {
            setting,
            reason: e.to_string(),
        }
    })?;
    let server = server
        .map(|raw| parse_addr("dns-server", raw.trim()))
        .transpose()?;
    Ok((Some(discovery), server))
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

/// `--distribution`: the strategies' names as Elixir's ProcessHub spells them, dashed.
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
mod tests;
