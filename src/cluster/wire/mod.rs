//! The wire format between the hubs of one hub id on different nodes.
//!
//! A frame is `version: u16` (little endian) followed by the bincode encoding of
//! `(hub_id, from, WireMsg)`. The version comes first and alone so that a node can refuse a frame
//! of a protocol it does not speak *before* trying to decode it, with an error that says so,
//! rather than misreading it as garbage. Decoding never panics: a bad frame yields a
//! [`WireError`], which the receiving transport logs and drops (the periodic full sync heals what
//! a dropped frame carried).
//!
//! Messages are defined in terms of [`crate::model`] types, so that what the registry stores and
//! what crosses the wire cannot drift apart. Renaming or reordering variants or fields changes
//! the encoding: bump [`WIRE_VERSION`] when doing so.
//!
//! This file holds the messages; `frame` the codec ([`encode`], [`decode`], [`WireError`]),
//! `budget` how outbound batches are cut to fit a frame, and `declared` the declared-list
//! payloads ([`DeclaredOp`], [`DeclaredRefusal`]), re-exported
//! here so every item keeps its `crate::cluster::wire::` path.

pub mod budget;
mod declared;
mod frame;
pub mod seal;
#[cfg(test)]
mod summary_tests;

pub use declared::{DeclaredOp, DeclaredRefusal};
pub use frame::{
    decode, decode_body, decode_for, encode, encode_compact_body, WireError, WireFrame,
};

use serde::{Deserialize, Serialize};

use crate::core::activity::NodeSummary;
use crate::core::boot_token::BootToken;
use crate::core::declared::delta::DeclaredDelta;
use crate::core::declared::list::{DeclaredChild, DeclaredList};
use crate::core::declared::summary::CopySummary;
use crate::core::reachability::{DigestEntry, Observation, MAX_NODES};
use crate::model::{ChildId, ChildSpec, DownReason, HubMeta, Metadata, NodeName, Pid, Row};

/// The version of the message encoding, and of open frames ([`encode`]). Frames between
/// nodes that both speak [`seal::SEALED_VERSION`] carry the same encoding, sealed.
pub const WIRE_VERSION: u16 = 1;

/// Largest frame accepted (16 MiB, ractor_cluster's default inbound limit).
pub const MAX_FRAME_BYTES: u64 = 16 * 1024 * 1024;

/// Identifies one pending operation on the node that started it (`reply_to`): replies carry it
/// back so the waiting caller can be found. Unique per origin node, not cluster-wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// One child to start, with what the registry records about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartItem {
    /// What to start.
    pub spec: ChildSpec,
    /// The caller's metadata for the row.
    pub metadata: Metadata,
    /// The child belongs in the declared list (it must survive a whole-cluster outage).
    pub durable: bool,
}

/// A child that runs (or already ran, with `check_existing`) on `node`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedChild {
    /// The child.
    pub id: ChildId,
    /// The node it runs on.
    pub node: NodeName,
    /// Its pid on that node.
    pub pid: Pid,
}

/// An operation on one child that failed on `node`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildFailure {
    /// The child.
    pub id: ChildId,
    /// The node that refused or failed.
    pub node: NodeName,
    /// A snake_case code (`already_started`, `unknown_kind`, `start_failed`, `not_found`,
    /// `forward_limit`...), as the admin API reports it.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

/// One change of the sender's registry, in terms the receiver can merge
/// ([`crate::model::merge_rows`], [`crate::model::apply_observation`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegistryChange {
    /// The sender's version of the row. Its `node_pids` holds at most the sender's own
    /// observation; the receiver takes only that one and merges the authored part by epoch.
    Upsert(Row),
    /// The sender no longer runs the child (its observation is removed; the row stays).
    Unbind {
        /// The child.
        id: ChildId,
    },
    /// The child was deliberately stopped: the authored removal at this bookkeeping version.
    Removed {
        /// The child.
        id: ChildId,
        /// The removal's version; a receiver holding a newer authored row keeps it.
        hub: HubMeta,
    },
}

