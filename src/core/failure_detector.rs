//! A heartbeat failure detector: decides from "when did I last hear from each peer" whether a
//! peer is alive, suspect, or down.
//!
//! ractor_cluster only notices a dead peer when TCP does; a half-open connection (a cable pulled,
//! a VM frozen) can linger for minutes. So every peer sends a heartbeat every `interval`, any
//! frame counts as a sign of life, and a peer silent for `suspect_after` is suspect (logged, not
//! acted on) and for `timeout` is down (the transport reports `NodeDown`).
//!
//! Pure: time is an input, the actor calls [`FailureDetector::tick`] on its own timer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::model::NodeName;

/// Heartbeat timing. Every node of a hub should use the same values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetectorConfig {
    /// How often each node sends a heartbeat. Default 500 ms.
    pub interval: Duration,
    /// Silence after which a peer is suspect. Default 2 × interval.
    pub suspect_after: Duration,
    /// Silence after which a peer is declared down. Default 5 s (10 missed heartbeats), so a GC
    /// pause or a busy core is not mistaken for a crash; a crashed process is noticed sooner by
    /// its TCP connection closing.
    pub timeout: Duration,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(500),
            suspect_after: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
        }
    }
}

/// The detector's opinion of one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerHealth {
    /// Heard within `suspect_after`.
    Alive,
    /// Silent for at least `suspect_after`.
    Suspect,
    /// Silent for at least `timeout`; stays down until heard again.
    Down,
}

/// A change of opinion returned by [`FailureDetector::tick`] or [`FailureDetector::heard`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChange {
    /// The peer.
    pub node: NodeName,
    /// Its health before.
    pub from: PeerHealth,
    /// Its health now.
    pub to: PeerHealth,
}

#[derive(Debug, Clone)]
struct Peer {
    last_heard: Instant,
    health: PeerHealth,
}

/// Last-heard times of the watched peers.
#[derive(Debug, Clone)]
pub struct FailureDetector {
    config: DetectorConfig,
    peers: BTreeMap<NodeName, Peer>,
}

impl FailureDetector {
    /// A detector watching nobody.
    pub fn new(config: DetectorConfig) -> Self {
        Self {
            config,
            peers: BTreeMap::new(),
        }
    }

    /// The timing in use.
    pub fn config(&self) -> &DetectorConfig {
        &self.config
    }

    /// Records a sign of life from `node` at `now`, starting to watch it if needed. Returns the
    /// change when the peer was suspect or down (a watched peer came back).
    pub fn heard(&mut self, node: &str, now: Instant) -> Option<HealthChange> {
        match self.peers.get_mut(node) {
            Some(peer) => {
                // Frames may be handled out of order; never move last_heard backwards.
                if now > peer.last_heard {
                    peer.last_heard = now;
                }
                let before = peer.health;
                peer.health = PeerHealth::Alive;
                (before != PeerHealth::Alive).then(|| HealthChange {
                    node: node.to_owned(),
                    from: before,
                    to: PeerHealth::Alive,
                })
            }
            None => {
                self.peers.insert(
                    node.to_owned(),
                    Peer {
                        last_heard: now,
                        health: PeerHealth::Alive,
                    },
                );
                None
            }
        }
    }

    /// Stops watching `node` (it left, or its connection closed and it was already reported).
    pub fn forget(&mut self, node: &str) {
        self.peers.remove(node);
    }

    /// The current opinion of `node`, `None` if not watched.
    pub fn health(&self, node: &str) -> Option<PeerHealth> {
        self.peers.get(node).map(|p| p.health)
    }

    /// Re-evaluates every peer at `now` and returns the changes (Alive→Suspect, →Down). A peer
    /// reported down is not reported again until it is heard.
    pub fn tick(&mut self, now: Instant) -> Vec<HealthChange> {
        let mut changes = Vec::new();
        for (node, peer) in &mut self.peers {
            let silent = now.saturating_duration_since(peer.last_heard);
            let health = if silent >= self.config.timeout {
                PeerHealth::Down
            } else if silent >= self.config.suspect_after {
                PeerHealth::Suspect
            } else {
                PeerHealth::Alive
            };
            if health != peer.health && peer.health != PeerHealth::Down {
                changes.push(HealthChange {
                    node: node.clone(),
                    from: peer.health,
                    to: health,
                });
                peer.health = health;
            }
        }
        changes
    }

    /// How long each watched peer has been silent at `now`, with its health.
    pub fn silences(
        &self,
        now: Instant,
    ) -> impl Iterator<Item = (&NodeName, Duration, PeerHealth)> {
        self.peers
            .iter()
            .map(move |(n, p)| (n, now.saturating_duration_since(p.last_heard), p.health))
    }

    /// Peers currently considered up (alive or suspect).
    pub fn up_peers(&self) -> impl Iterator<Item = &NodeName> {
        self.peers
            .iter()
            .filter(|(_, p)| p.health != PeerHealth::Down)
            .map(|(n, _)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> DetectorConfig {
        DetectorConfig {
            interval: Duration::from_millis(100),
            suspect_after: Duration::from_millis(250),
            timeout: Duration::from_millis(1_000),
        }
    }

    #[test]
    fn silent_peer_becomes_suspect_then_down_once() {
        let t0 = Instant::now();
        let mut fd = FailureDetector::new(config());
        assert_eq!(fd.heard("b", t0), None);
        assert!(fd.tick(t0 + Duration::from_millis(200)).is_empty());
        let changes = fd.tick(t0 + Duration::from_millis(300));
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].to, PeerHealth::Suspect);
        let changes = fd.tick(t0 + Duration::from_millis(1_000));
        assert_eq!(changes[0].from, PeerHealth::Suspect);
        assert_eq!(changes[0].to, PeerHealth::Down);
        assert!(fd.tick(t0 + Duration::from_secs(10)).is_empty());
        assert_eq!(fd.up_peers().count(), 0);
    }

    #[test]
    fn heartbeats_keep_a_peer_alive() {
        let t0 = Instant::now();
        let mut fd = FailureDetector::new(config());
        for i in 0..50u64 {
            let now = t0 + Duration::from_millis(i * 100);
            fd.heard("b", now);
            assert!(fd.tick(now + Duration::from_millis(50)).is_empty());
        }
        assert_eq!(fd.health("b"), Some(PeerHealth::Alive));
    }

    #[test]
    fn a_down_peer_heard_again_comes_back() {
        let t0 = Instant::now();
        let mut fd = FailureDetector::new(config());
        fd.heard("b", t0);
        fd.tick(t0 + Duration::from_secs(2));
        assert_eq!(fd.health("b"), Some(PeerHealth::Down));
        let back = fd.heard("b", t0 + Duration::from_secs(3)).unwrap();
        assert_eq!((back.from, back.to), (PeerHealth::Down, PeerHealth::Alive));
        // A late, older frame does not rewind the clock.
        fd.heard("b", t0);
        assert!(fd.tick(t0 + Duration::from_millis(3_100)).is_empty());
        fd.forget("b");
        assert_eq!(fd.health("b"), None);
    }
}
