//! What a request's answer says went wrong, one enum per concern: below every layer that
//! produces or carries these errors. The conversions from a layer's own errors live with that
//! layer (`core::guided`, `kinds`, `storage`, `cluster::wire`), so this file knows only the
//! model.

use serde::{Deserialize, Serialize};

use crate::model::{ChildId, NodeName};

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
    /// No kind with this name is registered on the node. The node that takes the request
    /// refuses it there, before the child is declared or sent to any node.
    #[error("unknown child kind {kind:?}{}", known_kinds_suffix(.known))]
    UnknownKind {
        /// The kind the spec named.
        kind: String,
        /// The kinds the node knows, sorted (empty from a node that did not say).
        #[serde(default)]
        known: Vec<String>,
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
    /// A durable start of a child whose restart type is not `permanent` (a transient or
    /// temporary child may finish on its own, which no other node could tell from "lost").
    #[error("durable requires restart permanent, not {restart}")]
    DurableRequiresPermanent {
        /// The restart type the spec asked for.
        restart: String,
    },
    /// The spec and metadata encode larger than a child may weigh
    /// ([`crate::model::MAX_CHILD_BYTES`]): such a child could never cross the wire whole, so
    /// it could be neither replicated nor moved.
    #[error("child encodes to {bytes} bytes, more than the {max} bytes a child may weigh")]
    TooLarge {
        /// The child's encoded size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The spec breaks another rule of the API (an empty or overlong kind), or a peer sent a
    /// child no API would have accepted.
    #[error("invalid child spec: {reason}")]
    InvalidSpec {
        /// Why.
        reason: String,
    },
    /// The child started but its row could not be written because the disk is full; it was
    /// stopped again. The same start succeeds once space returns.
    #[error("registry write failed, no space left: {message}")]
    InsufficientStorage {
        /// The storage error.
        message: String,
    },
    /// The hub places children by mapping (`distribution = "guided"`) and the start's
    /// `child_mapping` names no node for this child.
    #[error("child mapping missing: the hub's distribution is guided")]
    ChildMappingMissing,
    /// The start's `child_mapping` for this child names a node that is not a member, or one
    /// node twice.
    #[error("invalid child mapping: {reason}")]
    ChildMappingInvalid {
        /// What is wrong.
        reason: String,
    },
    /// The node that owns the child is in partition mode (its side of a split has no quorum)
    /// and runs no child until quorum returns.
    #[error("partitioned: the owner's side of the cluster has no quorum")]
    Partitioned,
    /// The start's `child_mapping` for this child names another number of nodes than the
    /// replication factor.
    #[error("child mapping names {got} nodes; the replication factor is {expected}")]
    ChildMappingMismatch {
        /// The replication factor.
        expected: u32,
        /// The nodes named.
        got: u32,
    },
}

impl ChildStartError {
    /// Whether the child may have started all the same: the node got the request, or may
    /// have, and did not say. A caller that would act on "not started" (resume a hot-moved
    /// child where it was, say) must not, or two instances may run.
    pub fn may_have_started(&self) -> bool {
        matches!(
            self,
            Self::NodeReceiveTimeout | Self::NodeUnavailable { .. }
        )
    }
}

/// Why an operation on the declared list (a durable start, the stop of a declared child, a
/// `clear`) was refused. Nothing was changed, except for [`RecoveryError::OutcomeUnknown`],
/// which says that this node cannot tell.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum RecoveryError {
    /// The hub runs without `auto_recovery`: there is no declared list.
    #[error("auto_recovery is off on this hub: durable children need it")]
    AutoRecoveryDisabled,
    /// No declared-list leader is reachable; plain starts, lookups and stops of undeclared
    /// children keep working.
    #[error("no declared-list leader is reachable: {reason}")]
    NoLeader {
        /// Why.
        reason: String,
    },
    /// This node's list is lost and its reconcile is parked until a copy is restored or an
    /// operator clears it.
    #[error("the declared list is lost on this node (parked); restore or clear it first")]
    DeclaredParked,
    /// The list could not be persisted (the mutation was not acknowledged).
    #[error("declared list write failed: {message}")]
    Storage {
        /// The storage error.
        message: String,
    },
    /// The list could not be persisted because its disk is full (the mutation was not
    /// acknowledged); the same request succeeds once space returns.
    #[error("declared list write failed, no space left: {message}")]
    NoSpace {
        /// The storage error.
        message: String,
    },
    /// The hub is not running.
    #[error("hub unavailable: {reason}")]
    HubUnavailable {
        /// Why.
        reason: String,
    },
    /// The mutation was sent to the leader, which did not answer (it timed out, or went down
    /// before answering): it may or may not have been applied. Retrying is safe: a declare of
    /// a declared child and an undeclare of an undeclared one change nothing.
    #[error("outcome unknown: {reason}")]
    OutcomeUnknown {
        /// Why.
        reason: String,
    },
}