/// The hub protocol: every message a hub sends to a peer hub of the same hub id.
///
/// `Hello` and `Heartbeat` are consumed by the transport itself (membership and failure
/// detection); everything else is delivered to the hub.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireMsg {
    /// "I host this hub": sent when a peer hub is discovered and answered once. Carries the
    /// sender's boot token (so a restart is told from a flap) and the peers it currently sees
    /// (diagnostics; lets a receiver notice members it is not connected to).
    Hello {
        /// The sender's boot token.
        boot_token: BootToken,
        /// The sender's current members, itself included, sorted.
        members: Vec<NodeName>,
        /// Whether this is an answer to a `Hello` (an answer is not answered again).
        reply: bool,
    },
    /// A sign of life every heartbeat interval; the token exposes a restart that happened
    /// between two heartbeats.
    Heartbeat {
        /// The sender's boot token.
        boot_token: BootToken,
    },
    /// The sender is leaving gracefully (SIGTERM): its `NodeDown` follows shortly; the hub may
    /// skip the grace period for it and expect its children to be handed over. Delivered to the
    /// hub like any message (the transport does not interpret it).
    Goodbye,
    /// Start these children on the receiver, which should own them. A receiver that does not
    /// own a child (its ring differs) forwards it with `hops + 1`, keeping `request_id` and
    /// `reply_to`, so the reply goes straight to the origin.
    StartChildren {
        /// The origin's pending operation.
        request_id: RequestId,
        /// The node waiting for the [`WireMsg::StartReply`].
        reply_to: NodeName,
        /// Forwarding count; a receiver refuses (`forward_limit`) beyond a small bound so that
        /// disagreeing rings cannot bounce a child forever.
        hops: u8,
        /// An already-running child counts as started (recovery, migrations).
        check_existing: bool,
        /// The children.
        children: Vec<StartItem>,
    },
    /// The outcome of a `StartChildren`, for the children this node handled.
    StartReply {
        /// The origin's pending operation.
        request_id: RequestId,
        /// Children now running.
        started: Vec<StartedChild>,
        /// Children that failed.
        errors: Vec<ChildFailure>,
    },
    /// Stop these children on the receiver (which runs them).
    StopChildren {
        /// The origin's pending operation.
        request_id: RequestId,
        /// The node waiting for the [`WireMsg::StopReply`].
        reply_to: NodeName,
        /// The children.
        ids: Vec<ChildId>,
    },
    /// The outcome of a `StopChildren`.
    StopReply {
        /// The origin's pending operation.
        request_id: RequestId,
        /// `(child, node it was stopped on)`.
        stopped: Vec<(ChildId, NodeName)>,
        /// Children that could not be stopped (`not_found`...).
        errors: Vec<ChildFailure>,
    },
    /// Changes of the sender's registry since its last delta (broadcast after each write).
    RegistryDelta {
        /// The changes, in the order the sender applied them.
        changes: Vec<RegistryChange>,
    },
    /// The sender's complete set of its own observations (every `sync_interval`, and on
    /// request). The receiver upserts them and removes the sender's binding from every row the
    /// sync does not list. `rows` carry the sender's authored versions too.
    FullSync {
        /// Every child the sender's supervisor confirms running, with its row.
        rows: Vec<Row>,
    },
    /// Ask the receiver for a [`WireMsg::FullSync`] now (a node that joined, or that detected a
    /// gap). Answered once.
    SyncRequest,
    /// A message for a child, routed by id through the hubs (no remote proxy per child). The
    /// receiver delivers it if the child runs there, else forwards it to the owner once.
    ChildCast {
        /// The child.
        id: ChildId,
        /// The message, encoded by the child's kind.
        payload: Vec<u8>,
        /// Forwarding count.
        hops: u8,
    },
    /// A request to a child expecting an answer in [`WireMsg::ChildCallReply`].
    ChildCall {
        /// The origin's pending operation.
        request_id: RequestId,
        /// The node waiting for the reply.
        reply_to: NodeName,
        /// The child.
        id: ChildId,
        /// The request, encoded by the child's kind.
        payload: Vec<u8>,
        /// Forwarding count.
        hops: u8,
    },
    /// The answer to a [`WireMsg::ChildCall`]: the encoded reply, or a failure.
    ChildCallReply {
        /// The origin's pending operation.
        request_id: RequestId,
        /// The reply bytes, or why there is none.
        result: Result<Vec<u8>, ChildFailure>,
    },
    /// The sender's adopted copy of the declared list (durable children): broadcast by the
    /// leader after each persisted mutation, and sent to a peer when it comes up (boot
    /// adoption). The receiver adopts it whole if it wins by version (ties: lowest mutator).
    DeclaredOffer {
        /// The copy.
        list: DeclaredList,
        /// The sender has not heard the receiver's copy yet: answer with an offer (`false`).
        reply: bool,
    },
    /// A mutation of the declared list, sent to the node the sender takes for the leader.
    DeclaredMutate {
        /// The origin's pending mutation.
        request_id: RequestId,
        /// The node waiting for the [`WireMsg::DeclaredMutateReply`].
        reply_to: NodeName,
        /// What to change.
        op: DeclaredOp,
    },
    /// The leader's answer to a [`WireMsg::DeclaredMutate`], sent once the mutation is
    /// persisted (or refused).
    DeclaredMutateReply {
        /// The origin's pending mutation.
        request_id: RequestId,
        /// The version after the mutation, or why it was refused.
        result: Result<u64, DeclaredRefusal>,
    },
    /// The sender's declared-list version and last mutator, every `sync_interval` (before its
    /// `FullSync`): a node that missed a leader's broadcast learns it is behind, asks for the
    /// copy, and plans its rounds parked until it has it, so an outdated copy never restarts a
    /// child stopped since. Only the version travels, not the list.
    DeclaredVersion {
        /// The sender's version.
        version: u64,
        /// The node that made it (the tie-break between equal versions).
        last_mutated_by: Option<NodeName>,
    },
    /// "Tell me your declared version now": a node about to run a reconcile round asks the
    /// leader, which answers with a [`WireMsg::DeclaredVersion`]. A copy behind the leader's may
    /// still declare a child stopped a moment ago (its broadcast in flight), so the round plans
    /// parked instead of restarting it.
    DeclaredVersionQuery,
    /// Part `index` of `total` of a [`WireMsg::FullSync`] too large for one frame. The receiver
    /// applies the sync only once every part of `sync_id` arrived (`core::reassembly`): a
    /// partial sync would unbind the sender from the children of the missing parts.
    FullSyncPart {
        /// The sender's sync (increasing per sender).
        sync_id: u64,
        /// This part, from 0.
        index: u32,
        /// How many parts the sync has.
        total: u32,
        /// This part's rows.
        rows: Vec<Row>,
    },
    /// The leader's changes to the declared list after a persisted mutation (one operation,
    /// e.g. a batch of durable starts), broadcast instead of its whole copy so a mutation costs
    /// the size of the change, not of the list. A receiver applies it only if its copy is
    /// exactly `delta.base`, else asks the sender for its whole copy ([`WireMsg::DeclaredOffer`]
    /// with `reply`); see `core::declared::delta`. Added after every other variant so the older
    /// variants encode as before.
    DeclaredDelta {
        /// The changes, between the stamps of the leader's copy before and after.
        delta: DeclaredDelta,
    },
    /// Part `index` of `total` of a [`WireMsg::DeclaredOffer`] too large for one frame: the
    /// copy's stamp and a slice of its children. The receiver weighs the copy only once every
    /// part of `offer_id` arrived (`core::reassembly`), exactly as it weighs a whole offer.
    /// Added after every other variant so the older variants encode as before.
    DeclaredOfferPart {
        /// The sender's offer (increasing per sender).
        offer_id: u64,
        /// This part, from 0.
        index: u32,
        /// How many parts the offer has.
        total: u32,
        /// The copy's version.
        version: u64,
        /// The node that last mutated the copy.
        last_mutated_by: Option<NodeName>,
        /// As [`WireMsg::DeclaredOffer`]'s `reply`.
        reply: bool,
        /// This part's children.
        children: Vec<DeclaredChild>,
    },
    // Typed messages to children and monitors (`ChildRef`, `Hub::monitor`). Added after every
    // other variant so the older variants encode as before.
    /// A typed cast to a child: the message as ractor serializes a remotable message
    /// (`SerializedMessage::Cast`: its variant's name and its `BytesConvertable` fields). The
    /// host decodes it into the child's message type and sends it; a host that does not run
    /// the child forwards it where the registry says (at most `hops` 3).
    TypedCast {
        /// The child.
        id: ChildId,
        /// The message variant's name.
        variant: String,
        /// Its fields, as ractor packs them.
        args: Vec<u8>,
        /// Forwarding count.
        hops: u8,
    },
    /// A typed call to a child (`SerializedMessage::Call` without its port), answered by a
    /// [`WireMsg::TypedReply`]. A host that does not run the child answers at once (`moved`,
    /// `between_nodes`, `not_found`) and the caller retries where the answer says.
    TypedCall {
        /// The caller's pending call.
        request_id: RequestId,
        /// The child.
        id: ChildId,
        /// The message variant's name.
        variant: String,
        /// Its fields, as ractor packs them.
        args: Vec<u8>,
        /// How long the caller waits: the host stops waiting for the child after it.
        timeout_ms: u64,
    },
    /// The answer to a [`WireMsg::TypedCall`]: the reply as its `BytesConvertable` bytes, or
    /// why there is none.
    TypedReply {
        /// The caller's pending call.
        request_id: RequestId,
        /// The reply bytes, or the failure (`code` in `reason`).
        result: Result<Vec<u8>, ChildFailure>,
    },
    /// Watch child `id` for the sender: the receiver (which runs it) sends one
    /// [`WireMsg::ChildDown`] when the instance ends, or at once if it does not run it.
    MonitorChild {
        /// The sender's monitor.
        monitor: u64,
        /// The child.
        id: ChildId,
        /// Keep watching across restarts by the child's supervisor.
        follow_restarts: bool,
    },
    /// Stop watching for the sender's `monitor` (its owner demonitored it, or it fired).
    Demonitor {
        /// The sender's monitor.
        monitor: u64,
    },
    /// The child watched by the receiver's `monitor` is down.
    ChildDown {
        /// The receiver's monitor.
        monitor: u64,
        /// The child.
        id: ChildId,
        /// Why.
        reason: DownReason,
    },
    /// The answer to a [`WireMsg::Goodbye`]: whether the answering node is leaving too. A
    /// leaving node waits for these (briefly) before it hands its children over, so two nodes
    /// leaving at once never hand children to each other.
    GoodbyeAck {
        /// The sender is leaving as well.
        leaving: bool,
    },
    /// A moving child's state (hot swap, `core::handover`), sent by its old node to the node
    /// about to start it, ahead of the `StartChildren` on the same link. The receiver keeps it
    /// (bounded, for `handover_data_wait_ms`) and gives it to the child as its first message
    /// when the cluster starts it there (a move; a caller's start never takes one); a receiver
    /// that forwards the start forwards the state first.
    /// Added after every other variant so the older variants encode as before.
    HandoverState {
        /// The child.
        id: ChildId,
        /// Its state, in its kind's encoding (at most `core::handover::MAX_HANDOVER_BYTES`).
        state: Vec<u8>,
    },
    /// A member's load, sent to the leader every `load_balancer.push_interval_ms`
    /// (`Distribution::LoadBalanced`). The leader alone keeps it.
    LoadReport {
        /// The sender's load now.
        sample: crate::core::load::LoadSample,
    },
    /// The leader's table of the members' loads (each an average over its reports), sent to
    /// every member after each round of reports: what new children are placed by. Taken only
    /// from the node the receiver sees as leader, and only for its members.
    LoadTable {
        /// Each member's load.
        loads: Vec<(NodeName, crate::core::load::LoadSample)>,
    },
    /// The leader asks the receiver, the busiest member, to move `count` of its children placed
    /// by load to `to`, the idlest one (`core::load::plan_rebalance`).
    Rebalance {
        /// Where the children go.
        to: NodeName,
        /// How many.
        count: u64,
    },
    /// A registry delta of `origin` passed along the gossip tree (`sync = gossip`): the
    /// receiver applies `origin`'s changes in `seq` order and hands the frame on to its share
    /// of `relay_to`. Only `origin`'s own observations are in it, as in a `RegistryDelta`.
    GossipDelta {
        /// The node whose observations these are.
        origin: NodeName,
        /// `origin`'s stream: a new one each time its Registry starts.
        epoch: u64,
        /// The delta's number in that stream, from 1.
        seq: u64,
        /// The changes, in the order `origin` applied them.
        changes: Vec<RegistryChange>,
        /// The nodes the receiver passes the frame to (itself excluded).
        relay_to: Vec<NodeName>,
    },
    /// The sender's whole set of its own observations with its gossip stream position
    /// (`sync = gossip`): what a node behind in the sender's stream restarts from. Cut into
    /// parts like a `FullSyncPart`; applied once every part arrived.
    GossipSync {
        /// The sender's stream.
        epoch: u64,
        /// The last delta of that stream the rows include.
        seq: u64,
        /// Tells the parts of two syncs apart.
        sync_id: u64,
        /// This part's index, from 0.
        index: u32,
        /// How many parts.
        total: u32,
        /// Rows of this part.
        rows: Vec<Row>,
    },
    /// A periodic gossip round (`sync = gossip`): first it travels `route` one node at a time,
    /// each adding the stream positions it has applied; then it spreads like a delta, and a
    /// node that sees it is behind in some stream asks that stream's origin for a
    /// `GossipSync`.
    GossipRound {
        /// The node that started the round.
        initiator: NodeName,
        /// The initiator's number for it.
        round: u64,
        /// Each origin's furthest stream position seen so far: `(origin, epoch, seq)`.
        heads: Vec<(NodeName, u64, u64)>,
        /// Gathering: the nodes still to visit, in order. Spreading: the receiver's share.
        route: Vec<NodeName>,
        /// Whether the round is spreading (every position gathered).
        spreading: bool,
    },
    /// The sender's declared copy in brief (`core::declared::summary`), sent instead of the whole
    /// copy when a peer comes up or a parked round asks: the receiver weighs it against its own
    /// and a whole copy travels only to a node whose copy is outranked, or both ways when the
    /// stamps tie on other content. Added after every other variant so the older variants
    /// encode as before.
    DeclaredSummary {
        /// The copy's stamp and digest.
        summary: CopySummary,
        /// The sender has not weighed the receiver's copy yet: answer with a summary (`false`).
        reply: bool,
    },
    /// Reachability records (`core::reachability`): the sender's own when its links changed,
    /// or records of other observers it learned and passes on (flooding: a receiver that
    /// finds one newer than its own merges it and passes it on to the peers it reaches), or
    /// the answer to a [`WireMsg::ReachDigest`]. At most [`MAX_NODES`] records, each checked on
    /// decode.
    Reachability {
        /// The records, at most one per observer.
        records: Vec<Observation>,
    },
    /// The sender's digest of its reachability table (anti-entropy): the receiver answers
    /// with the records it holds newer, and, when the digest shows the sender holds newer
    /// ones and `reply` is set, with its own digest (`reply: false`).
    ReachDigest {
        /// Which record of each observer the sender holds (at most [`MAX_NODES`]).
        digest: Vec<DigestEntry>,
        /// Answer with a digest when the sender holds records the receiver lacks.
        reply: bool,
    },
    /// "Send me your figures": a node serving `GET /v1/cluster` asks each member, which
    /// answers once with a [`WireMsg::SummaryReply`] (no actor hop: read from the shared
    /// state). Added after every other variant so the older variants encode as before.
    SummaryQuery {
        /// The asker's pending query.
        request_id: RequestId,
    },
    /// The answer to a [`WireMsg::SummaryQuery`]: the sender's figures and its last ten
    /// minutes, bounded on decode ([`NodeSummary::validate`]).
    SummaryReply {
        /// The asker's pending query.
        request_id: RequestId,
        /// The sender's figures (boxed: the other messages stay small).
        summary: Box<NodeSummary>,
    },
    /// The periodic sync in 24 bytes (`core::sync_digest`): the count and digest of the
    /// sender's own bindings. A receiver whose copy of them digests alike is in sync with the
    /// sender (as after a `FullSync`); one that differs answers with a
    /// [`WireMsg::SyncRequest`]. Fixed size, nothing to bound. Added after every other
    /// variant so the older variants encode as before; a node that predates it refuses the
    /// frame as malformed (an unknown variant) and hears the sender's rows only at a join, a
    /// heal or its own request.
    SyncDigest {
        /// How many bindings the sender has.
        count: u64,
        /// The wrapping sum of their hashes, low 64 bits first.
        digest: [u64; 2],
    },
}

