//! Boot decisions about the declared list: "a missing list is never empty truth" and boot
//! adoption (docs/recovery.md, "Boot").
//!
//! On boot a node has its local copy (readable, missing, or corrupt and rotated aside), some
//! evidence that durable children existed (the seeded marker beside the list file, durable rows
//! in its registry), and maybe the remote manifest's copy. [`decide_boot`] turns that into one of
//! four decisions:
//!
//! | local list | evidence | manifest | decision |
//! | --- | --- | --- | --- |
//! | readable | any | any | adopt the higher of local and manifest |
//! | missing or corrupt | any | has a list | adopt the manifest's (restore) |
//! | missing | no marker, durable rows | no list | seed version 1 from the rows (first boot) |
//! | missing | seeded marker | no list | **park** |
//! | corrupt | marker or durable rows | no list | **park** |
//! | missing or corrupt | none | no list | start empty |
//!
//! A parked hub starts and stops nothing (its rounds are planned parked) and fires the
//! alarm-grade `declared_parked` hook, until a copy with a real version arrives (a peer's, a
//! manifest's: [`restores_parked`]) or the operator calls `clear`. A manifest that failed to
//! answer counts as "no list": parking then is the safe answer, and a later fetch may restore.
//!
//! After that decision, joining peers offer their copies and the highest wins
//! ([`boot_adoption`], built on [`crate::core::declared::list::precedence`]).

use std::cmp::Ordering;

use crate::core::declared::list::{
    check_version, highest, precedence, tiebreak_between, DeclaredList, Tiebreak,
};

/// The local copy as the store found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalList {
    /// A stored list that decoded.
    Readable(DeclaredList),
    /// No stored list.
    Missing,
    /// The stored list could not be read and was rotated aside.
    Corrupt,
}

/// What says that durable children existed here before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurableEvidence {
    /// The seeded marker beside the list file exists (a list was stored here once).
    pub seeded_marker: bool,
    /// Rows marked durable in this node's registry.
    pub durable_rows: usize,
}

/// What the remote manifest answered at boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManifestFetch {
    /// No remote manifest is configured.
    Disabled,
    /// The manifest holds no list.
    Absent,
    /// The manifest's list.
    Found(DeclaredList),
    /// The fetch failed (the error, for the log and the park reason).
    Failed(String),
}

/// Where an adopted copy came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopySource {
    /// This node's store.
    Local,
    /// A peer.
    Peer,
    /// The remote manifest.
    Manifest,
}

/// Why a hub parks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkReason {
    /// The local list was corrupt (else missing).
    pub corrupt: bool,
    /// The evidence found.
    pub evidence: DurableEvidence,
    /// The manifest's failure, if the fetch failed (else it was disabled or empty).
    pub manifest_error: Option<String>,
}

/// What to do with the declared list at boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootDecision {
    /// Adopt (and persist, if it is not the local copy) this list.
    Adopt {
        /// The list.
        list: DeclaredList,
        /// Where it came from.
        source: CopySource,
        /// A tie resolved between the local copy and the manifest's.
        tiebreak: Option<Tiebreak>,
    },
    /// First boot with the feature on: seed version 1 from the durable registry rows
    /// ([`DeclaredList::seed_from_rows`]), persist it, write the seeded marker.
    SeedFromRows,
    /// The list is lost: park the reconcile and fire `declared_parked`.
    Park(ParkReason),
    /// Nothing was ever declared here: start with the empty list (and write the marker once
    /// something is persisted).
    StartEmpty,
}

