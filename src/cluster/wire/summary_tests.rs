//! The dashboard's frames (`SummaryQuery`, `SummaryReply`): they round-trip, and a summary
//! beyond its bounds is refused on decode like any malformed peer input.

use super::{decode_for, encode, RequestId, WireError, WireMsg};
use crate::core::activity::{ActivityHistory, NodeSummary, BUCKETS};

fn summary() -> NodeSummary {
    NodeSummary {
        node: "b@h".into(),
        at_ms: 1_700_000_000_000,
        status: "ok".into(),
        recovery_state: "normal".into(),
        children: 3,
        registry_rows: 7,
        declared: Some(2),
        history: ActivityHistory::new().series(1_700_000_000_000),
        ..NodeSummary::default()
    }
}

#[test]
fn the_summary_frames_round_trip() {
    for msg in [
        WireMsg::SummaryQuery {
            request_id: RequestId(9),
        },
        WireMsg::SummaryReply {
            request_id: RequestId(9),
            summary: Box::new(summary()),
        },
    ] {
        let bytes = encode("hub", "a@h", &msg).expect("encodes");
        assert_eq!(decode_for("hub", &bytes).expect("decodes").payload, msg);
    }
    assert_eq!(
        WireMsg::SummaryQuery {
            request_id: RequestId(1)
        }
        .kind(),
        "summary_query"
    );
}

#[test]
fn a_summary_beyond_its_bounds_is_refused_on_decode() {
    let mut long = summary();
    long.history.starts = vec![1; BUCKETS + 1];
    let mut word = summary();
    word.status = "ok; drop table".into();
    for bad in [long, word] {
        let bytes = encode(
            "hub",
            "b@h",
            &WireMsg::SummaryReply {
                request_id: RequestId(1),
                summary: Box::new(bad),
            },
        )
        .expect("encodes");
        assert!(
            matches!(decode_for("hub", &bytes), Err(WireError::Malformed(_))),
            "refused as malformed"
        );
    }
}

/// The periodic sync's digest is the last variant (every older variant keeps its encoding),
/// round-trips, and stays 24 bytes of payload whatever the registry's size.
#[test]
fn the_sync_digest_is_the_last_variant_and_small() {
    let msg = WireMsg::SyncDigest {
        count: 1_000_000,
        digest: [u64::MAX, 7],
    };
    let bytes = encode("h", "a", &msg).expect("encodes");
    // version (2) + hub id (8 + 1) + from (8 + 1), then the u32 variant index.
    let variant = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
    let summary_reply = encode(
        "h",
        "a",
        &WireMsg::SummaryReply {
            request_id: RequestId(1),
            summary: Box::new(summary()),
        },
    )
    .expect("encodes");
    let before = u32::from_le_bytes(summary_reply[20..24].try_into().unwrap());
    assert_eq!(variant, before + 1, "appended after every other variant");
    assert!(bytes.len() <= 24 + 8 + 16, "{} bytes", bytes.len());
    assert_eq!(decode_for("h", &bytes).expect("decodes").payload, msg);
    assert_eq!(msg.kind(), "sync_digest");
}
