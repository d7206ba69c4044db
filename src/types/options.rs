//! Options of start and stop requests.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::errors::{StartError, StopError};
use crate::model::{ChildId, Metadata, NodeName, ReservedMetadataKey, RESERVED_METADATA_KEY};

/// The longest timeout a request may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// What to do with the children that did start when others of the same request failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Keep them (the default).
    #[default]
    Continue,
    /// Stop them, so the request leaves nothing behind. Requires `awaitable`.
    Rollback,
}

/// Options of `start_child` / `start_children`.
///
/// Unlike Elixir's ProcessHub, `awaitable` defaults to `true`: the Rust API is `async` anyway, and
/// a typed [`crate::StartResult`] is the useful answer. Set it to `false` to return as soon as the
/// request is validated and delivered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StartOptions {
    /// Wait for every node's answer (default `true`).
    pub awaitable: bool,
    /// How long to wait for the nodes' answers; `None` uses the hub's `default_timeout_ms`.
    /// A node that does not answer in time gives `node_receive_timeout` errors (the children
    /// may still start). At most one hour.
    pub timeout: Option<Duration>,
    /// Refuse ids the registry already has (default `true`).
    pub check_existing: bool,
    /// Continue or roll back when some children fail.
    pub on_failure: OnFailure,
    /// Metadata stored with every child of the request; `tag` drives `tag_query`. The key
    /// [`crate::model::RESERVED_METADATA_KEY`] is refused.
    pub metadata: Metadata,
    /// Declare the children (issue 5, `docs/recovery.md`): each is added to the hub's declared
    /// list before it starts and comes back after any outage until deliberately stopped.
    /// Needs `auto_recovery` and `Restart::Permanent` children (default `false`).
    pub durable: bool,
    /// Guided placement: the node each named child must run on (as many nodes as the
    /// replication factor: one). Such a child never migrates when nodes join. Required for
    /// every child when the hub's `distribution` is `guided`; a node that is not a member is
    /// refused (`child_mapping_invalid`). See `docs/strategies.md`.
    pub child_mapping: BTreeMap<ChildId, Vec<NodeName>>,
    /// Whether a guided child may be re-placed by the ring when all its nodes are gone (default
    /// `false`: it waits for its node to come back).
    pub guided_fallback: bool,
    /// The children of `child_mapping` whose nodes the hub chose by load
    /// (`Distribution::LoadBalanced`): they fall back to the ring when their nodes are gone
    /// and a rebalance may move them. Filled by the hub when it receives the start; a caller's
    /// value is replaced.
    #[doc(hidden)]
    #[serde(skip)]
    pub placed_by_load: std::collections::BTreeSet<ChildId>,
}

impl Default for StartOptions {
    fn default() -> Self {
        Self {
            awaitable: true,
            timeout: None,
            check_existing: true,
            on_failure: OnFailure::Continue,
            metadata: Metadata::new(),
            durable: false,
            child_mapping: BTreeMap::new(),
            guided_fallback: false,
            placed_by_load: Default::default(),
        }
    }
}

impl StartOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `awaitable`.
    pub fn awaitable(mut self, awaitable: bool) -> Self {
        self.awaitable = awaitable;
        self
    }

    /// Guided placement: child `id` runs on `node` (see [`StartOptions::child_mapping`]).
    pub fn child_on(mut self, id: impl Into<ChildId>, node: impl Into<NodeName>) -> Self {
        self.child_mapping.insert(id.into(), vec![node.into()]);
        self
    }

    /// Sets whether guided children may fall back to the ring when their nodes are gone.
    pub fn guided_fallback(mut self, fallback: bool) -> Self {
        self.guided_fallback = fallback;
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets `check_existing`.
    pub fn check_existing(mut self, check: bool) -> Self {
        self.check_existing = check;
        self
    }

    /// Sets `on_failure`.
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// Adds one metadata pair.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Sets `durable` (declare the children; see the field).
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Sets the `tag` metadata.
    pub fn tag(self, tag: impl Into<String>) -> Self {
        self.metadata("tag", tag)
    }

    /// Checks the options of a request for `children` children; returns the effective timeout
    /// (`default` when none is set).
    pub fn validate(&self, children: usize, default: Duration) -> Result<Duration, StartError> {
        if children == 0 {
            return Err(StartError::NoChildren);
        }
        if self.metadata.contains_key(RESERVED_METADATA_KEY) {
            return Err(ReservedMetadataKey.into());
        }
        let timeout = self.timeout.unwrap_or(default);
        if timeout > MAX_TIMEOUT {
            return Err(StartError::InvalidOption {
                option: "timeout",
                reason: "at most one hour",
            });
        }
        if self.on_failure == OnFailure::Rollback && !self.awaitable {
            return Err(StartError::InvalidOption {
                option: "on_failure",
                reason: "rollback needs the results: set awaitable",
            });
        }
        Ok(timeout)
    }
}

