//! Frames: how a [`WireMsg`] is encoded for one hub and decoded on the other side, and the
//! typed [`WireError`] a bad frame yields. Kept apart from the message definitions so that the
//! codec's guarantees (the version first and alone, a hard size limit, never a panic) and
//! their property tests read in one place.

use bincode::Options;

use super::{WireMsg, MAX_FRAME_BYTES, WIRE_VERSION};
use crate::model::NodeName;

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

/// The encoding of version 3's bodies ([`super::seal::COMPACT_VERSION`]): the same messages
/// with variable-length integers, under the same limits.
fn compact_options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_varint_encoding()
        .with_little_endian()
        .with_limit(MAX_FRAME_BYTES)
        .reject_trailing_bytes()
}

/// Reads a `T` from the start of a frame body in `version`'s encoding (compact for version 3,
/// fixed-width integers before), whole or, with `prefix`, leaving the rest unread. The one
/// place that knows which encoding a version's bodies use.
pub(super) fn read_body<'de, T: serde::Deserialize<'de>>(
    version: u16,
    body: &'de [u8],
    prefix: bool,
) -> bincode::Result<T> {
    match (version == super::seal::COMPACT_VERSION, prefix) {
        (true, false) => compact_options().deserialize(body),
        (true, true) => compact_options().allow_trailing_bytes().deserialize(body),
        (false, false) => options().deserialize(body),
        (false, true) => options().allow_trailing_bytes().deserialize(body),
    }
}

/// Encodes the body of a compact frame (`compact(hub_id, from, msg)`), to be sealed with
/// [`super::seal::seal_compact`] for a peer that speaks version 3.
pub fn encode_compact_body(hub_id: &str, from: &str, msg: &WireMsg) -> Result<Vec<u8>, WireError> {
    compact_options()
        .serialize(&(hub_id, from, msg))
        .map_err(|e| WireError::Encode(e.to_string()))
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
    decode_body(version, body)
}

