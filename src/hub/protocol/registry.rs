//! The Registry's messages: writes as operations (not raw mutations), their completions, and
//! the replication requests it serves.

use std::time::Duration;

use ractor::RpcReplyPort;

use crate::cluster::wire::RegistryChange;
use crate::model::{ChildId, NodeName, Pid, Row};
use crate::storage::StorageError;

/// One change a writer asks for.
#[derive(Clone, Debug)]
pub(crate) enum RegistryOp {
    /// Insert (or replace) a row authored here, with this node's observation in it.
    Insert(Row),
    /// A new authored version of a known row (its placement changed: a move for load), every
    /// node's observation kept; told to every peer so that no stub names the old placement.
    Reauthor(Row),
    /// A child got a new pid on `node` (a restart).
    SetPid {
        id: ChildId,
        node: NodeName,
        pid: Pid,
    },
    /// `node` no longer runs the child; the row goes when no node runs it.
    Unbind { id: ChildId, node: NodeName },
    /// `node` handed the child over (a migration): like `Unbind`, but a row left with no
    /// binding stays as a stub (`stub_ttl_ms`) until the new owner records it, so the child
    /// is never forgotten while it moves.
    Release { id: ChildId, node: NodeName },
    /// Tell every peer this node's version of a row again, unchanged (its authored part and
    /// this node's own observation): a node that refused a start decided from an older row
    /// makes sure the sender can learn the newer one. A row authored by a node that does not
    /// run the child is in no periodic sync of that node, so a lost delta would otherwise
    /// leave the sender's row behind for good. Nothing is written.
    Announce { id: ChildId },
    /// Remove a row nothing runs (a stale durable row), told to every peer; a row that is
    /// bound by the time the write is made (the child was started meanwhile) stays.
    RemoveUnbound { id: ChildId },
    /// Insert a row that disappears after `ttl` (swept by the janitor).
    #[allow(dead_code)] // kept for writers of expiring rows (stubs are written by `Reap`)
    PutWithTtl { row: Row, ttl: Duration },
    /// Changes broadcast by peer `from` (its own observations only; never re-broadcast).
    Merge {
        from: NodeName,
        changes: Vec<RegistryChange>,
    },
    /// Peer `from`'s full set of observations: upsert them, and unbind `from` from every row
    /// it no longer reports.
    Sync { from: NodeName, rows: Vec<Row> },
    /// `node` is gone (its grace ran out, or it restarted): drop its bindings; rows left with
    /// none become stubs that expire after `ttl` unless a new owner starts them first.
    Reap { node: NodeName, ttl: Duration },
}

/// Called with the outcome once a write is committed.
pub(crate) type WriteDone = Box<dyn FnOnce(Result<(), StorageError>) + Send>;

pub(crate) enum RegistryMsg {
    /// Apply `ops` in order; `done` runs after the commit.
    Write {
        ops: Vec<RegistryOp>,
        done: Option<WriteDone>,
    },
    /// The completion task finished every batch up to `upto`.
    Committed { upto: u64 },
    /// Remove expired TTL rows; answers how many were removed.
    SweepExpired { reply: Option<RpcReplyPort<usize>> },
    /// Send this node's observations as a `FullSync` to `to` (every peer with `None`).
    SendFullSync { to: Option<NodeName> },
    /// Peer `from`'s changes (a `RegistryDelta`).
    Merge {
        from: NodeName,
        changes: Vec<RegistryChange>,
    },
    /// Peer `from`'s full sync: applied whole, then the Coordinator is told (`Synced`).
    PeerSync { from: NodeName, rows: Vec<Row> },
    /// One part of peer `from`'s full sync; applied like `PeerSync` once every part arrived.
    PeerSyncPart {
        from: NodeName,
        sync_id: u64,
        index: u32,
        total: u32,
        rows: Vec<Row>,
    },
    /// Peer `from`'s periodic digest of its own bindings (a `SyncDigest`): in sync, or ask
    /// for its full sync.
    PeerDigest {
        from: NodeName,
        digest: crate::core::sync_digest::BindingDigest,
    },
    /// Peer `node` went down: its unfinished sync (and its gossip stream) is forgotten.
    PeerDown { node: NodeName },
    /// The periodic sync: a `FullSync` to every peer (`pubsub`), or a gossip round and one
    /// peer's direct sync (`gossip`).
    SyncTick,
    /// A `GossipDelta` relayed by `from`.
    GossipDelta {
        from: NodeName,
        origin: NodeName,
        epoch: u64,
        seq: u64,
        changes: Vec<RegistryChange>,
        relay_to: Vec<NodeName>,
    },
    /// One part of `from`'s `GossipSync`.
    GossipSync {
        from: NodeName,
        epoch: u64,
        seq: u64,
        sync_id: u64,
        index: u32,
        total: u32,
        rows: Vec<Row>,
    },
    /// A `GossipRound` passed on by `from`.
    GossipRound {
        initiator: NodeName,
        round: u64,
        heads: Vec<crate::core::gossip::Head>,
        route: Vec<NodeName>,
        spreading: bool,
    },
    /// A commit failed (sent by the completion task): probe the disk until writes succeed,
    /// and tell the peers this node's rows again (the failed write's delta already left).
    WriteFailed,
    /// The probe's timer: write nothing, to learn whether the disk takes writes again.
    Probe,
}

impl RegistryMsg {
    /// The peer whose registry stream this frame is part of, as it came off the wire (the
    /// sync lag counts it waiting from its arrival until the Registry handled it).
    pub(crate) fn stream_sender(&self) -> Option<&NodeName> {
        match self {
            RegistryMsg::Merge { from, .. }
            | RegistryMsg::PeerSync { from, .. }
            | RegistryMsg::PeerSyncPart { from, .. }
            | RegistryMsg::PeerDigest { from, .. }
            | RegistryMsg::GossipDelta { from, .. }
            | RegistryMsg::GossipSync { from, .. } => Some(from),
            _ => None,
        }
    }
}

impl ractor::Message for RegistryMsg {}