/// Options of `stop_child` / `stop_children`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StopOptions {
    /// Wait for every node's answer (default `true`).
    pub awaitable: bool,
    /// How long to wait; `None` uses the hub's `default_timeout_ms`. At most one hour.
    pub timeout: Option<Duration>,
}

impl Default for StopOptions {
    fn default() -> Self {
        Self {
            awaitable: true,
            timeout: None,
        }
    }
}

impl StopOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `awaitable`.
    pub fn awaitable(mut self, awaitable: bool) -> Self {
        self.awaitable = awaitable;
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Checks the options of a request for `children` children; returns the effective timeout.
    pub fn validate(&self, children: usize, default: Duration) -> Result<Duration, StopError> {
        if children == 0 {
            return Err(StopError::NoChildren);
        }
        let timeout = self.timeout.unwrap_or(default);
        if timeout > MAX_TIMEOUT {
            return Err(StopError::InvalidOption {
                option: "timeout",
                reason: "at most one hour",
            });
        }
        Ok(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Duration = Duration::from_secs(10);

    #[test]
    fn start_options_are_checked_with_the_right_error() {
        assert_eq!(
            StartOptions::new().validate(0, DEFAULT),
            Err(StartError::NoChildren)
        );
        assert_eq!(StartOptions::new().validate(3, DEFAULT), Ok(DEFAULT));
        let t = Duration::from_millis(5);
        assert_eq!(StartOptions::new().timeout(t).validate(1, DEFAULT), Ok(t));
        assert!(matches!(
            StartOptions::new()
                .metadata(RESERVED_METADATA_KEY, "x")
                .validate(1, DEFAULT),
            Err(StartError::ReservedMetadataKey(_))
        ));
        assert!(matches!(
            StartOptions::new()
                .timeout(MAX_TIMEOUT + Duration::from_millis(1))
                .validate(1, DEFAULT),
            Err(StartError::InvalidOption {
                option: "timeout",
                ..
            })
        ));
        assert!(matches!(
            StartOptions::new()
                .awaitable(false)
                .on_failure(OnFailure::Rollback)
                .validate(1, DEFAULT),
            Err(StartError::InvalidOption {
                option: "on_failure",
                ..
            })
        ));
    }

    #[test]
    fn stop_options_are_checked_with_the_right_error() {
        assert_eq!(
            StopOptions::new().validate(0, DEFAULT),
            Err(StopError::NoChildren)
        );
        assert_eq!(StopOptions::new().validate(1, DEFAULT), Ok(DEFAULT));
        assert!(matches!(
            StopOptions::new()
                .timeout(MAX_TIMEOUT * 2)
                .validate(1, DEFAULT),
            Err(StopError::InvalidOption {
                option: "timeout",
                ..
            })
        ));
    }

    #[test]
    fn options_load_from_json_with_defaults() {
        let opts: StartOptions =
            serde_json::from_str(r#"{"on_failure":"rollback","metadata":{"tag":"a"}}"#).unwrap();
        assert!(opts.awaitable && opts.check_existing);
        assert_eq!(opts.on_failure, OnFailure::Rollback);
        assert_eq!(opts.metadata["tag"], "a");
    }
}
