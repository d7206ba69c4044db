//! A child: the unit the hub places, supervises and records.
//!
//! `kind` names an actor type that every node registered under the same name, and `args` carries
//! its arguments as JSON text. This is Rust's stand-in for Erlang's `{module, function, args}`:
//! a spec is plain data, so it can cross the wire, sit on disk, and be started on any node.

use std::fmt;
use std::time::Duration;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// The cluster-wide name of a child; unique within a hub.
///
/// A newtype so that ids cannot be confused with kinds or node names in signatures. An id of up
/// to 24 bytes is kept inline, so the copies the hub keeps of it (registry key, host tables)
/// cost no allocation; it compares, hashes and serializes as the text it holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChildId(CompactString);

/// A child id was empty or too long to be a sensible key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid child id {id:?}: {reason}")]
pub struct InvalidChildId {
    /// The rejected id (truncated to 64 characters).
    pub id: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

impl ChildId {
    /// The longest id accepted; LMDB keys are limited to 511 bytes.
    pub const MAX_LEN: usize = 480;

    /// Builds an id, rejecting the empty string and ids too long to be stored as a key.
    pub fn parse(id: impl Into<String>) -> Result<Self, InvalidChildId> {
        let id = id.into();
        if id.is_empty() {
            return Err(InvalidChildId {
                id,
                reason: "must not be empty",
            });
        }
        if id.len() > Self::MAX_LEN {
            return Err(InvalidChildId {
                id: id.chars().take(64).collect(),
                reason: "longer than 480 bytes",
            });
        }
        Ok(Self(id.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ChildId {
    /// Infallible conversion for literals in code and tests; use [`ChildId::parse`] for input
    /// that comes from outside the program.
    fn from(s: &str) -> Self {
        Self(s.into())
    }
}

impl From<String> for ChildId {
    fn from(s: String) -> Self {
        Self(s.into())
    }
}

impl fmt::Display for ChildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ChildId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// When the node's supervisor restarts a child that stopped.
///
/// The names and meanings are Erlang's, because that is what users of a process hub know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restart {
    /// Always restarted, whatever the exit reason. The only type a durable child may have.
    #[default]
    Permanent,
    /// Restarted only after an abnormal exit (a panic or an error); a normal stop is final.
    Transient,
    /// Never restarted.
    Temporary,
}

/// How long a child gets to stop before it is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shutdown {
    /// Ask the child to stop and wait up to this many milliseconds, then kill it.
    TimeoutMs(u64),
    /// Kill the child at once (its `post_stop` does not run).
    Kill,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::TimeoutMs(5_000)
    }
}

impl Shutdown {
    /// The grace period before a kill, `None` for an immediate kill.
    pub fn grace(&self) -> Option<Duration> {
        match self {
            Shutdown::TimeoutMs(ms) => Some(Duration::from_millis(*ms)),
            Shutdown::Kill => None,
        }
    }
}

/// A child's arguments as JSON text, decoded by the kind that starts it.
///
/// JSON text rather than a typed value because the hub does not know the argument types of the
/// kinds it hosts, and because JSON crosses the admin API, the wire and the disk unchanged.
///
/// Omitted arguments are JSON `null` (the [`Default`]): a kind whose `Arguments` is
/// `Option<T>` starts with `None`, one whose `Arguments` is `()` starts, and one that needs a
/// `T` refuses the start with `invalid_args` saying that none were given. An explicit `null`
/// is the same value: "no arguments" has one spelling.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChildArgs(CompactString);

impl Default for ChildArgs {
    fn default() -> Self {
        // Kept inline (no allocation): most children have no arguments, and every node keeps
        // the spec of each child it runs.
        Self(CompactString::const_new("null"))
    }
}

impl ChildArgs {
    /// Serializes a typed argument value.
    pub fn encode<T: Serialize>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_string(value).map(|text| Self(text.into()))
    }

    /// Wraps JSON text that is already encoded (it is checked when the kind decodes it).
    pub fn from_json_text(text: impl Into<String>) -> Self {
        Self(text.into().into())
    }

    /// Wraps a JSON value.
    pub fn from_json(value: &serde_json::Value) -> Self {
        Self(value.to_string().into())
    }

    /// Decodes the arguments as the type a kind expects.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.0)
    }

    /// The JSON text.
    pub fn as_json_text(&self) -> &str {
        &self.0
    }

    /// Whether no arguments were given (the JSON text is `null`).
    pub fn is_omitted(&self) -> bool {
        self.0.trim() == "null"
    }
}

/// Everything needed to start a child on any node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChildSpec {
    /// Cluster-wide name of the child.
    pub id: ChildId,
    /// The registered kind (actor type) to start.
    pub kind: String,
    /// Arguments for the kind, as JSON text.
    #[serde(default)]
    pub args: ChildArgs,
    /// Restart type; see [`Restart`].
    #[serde(default)]
    pub restart: Restart,
    /// Shutdown behaviour; see [`Shutdown`].
    #[serde(default)]
    pub shutdown: Shutdown,
}

impl ChildSpec {
    /// A permanent child of `kind` with no arguments and the default shutdown.
    pub fn new(id: impl Into<ChildId>, kind: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: kind.into(),
            args: ChildArgs::default(),
            restart: Restart::default(),
            shutdown: Shutdown::default(),
        }
    }

    /// Sets typed arguments.
    pub fn with_args<T: Serialize>(mut self, args: &T) -> Result<Self, serde_json::Error> {
        self.args = ChildArgs::encode(args)?;
        Ok(self)
    }

    /// Sets the restart type.
    pub fn with_restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Sets the shutdown behaviour.
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_id_rejects_empty_and_overlong() {
        assert!(ChildId::parse("").is_err());
        assert!(ChildId::parse("x".repeat(481)).is_err());
        assert_eq!(ChildId::parse("a").unwrap().as_str(), "a");
    }

    #[test]
    fn spec_roundtrips_through_json_and_bincode() {
        let spec = ChildSpec::new("c1", "counter")
            .with_args(&serde_json::json!({"start": 3}))
            .unwrap()
            .with_restart(Restart::Transient);
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<ChildSpec>(&json).unwrap(), spec);
        let bin = bincode::serialize(&spec).unwrap();
        assert_eq!(bincode::deserialize::<ChildSpec>(&bin).unwrap(), spec);
    }

    #[test]
    fn spec_defaults_when_fields_missing() {
        let spec: ChildSpec = serde_json::from_str(r#"{"id":"a","kind":"counter"}"#).unwrap();
        assert_eq!(spec.restart, Restart::Permanent);
        assert_eq!(spec.args.as_json_text(), "null");
        assert_eq!(spec.shutdown, Shutdown::TimeoutMs(5_000));
    }
}
