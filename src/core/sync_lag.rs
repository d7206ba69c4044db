//! How far this node's registry copy is behind each peer's: the sync lag an operator alerts on.
//!
//! A peer's registry reaches this node as a stream of frames (deltas, full syncs, their parts,
//! gossip frames), handed to the Registry in the order they arrive. The lag of a peer is the
//! larger of two ages, so that an idle healthy cluster shows 0 and a stuck stream climbs:
//! - **frames waiting**: the age of the oldest frame from the peer that arrived and has not
//!   been handled yet (the Registry is behind its mailbox);
//! - **sync overdue**: how long the peer's stream is overdue for its next proof of being in
//!   sync. A full sync applied, a peer's sync digest that matches this node's copy of its
//!   bindings (every peer sends one every sync period, `core::sync_digest`), or a gossip round
//!   whose positions this node has caught up with,
//!   proves that everything the peer had sent is applied here. The next proof is due within
//!   [`grace_ms`] of the last; past that the lag grows by the time overdue. A peer whose frames
//!   are lost or never sent stops proving it, whatever else still arrives.
//!
//! Pure: time is an input (ms of the hub's monotonic clock), nothing here does IO.

use std::collections::{BTreeMap, VecDeque};

use crate::model::NodeName;

/// Distinct arrival times kept per peer for the frames waiting; past it a new frame is
/// counted with the newest kept time (an older time: the lag errs high, never low).
pub const MAX_WAITING_TIMES: usize = 1024;

/// How long after a peer's last proof of being in sync its next one is due: one and a half
/// sync periods, so a proof that comes a little late (a timer's jitter, a sync that took time
/// to build) shows no lag.
pub fn grace_ms(sync_period_ms: u64) -> u64 {
    sync_period_ms.saturating_add(sync_period_ms / 2)
}

/// One peer's stream as this node receives it.
#[derive(Clone, Debug, Default)]
struct Stream {
    /// The last proof that this node had applied everything the peer sent.
    in_sync_at: u64,
    /// Frames arrived and not yet handled, as `(arrival ms, how many)`, oldest first.
    waiting: VecDeque<(u64, u32)>,
}

/// Every peer's stream, for the sync lag.
#[derive(Clone, Debug, Default)]
pub struct SyncLag {
    peers: BTreeMap<NodeName, Stream>,
}

impl SyncLag {
    fn stream(&mut self, peer: &str, now_ms: u64) -> &mut Stream {
        if !self.peers.contains_key(peer) {
            // A peer first seen now: its first proof is due within the grace from now.
            self.peers.insert(
                peer.to_owned(),
                Stream {
                    in_sync_at: now_ms,
                    waiting: VecDeque::new(),
                },
            );
        }
        self.peers.get_mut(peer).expect("inserted above")
    }

    /// A registry frame from `peer` arrived at `now_ms` and was handed to the Registry.
    pub fn received(&mut self, peer: &str, now_ms: u64) {
        let waiting = &mut self.stream(peer, now_ms).waiting;
        let full = waiting.len() >= MAX_WAITING_TIMES;
        match waiting.back_mut() {
            Some((at, n)) if *at == now_ms || full => *n = n.saturating_add(1),
            _ => waiting.push_back((now_ms, 1)),
        }
    }

    /// The Registry handled the oldest waiting frame from `peer` (applied, held or refused).
    pub fn handled(&mut self, peer: &str) {
        let Some(stream) = self.peers.get_mut(peer) else {
            return;
        };
        if let Some((_, n)) = stream.waiting.front_mut() {
            *n -= 1;
            if *n == 0 {
                stream.waiting.pop_front();
            }
        }
    }

    /// Everything `peer` had sent is applied here, as of `now_ms` (a full sync applied, a
    /// gossip round caught up with).
    pub fn in_sync(&mut self, peer: &str, now_ms: u64) {
        let stream = self.stream(peer, now_ms);
        stream.in_sync_at = stream.in_sync_at.max(now_ms);
    }

    /// `peer` left or went down: its stream is forgotten (a new one starts when it is back).
    pub fn forget(&mut self, peer: &str) {
        self.peers.remove(peer);
    }

    /// The Registry restarted: the frames its mailbox held are gone, not waiting.
    pub fn registry_restarted(&mut self) {
        for stream in self.peers.values_mut() {
            stream.waiting.clear();
        }
    }

