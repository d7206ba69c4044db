//! The DeclaredLeader's messages: durable starts and every stop while recovery is on, the
//! operator's clear, copies and mutations from peers, and membership changes.

use ractor::RpcReplyPort;

use super::coordinator::{StartReplyPort, StopReplyPort};
use crate::cluster::wire::WireMsg;
use crate::core::declared::list::DeclaredList;
use crate::model::{ChildId, ChildSpec, NodeName};
use crate::storage::StorageError;
use crate::types::RecoveryError;
use crate::types::{StartOptions, StopOptions};

pub(crate) enum DeclaredMsg {
    /// A start with `durable: true`.
    DurableStart {
        specs: Vec<ChildSpec>,
        opts: StartOptions,
        reply: StartReplyPort,
    },
    /// Every stop request while recovery is on.
    Stop {
        ids: Vec<ChildId>,
        opts: StopOptions,
        reply: StopReplyPort,
    },
    /// The operator's `clear`.
    Clear {
        reply: RpcReplyPort<Result<u64, RecoveryError>>,
    },
    /// A copy from a peer (a leader's broadcast, a peer at join) or a later manifest fetch.
    /// `done` is told once the adopted copy (if any) is persisted and published.
    Offer {
        list: DeclaredList,
        done: Option<tokio::sync::oneshot::Sender<()>>,
    },
    /// Undeclare children that must not run: their start can never succeed (unknown kind, bad
    /// arguments), or the durable start that declared them was refused.
    Forget {
        /// The children.
        ids: Vec<ChildId>,
        /// Why, for the log.
        why: &'static str,
    },
    /// A declared-list message from peer `from` (offer, mutation, mutation reply).
    Wire { from: NodeName, msg: WireMsg },
    /// Peer `node` came up: send it this node's copy (boot adoption on both sides).
    PeerUp { node: NodeName },
    /// Peer `node` went down: mutations waiting on it as the leader fail now.
    PeerDown { node: NodeName },
    /// Ask these peers for their copies (the Reconciler has not heard from them).
    Solicit { nodes: Vec<NodeName> },
    /// Peer `from` announced a copy ahead of this one: its deltas on their way may bring this
    /// copy there; its whole copy is fetched only if they do not.
    Announced { from: NodeName },
    /// A moment after an announcement: has this copy reached it, or moved towards it?
    AnnouncedCheck { from: NodeName },
    /// A mutation sent to the leader was not answered in time.
    MutateTimeout { request_id: u64 },
    /// A persist failed: refuse mutations, then rebuild the copy from the disk.
    PersistFailed { error: StorageError },
    /// Every operation started before a failed persist has finished: rebuild the copy from the
    /// disk now.
    Rebuild,
    /// While the last write failed: try a harmless write to learn whether the disk takes writes
    /// again.
    Probe,
}

impl ractor::Message for DeclaredMsg {}
