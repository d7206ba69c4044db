//! Why a node's settings were refused.

use std::path::PathBuf;

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