impl WireMsg {
    /// Checks what the decoder cannot: the bounds of the reachability messages (record count,
    /// each record's shape) and of a node summary. A frame that fails is refused as malformed.
    pub(crate) fn check_bounds(&self) -> Result<(), String> {
        match self {
            WireMsg::Reachability { records } => {
                if records.len() > MAX_NODES {
                    return Err(format!(
                        "{} reachability records, at most {MAX_NODES}",
                        records.len()
                    ));
                }
                for record in records {
                    // The incarnation's plausibility needs a clock: checked on merge.
                    record
                        .validate(0, u64::MAX)
                        .map_err(|e| format!("reachability record: {e}"))?;
                }
                Ok(())
            }
            WireMsg::ReachDigest { digest, .. } if digest.len() > MAX_NODES => Err(format!(
                "reachability digest of {} entries, at most {MAX_NODES}",
                digest.len()
            )),
            WireMsg::SummaryReply { summary, .. } => {
                summary.validate().map_err(|e| format!("node summary: {e}"))
            }
            _ => Ok(()),
        }
    }
}

impl From<ChildFailure> for crate::types::ChildMessageError {
    fn from(f: ChildFailure) -> Self {
        Self {
            id: f.id,
            node: f.node,
            code: f.reason,
            message: f.message,
        }
    }
}

