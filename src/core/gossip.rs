//! Gossip synchronization's decisions (`sync = gossip`): who passes a change on to whom, in
//! which order a node applies another node's changes, and when it must ask that node for its
//! whole set of observations instead.
//!
//! Each node numbers the deltas of its own observations in a *stream* (`epoch`, `seq`): a new
//! epoch each time its Registry starts, `seq` from 1. A delta travels a tree: its origin hands
//! it to `recipients` peers, each responsible for delivering it to its share of the rest
//! ([`relay_plan`]), so every node receives it once and no node sends it more than
//! `recipients` times. Shares reach a node by different paths, so deltas of one origin arrive
//! out of order; [`Streams`] applies them in order (a removal carries no pid: applied before
//! the insert it follows, it would leave a stale binding). What it cannot order (a gap that
//! lasts, a stream it has no start of, a buffer past its bound) it resolves by asking the
//! origin for a `GossipSync`: the origin's rows with the position they include.
//!
//! Periodic rounds gather each node's positions ([`merge_heads`]) and spread them, so a node
//! that missed the last delta of a stream (no later one reveals the gap) learns it is behind.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::Rng;

use crate::model::NodeName;

/// A stream position: `(origin, epoch, seq)`.
pub type Head = (NodeName, u64, u64);

/// The most deltas held per origin while waiting for a gap to fill; past it they are dropped
/// and the origin asked for a sync (a peer that never fills a gap cannot grow a node's memory).
pub const MAX_PENDING_PER_ORIGIN: usize = 4_096;

/// The longest list of nodes (a relay share, a round's route, its heads) a frame may carry.
pub const MAX_NODE_LIST: usize = 4_096;

/// How long a gap may last before the origin is asked for a sync, in ms.
pub const GAP_WAIT_MS: u64 = 1_000;

/// How often one origin is asked for a sync at most, in ms.
pub const ASK_EVERY_MS: u64 = 1_000;

/// Splits `targets` among at most `fanout` next hops: each pair is a node to send to and the
/// share of the rest it passes the frame on to. Every target appears exactly once; the shares
/// differ in size by at most one, so the tree is about log_fanout(n) hops deep.
pub fn relay_plan<R: Rng>(
    mut targets: Vec<NodeName>,
    fanout: usize,
    rng: &mut R,
) -> Vec<(NodeName, Vec<NodeName>)> {
    targets.sort();
    targets.dedup();
    targets.shuffle(rng);
    let groups = fanout.max(1).min(targets.len());
    let mut plan: Vec<(NodeName, Vec<NodeName>)> = Vec::with_capacity(groups);
    let (base, extra) = match groups {
        0 => (0, 0),
        g => (targets.len() / g, targets.len() % g),
    };
    let mut rest = targets.into_iter();
    for g in 0..groups {
        let size = base + usize::from(g < extra);
        let mut group: Vec<NodeName> = rest.by_ref().take(size).collect();
        let head = group.remove(0);
        plan.push((head, group));
    }
    plan
}

/// Merges `theirs` into `into`, keeping per origin the furthest position of one epoch; an
/// origin's own report of itself wins over what others saw of it (it alone knows its epoch).
/// The result is sorted by origin and bounded by [`MAX_NODE_LIST`].
pub fn merge_heads(into: &mut Vec<Head>, theirs: impl IntoIterator<Item = Head>, reporter: &str) {
    let mut by_origin: BTreeMap<NodeName, (u64, u64)> = into
        .drain(..)
        .map(|(origin, epoch, seq)| (origin, (epoch, seq)))
        .collect();
    for (origin, epoch, seq) in theirs {
        let room = by_origin.len() < MAX_NODE_LIST;
        match by_origin.get_mut(&origin) {
            Some(known) if origin == reporter => *known = (epoch, seq),
            Some(known) if known.0 == epoch => known.1 = known.1.max(seq),
            Some(_) => {}
            None if room => {
                by_origin.insert(origin, (epoch, seq));
            }
            None => {}
        }
    }
    into.extend(
        by_origin
            .into_iter()
            .map(|(origin, (epoch, seq))| (origin, epoch, seq)),
    );
}

/// What became of an offered delta.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer<T> {
    /// Apply these, in order (the offered delta and any it unblocked).
    Apply(Vec<T>),
    /// Already applied (or older than the stream's start): drop it.
    Duplicate,
    /// Held until what comes before it arrives.
    Held,
}

/// One origin's stream as this node applied it.
#[derive(Debug)]
struct Stream<T> {
    /// The epoch and last position applied, once a sync gave a start.
    applied: Option<(u64, u64)>,
    /// Deltas waiting for their turn, by `(epoch, seq)`.
    pending: BTreeMap<(u64, u64), T>,
    /// Since when a delta waits behind a gap (ms).
    waiting_since: Option<u64>,
    /// When the origin was last asked for a sync (ms).
    asked_at: Option<u64>,
    /// Ask the origin without waiting (another epoch, a dropped buffer).
    ask_now: bool,
}

impl<T> Default for Stream<T> {
    fn default() -> Self {
        Self {
            applied: None,
            pending: BTreeMap::new(),
            waiting_since: None,
            asked_at: None,
            ask_now: false,
        }
    }
}

impl<T> Stream<T> {
    /// Takes the deltas that now follow the applied position, in order.
    fn drain_ready(&mut self) -> Vec<T> {
        let mut ready = Vec::new();
        while let Some((epoch, seq)) = self.applied {
            match self.pending.remove(&(epoch, seq + 1)) {
                Some(delta) => {
                    self.applied = Some((epoch, seq + 1));
                    ready.push(delta);
                }
                None => break,
            }
        }
        if self.pending.is_empty() {
            self.waiting_since = None;
        }
        ready
    }
}