/// Decides what the boot does with the declared list; see the module doc's table.
pub fn decide_boot(
    local: LocalList,
    evidence: DurableEvidence,
    manifest: ManifestFetch,
) -> BootDecision {
    let local_version = match &local {
        LocalList::Readable(list) => list.version(),
        LocalList::Missing | LocalList::Corrupt => 0,
    };
    let (remote, manifest_error) = match manifest {
        ManifestFetch::Found(list) if list.version() > 0 => {
            match check_version(local_version, list.version()) {
                Ok(()) => (Some(list), None),
                Err(refused) => (None, Some(format!("remote manifest refused: {refused}"))),
            }
        }
        ManifestFetch::Failed(error) => (None, Some(error)),
        _ => (None, None),
    };
    let corrupt = match local {
        LocalList::Readable(local) => {
            let Some(remote) = remote else {
                return BootDecision::Adopt {
                    list: local,
                    source: CopySource::Local,
                    tiebreak: None,
                };
            };
            let tiebreak = tiebreak_between(&local, &remote);
            let (list, source) = if precedence(&remote, &local) == Ordering::Greater {
                (remote, CopySource::Manifest)
            } else {
                (local, CopySource::Local)
            };
            return BootDecision::Adopt {
                list,
                source,
                tiebreak,
            };
        }
        LocalList::Missing => false,
        LocalList::Corrupt => true,
    };
    if let Some(remote) = remote {
        return BootDecision::Adopt {
            list: remote,
            source: CopySource::Manifest,
            tiebreak: None,
        };
    }
    let lost = evidence.seeded_marker || (corrupt && evidence.durable_rows > 0);
    if lost {
        return BootDecision::Park(ParkReason {
            corrupt,
            evidence,
            manifest_error,
        });
    }
    if evidence.durable_rows > 0 {
        BootDecision::SeedFromRows
    } else {
        BootDecision::StartEmpty
    }
}

/// Whether an offered copy ends a park: any copy somebody actually mutated (version 1 or
/// more). An empty version-0 copy (a fresh peer) knows nothing and restores nothing.
pub fn restores_parked(offered: &DeclaredList) -> bool {
    offered.version() > 0
}

/// The boot adoption: the highest copy among the local one, the peers' and the manifest's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootAdoption {
    /// The winning copy.
    pub list: DeclaredList,
    /// Where it came from (the local copy wins ties with an identical peer copy).
    pub source: CopySource,
    /// Every tie resolved on the way (the hub fires `declared_tiebreak` for each).
    pub tiebreaks: Vec<Tiebreak>,
}