/// Decodes the body of a frame (`bincode(hub_id, from, msg)`) that came in a frame of `version`
/// (an open frame's after its version, a sealed frame's after its seal was checked): compact
/// for version 3, fixed-width integers before.
pub fn decode_body(version: u16, body: &[u8]) -> Result<WireFrame, WireError> {
    let decoded: bincode::Result<(String, NodeName, WireMsg)> = read_body(version, body, false);
    let (hub_id, from, payload) = decoded.map_err(|e| match *e {
        bincode::ErrorKind::Io(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            WireError::Truncated { len: body.len() }
        }
        other => WireError::Malformed(other.to_string()),
    })?;
    payload.check_bounds().map_err(WireError::Malformed)?;
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

/// The encoding of version 1, pinned: peers of an older build read it, so a change to a
/// message's encoding breaks them. Change [`PINNED_V1`] only together with a new wire version
/// that translates for version-1 peers.
#[cfg(test)]
mod pinned {
    use super::*;
    use crate::cluster::wire::{RequestId, StartItem};
    use crate::core::boot_token::BootToken;
    use crate::model::{ChildSpec, Metadata};

    /// BLAKE3 of the encodings below, concatenated.
    const PINNED_V1: &str = "35afd66b2af86a739bec2e5084491212665e687bf444467ab30f61f52826a9ac";

    fn samples() -> Vec<WireMsg> {
        vec![
            WireMsg::Hello {
                boot_token: BootToken(7),
                members: vec!["a@h".into(), "b@h".into()],
                reply: true,
            },
            WireMsg::Heartbeat {
                boot_token: BootToken(7),
            },
            WireMsg::Goodbye,
            WireMsg::SyncRequest,
            WireMsg::ChildCast {
                id: "c".into(),
                payload: vec![1, 2, 3],
                hops: 1,
            },
            WireMsg::StartChildren {
                request_id: RequestId(9),
                reply_to: "a@h".into(),
                hops: 0,
                check_existing: true,
                children: vec![StartItem {
                    spec: ChildSpec::new("c", "k"),
                    metadata: Metadata::new(),
                    durable: true,
                }],
            },
            WireMsg::FullSyncPart {
                sync_id: 3,
                index: 0,
                total: 1,
                rows: Vec::new(),
            },
            WireMsg::DeclaredVersion {
                version: 5,
                last_mutated_by: Some("a@h".into()),
            },
            WireMsg::DeclaredVersionQuery,
        ]
    }

    #[test]
    fn the_version_1_encoding_is_pinned() {
        let mut hasher = blake3::Hasher::new();
        for msg in samples() {
            hasher.update(&encode("h", "a@h", &msg).unwrap());
        }
        assert_eq!(hasher.finalize().to_hex().as_str(), PINNED_V1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::wire::{ChildFailure, RegistryChange, RequestId, StartItem, StartedChild};
    use crate::core::boot_token::BootToken;
    use crate::core::declared::delta::DeclaredDelta;
    use crate::model::{ChildArgs, Restart, Shutdown};
    use crate::model::{ChildId, ChildSpec, HubMeta, Metadata, Row};
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
            any::<bool>().prop_map(|leaving| WireMsg::GoodbyeAck { leaving }),
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
                |(children, busy_permille, run_queue, memory_bytes)| WireMsg::LoadReport {
                    sample: crate::core::load::LoadSample {
                        children,
                        busy_permille,
                        run_queue,
                        memory_bytes,
                        moving: 0,
                    },
                }
            ),
            proptest::collection::vec((node, any::<u64>()), 0..4).prop_map(|loads| {
                WireMsg::LoadTable {
                    loads: loads
                        .into_iter()
                        .map(|(n, children)| {
                            (
                                n,
                                crate::core::load::LoadSample {
                                    children,
                                    ..Default::default()
                                },
                            )
                        })
                        .collect(),
                }
            }),
            (node, any::<u64>()).prop_map(|(to, count)| WireMsg::Rebalance { to, count }),
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(|state| {
                WireMsg::HandoverState {
                    id: ChildId::from("moving"),
                    state,
                }
            }),
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
        use crate::core::declared::list::DeclaredList;

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

    /// A declared summary is the last variant, is small whatever the size of the list it
    /// sums up, and survives the wire.
    #[test]
    fn the_declared_summary_is_additive_small_and_roundtrips() {
        use crate::core::declared::list::DeclaredList;
        use crate::core::declared::summary::CopySummary;

        let mut list = DeclaredList::new();
        for i in 0..10_000 {
            list.add(
                ChildSpec::new(format!("c{i}"), "counter"),
                Metadata::new(),
                "n1@h",
            )
            .unwrap();
        }
        let msg = WireMsg::DeclaredSummary {
            summary: CopySummary::of(&list),
            reply: true,
        };
        let bytes = encode("hub", "a@h", &msg).unwrap();
        assert_eq!(
            u32::from_le_bytes(bytes[24..28].try_into().unwrap()),
            35,
            "the variant index after every other"
        );
        assert!(bytes.len() < 80, "{} bytes", bytes.len());
        assert_eq!(decode_for("hub", &bytes).unwrap().payload, msg);
    }

    /// The load balancer's messages are small: a report is one frame under 100 bytes, and
    /// the table grows by one node name and four 8-byte numbers per member.
    #[test]
    fn load_frames_are_small() {
        let sample = crate::core::load::LoadSample {
            children: 3_334,
            busy_permille: 412,
            run_queue: 7,
            memory_bytes: 180 << 20,
            moving: 0,
        };
        let report = encode("orders", "node-1@10.0.0.1", &WireMsg::LoadReport { sample }).unwrap();
        let table = |n: usize| {
            let loads = (0..n)
                .map(|i| (format!("node-{i}@10.0.0.{i}"), sample))
                .collect();
            encode("orders", "node-1@10.0.0.1", &WireMsg::LoadTable { loads })
                .unwrap()
                .len()
        };
        let per_member = table(4) - table(3);
        assert!(report.len() <= 96, "report {} bytes", report.len());
        assert!(per_member <= 64, "{per_member} bytes per member");
        assert!(
            table(3) <= 64 + 3 * per_member,
            "table of 3: {} bytes",
            table(3)
        );
        for msg in [
            WireMsg::LoadReport { sample },
            WireMsg::Rebalance {
                to: "b@h".into(),
                count: 25,
            },
        ] {
            let bytes = encode("hub", "a@h", &msg).unwrap();
            assert_eq!(decode_for("hub", &bytes).unwrap().payload, msg);
        }
        eprintln!(
            "load_report {} B, load_table of 3 {} B ({per_member} B per member)",
            report.len(),
            table(3)
        );
    }

    /// The typed messages and monitors come after every older variant (21 onwards), and each
    /// survives the wire, every reason of a monitor included.
    #[test]
    fn typed_messages_and_monitors_are_additive_and_roundtrip() {
        use crate::model::DownReason;

        let node = || "b@h".to_owned();
        let reasons = [
            DownReason::Normal { node: node() },
            DownReason::Abnormal {
                node: node(),
                detail: "boom".into(),
            },
            DownReason::Stopped { node: node() },
            DownReason::Moved { node: node() },
            DownReason::NodeDown { node: node() },
            DownReason::NoChild,
            DownReason::HubStopped,
            DownReason::MonitorRefused { node: node() },
        ];
        let mut msgs = vec![
            WireMsg::TypedCast {
                id: "c".into(),
                variant: "Post".into(),
                args: vec![0, 0, 0, 0, 0, 0, 0, 1, 7],
                hops: 1,
            },
            WireMsg::TypedCall {
                request_id: RequestId(3),
                id: "c".into(),
                variant: "History".into(),
                args: Vec::new(),
                timeout_ms: 5000,
            },
            WireMsg::TypedReply {
                request_id: RequestId(3),
                result: Ok(vec![1, 2]),
            },
            WireMsg::MonitorChild {
                monitor: 4,
                id: "c".into(),
                follow_restarts: true,
            },
            WireMsg::Demonitor { monitor: 4 },
        ];
        msgs.extend(reasons.into_iter().map(|reason| WireMsg::ChildDown {
            monitor: 4,
            id: "c".into(),
            reason,
        }));
        for (i, msg) in msgs.into_iter().enumerate() {
            let bytes = encode("hub", "a@h", &msg).unwrap();
            let variant = u32::from_le_bytes(bytes[24..28].try_into().unwrap());
            assert_eq!(variant, 21 + (i as u32).min(5), "{msg:?}");
            assert_eq!(decode_for("hub", &bytes).unwrap().payload, msg);
        }
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
            // The compact encoding (version 3) carries the same message, in no more bytes
            // than the fixed-width one plus one per wide integer.
            let compact = encode_compact_body(&hub, &from, &msg).unwrap();
            let frame = decode_body(crate::cluster::wire::seal::COMPACT_VERSION, &compact).unwrap();
            prop_assert_eq!(&frame.hub_id, &hub);
            prop_assert_eq!(&frame.from, &from);
            prop_assert_eq!(&frame.payload, &msg);
            prop_assert!(compact.len() <= bytes.len() + bytes.len() / 8);
            let at = compact.len() / 2;
            prop_assert!(decode_body(crate::cluster::wire::seal::COMPACT_VERSION, &compact[..at]).is_err());
        }

        #[test]
        fn gossip_frames_roundtrip(
            origin in "[a-z]{1,4}@h",
            epoch in any::<u64>(),
            seq in any::<u64>(),
            rows in proptest::collection::vec(arb_row(), 0..3),
            relay_to in proptest::collection::vec("[a-z]{1,4}@h", 0..5),
            heads in proptest::collection::vec(("[a-z]{1,4}@h", any::<u64>(), any::<u64>()), 0..5),
            spreading in any::<bool>(),
        ) {
            let changes = rows.iter().cloned().map(RegistryChange::Upsert).collect();
            for msg in [
                WireMsg::GossipDelta { origin: origin.clone(), epoch, seq, changes, relay_to: relay_to.clone() },
                WireMsg::GossipSync { epoch, seq, sync_id: seq ^ epoch, index: 0, total: 1, rows },
                WireMsg::GossipRound { initiator: origin, round: seq, heads, route: relay_to, spreading },
            ] {
                let bytes = encode("hub", "a@h", &msg).unwrap();
                prop_assert_eq!(&decode_for("hub", &bytes).unwrap().payload, &msg);
                let at = (seq as usize) % bytes.len();
                prop_assert!(decode(&bytes[..at]).is_err());
            }
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
    fn reachability_frames_roundtrip_and_hostile_ones_are_refused_on_decode() {
        use crate::core::reachability::{DigestEntry, Observation, MAX_NODES};
        let record = |observer: &str, version: u64, reachable: Vec<String>| Observation {
            observer: observer.into(),
            incarnation: 7,
            version,
            reachable: reachable.into_iter().collect(),
            aside: false,
        };
        let good = [
            WireMsg::Reachability {
                records: vec![record("a@h", 3, vec!["b@h".into(), "c@h".into()])],
            },
            WireMsg::ReachDigest {
                digest: vec![DigestEntry {
                    observer: "a@h".into(),
                    incarnation: 7,
                    version: 3,
                }],
                reply: true,
            },
        ];
        for msg in good {
            let bytes = encode("hub", "a@h", &msg).unwrap();
            assert_eq!(decode_for("hub", &bytes).unwrap().payload, msg);
            let compact = encode_compact_body("hub", "a@h", &msg).unwrap();
            let frame = decode_body(crate::cluster::wire::seal::COMPACT_VERSION, &compact).unwrap();
            assert_eq!(frame.payload, msg);
        }
        let hostile = [
            WireMsg::Reachability {
                records: vec![record("a@h", u64::MAX, vec![])],
            },
            WireMsg::Reachability {
                records: vec![record("a@h", 1, vec!["a@h".into()])],
            },
            WireMsg::Reachability {
                records: vec![record(
                    "a@h",
                    1,
                    (0..=MAX_NODES).map(|i| format!("n{i}")).collect(),
                )],
            },
            WireMsg::Reachability {
                records: (0..=MAX_NODES)
                    .map(|i| record(&format!("n{i}"), 1, vec![]))
                    .collect(),
            },
            WireMsg::ReachDigest {
                digest: (0..=MAX_NODES)
                    .map(|i| DigestEntry {
                        observer: format!("n{i}"),
                        incarnation: 1,
                        version: 1,
                    })
                    .collect(),
                reply: false,
            },
        ];
        for msg in hostile {
            let bytes = encode("hub", "a@h", &msg).unwrap();
            assert!(
                matches!(decode(&bytes), Err(WireError::Malformed(_))),
                "{}",
                msg.kind()
            );
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