impl StartError {
    /// The answer to a durable start the declared list did not take: a refusal, or, when the
    /// leader did not answer, [`StartError::OutcomeUnknown`].
    pub(crate) fn of_declared(e: RecoveryError) -> Self {
        match e {
            RecoveryError::OutcomeUnknown { reason } => Self::OutcomeUnknown { reason },
            e => Self::Declared(e),
        }
    }
}

impl StopError {
    /// As [`StartError::of_declared`], for a stop.
    pub(crate) fn of_declared(e: RecoveryError) -> Self {
        match e {
            RecoveryError::OutcomeUnknown { reason } => Self::OutcomeUnknown { reason },
            e => Self::Declared(e),
        }
    }
}

impl From<crate::model::InvalidChild> for ChildStartError {
    fn from(e: crate::model::InvalidChild) -> Self {
        use crate::model::InvalidChild;
        match e {
            InvalidChild::Id(e) => ChildStartError::InvalidId {
                reason: e.reason.to_owned(),
            },
            InvalidChild::TooLarge { bytes, max, .. } => ChildStartError::TooLarge { bytes, max },
            other => ChildStartError::InvalidSpec {
                reason: other.to_string(),
            },
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
    /// The child stopped but its row could not be removed; the same stop removes it once the
    /// disk takes writes again.
    #[error("registry write failed: {message}")]
    Storage {
        /// The storage error.
        message: String,
    },
    /// As `Storage`, because the disk is full.
    #[error("registry write failed, no space left: {message}")]
    InsufficientStorage {
        /// The storage error.
        message: String,
    },
    /// This node cannot tell whether the stop took effect: the declared list's leader took
    /// the removal, but this node's copy did not know the child, and its host did not answer
    /// or did not know it either (the child may have been declared and is then undeclared for
    /// good, or may never have existed). Retrying the stop is safe and settles it.
    #[error("outcome unknown: {reason}")]
    OutcomeUnknown {
        /// Why it cannot be told.
        reason: String,
    },
}

impl ChildStopError {
    /// Whether the stop may have taken effect all the same: the node got the request and did
    /// not answer, or this node cannot tell. Retrying the stop is safe.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Self::NodeReceiveTimeout | Self::OutcomeUnknown { .. })
    }
}

/// Why a whole start request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The request named no children (`:no_children` in Elixir's ProcessHub).
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
    /// A durable start was refused by the declared list (`no_leader`, parked, off, a failed
    /// write); no child of the request was started or declared. (An unanswered declaration is
    /// [`StartError::OutcomeUnknown`], never this.)
    #[error(transparent)]
    Declared(RecoveryError),
    /// This node's side of a split has no quorum (`partition_tolerance`): it starts nothing
    /// until quorum returns. Retry on a node of the majority, or later.
    #[error("partitioned: this node's side of the cluster has no quorum")]
    Partitioned,
    /// A durable start whose declaration was sent to the declared list's leader, which did not
    /// answer: the children may be declared (and then start, by the reconcile) or not. Not a
    /// refusal: retry the start, which is safe (a declared child's start answers
    /// `already_started` once it runs, or starts it).
    #[error("outcome unknown: {reason}")]
    OutcomeUnknown {
        /// Why.
        reason: String,
    },
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
    /// The stop names a declared child and the declared list refused to remove it
    /// (`no_leader`, parked, a failed write); no child of the request was stopped or
    /// undeclared. (An unanswered removal is [`StopError::OutcomeUnknown`], never this.)
    #[error(transparent)]
    Declared(RecoveryError),
    /// This node's side of a split has no quorum (`partition_tolerance`): a stop made here
    /// could not reach the majority that runs the children, so none is taken.
    #[error("partitioned: this node's side of the cluster has no quorum")]
    Partitioned,
    /// A stop of declared children whose removal was sent to the declared list's leader, which
    /// did not answer: the children may be undeclared (and then stop for good, by the
    /// reconcile) or not. Not a refusal: retry the stop, which is safe (a retried stop of an
    /// undeclared child stops what still runs of it).
    #[error("outcome unknown: {reason}")]
    OutcomeUnknown {
        /// Why.
        reason: String,
    },
}

/// A message to a child by id (`Hub::cast_child` / `Hub::call_child`) failed.
///
/// `code` is one of `not_found` (no node runs the child), `between_nodes` (retryable: the
/// child exists but its node is down within the grace period or it is being moved; `node`
/// names the host the registry gives), `no_command_handler` (its kind
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