/// The streams of every other node, as this node applied them.
#[derive(Debug)]
pub struct Streams<T> {
    by_origin: BTreeMap<NodeName, Stream<T>>,
}

impl<T> Default for Streams<T> {
    fn default() -> Self {
        Self {
            by_origin: BTreeMap::new(),
        }
    }
}

impl<T> Streams<T> {
    /// A delta of `origin` at `(epoch, seq)`, received at `now_ms`.
    pub fn offer(&mut self, origin: &str, epoch: u64, seq: u64, delta: T, now_ms: u64) -> Offer<T> {
        let stream = self.by_origin.entry(origin.to_owned()).or_default();
        match stream.applied {
            Some((e, applied)) if e == epoch && seq <= applied => return Offer::Duplicate,
            Some((e, applied)) if e == epoch && seq == applied + 1 => {
                stream.applied = Some((e, seq));
                let mut ready = vec![delta];
                ready.extend(stream.drain_ready());
                return Offer::Apply(ready);
            }
            // The origin restarted its stream (or this is an older one's straggler): only
            // the origin's sync tells which is current.
            Some((e, _)) if e != epoch => stream.ask_now = true,
            _ => {}
        }
        if stream.pending.len() >= MAX_PENDING_PER_ORIGIN {
            // A gap nobody fills: start again from the origin's sync.
            stream.pending.clear();
            stream.waiting_since = None;
            stream.ask_now = true;
            return Offer::Held;
        }
        stream.pending.insert((epoch, seq), delta);
        stream.waiting_since.get_or_insert(now_ms);
        Offer::Held
    }

    /// `origin`'s rows as of `(epoch, seq)` arrived. `None`: they are older than what was
    /// applied since (a delta overtook the sync) and must not be applied. `Some`: apply them,
    /// then these held deltas, in order.
    pub fn synced(&mut self, origin: &str, epoch: u64, seq: u64, now_ms: u64) -> Option<Vec<T>> {
        let stream = self.by_origin.entry(origin.to_owned()).or_default();
        if let Some((e, applied)) = stream.applied {
            if e == epoch && seq < applied {
                return None;
            }
        }
        stream.applied = Some((epoch, seq));
        stream.pending.retain(|&(e, s), _| e == epoch && s > seq);
        stream.asked_at = None;
        stream.ask_now = false;
        let ready = stream.drain_ready();
        if !stream.pending.is_empty() {
            stream.waiting_since = Some(now_ms);
        }
        Some(ready)
    }

    /// The origins to ask for a sync now: a delta held behind a gap for [`GAP_WAIT_MS`], or a
    /// stream with no start, unless asked within [`ASK_EVERY_MS`]. Each returned origin counts
    /// as asked.
    pub fn overdue(&mut self, now_ms: u64) -> Vec<NodeName> {
        let mut due = Vec::new();
        for (origin, stream) in &mut self.by_origin {
            let waiting = stream
                .waiting_since
                .is_some_and(|since| now_ms.saturating_sub(since) >= GAP_WAIT_MS);
            let no_start = stream.applied.is_none() && !stream.pending.is_empty();
            if (waiting || no_start || stream.ask_now) && may_ask(stream.asked_at, now_ms) {
                stream.asked_at = Some(now_ms);
                due.push(origin.clone());
            }
        }
        due
    }

    /// The origins of `heads` this node is behind in (a later position of the epoch it
    /// applied, or another epoch), `me` excluded; each counts as asked, at most once per
    /// [`ASK_EVERY_MS`].
    pub fn behind(&mut self, heads: &[Head], me: &str, now_ms: u64) -> Vec<NodeName> {
        let mut due = Vec::new();
        for (origin, epoch, seq) in heads {
            if origin == me {
                continue;
            }
            let stream = self.by_origin.entry(origin.clone()).or_default();
            let behind = match stream.applied {
                Some((e, applied)) => e != *epoch || applied < *seq,
                None => true,
            };
            if behind && may_ask(stream.asked_at, now_ms) {
                stream.asked_at = Some(now_ms);
                due.push(origin.clone());
            }
        }
        due
    }

    /// The origins of `heads` this node has applied up to their position (or past it, in
    /// the same epoch), `me` excluded: everything they had sent when the positions were
    /// gathered is applied here (the sync lag's proof of being in sync).
    pub fn caught_up(&self, heads: &[Head], me: &str) -> Vec<NodeName> {
        heads
            .iter()
            .filter(|(origin, epoch, seq)| {
                origin != me
                    && self.by_origin.get(origin).is_some_and(|s| {
                        matches!(s.applied, Some((e, applied)) if e == *epoch && applied >= *seq)
                    })
            })
            .map(|(origin, ..)| origin.clone())
            .collect()
    }

    /// The positions this node applied, per origin.
    pub fn heads(&self) -> Vec<Head> {
        self.by_origin
            .iter()
            .filter_map(|(origin, s)| s.applied.map(|(e, seq)| (origin.clone(), e, seq)))
            .collect()
    }

    /// `origin` is gone: its stream and held deltas go (it starts a new epoch when it is back).
    pub fn forget(&mut self, origin: &str) {
        self.by_origin.remove(origin);
    }

    /// Deltas held for `origin`.
    pub fn held(&self, origin: &str) -> usize {
        self.by_origin.get(origin).map_or(0, |s| s.pending.len())
    }
}

fn may_ask(asked_at: Option<u64>, now_ms: u64) -> bool {
    !matches!(asked_at, Some(at) if now_ms.saturating_sub(at) < ASK_EVERY_MS)
}

#[cfg(test)]
#[path = "gossip_tests.rs"]
mod tests;
