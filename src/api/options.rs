//! Options of start and stop requests.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::Metadata;

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
/// Unlike the original, `awaitable` defaults to `true`: the Rust API is `async` anyway, and a
/// typed [`crate::StartResult`] is the useful answer. Set it to `false` to return as soon as the
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
}

impl Default for StartOptions {
    fn default() -> Self {
        Self {
            awaitable: true,
            timeout: None,
            check_existing: true,
            on_failure: OnFailure::Continue,
            metadata: Metadata::new(),
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

    /// Sets the `tag` metadata.
    pub fn tag(self, tag: impl Into<String>) -> Self {
        self.metadata("tag", tag)
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
}
