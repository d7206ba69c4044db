//! Errors of the public API, one enum per concern.

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;
use crate::kinds::KindError;
use crate::storage::StorageError;

/// Why one child of a start request did not start (an entry of `StartResult::errors`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum ChildStartError {
    /// The id is in the registry already, appears twice in the request, or runs on the node.
    #[error("already started")]
    AlreadyStarted,
    /// The id is empty or too long.
    #[error("invalid child id: {reason}")]
    InvalidId {
        /// Why.
        reason: String,
    },
    /// No kind with this name is registered on the node.
    #[error("unknown child kind {kind:?}")]
    UnknownKind {
        /// The kind the spec named.
        kind: String,
    },
    /// The arguments do not decode as the kind's argument type.
    #[error("arguments of kind {kind:?} do not decode: {message}")]
    InvalidArgs {
        /// The kind.
        kind: String,
        /// The decoder's message.
        message: String,
    },
    /// The actor's `pre_start` returned an error or panicked.
    #[error("child failed to start: {message}")]
    StartupFailed {
        /// The error or panic message.
        message: String,
    },
    /// The node did not answer within the request's timeout (the child may still start).
    #[error("node did not answer in time")]
    NodeReceiveTimeout,
    /// The node that owns the child cannot be reached.
    #[error("node unavailable: {reason}")]
    NodeUnavailable {
        /// Why.
        reason: String,
    },
    /// The child started but its row could not be written; it was stopped again.
    #[error("registry write failed: {message}")]
    Storage {
        /// The storage error.
        message: String,
    },
}

impl From<KindError> for ChildStartError {
    fn from(e: KindError) -> Self {
        match e {
            KindError::UnknownKind { kind } => ChildStartError::UnknownKind { kind },
            KindError::InvalidArgs { kind, message } => {
                ChildStartError::InvalidArgs { kind, message }
            }
            KindError::StartupFailed { message } => ChildStartError::StartupFailed { message },
        }
    }
}

/// Why one child of a stop request was not stopped (an entry of `StopResult::errors`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum ChildStopError {
    /// The registry has no such child.
    #[error("no such child")]
    NotFound,
    /// The node did not answer within the request's timeout.
    #[error("node did not answer in time")]
    NodeReceiveTimeout,
    /// The node hosting the child cannot be reached.
    #[error("node unavailable: {reason}")]
    NodeUnavailable {
        /// Why.
        reason: String,
    },
    /// The child stopped but its row could not be removed.
    #[error("registry write failed: {message}")]
    Storage {
        /// The storage error.
        message: String,
    },
}

/// Why a whole start request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The request named no children (the original's `:no_children`).
    #[error("no children to start")]
    NoChildren,
    /// The metadata uses the key reserved for the hub.
    #[error(transparent)]
    ReservedMetadataKey(#[from] crate::model::ReservedMetadataKey),
    /// An option is out of range or contradicts another.
    #[error("option `{option}` is invalid: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The hub is not running (stopped, or its coordinator is restarting).
    #[error("hub unavailable: {0}")]
    HubUnavailable(String),
}

/// Why a whole stop request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StopError {
    /// The request named no children.
    #[error("no children to stop")]
    NoChildren,
    /// An option is out of range.
    #[error("option `{option}` is invalid: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The hub is not running.
    #[error("hub unavailable: {0}")]
    HubUnavailable(String),
}

/// Why a hub could not be spawned.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The registry backend could not be opened.
    #[error("registry backend: {0}")]
    Storage(#[from] StorageError),
    /// A hub actor could not be spawned.
    #[error("hub actor failed to start: {0}")]
    Actor(String),
    /// A hook given at spawn was rejected.
    #[error(transparent)]
    Hook(#[from] crate::hooks::HookError),
    /// A static child (`child_specs`) did not start; the hub was shut down again.
    #[error("static children failed to start: {}", describe(.errors))]
    StaticChildren {
        /// Each failed child with its reason.
        errors: Vec<crate::ChildFailure>,
    },
}

fn describe(errors: &[crate::ChildFailure]) -> String {
    errors
        .iter()
        .map(|e| format!("{} on {}: {}", e.id, e.node, e.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A message to a child by id (`Hub::cast_child` / `Hub::call_child`) failed.
///
/// `code` is one of `not_found` (no node runs the child), `no_command_handler` (its kind
/// registered none), `command_failed` (the handler refused the payload or the child did not
/// answer), `timeout`, `forward_limit` (the child kept moving), `unreachable` (the node running
/// it could not be reached) and `hub_unavailable`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("message to child {id} failed on {node}: {code}: {message}")]
pub struct ChildMessageError {
    /// The child.
    pub id: crate::model::ChildId,
    /// The node that reported the failure.
    pub node: crate::model::NodeName,
    /// A snake_case code (see the type's docs).
    pub code: String,
    /// Human-readable detail.
    pub message: String,
}

impl From<crate::cluster::wire::ChildFailure> for ChildMessageError {
    fn from(f: crate::cluster::wire::ChildFailure) -> Self {
        Self {
            id: f.id,
            node: f.node,
            code: f.reason,
            message: f.message,
        }
    }
}
