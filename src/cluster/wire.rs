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

use bincode::Options;
use serde::{Deserialize, Serialize};

use crate::core::boot_token::BootToken;
use crate::core::declared_delta::DeclaredDelta;
use crate::core::declared_list::DeclaredList;
use crate::model::{ChildId, ChildSpec, HubMeta, Metadata, NodeName, Pid, Row};

/// The protocol version this build speaks.
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
    /// applies the sync only once every part of `sync_id` arrived (`core::sync_parts`): a
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
    /// with `reply`); see `core::declared_delta`. Added after every other variant so the older
    /// variants encode as before.
    DeclaredDelta {
        /// The changes, between the stamps of the leader's copy before and after.
        delta: DeclaredDelta,
    },
}

/// A mutation of the declared list routed to the leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeclaredOp {
    /// Declare these children (a durable start, before the start).
    Declare {
        /// The children with their metadata.
        children: Vec<(ChildSpec, Metadata)>,
    },
    /// Undeclare these children (a deliberate stop, before the terminate).
    Undeclare {
        /// The children.
        ids: Vec<ChildId>,
    },
    /// The operator's clear.
    Clear,
}

/// Why the leader refused a [`WireMsg::DeclaredMutate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredRefusal {
    /// `no_leader`, `declared_parked`, `auto_recovery_disabled` or `storage`.
    pub code: String,
    /// Details.
    pub message: String,
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
        }
    }
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireFrame {
    /// The protocol version it was encoded with.
    pub version: u16,
    /// The hub it is addressed to (and sent from).
    pub hub_id: String,
    /// The node that sent it.
    pub from: NodeName,
    /// The message.
    pub payload: WireMsg,
}

/// Why a frame was not accepted. The receiver logs it and drops the frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The frame was encoded by a protocol version this build does not speak.
    #[error("wire version {found} is not supported (this node speaks {supported})")]
    UnknownVersion {
        /// The frame's version.
        found: u16,
        /// Ours.
        supported: u16,
    },
    /// The frame ended before a complete message.
    #[error("truncated frame ({len} bytes)")]
    Truncated {
        /// Bytes received.
        len: usize,
    },
    /// The bytes are not a message of this protocol.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The frame is larger than [`MAX_FRAME_BYTES`].
    #[error("frame of {len} bytes exceeds the {max} byte limit")]
    TooLarge {
        /// Bytes received or to send.
        len: usize,
        /// The limit.
        max: u64,
    },
    /// The frame belongs to another hub.
    #[error("frame for hub {found:?} delivered to hub {expected:?}")]
    WrongHub {
        /// Our hub id.
        expected: String,
        /// The frame's hub id.
        found: String,
    },
    /// Encoding failed (a message larger than the limit, or a serializer error).
    #[error("cannot encode frame: {0}")]
    Encode(String),
}

fn options() -> impl Options {
    // Fixed-width integers like `bincode::serialize`, a hard size limit so that a forged length
    // prefix cannot make the decoder allocate gigabytes, and no trailing bytes.
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_FRAME_BYTES)
        .reject_trailing_bytes()
}