/// Picks the copy to adopt among the local copy, the peers' and the manifest's. `None` when
/// there is no copy at all.
pub fn boot_adoption(
    local: Option<&DeclaredList>,
    peers: &[DeclaredList],
    manifest: Option<&DeclaredList>,
) -> Option<BootAdoption> {
    let tagged: Vec<(&DeclaredList, CopySource)> = local
        .map(|l| (l, CopySource::Local))
        .into_iter()
        .chain(peers.iter().map(|p| (p, CopySource::Peer)))
        .chain(manifest.map(|m| (m, CopySource::Manifest)))
        .collect();
    let (best, tiebreaks) = highest(tagged.iter().map(|(l, _)| *l))?;
    let source = tagged
        .iter()
        .find(|(l, _)| *l == best)
        .map_or(CopySource::Local, |(_, s)| *s);
    Some(BootAdoption {
        list: best.clone(),
        source,
        tiebreaks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};

    fn list(ids: &[&str], by: &str) -> DeclaredList {
        let mut l = DeclaredList::new();
        for id in ids {
            l.add(ChildSpec::new(*id, "k"), Metadata::new(), by)
                .unwrap();
        }
        l
    }

    const MARKER: DurableEvidence = DurableEvidence {
        seeded_marker: true,
        durable_rows: 0,
    };
    const ROWS: DurableEvidence = DurableEvidence {
        seeded_marker: false,
        durable_rows: 3,
    };
    const NONE: DurableEvidence = DurableEvidence {
        seeded_marker: false,
        durable_rows: 0,
    };

    #[test]
    fn a_readable_list_is_adopted_or_beaten_by_a_newer_manifest() {
        let local = list(&["a"], "n1");
        let newer = list(&["a", "b"], "n1");
        let d = decide_boot(
            LocalList::Readable(local.clone()),
            MARKER,
            ManifestFetch::Disabled,
        );
        assert_eq!(
            d,
            BootDecision::Adopt {
                list: local.clone(),
                source: CopySource::Local,
                tiebreak: None
            }
        );
        let d = decide_boot(
            LocalList::Readable(local.clone()),
            MARKER,
            ManifestFetch::Found(newer.clone()),
        );
        assert!(
            matches!(d, BootDecision::Adopt { list, source: CopySource::Manifest, .. } if list == newer)
        );
        let d = decide_boot(
            LocalList::Readable(newer.clone()),
            MARKER,
            ManifestFetch::Found(local),
        );
        assert!(matches!(
            d,
            BootDecision::Adopt {
                source: CopySource::Local,
                ..
            }
        ));
    }

    #[test]
    fn a_missing_list_with_evidence_is_never_empty_truth() {
        for local in [LocalList::Missing, LocalList::Corrupt] {
            for manifest in [ManifestFetch::Disabled, ManifestFetch::Absent] {
                let d = decide_boot(local.clone(), MARKER, manifest);
                assert!(matches!(d, BootDecision::Park(_)), "{local:?}: {d:?}");
            }
            let d = decide_boot(
                local.clone(),
                MARKER,
                ManifestFetch::Failed("timeout".into()),
            );
            let BootDecision::Park(reason) = d else {
                panic!("parks")
            };
            assert_eq!(reason.manifest_error.as_deref(), Some("timeout"));
            assert_eq!(reason.corrupt, local == LocalList::Corrupt);
        }
        let d = decide_boot(LocalList::Corrupt, ROWS, ManifestFetch::Disabled);
        assert!(matches!(d, BootDecision::Park(_)));
    }

    #[test]
    fn a_lost_list_is_restored_from_the_manifest() {
        let remote = list(&["a", "b"], "n2");
        for local in [LocalList::Missing, LocalList::Corrupt] {
            let d = decide_boot(local, MARKER, ManifestFetch::Found(remote.clone()));
            assert_eq!(
                d,
                BootDecision::Adopt {
                    list: remote.clone(),
                    source: CopySource::Manifest,
                    tiebreak: None
                }
            );
        }
    }

    #[test]
    fn the_first_boot_seeds_from_durable_rows_once() {
        assert_eq!(
            decide_boot(LocalList::Missing, ROWS, ManifestFetch::Absent),
            BootDecision::SeedFromRows
        );
        // Once seeded, the marker exists: a later loss parks instead of re-seeding.
        let both = DurableEvidence {
            seeded_marker: true,
            durable_rows: 3,
        };
        assert!(matches!(
            decide_boot(LocalList::Missing, both, ManifestFetch::Absent),
            BootDecision::Park(_)
        ));
    }

    #[test]
    fn no_evidence_starts_empty() {
        for local in [LocalList::Missing, LocalList::Corrupt] {
            assert_eq!(
                decide_boot(local, NONE, ManifestFetch::Disabled),
                BootDecision::StartEmpty
            );
        }
        // An empty manifest copy (version 0) restores nothing.
        assert_eq!(
            decide_boot(
                LocalList::Missing,
                NONE,
                ManifestFetch::Found(DeclaredList::new())
            ),
            BootDecision::StartEmpty
        );
    }

    #[test]
    fn only_a_real_copy_ends_a_park() {
        assert!(!restores_parked(&DeclaredList::new()));
        let mut cleared = list(&["a"], "n1");
        cleared.clear("op");
        assert!(
            restores_parked(&cleared),
            "an operator's clear is a real copy"
        );
        assert!(restores_parked(&list(&["a"], "n1")));
    }

    #[test]
    fn boot_adopts_the_highest_of_local_peers_and_manifest() {
        let local = list(&["a"], "n1");
        let peer = list(&["a", "b", "c"], "n2");
        let manifest = list(&["a", "b"], "n1");
        let got =
            boot_adoption(Some(&local), std::slice::from_ref(&peer), Some(&manifest)).unwrap();
        assert_eq!(got.list, peer);
        assert_eq!(got.source, CopySource::Peer);
        let got = boot_adoption(None, &[], Some(&manifest)).unwrap();
        assert_eq!(got.source, CopySource::Manifest);
        assert!(boot_adoption(None, &[], None).is_none());
        // A partition tie among the peers is reported.
        let mut p1 = local.clone();
        p1.add(ChildSpec::new("x", "k"), Metadata::new(), "n3")
            .unwrap();
        let mut p2 = local.clone();
        p2.add(ChildSpec::new("y", "k"), Metadata::new(), "n2")
            .unwrap();
        let got = boot_adoption(Some(&local), &[p1, p2.clone()], None).unwrap();
        assert_eq!(got.list, p2);
        assert_eq!(got.tiebreaks.len(), 1);
        assert_eq!(got.tiebreaks[0].winner.as_deref(), Some("n2"));
    }
}