impl crate::types::ChildRefError {
    /// The error a host's failure code stands for.
    pub(crate) fn from_failure(f: ChildFailure) -> Self {
        let ChildFailure {
            id,
            node,
            reason,
            message,
        } = f;
        match reason.as_str() {
            "not_found" => Self::NotFound { id },
            // A host that no longer runs the child (it moved on) is a retry elsewhere.
            "between_nodes" | "moved" => Self::BetweenNodes {
                id,
                host: (!message.is_empty()).then_some(message),
            },
            "decode" => Self::Decode {
                id,
                node,
                detail: message,
            },
            "too_large" => Self::TooLarge {
                id,
                bytes: message.parse().unwrap_or(0),
                max: crate::cluster::wire::budget::FRAME_BUDGET_BYTES,
            },
            "no_reply" => Self::NoReply { id, node },
            "overloaded" => Self::Overloaded { id, node },
            "timeout" => Self::Timeout {
                id,
                waited_ms: message.parse().unwrap_or(0),
            },
            _ => Self::Unreachable { id, node },
        }
    }
}

impl WireMsg {
    /// The variant's name, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            WireMsg::Hello { .. } => "hello",
            WireMsg::Heartbeat { .. } => "heartbeat",
            WireMsg::Goodbye => "goodbye",
            WireMsg::StartChildren { .. } => "start_children",
            WireMsg::StartReply { .. } => "start_reply",
            WireMsg::StopChildren { .. } => "stop_children",
            WireMsg::StopReply { .. } => "stop_reply",
            WireMsg::RegistryDelta { .. } => "registry_delta",
            WireMsg::FullSync { .. } => "full_sync",
            WireMsg::SyncRequest => "sync_request",
            WireMsg::ChildCast { .. } => "child_cast",
            WireMsg::ChildCall { .. } => "child_call",
            WireMsg::ChildCallReply { .. } => "child_call_reply",
            WireMsg::DeclaredOffer { .. } => "declared_offer",
            WireMsg::DeclaredMutate { .. } => "declared_mutate",
            WireMsg::DeclaredMutateReply { .. } => "declared_mutate_reply",
            WireMsg::DeclaredVersion { .. } => "declared_version",
            WireMsg::FullSyncPart { .. } => "full_sync_part",
            WireMsg::DeclaredVersionQuery => "declared_version_query",
            WireMsg::DeclaredDelta { .. } => "declared_delta",
            WireMsg::DeclaredOfferPart { .. } => "declared_offer_part",
            WireMsg::DeclaredSummary { .. } => "declared_summary",
            WireMsg::TypedCast { .. } => "typed_cast",
            WireMsg::TypedCall { .. } => "typed_call",
            WireMsg::TypedReply { .. } => "typed_reply",
            WireMsg::MonitorChild { .. } => "monitor_child",
            WireMsg::Demonitor { .. } => "demonitor",
            WireMsg::ChildDown { .. } => "child_down",
            WireMsg::GoodbyeAck { .. } => "goodbye_ack",
            WireMsg::HandoverState { .. } => "handover_state",
            WireMsg::LoadReport { .. } => "load_report",
            WireMsg::LoadTable { .. } => "load_table",
            WireMsg::Rebalance { .. } => "rebalance",
            WireMsg::GossipDelta { .. } => "gossip_delta",
            WireMsg::GossipSync { .. } => "gossip_sync",
            WireMsg::GossipRound { .. } => "gossip_round",
            WireMsg::Reachability { .. } => "reachability",
            WireMsg::ReachDigest { .. } => "reach_digest",
            WireMsg::SummaryQuery { .. } => "summary_query",
            WireMsg::SummaryReply { .. } => "summary_reply",
            WireMsg::SyncDigest { .. } => "sync_digest",
        }
    }
}