/// `await_normal` gave up before the first round completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the hub did not reach the normal recovery state within {waited_ms} ms")]
pub struct AwaitNormalTimeout {
    /// How long the caller waited.
    pub waited_ms: u64,
}

/// `Hub::wait_for_members` gave up: the hub's membership did not reach the count in time.
/// Says how many members it had when the wait ended, so the caller can tell "nobody came"
/// (1, this node alone) from "one is missing".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the hub had {seen} of the {wanted} members it waited for (this node included) after {waited_ms} ms"
)]
pub struct WaitForMembersTimeout {
    /// The member count waited for, this node included.
    pub wanted: usize,
    /// The member count when the wait gave up, this node included.
    pub seen: usize,
    /// How long the caller waited.
    pub waited_ms: u64,
}

/// A typed cast or call to a child failed.
///
/// [`ChildRefError::BetweenNodes`] is the one a caller may retry: the child exists and will run
/// again in a moment (its node is down within the grace period, or it is being moved).
/// `ChildRef` already retries it within the call's timeout; it surfaces only when the timeout
/// ran out first (or to a cast, which does not wait).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChildRefError {
    /// No node runs the child, and none is about to.
    #[error("no node runs child {id}")]
    NotFound {
        /// The child.
        id: ChildId,
    },
    /// The child exists but no reachable node runs it right now: `host` (the node the registry
    /// names) is down within its grace period, or the child is being moved. Retryable.
    #[error("child {id} is between nodes (registry host: {host:?})")]
    BetweenNodes {
        /// The child.
        id: ChildId,
        /// The host the registry names, if any.
        host: Option<NodeName>,
    },
    /// No answer within the caller's timeout.
    #[error("child {id} did not answer within {waited_ms} ms")]
    Timeout {
        /// The child.
        id: ChildId,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The node running the child went down or could not be reached while the call waited;
    /// whether the child handled the message is unknown.
    #[error("node {node} running child {id} is unreachable")]
    Unreachable {
        /// The child.
        id: ChildId,
        /// The node.
        node: NodeName,
    },
    /// The message is not of the child's message type (a local child checks the type; a remote
    /// one fails to decode it), or its bytes do not decode.
    #[error("message to child {id} does not decode on {node}: {detail}")]
    Decode {
        /// The child.
        id: ChildId,
        /// The node that refused it.
        node: NodeName,
        /// What went wrong.
        detail: String,
    },
    /// The child runs on another node and the message type has no serialized form (it is
    /// local-only), or a call was built from a variant that is not `#[rpc]`.
    #[error("message to child {id} cannot cross nodes: {detail}")]
    NotRemotable {
        /// The child.
        id: ChildId,
        /// Why.
        detail: String,
    },
    /// The encoded message or answer is larger than one frame may carry.
    #[error("message to child {id} is {bytes} bytes, above the {max}-byte frame budget")]
    TooLarge {
        /// The child.
        id: ChildId,
        /// Its encoded size.
        bytes: u64,
        /// The budget.
        max: u64,
    },
    /// The child dropped the reply port without answering (it stopped or failed meanwhile).
    #[error("child {id} on {node} dropped the call without answering")]
    NoReply {
        /// The child.
        id: ChildId,
        /// Its node.
        node: NodeName,
    },
    /// The host refused: too many typed calls from peers are in flight there.
    #[error("node {node} is overloaded with child messages")]
    Overloaded {
        /// The child.
        id: ChildId,
        /// The node.
        node: NodeName,
    },
    /// This node's hub is not running (or not clustered while the child is elsewhere).
    #[error("the hub is not running")]
    HubUnavailable {
        /// The child.
        id: ChildId,
    },
}

impl ChildRefError {
    /// The snake_case code (as serialized).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "not_found",
            Self::BetweenNodes { .. } => "between_nodes",
            Self::Timeout { .. } => "timeout",
            Self::Unreachable { .. } => "unreachable",
            Self::Decode { .. } => "decode",
            Self::NotRemotable { .. } => "not_remotable",
            Self::TooLarge { .. } => "too_large",
            Self::NoReply { .. } => "no_reply",
            Self::Overloaded { .. } => "overloaded",
            Self::HubUnavailable { .. } => "hub_unavailable",
        }
    }

    /// Whether a retry in a moment may succeed (the child exists and will run again).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::BetweenNodes { .. })
    }
}

/// `; known kinds: a, b` for an unknown-kind message, so a typo shows its fix (nothing when
/// the list is not known).
pub(crate) fn known_kinds_suffix(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!("; known kinds: {}", known.join(", "))
    }
}
