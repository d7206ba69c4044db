//! One observer's record: the peers it reaches now.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::model::NodeName;

/// Most nodes a record may name, and most observers a table keeps: far above any cluster the
/// hub is meant for (the quadratic cost of a table of this size is still a few MiB at most).
pub const MAX_NODES: usize = 1024;

/// Longest node name accepted in a record (a `name@host` is far shorter).
pub const MAX_NAME_BYTES: usize = 255;

/// Highest version a record may carry: an observer bumps its version once per change of its
/// links, so 2^48 is never reached honestly; a record near `u64::MAX` is a forgery meant to
/// freeze the observer's record forever, and is refused.
pub const MAX_VERSION: u64 = 1 << 48;

/// What `observer` reaches now: the peers whose link to it is up in the observer's own
/// transport (a peer is reachable when its frames arrive and its heartbeats have not timed
/// out). A positive set rather than a list of unreachable peers, so that a node an observer
/// never connected to, or a record of a node that died, counts as *not* reached: only links
/// both ends vouch for carry the component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// Who observes (the only author of this record).
    pub observer: NodeName,
    /// The observer's incarnation: its wall-clock milliseconds when its hub opened. A record of
    /// a later incarnation wins whatever its version, so a restarted observer's records replace
    /// those of its previous life.
    pub incarnation: u64,
    /// Bumped by the observer on every change of `reachable`, from 1.
    pub version: u64,
    /// The peers the observer reaches now (never itself).
    pub reachable: BTreeSet<NodeName>,
    /// The observer has set itself aside and released its children (stopped them): only then
    /// do the other members take it out of the ring and re-place its children. Each node
    /// decides this about itself alone, so the others never act on a resolution the node
    /// itself has not carried out.
    #[serde(default)]
    pub aside: bool,
}

impl Observation {
    /// The order of two records of one observer: incarnation first, then version.
    pub fn key(&self) -> (u64, u64) {
        (self.incarnation, self.version)
    }

    /// Checks the record's shape: bounded, well-formed names, a plausible version and an
    /// incarnation not further ahead of `now_wall_ms` than `max_skew_ms`.
    pub fn validate(&self, now_wall_ms: u64, max_skew_ms: u64) -> Result<(), ReachError> {
        check_name(&self.observer)?;
        if self.reachable.len() > MAX_NODES {
            return Err(ReachError::TooManyPeers {
                len: self.reachable.len(),
                max: MAX_NODES,
            });
        }
        for name in &self.reachable {
            check_name(name)?;
        }
        if self.reachable.contains(&self.observer) {
            return Err(ReachError::ListsItself {
                observer: self.observer.clone(),
            });
        }
        if self.version == 0 || self.version > MAX_VERSION {
            return Err(ReachError::VersionOutOfRange {
                version: self.version,
            });
        }
        if self.incarnation > now_wall_ms.saturating_add(max_skew_ms) {
            return Err(ReachError::IncarnationAhead {
                incarnation: self.incarnation,
                now: now_wall_ms,
            });
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), ReachError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(ReachError::BadName { len: name.len() });
    }
    Ok(())
}

/// Why a record was refused. Every refusal leaves the table as it was.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReachError {
    /// A record in this node's name that this node did not write: only the observer speaks
    /// for itself.
    #[error("a record in this node's name ({observer}) from another node")]
    ForeignSelf {
        /// This node.
        observer: NodeName,
    },
    /// More peers than any table keeps.
    #[error("record names {len} peers, at most {max}")]
    TooManyPeers {
        /// Peers named.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A name that is empty, too long or has control characters.
    #[error("ill-formed node name ({len} bytes)")]
    BadName {
        /// Its length.
        len: usize,
    },
    /// The observer lists itself among the peers it reaches.
    #[error("{observer} lists itself")]
    ListsItself {
        /// The observer.
        observer: NodeName,
    },
    /// Version 0 or beyond [`MAX_VERSION`].
    #[error("version {version} out of range")]
    VersionOutOfRange {
        /// The version.
        version: u64,
    },
    /// A version more than [`super::MAX_VERSION_STEP`] above the known one of the same
    /// incarnation: honest observers count one by one.
    #[error("version jumps from {known} to {version}")]
    VersionJump {
        /// The version this node holds.
        known: u64,
        /// The version offered.
        version: u64,
    },
    /// An incarnation in the future: a forged record meant to win forever.
    #[error("incarnation {incarnation} ahead of now ({now})")]
    IncarnationAhead {
        /// The incarnation offered.
        incarnation: u64,
        /// This node's wall clock.
        now: u64,
    },
    /// The table already holds [`MAX_NODES`] observers.
    #[error("reachability table full ({max} observers)")]
    TableFull {
        /// The limit.
        max: usize,
    },
}
