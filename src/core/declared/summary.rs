//! A declared copy in brief: its stamp (version, last mutator) and its content digest, which
//! nodes exchange before their whole copies.
//!
//! A node that meets a peer must weigh the peer's copy before it acts on its own (an outdated
//! copy could restart a child stopped since). After a whole-cluster restart every copy is
//! usually the same, and sending each peer a quarter of a million children to find that out
//! costs seconds of encoding and decoding on every node while the recovery waits. So a node
//! sends its summary first; the receiver compares it with its own copy and only then does a
//! whole copy travel, in the direction that needs it:
//!
//! | verdict | the receiver |
//! |---|---|
//! | [`SummaryVerdict::Same`] | has weighed the sender's copy (adopting it would change nothing) |
//! | [`SummaryVerdict::MineNewer`] | has weighed it too (it would keep its own) and sends its whole copy |
//! | [`SummaryVerdict::TheirsNewer`] | answers with its own summary, which makes the sender send its whole copy |
//! | [`SummaryVerdict::Conflict`] | same stamp, other content: both whole copies travel, and [`precedence`] settles it by content |
//!
//! Equal digests are taken for equal content: the digest is 64 bits over every entry (see
//! [`crate::core::declared::list::content_digest`]), so two different copies with the same
//! stamp that also collide on it are left for the next whole exchange, as equal announcements
//! already are ([`crate::core::declared::list::announced_ahead`]).

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::list::precedence;
use super::list::{stamp_order, DeclaredList};
use crate::model::NodeName;

/// A copy's stamp and content digest: what a peer needs to know whether the whole copy is
/// worth sending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopySummary {
    /// The copy's version.
    pub version: u64,
    /// The node that made that version (the tie-break between equal versions).
    pub last_mutated_by: Option<NodeName>,
    /// The digest of its children.
    pub digest: u64,
}

impl CopySummary {
    /// The summary of `list`.
    pub fn of(list: &DeclaredList) -> Self {
        CopySummary {
            version: list.version(),
            last_mutated_by: list.last_mutated_by().map(str::to_owned),
            digest: list.digest(),
        }
    }
}

/// What a node's own copy says about a peer's summary (see the module doc's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryVerdict {
    /// Same stamp, same digest.
    Same,
    /// The receiver's copy outranks the sender's by its stamp.
    MineNewer,
    /// The sender's copy outranks the receiver's by its stamp.
    TheirsNewer,
    /// Same stamp, different content: only the whole copies can settle it.
    Conflict,
}

/// Weighs a peer's summary against `mine`, with the order of [`precedence`]: the higher
/// version, then the lower mutator's name, then (same stamp) the content.
pub fn weigh_summary(mine: &DeclaredList, theirs: &CopySummary) -> SummaryVerdict {
    let by_stamp = stamp_order(
        (theirs.version, theirs.last_mutated_by.as_deref()),
        (mine.version(), mine.last_mutated_by()),
    );
    match by_stamp {
        Ordering::Greater => SummaryVerdict::TheirsNewer,
        Ordering::Less => SummaryVerdict::MineNewer,
        Ordering::Equal if theirs.digest == mine.digest() => SummaryVerdict::Same,
        Ordering::Equal => SummaryVerdict::Conflict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::declared::list::{precedence, DeclaredChild, DeclaredChildren};
    use crate::model::ChildSpec;

    fn list(version: u64, by: Option<&str>, ids: &[&str]) -> DeclaredList {
        let children: DeclaredChildren = ids
            .iter()
            .map(|id| {
                let child = DeclaredChild {
                    spec: ChildSpec::new(*id, "counter"),
                    metadata: Default::default(),
                };
                (child.spec.id.clone(), child)
            })
            .collect();
        DeclaredList::from_parts(version, children, by.map(str::to_owned))
    }

    #[test]
    fn an_identical_copy_is_the_same() {
        let a = list(4, Some("n1"), &["a", "b"]);
        let b = list(4, Some("n1"), &["b", "a"]);
        assert_eq!(
            weigh_summary(&a, &CopySummary::of(&b)),
            SummaryVerdict::Same
        );
    }

    #[test]
    fn the_verdict_agrees_with_precedence_on_stamps() {
        let copies = [
            list(0, None, &[]),
            list(3, Some("n2"), &["a"]),
            list(3, Some("n1"), &["b"]),
            list(4, Some("n3"), &["a", "c"]),
            list(4, None, &["a"]),
            list(9, Some("n1"), &["a"]),
        ];
        for mine in &copies {
            for theirs in &copies {
                let verdict = weigh_summary(mine, &CopySummary::of(theirs));
                let expected = match precedence(theirs, mine) {
                    Ordering::Greater
                        if theirs.version() != mine.version()
                            || theirs.last_mutated_by() != mine.last_mutated_by() =>
                    {
                        SummaryVerdict::TheirsNewer
                    }
                    Ordering::Less
                        if theirs.version() != mine.version()
                            || theirs.last_mutated_by() != mine.last_mutated_by() =>
                    {
                        SummaryVerdict::MineNewer
                    }
                    Ordering::Equal => SummaryVerdict::Same,
                    _ => SummaryVerdict::Conflict,
                };
                assert_eq!(verdict, expected, "mine {mine:?} theirs {theirs:?}");
            }
        }
    }

    #[test]
    fn the_same_stamp_with_other_content_is_a_conflict() {
        let a = list(5, Some("n1"), &["a"]);
        let b = list(5, Some("n1"), &["b"]);
        assert_eq!(
            weigh_summary(&a, &CopySummary::of(&b)),
            SummaryVerdict::Conflict
        );
        assert_eq!(
            weigh_summary(&b, &CopySummary::of(&a)),
            SummaryVerdict::Conflict
        );
    }

    #[test]
    fn a_forged_version_is_only_ever_newer() {
        let mine = list(5, Some("n1"), &["a"]);
        let forged = CopySummary {
            version: u64::MAX,
            last_mutated_by: Some("x".repeat(64)),
            digest: 0,
        };
        // Weighed alone it ranks above; the DeclaredLeader checks the version first
        // (`check_version`) and refuses such a summary unanswered, as it refuses an offer.
        assert_eq!(weigh_summary(&mine, &forged), SummaryVerdict::TheirsNewer);
    }
}
