//! The hostile peer's frames ([`HostileFrame`]) as bytes on the in-process router: what a node
//! that holds the cookie but not the hub's rules could send. A run injects them toward a node
//! and the invariants must hold as if they had never been sent.

use crate::cluster::wire::{self, DeclaredOp, RegistryChange, RequestId, WireMsg, WIRE_VERSION};
use crate::core::declared::delta::{DeclaredDelta, DeltaChange, ListStamp};
use crate::core::declared::list::{DeclaredChildren, DeclaredList};
use crate::core::declared::summary::CopySummary;
use crate::model::{ChildId, ChildSpec, HubMeta, Metadata, Row, MAX_CHILD_BYTES};

use super::cluster::SIM_HUB;
use super::workload::HostileFrame;

/// The frame `from` appears to send.
pub(super) fn frame_bytes(from: &str, frame: &HostileFrame) -> Vec<u8> {
    let msg = match frame {
        HostileFrame::SyncPartTotal { total } => WireMsg::FullSyncPart {
            sync_id: 1,
            index: 0,
            total: *total,
            rows: Vec::new(),
        },
        HostileFrame::OfferVersion { version } => WireMsg::DeclaredOffer {
            list: DeclaredList::from_parts(
                *version,
                DeclaredChildren::new(),
                Some(from.to_owned()),
            ),
            reply: false,
        },
        HostileFrame::SummaryVersion { version } => WireMsg::DeclaredSummary {
            summary: CopySummary {
                version: *version,
                last_mutated_by: Some(from.to_owned()),
                digest: 0,
            },
            reply: true,
        },
        HostileFrame::DeltaVersion { version } => WireMsg::DeclaredDelta {
            delta: DeclaredDelta {
                base: ListStamp {
                    version: 0,
                    last_mutated_by: None,
                    digest: 0,
                },
                target: ListStamp {
                    version: *version,
                    last_mutated_by: Some(from.to_owned()),
                    digest: 0,
                },
                changes: vec![DeltaChange::Cleared],
            },
        },
        HostileFrame::AnnouncedVersion { version } => WireMsg::DeclaredVersion {
            version: *version,
            last_mutated_by: Some(from.to_owned()),
        },
        HostileFrame::InvalidRow { long_id } => {
            let (id, metadata) = if *long_id {
                (ChildId::from("x".repeat(700)), Metadata::new())
            } else {
                let blob = "m".repeat(MAX_CHILD_BYTES as usize + 1);
                (
                    ChildId::from("hostile"),
                    Metadata::from([("m".to_owned(), blob)]),
                )
            };
            let mut row = Row {
                spec: ChildSpec::new(id, "sim"),
                node_pids: Default::default(),
                metadata,
                hub: HubMeta {
                    epoch: 1,
                    changed_by: from.to_owned(),
                    changed_at_ms: 0,
                    durable: false,
                },
            };
            row.node_pids.insert(from.to_owned(), 1);
            WireMsg::RegistryDelta {
                changes: vec![RegistryChange::Upsert(row)],
            }
        }
        HostileFrame::ForgedName { claimed, what } => {
            let msg = match what {
                0 => WireMsg::FullSync { rows: Vec::new() },
                1 => WireMsg::Goodbye,
                _ => WireMsg::DeclaredMutate {
                    request_id: RequestId(u64::MAX),
                    reply_to: claimed.clone(),
                    op: DeclaredOp::Clear,
                },
            };
            return wire::encode(SIM_HUB, claimed, &msg).unwrap_or_default();
        }
        HostileFrame::Garbage { len } => {
            let mut bytes = WIRE_VERSION.to_le_bytes().to_vec();
            bytes.extend((0..*len).map(|i| (i % 251) as u8));
            return bytes;
        }
    };
    wire::encode(SIM_HUB, from, &msg).unwrap_or_default()
}
