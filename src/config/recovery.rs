//! The `auto_recovery` configuration (docs/recovery.md, "Configuration"),
//! validated once at spawn.
//!
//! | option | default | range |
//! | --- | --- | --- |
//! | `reconcile_grace_ms` | 30,000 | [50, 600,000] |
//! | `reconcile_interval_ms` | 15,000 | [1,000, 600,000] |
//! | `remote_manifest` | none | a local path or `s3://BUCKET/PREFIX` |
//! | `start_budget.max_starts_per_second` | 100,000 | [1, 10,000,000] |
//! | `start_budget.max_starts_per_round` | unlimited | [1, 10,000,000] |
//! | `declared_commit` | `group` | `group` or `per_mutation` (a benchmarking/compat knob) |
//!
//! The grace should exceed the synchronisation interval (a round that runs before the first
//! sync sees an empty registry and submits every declared child); validation warns when it does
//! not. The superseded keys `marker_path`, `replay_timeout_ms`, `recovery_timeout_ms` and
//! `stopped_row_ttl_ms` are accepted with a WARN and ignored.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

/// The `auto_recovery` options of a hub.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AutoRecoveryConfig {
    /// Delay before the first round, in ms. Default 30,000, range [50, 600,000]. Set it above
    /// the synchronisation interval.
    pub reconcile_grace_ms: u64,
    /// Minimum spacing between rounds, and the per-handler budget of the blocking
    /// `pre_recovery_replay` hook, in ms. Default 15,000, range [1,000, 600,000].
    pub reconcile_interval_ms: u64,
    /// The off-cluster copy of the declared list. Default none (disabled).
    pub remote_manifest: Option<ManifestLocation>,
    /// Admission control for recovery starts (beyond Elixir's ProcessHub).
    pub start_budget: StartBudget,
    /// How the declared store commits. Default [`DeclaredCommit::Group`]; the other value is a
    /// benchmarking/compat knob (the baseline of `process-hub bench recovery`).
    pub declared_commit: DeclaredCommit,
    /// Deprecated (superseded by the seeded marker beside the list): accepted with a WARN,
    /// ignored.
    #[serde(skip_serializing)]
    pub marker_path: Option<IgnoredAny>,
    /// Deprecated: accepted with a WARN, ignored.
    #[serde(skip_serializing)]
    pub replay_timeout_ms: Option<IgnoredAny>,
    /// Deprecated: accepted with a WARN, ignored.
    #[serde(skip_serializing)]
    pub recovery_timeout_ms: Option<IgnoredAny>,
    /// Deprecated (stop memory lives in the declared list and never expires): accepted with a
    /// WARN, ignored.
    #[serde(skip_serializing)]
    pub stopped_row_ttl_ms: Option<IgnoredAny>,
}

// The deprecated keys hold `IgnoredAny` (a unit value), so equality is total.
impl Eq for AutoRecoveryConfig {}

impl Default for AutoRecoveryConfig {
    fn default() -> Self {
        Self {
            reconcile_grace_ms: 30_000,
            reconcile_interval_ms: 15_000,
            remote_manifest: None,
            start_budget: StartBudget::default(),
            declared_commit: DeclaredCommit::Group,
            marker_path: None,
            replay_timeout_ms: None,
            recovery_timeout_ms: None,
            stopped_row_ttl_ms: None,
        }
    }
}

/// How fast one node submits recovery starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StartBudget {
    /// Sustained recovery starts per second on this node (bursts up to one second's worth).
    /// Default 100,000, range [1, 10,000,000]: above what one node's supervisor starts in a
    /// second, so by default it caps a runaway list without pacing a healthy recovery; lower it
    /// when each child's start is expensive (a connection, a load from disk).
    pub max_starts_per_second: u32,
    /// Most recovery starts one round submits from this node; the rest stay orphans for the
    /// next round. Default unlimited, range [1, 10,000,000].
    pub max_starts_per_round: Option<u32>,
}

