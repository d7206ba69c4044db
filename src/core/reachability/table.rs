//! The reachability table: the latest record of every observer, this node's own included.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::observation::{Observation, ReachError, MAX_NODES};
use crate::model::NodeName;

/// Largest version step accepted from a record of a known incarnation: an observer bumps its
/// version by one per change, so a relay that offers a version a million ahead is lying (it
/// would freeze the observer's record at that version).
pub const MAX_VERSION_STEP: u64 = 1 << 20;

/// How far ahead of this node's wall clock a record's incarnation may be (clock skew between
/// machines, clocks set by hand), in ms: a day, far above honest skew, far below a forged `u64::MAX`.
pub const MAX_INCARNATION_SKEW_MS: u64 = 24 * 60 * 60 * 1000;

/// What a merge did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// The record was newer: the table changed (forward it to the peers).
    Newer,
    /// The table held this record or a newer one: nothing changed.
    Known,
    /// A record in this node's name, newer than its own, that it did not write: a previous
    /// life's (its wall clock went back across a restart, so its new incarnation is lower) or a
    /// forgery. Not taken: this node's own record was raised above it instead (same
    /// reachability, a greater key), so that it replaces that record wherever it is held
    /// (publish it).
    OwnRaised,
}

/// One line of a digest: which record of `observer` the sender holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DigestEntry {
    /// The observer.
    pub observer: NodeName,
    /// Its incarnation.
    pub incarnation: u64,
    /// Its version.
    pub version: u64,
}

/// The latest record per observer, as this node knows them, with this node's own record
/// (which only this node writes). Bounded to [`MAX_NODES`] observers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReachTable {
    me: NodeName,
    records: BTreeMap<NodeName, Observation>,
}

impl ReachTable {
    /// A table holding only this node's record: version 1, reaching nobody, of `incarnation`
    /// (this node's wall-clock ms when its hub opened).
    pub fn new(me: NodeName, incarnation: u64) -> Self {
        let own = Observation {
            observer: me.clone(),
            incarnation,
            version: 1,
            reachable: BTreeSet::new(),
        };
        Self {
            records: BTreeMap::from([(me.clone(), own)]),
            me,
        }
    }

    /// A table of these records, seen from `me` (tests and the simulator's judge: any member's
    /// view of the same records). `me`'s own record must be among them.
    pub fn from_records(me: NodeName, records: impl IntoIterator<Item = Observation>) -> Self {
        let mut records: BTreeMap<NodeName, Observation> = records
            .into_iter()
            .map(|r| (r.observer.clone(), r))
            .collect();
        records.entry(me.clone()).or_insert_with(|| Observation {
            observer: me.clone(),
            incarnation: 0,
            version: 1,
            reachable: BTreeSet::new(),
        });
        Self { me, records }
    }

    /// This node.
    pub fn me(&self) -> &NodeName {
        &self.me
    }

    /// This node's own record.
    pub fn own(&self) -> &Observation {
        &self.records[&self.me]
    }

    /// Every record, by observer.
    pub fn records(&self) -> &BTreeMap<NodeName, Observation> {
        &self.records
    }

    /// The record of `observer`, if known.
    pub fn get(&self, observer: &str) -> Option<&Observation> {
        self.records.get(observer)
    }

    /// Sets what this node reaches now; returns its new record (to publish) when that changed
    /// it, with the version bumped.
    pub fn set_reachable(&mut self, reachable: BTreeSet<NodeName>) -> Option<Observation> {
        let me = self.me.clone();
        let own = self.records.get_mut(&me)?;
        let mut reachable = reachable;
        reachable.remove(&me);
        if own.reachable == reachable {
            return None;
        }
        own.reachable = reachable;
        own.version = own.version.saturating_add(1);
        Some(own.clone())
    }

    /// Merges a record that came from a peer, at this node's wall-clock `now_wall_ms`: kept
    /// when newer than the one held (incarnation, then version). A record in this node's name
    /// is never taken: an echo of one this node wrote is known, a newer one raises this node's
    /// own record above it ([`Merge::OwnRaised`]). An ill-formed or implausible one (see
    /// [`Observation::validate`], [`MAX_VERSION_STEP`]) is refused and the table is left as it
    /// was.
    pub fn merge(&mut self, record: Observation, now_wall_ms: u64) -> Result<Merge, ReachError> {
        record.validate(now_wall_ms, MAX_INCARNATION_SKEW_MS)?;
        if record.observer == self.me {
            if record.key() <= self.own().key() {
                return Ok(Merge::Known);
            }
            let me = self.me.clone();
            let own = self
                .records
                .get_mut(&me)
                .ok_or(ReachError::ForeignSelf { observer: me })?;
            own.incarnation = record.incarnation;
            own.version = record.version.saturating_add(1);
            return Ok(Merge::OwnRaised);
        }
        match self.records.get(&record.observer) {
            Some(known) if record.key() <= known.key() => return Ok(Merge::Known),
            Some(known)
                if record.incarnation == known.incarnation
                    && record.version - known.version > MAX_VERSION_STEP =>
            {
                return Err(ReachError::VersionJump {
                    known: known.version,
                    version: record.version,
                });
            }
            None if self.records.len() >= MAX_NODES => {
                return Err(ReachError::TableFull { max: MAX_NODES })
            }
            _ => {}
        }
        self.records.insert(record.observer.clone(), record);
        Ok(Merge::Newer)
    }

    /// Which record of each observer this node holds.
    pub fn digest(&self) -> Vec<DigestEntry> {
        self.records
            .values()
            .map(|r| DigestEntry {
                observer: r.observer.clone(),
                incarnation: r.incarnation,
                version: r.version,
            })
            .collect()
    }

    /// The records this node holds that are newer than what `digest` says its sender holds
    /// (or that the sender lacks): what to send it.
    pub fn newer_than(&self, digest: &[DigestEntry]) -> Vec<Observation> {
        let theirs: BTreeMap<&str, (u64, u64)> = digest
            .iter()
            .map(|e| (e.observer.as_str(), (e.incarnation, e.version)))
            .collect();
        self.records
            .values()
            .filter(|r| {
                theirs
                    .get(r.observer.as_str())
                    .is_none_or(|key| r.key() > *key)
            })
            .cloned()
            .collect()
    }

    /// Whether `digest` names a record newer than this node's (or one it lacks): then the
    /// digest's sender has something to send here.
    pub fn behind(&self, digest: &[DigestEntry]) -> bool {
        digest.iter().any(|e| {
            self.records
                .get(&e.observer)
                .is_none_or(|r| (e.incarnation, e.version) > r.key())
        })
    }
}