    /// The lag of `peer` at `now_ms`, in ms, with the proofs due within `grace_ms` of each
    /// other (see the module's docs). A peer not seen before starts being watched now, at 0.
    pub fn lag_ms(&mut self, peer: &str, now_ms: u64, grace_ms: u64) -> u64 {
        let stream = self.stream(peer, now_ms);
        let waiting = stream
            .waiting
            .front()
            .map_or(0, |(at, _)| now_ms.saturating_sub(*at));
        let overdue = now_ms.saturating_sub(stream.in_sync_at.saturating_add(grace_ms));
        waiting.max(overdue)
    }

    /// The peers watched.
    pub fn peers(&self) -> Vec<NodeName> {
        self.peers.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: u64 = 15_000;

    #[test]
    fn an_idle_peer_that_syncs_every_period_shows_no_lag() {
        let mut lag = SyncLag::default();
        let grace = grace_ms(PERIOD);
        lag.in_sync("b", 0);
        // An hour idle: a full sync every period (a little late sometimes), sampled every second.
        let mut next_sync = PERIOD;
        for now in (0..3_600_000u64).step_by(1_000) {
            if now >= next_sync {
                lag.received("b", now);
                lag.handled("b");
                lag.in_sync("b", now);
                next_sync = now + PERIOD + (now / 1_000 % 3) * 1_000;
            }
            assert_eq!(lag.lag_ms("b", now, grace), 0, "at {now} ms");
        }
    }

    #[test]
    fn a_peer_whose_syncs_stop_arriving_climbs_past_the_grace() {
        let mut lag = SyncLag::default();
        let grace = grace_ms(PERIOD);
        lag.in_sync("b", 10_000);
        assert_eq!(lag.lag_ms("b", 10_000 + grace, grace), 0);
        assert_eq!(lag.lag_ms("b", 10_000 + grace + 5_000, grace), 5_000);
        assert_eq!(lag.lag_ms("b", 10_000 + grace + 60_000, grace), 60_000);
        // Its next sync brings it back to 0.
        lag.in_sync("b", 100_000);
        assert_eq!(lag.lag_ms("b", 100_500, grace), 0);
    }

    #[test]
    fn frames_waiting_in_the_registry_count_from_the_oldest() {
        let mut lag = SyncLag::default();
        let grace = grace_ms(PERIOD);
        lag.in_sync("b", 0);
        lag.received("b", 1_000);
        lag.received("b", 1_000);
        lag.received("b", 2_000);
        assert_eq!(lag.lag_ms("b", 4_000, grace), 3_000);
        lag.handled("b");
        assert_eq!(
            lag.lag_ms("b", 4_000, grace),
            3_000,
            "one of two still waits"
        );
        lag.handled("b");
        assert_eq!(lag.lag_ms("b", 4_000, grace), 2_000);
        lag.handled("b");
        assert_eq!(lag.lag_ms("b", 4_000, grace), 0);
        // More handled than received (a frame counted before a restart) changes nothing.
        lag.handled("b");
        assert_eq!(lag.lag_ms("b", 4_000, grace), 0);
    }

    #[test]
    fn waiting_times_are_bounded_and_err_high() {
        let mut lag = SyncLag::default();
        for t in 0..(MAX_WAITING_TIMES as u64 * 3) {
            lag.received("b", t);
        }
        assert_eq!(lag.peers["b"].waiting.len(), MAX_WAITING_TIMES);
        let total: u32 = lag.peers["b"].waiting.iter().map(|(_, n)| n).sum();
        assert_eq!(total as usize, MAX_WAITING_TIMES * 3, "every frame counted");
        lag.registry_restarted();
        assert_eq!(lag.lag_ms("b", 10_000, grace_ms(PERIOD)), 0);
    }

    #[test]
    fn a_forgotten_peer_starts_again_at_zero() {
        let mut lag = SyncLag::default();
        let grace = grace_ms(PERIOD);
        lag.in_sync("b", 0);
        assert!(lag.lag_ms("b", 100_000, grace) > 0);
        lag.forget("b");
        assert_eq!(lag.lag_ms("b", 100_000, grace), 0);
        assert_eq!(lag.peers(), vec!["b".to_owned()]);
    }
}