impl Default for StartBudget {
    fn default() -> Self {
        Self {
            max_starts_per_second: 100_000,
            max_starts_per_round: None,
        }
    }
}

/// How the declared store turns mutations into fsyncs. Both answer a mutation only once it is
/// on disk; they differ only in how many mutations share one fsync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclaredCommit {
    /// Concurrent mutations (the children of one durable start request, several requests in
    /// flight) share one transaction and fsync: group commit. The default.
    #[default]
    Group,
    /// One transaction and fsync per mutation (per declared or undeclared child): the profile
    /// of a store without group commit. A benchmarking/compat knob, kept so that
    /// `process-hub bench recovery` can measure its baseline in the same run; it only costs
    /// throughput, never durability.
    PerMutation,
}

/// Where the remote manifest lives. Parsed from `PATH` or `s3://BUCKET/PREFIX`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ManifestLocation {
    /// A directory on storage that lives outside the cluster (a mount, a NAS).
    LocalPath {
        /// The directory holding the manifest file.
        path: PathBuf,
    },
    /// An S3 bucket (or an S3-compatible store). Credentials and region come from the standard
    /// `AWS_*` environment variables unless set here.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix (without leading or trailing `/`; may be empty).
        #[serde(default)]
        prefix: String,
        /// A custom endpoint (an S3-compatible server), e.g. `http://127.0.0.1:9000`.
        #[serde(default)]
        endpoint: Option<String>,
        /// The region; default from `AWS_REGION`, else `us-east-1`.
        #[serde(default)]
        region: Option<String>,
    },
}

/// A manifest location that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid remote manifest location {input:?}: {reason}")]
pub struct InvalidManifestLocation {
    /// What was given.
    pub input: String,
    /// Why it is rejected.
    pub reason: &'static str,
}

impl FromStr for ManifestLocation {
    type Err = InvalidManifestLocation;

    /// `s3://BUCKET/PREFIX` is an S3 location; anything else is a local directory.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| InvalidManifestLocation {
            input: input.to_owned(),
            reason,
        };
        if let Some(rest) = input.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(invalid("the bucket name is empty"));
            }
            return Ok(ManifestLocation::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_matches('/').to_owned(),
                endpoint: None,
                region: None,
            });
        }
        if input.trim().is_empty() {
            return Err(invalid("the path is empty"));
        }
        Ok(ManifestLocation::LocalPath {
            path: PathBuf::from(input),
        })
    }
}

impl fmt::Display for ManifestLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestLocation::LocalPath { path } => write!(f, "{}", path.display()),
            ManifestLocation::S3 { bucket, prefix, .. } if prefix.is_empty() => {
                write!(f, "s3://{bucket}")
            }
            ManifestLocation::S3 { bucket, prefix, .. } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutoRecoveryConfigError {
    /// A numeric option outside its documented range.
    #[error("auto_recovery.{option} = {value} is out of range [{min}, {max}]")]
    OutOfRange {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: u64,
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// The remote manifest location is unusable.
    #[error(transparent)]
    Manifest(#[from] InvalidManifestLocation),
}

/// Something worth a WARN at init that does not stop the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigWarning {
    /// The grace does not exceed the synchronisation interval: the first round may run before
    /// the first sync and see an empty registry.
    GraceNotAboveSyncInterval {
        /// `reconcile_grace_ms`.
        grace_ms: u64,
        /// The synchronisation strategy's interval.
        sync_interval_ms: u64,
    },
    /// A deprecated key was given; it is ignored.
    DeprecatedKey {
        /// The key.
        key: &'static str,
    },
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::GraceNotAboveSyncInterval {
                grace_ms,
                sync_interval_ms,
            } => write!(
                f,
                "auto_recovery.reconcile_grace_ms ({grace_ms}) is not above the sync interval \
                 ({sync_interval_ms} ms): the first round may run before the first sync"
            ),
            ConfigWarning::DeprecatedKey { key } => write!(
                f,
                "auto_recovery.{key} is deprecated and ignored; it will be rejected in a later \
                 release"
            ),
        }
    }
}