/// Encodes a frame from `from` for hub `hub_id` with the current [`WIRE_VERSION`].
pub fn encode(hub_id: &str, from: &str, msg: &WireMsg) -> Result<Vec<u8>, WireError> {
    let body = options()
        .serialize(&(hub_id, from, msg))
        .map_err(|e| WireError::Encode(e.to_string()))?;
    let mut frame = Vec::with_capacity(2 + body.len());
    frame.extend_from_slice(&WIRE_VERSION.to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes a frame of any hub. Never panics, whatever the bytes.
pub fn decode(bytes: &[u8]) -> Result<WireFrame, WireError> {
    if bytes.len() as u64 > MAX_FRAME_BYTES + 2 {
        return Err(WireError::TooLarge {
            len: bytes.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    let Some((head, body)) = bytes.split_first_chunk::<2>() else {
        return Err(WireError::Truncated { len: bytes.len() });
    };
    let version = u16::from_le_bytes(*head);
    if version != WIRE_VERSION {
        return Err(WireError::UnknownVersion {
            found: version,
            supported: WIRE_VERSION,
        });
    }
    let (hub_id, from, payload): (String, NodeName, WireMsg) =
        options().deserialize(body).map_err(|e| match *e {
            bincode::ErrorKind::Io(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                WireError::Truncated { len: bytes.len() }
            }
            other => WireError::Malformed(other.to_string()),
        })?;
    Ok(WireFrame {
        version,
        hub_id,
        from,
        payload,
    })
}

/// Decodes a frame and checks it is addressed to `hub_id`.
pub fn decode_for(hub_id: &str, bytes: &[u8]) -> Result<WireFrame, WireError> {
    let frame = decode(bytes)?;
    if frame.hub_id != hub_id {
        return Err(WireError::WrongHub {
            expected: hub_id.to_owned(),
            found: frame.hub_id,
        });
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildArgs, Restart, Shutdown};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn arb_spec() -> impl Strategy<Value = ChildSpec> {
        (
            "[a-z0-9-]{1,12}",
            "[a-z]{1,8}",
            any::<Option<i64>>(),
            0..3u8,
            any::<Option<u32>>(),
        )
            .prop_map(|(id, kind, arg, restart, shutdown)| ChildSpec {
                id: ChildId::from(id),
                kind,
                args: ChildArgs::from_json(&serde_json::json!({ "n": arg })),
                restart: [Restart::Permanent, Restart::Transient, Restart::Temporary]
                    [restart as usize],
                shutdown: shutdown.map_or(Shutdown::Kill, |ms| Shutdown::TimeoutMs(ms.into())),
            })
    }

    fn arb_meta() -> impl Strategy<Value = Metadata> {
        proptest::collection::btree_map("[a-z]{1,5}", ".{0,8}", 0..3)
    }

    fn arb_row() -> impl Strategy<Value = Row> {
        (
            arb_spec(),
            proptest::collection::btree_map("[a-z]{1,4}@h", any::<u64>(), 0..3),
            arb_meta(),
            any::<u64>(),
            "[a-z]{1,4}@h",
            any::<bool>(),
        )
            .prop_map(|(spec, node_pids, metadata, epoch, by, durable)| Row {
                spec,
                node_pids: node_pids.into_iter().collect::<BTreeMap<_, _>>(),
                metadata,
                hub: HubMeta {
                    epoch,
                    changed_by: by,
                    changed_at_ms: epoch / 3,
                    durable,
                },
            })
    }

    fn arb_failure() -> impl Strategy<Value = ChildFailure> {
        ("[a-z]{1,6}", "[a-z]{1,4}@h", "[a-z_]{1,12}", ".{0,16}").prop_map(
            |(id, node, reason, message)| ChildFailure {
                id: ChildId::from(id),
                node,
                reason,
                message,
            },
        )
    }

    fn arb_msg() -> impl Strategy<Value = WireMsg> {
        let node = "[a-z]{1,4}@h";
        prop_oneof![
            (
                any::<u128>(),
                proptest::collection::vec(node, 0..4),
                any::<bool>()
            )
                .prop_map(|(t, members, reply)| WireMsg::Hello {
                    boot_token: BootToken(t),
                    members,
                    reply
                }),
            any::<u128>().prop_map(|t| WireMsg::Heartbeat {
                boot_token: BootToken(t)
            }),
            Just(WireMsg::Goodbye),
            Just(WireMsg::SyncRequest),
            (
                any::<u64>(),
                node,
                any::<u8>(),
                any::<bool>(),
                proptest::collection::vec((arb_spec(), arb_meta(), any::<bool>()), 0..4)
            )
                .prop_map(|(r, reply_to, hops, check_existing, items)| {
                    WireMsg::StartChildren {
                        request_id: RequestId(r),
                        reply_to,
                        hops,
                        check_existing,
                        children: items
                            .into_iter()
                            .map(|(spec, metadata, durable)| StartItem {
                                spec,
                                metadata,
                                durable,
                            })
                            .collect(),
                    }
                }),
            (
                any::<u64>(),
                proptest::collection::vec(("[a-z]{1,6}", node, any::<u64>()), 0..4),
                proptest::collection::vec(arb_failure(), 0..3)
            )
                .prop_map(|(r, started, errors)| WireMsg::StartReply {
                    request_id: RequestId(r),
                    started: started
                        .into_iter()
                        .map(|(id, node, pid)| StartedChild {
                            id: ChildId::from(id),
                            node,
                            pid
                        })
                        .collect(),
                    errors,
                }),
            proptest::collection::vec(arb_row(), 0..4).prop_map(|rows| WireMsg::FullSync { rows }),
            proptest::collection::vec(
                prop_oneof![
                    arb_row().prop_map(RegistryChange::Upsert),
                    "[a-z]{1,6}".prop_map(|id| RegistryChange::Unbind {
                        id: ChildId::from(id)
                    }),
                ],
                0..4
            )
            .prop_map(|changes| WireMsg::RegistryDelta { changes }),
            (
                any::<u64>(),
                arb_failure(),
                proptest::collection::vec(any::<u8>(), 0..16),
                any::<bool>()
            )
                .prop_map(|(r, failure, bytes, ok)| WireMsg::ChildCallReply {
                    request_id: RequestId(r),
                    result: if ok { Ok(bytes) } else { Err(failure) },
                }),
        ]
    }

    /// The declared delta is the last variant: every older variant keeps its encoding (a peer
    /// of an older build drops only the frames it cannot read, and heals by version
    /// announcements), and the delta survives the wire.
    #[test]
    fn the_declared_delta_is_additive_and_roundtrips() {
        use crate::core::declared_list::DeclaredList;

        let query = encode("hub", "a@h", &WireMsg::DeclaredVersionQuery).unwrap();
        let part = WireMsg::FullSyncPart {
            sync_id: 1,
            index: 0,
            total: 1,
            rows: Vec::new(),
        };
        let part = encode("hub", "a@h", &part).unwrap();
        let variant = |bytes: &[u8]| {
            // version (2) + hub id (8 + 3) + from (8 + 3), then the u32 variant index.
            u32::from_le_bytes(bytes[24..28].try_into().unwrap())
        };
        assert_eq!(variant(&query), 17);
        assert_eq!(variant(&part), 18);

        let mut before = DeclaredList::new();
        before
            .add(ChildSpec::new("a", "counter"), Metadata::new(), "n1")
            .unwrap();
        let base = before.stamp();
        let mut after = before.clone();
        let changes = vec![
            after
                .add(ChildSpec::new("b", "counter"), Metadata::new(), "n1")
                .unwrap(),
            after.remove(&ChildId::from("a"), "n1"),
        ];
        let delta = DeclaredDelta::between(base, &after, &changes).unwrap();
        let msg = WireMsg::DeclaredDelta { delta };
        let bytes = encode("hub", "a@h", &msg).unwrap();
        assert_eq!(variant(&bytes), 19);
        assert_eq!(decode_for("hub", &bytes).unwrap().payload, msg);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn roundtrip(msg in arb_msg(), hub in "[a-z]{1,8}", from in "[a-z]{1,4}@h") {
            let bytes = encode(&hub, &from, &msg).unwrap();
            let frame = decode_for(&hub, &bytes).unwrap();
            prop_assert_eq!(frame.version, WIRE_VERSION);
            prop_assert_eq!(&frame.from, &from);
            prop_assert_eq!(&frame.payload, &msg);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
            let mut versioned = WIRE_VERSION.to_le_bytes().to_vec();
            versioned.extend_from_slice(&bytes);
            let _ = decode(&versioned);
        }

        #[test]
        fn every_truncation_is_an_error(msg in arb_msg(), cut in any::<prop::sample::Index>()) {
            let bytes = encode("hub", "a@h", &msg).unwrap();
            let at = cut.index(bytes.len());
            prop_assert!(decode(&bytes[..at]).is_err());
        }

        #[test]
        fn bit_flips_never_panic(msg in arb_msg(), at in any::<prop::sample::Index>(), bit in 0..8u8) {
            let mut bytes = encode("hub", "a@h", &msg).unwrap();
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn typed_errors() {
        assert_eq!(decode(&[]), Err(WireError::Truncated { len: 0 }));
        assert_eq!(decode(&[1]), Err(WireError::Truncated { len: 1 }));
        let mut bytes = encode("hub", "a@h", &WireMsg::Goodbye).unwrap();
        assert!(matches!(
            decode(&bytes[..bytes.len() - 1]),
            Err(WireError::Truncated { .. })
        ));
        bytes[0] = 9;
        assert_eq!(
            decode(&bytes),
            Err(WireError::UnknownVersion {
                found: 9,
                supported: WIRE_VERSION
            })
        );
        let bytes = encode("hub", "a@h", &WireMsg::Goodbye).unwrap();
        assert!(matches!(
            decode_for("other", &bytes),
            Err(WireError::WrongHub { .. })
        ));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(decode(&trailing), Err(WireError::Malformed(_))));
        // A forged huge length prefix for the hub id string must fail, not allocate.
        let mut forged = WIRE_VERSION.to_le_bytes().to_vec();
        forged.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&forged).is_err());
        // An unknown variant index.
        let mut unknown = WIRE_VERSION.to_le_bytes().to_vec();
        unknown.extend_from_slice(&1u64.to_le_bytes());
        unknown.push(b'h');
        unknown.extend_from_slice(&1u64.to_le_bytes());
        unknown.push(b'a');
        unknown.extend_from_slice(&999u32.to_le_bytes());
        assert!(matches!(decode(&unknown), Err(WireError::Malformed(_))));
    }
}