fn check_range(
    option: &'static str,
    value: u64,
    min: u64,
    max: u64,
) -> Result<(), AutoRecoveryConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(AutoRecoveryConfigError::OutOfRange {
            option,
            value,
            min,
            max,
        })
    }
}

impl AutoRecoveryConfig {
    /// The deprecated keys present in this configuration.
    pub fn deprecated_keys(&self) -> Vec<&'static str> {
        [
            ("marker_path", self.marker_path.is_some()),
            ("replay_timeout_ms", self.replay_timeout_ms.is_some()),
            ("recovery_timeout_ms", self.recovery_timeout_ms.is_some()),
            ("stopped_row_ttl_ms", self.stopped_row_ttl_ms.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, present)| present.then_some(key))
        .collect()
    }

    /// Checks every range, and returns (and logs at WARN) what deserves a warning: a grace not
    /// above `sync_interval_ms`, deprecated keys.
    pub fn validate(
        &self,
        sync_interval_ms: u64,
    ) -> Result<Vec<ConfigWarning>, AutoRecoveryConfigError> {
        check_range("reconcile_grace_ms", self.reconcile_grace_ms, 50, 600_000)?;
        check_range(
            "reconcile_interval_ms",
            self.reconcile_interval_ms,
            1_000,
            600_000,
        )?;
        check_range(
            "start_budget.max_starts_per_second",
            u64::from(self.start_budget.max_starts_per_second),
            1,
            10_000_000,
        )?;
        if let Some(per_round) = self.start_budget.max_starts_per_round {
            check_range(
                "start_budget.max_starts_per_round",
                u64::from(per_round),
                1,
                10_000_000,
            )?;
        }
        match &self.remote_manifest {
            Some(ManifestLocation::S3 { bucket, .. }) if bucket.is_empty() => {
                return Err(InvalidManifestLocation {
                    input: self
                        .remote_manifest
                        .as_ref()
                        .map(|l| l.to_string())
                        .unwrap_or_default(),
                    reason: "the bucket name is empty",
                }
                .into())
            }
            Some(ManifestLocation::LocalPath { path }) if path.as_os_str().is_empty() => {
                return Err(InvalidManifestLocation {
                    input: String::new(),
                    reason: "the path is empty",
                }
                .into())
            }
            _ => {}
        }
        let mut warnings = Vec::new();
        if self.reconcile_grace_ms <= sync_interval_ms {
            warnings.push(ConfigWarning::GraceNotAboveSyncInterval {
                grace_ms: self.reconcile_grace_ms,
                sync_interval_ms,
            });
        }
        warnings.extend(
            self.deprecated_keys()
                .into_iter()
                .map(|key| ConfigWarning::DeprecatedKey { key }),
        );
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Ok(warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_seed_s() {
        let c = AutoRecoveryConfig::default();
        assert_eq!(c.reconcile_grace_ms, 30_000);
        assert_eq!(c.reconcile_interval_ms, 15_000);
        assert_eq!(c.remote_manifest, None);
        assert_eq!(c.validate(5_000).unwrap(), vec![]);
    }

    #[test]
    fn ranges_name_the_option() {
        let cases = [
            (49, 15_000, "reconcile_grace_ms"),
            (600_001, 15_000, "reconcile_grace_ms"),
            (30_000, 999, "reconcile_interval_ms"),
            (30_000, 600_001, "reconcile_interval_ms"),
        ];
        for (grace, interval, name) in cases {
            let c = AutoRecoveryConfig {
                reconcile_grace_ms: grace,
                reconcile_interval_ms: interval,
                ..AutoRecoveryConfig::default()
            };
            match c.validate(0) {
                Err(AutoRecoveryConfigError::OutOfRange { option, .. }) => assert_eq!(option, name),
                other => panic!("{grace}/{interval}: {other:?}"),
            }
        }
        for (grace, interval) in [(50, 1_000), (600_000, 600_000)] {
            let c = AutoRecoveryConfig {
                reconcile_grace_ms: grace,
                reconcile_interval_ms: interval,
                ..AutoRecoveryConfig::default()
            };
            assert!(c.validate(0).is_ok(), "{grace}/{interval}");
        }
        let c = AutoRecoveryConfig {
            start_budget: StartBudget {
                max_starts_per_second: 0,
                max_starts_per_round: None,
            },
            ..AutoRecoveryConfig::default()
        };
        let err = c.validate(0).unwrap_err();
        assert!(err.to_string().contains("max_starts_per_second"), "{err}");
    }

    #[test]
    fn a_grace_not_above_the_sync_interval_warns() {
        let c = AutoRecoveryConfig {
            reconcile_grace_ms: 5_000,
            ..AutoRecoveryConfig::default()
        };
        assert_eq!(
            c.validate(5_000).unwrap(),
            vec![ConfigWarning::GraceNotAboveSyncInterval {
                grace_ms: 5_000,
                sync_interval_ms: 5_000
            }]
        );
        assert!(c.validate(4_999).unwrap().is_empty());
    }

    #[test]
    fn deprecated_keys_are_accepted_warned_and_ignored() {
        let toml_text = r#"
            reconcile_grace_ms = 1000
            marker_path = "/var/lib/x"
            replay_timeout_ms = 5
            recovery_timeout_ms = 6
            stopped_row_ttl_ms = 7
        "#;
        let c: AutoRecoveryConfig = toml::from_str(toml_text).unwrap();
        assert_eq!(c.reconcile_grace_ms, 1000);
        assert_eq!(
            c.deprecated_keys(),
            vec![
                "marker_path",
                "replay_timeout_ms",
                "recovery_timeout_ms",
                "stopped_row_ttl_ms"
            ]
        );
        let warnings = c.validate(0).unwrap();
        assert_eq!(warnings.len(), 4);
        // Ignored: they do not survive a round trip.
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("marker_path"), "{json}");
        let json_in = r#"{"reconcile_interval_ms": 2000, "stopped_row_ttl_ms": {"any": [1]}}"#;
        let c: AutoRecoveryConfig = serde_json::from_str(json_in).unwrap();
        assert_eq!(c.reconcile_interval_ms, 2000);
        assert_eq!(c.deprecated_keys(), vec!["stopped_row_ttl_ms"]);
    }

    #[test]
    fn the_declared_commit_knob_defaults_to_group_commit() {
        assert_eq!(
            AutoRecoveryConfig::default().declared_commit,
            DeclaredCommit::Group
        );
        let c: AutoRecoveryConfig = toml::from_str("declared_commit = \"per_mutation\"").unwrap();
        assert_eq!(c.declared_commit, DeclaredCommit::PerMutation);
        assert!(toml::from_str::<AutoRecoveryConfig>("declared_commit = \"sometimes\"").is_err());
    }

    #[test]
    fn manifest_locations_parse() {
        assert_eq!(
            "s3://bucket/a/b/".parse::<ManifestLocation>().unwrap(),
            ManifestLocation::S3 {
                bucket: "bucket".into(),
                prefix: "a/b".into(),
                endpoint: None,
                region: None
            }
        );
        assert_eq!(
            "s3://bucket"
                .parse::<ManifestLocation>()
                .unwrap()
                .to_string(),
            "s3://bucket"
        );
        assert_eq!(
            "/mnt/off".parse::<ManifestLocation>().unwrap(),
            ManifestLocation::LocalPath {
                path: "/mnt/off".into()
            }
        );
        assert!("s3://".parse::<ManifestLocation>().is_err());
        assert!("".parse::<ManifestLocation>().is_err());
        let toml_text =
            "remote_manifest = { type = \"s3\", bucket = \"b\", endpoint = \"http://x\" }";
        let c: AutoRecoveryConfig = toml::from_str(toml_text).unwrap();
        assert!(
            matches!(c.remote_manifest, Some(ManifestLocation::S3 { ref endpoint, .. }) if endpoint.as_deref() == Some("http://x"))
        );
    }
}
