//! What a node does with one DNS answer: which addresses become seeds it dials, and which
//! seeds it forgets because DNS no longer lists them.
//!
//! DNS says where nodes *might* be; it is not a membership authority. A record that disappears
//! may be a pod rescheduling, a headless service briefly without ready endpoints, or a slow
//! zone transfer, while the node behind it still runs and answers heartbeats. So the plan has
//! two verbs only, *dial* and *forget* (stop dialling), and no verb for disconnecting: a member
//! DNS lost keeps its session, and leaves the cluster only when the failure detector and the
//! reachability rules say so. An address DNS dropped that still has a session *lingers*: it
//! stays a known peer, reconnected like any other, until DNS lists it again (it is a seed
//! again) or its session is gone at a later answer (it is forgotten then, so that the
//! addresses of pods long replaced are not dialled forever). One without a session is
//! forgotten at once.
//!
//! The answer is untrusted input: it is deduplicated, this node's own addresses and the static
//! seeds are taken out, and at most [`MAX_SEEDS_PER_ANSWER`] addresses are taken from it (the
//! lowest, so that every node keeps the same ones).
//!
//! Pure: the discovery task of [`crate::cluster::node`] resolves, the membership actor gives
//! what it knows of the sessions, and carries the plan out.

use std::collections::BTreeSet;
use std::net::SocketAddr;

/// The most addresses taken from one DNS answer: a zone can list any number of records, and
/// each becomes a connection the node keeps trying.
pub const MAX_SEEDS_PER_ANSWER: usize = 256;

/// What the node knows when an answer arrives.
#[derive(Debug, Clone, Copy)]
pub struct DiscoveryView<'a> {
    /// The seeds found through DNS so far (the result of the previous plan).
    pub discovered: &'a BTreeSet<SocketAddr>,
    /// The seeds given statically (`--join`, [`ClusterConfig::seeds`](crate::ClusterConfig)):
    /// never forgotten because of DNS.
    pub static_seeds: &'a BTreeSet<SocketAddr>,
    /// Addresses that reach this node itself.
    pub own: &'a [SocketAddr],
    /// Addresses DNS dropped while they had a session (the result of the previous plan).
    pub lingering: &'a BTreeSet<SocketAddr>,
    /// Discovered and lingering addresses that have an authenticated session now.
    pub connected: &'a BTreeSet<SocketAddr>,
}

/// What to do with one DNS answer. There is deliberately no "disconnect": see the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoveryPlan {
    /// The discovered seeds after this answer.
    pub discovered: BTreeSet<SocketAddr>,
    /// New seeds: start dialling them (the same path as a static seed).
    pub dial: Vec<SocketAddr>,
    /// Seeds DNS dropped that have no session, and lingering addresses whose session is gone:
    /// stop dialling them.
    pub forget: Vec<SocketAddr>,
    /// Seeds DNS dropped that are still connected: they leave the seed set but stay known
    /// peers, reconnected like any peer this node has had; nothing closes their session.
    pub keep_as_peer: Vec<SocketAddr>,
    /// The addresses lingering after this answer (kept as peers, not in DNS).
    pub lingering: BTreeSet<SocketAddr>,
    /// Addresses of the answer left out beyond [`MAX_SEEDS_PER_ANSWER`].
    pub truncated: usize,
}

/// The plan for `answer` (every address one resolution returned, in any order, duplicates
/// allowed) given `view`.
pub fn plan(view: DiscoveryView<'_>, answer: &[SocketAddr]) -> DiscoveryPlan {
    let candidates: BTreeSet<SocketAddr> = answer
        .iter()
        .copied()
        .filter(|a| !view.own.contains(a) && !view.static_seeds.contains(a))
        .collect();
    let truncated = candidates.len().saturating_sub(MAX_SEEDS_PER_ANSWER);
    let discovered: BTreeSet<SocketAddr> =
        candidates.into_iter().take(MAX_SEEDS_PER_ANSWER).collect();
    let dial = discovered
        .difference(view.discovered)
        .copied()
        .collect::<Vec<_>>();
    let (keep_as_peer, mut forget): (Vec<SocketAddr>, Vec<SocketAddr>) = view
        .discovered
        .difference(&discovered)
        .copied()
        .partition(|a| view.connected.contains(a));
    let mut lingering: BTreeSet<SocketAddr> = keep_as_peer.iter().copied().collect();
    for addr in view.lingering.difference(&discovered) {
        if view.connected.contains(addr) {
            lingering.insert(*addr);
        } else {
            forget.push(*addr);
        }
    }
    forget.sort();
    DiscoveryPlan {
        discovered,
        dial,
        forget,
        keep_as_peer,
        lingering,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([10, 233, 0, last], 7100))
    }

    fn set(lasts: &[u8]) -> BTreeSet<SocketAddr> {
        lasts.iter().map(|l| addr(*l)).collect()
    }

    static NONE: BTreeSet<SocketAddr> = BTreeSet::new();

    fn view<'a>(
        discovered: &'a BTreeSet<SocketAddr>,
        static_seeds: &'a BTreeSet<SocketAddr>,
        own: &'a [SocketAddr],
        connected: &'a BTreeSet<SocketAddr>,
    ) -> DiscoveryView<'a> {
        DiscoveryView {
            discovered,
            static_seeds,
            own,
            lingering: &NONE,
            connected,
        }
    }

    #[test]
    fn the_first_answer_dials_every_address_but_the_node_itself() {
        let (none, own) = (BTreeSet::new(), [addr(1)]);
        let p = plan(
            view(&none, &none, &own, &none),
            &[addr(3), addr(1), addr(2), addr(3)],
        );
        assert_eq!(p.dial, vec![addr(2), addr(3)]);
        assert_eq!(p.discovered, set(&[2, 3]));
        assert!(p.forget.is_empty() && p.keep_as_peer.is_empty());
        assert_eq!(p.truncated, 0);
    }

    #[test]
    fn a_new_record_is_dialled_once_and_known_ones_are_not_dialled_again() {
        let (discovered, none, own) = (set(&[2, 3]), BTreeSet::new(), [addr(1)]);
        let p = plan(
            view(&discovered, &none, &own, &none),
            &[addr(1), addr(2), addr(3), addr(4)],
        );
        assert_eq!(p.dial, vec![addr(4)]);
        assert_eq!(p.discovered, set(&[2, 3, 4]));
    }

    #[test]
    fn a_dropped_record_leaves_the_seeds_but_a_connected_member_stays_a_peer() {
        let (discovered, none, own) = (set(&[2, 3, 4]), BTreeSet::new(), [addr(1)]);
        let connected = set(&[2, 3, 4]);
        // DNS lost 2 (still connected) and 4 (still connected); 3 stays.
        let p = plan(view(&discovered, &none, &own, &connected), &[addr(3)]);
        assert_eq!(p.discovered, set(&[3]));
        assert_eq!(p.keep_as_peer, vec![addr(2), addr(4)]);
        assert!(p.forget.is_empty(), "a connected member is never forgotten");
        assert!(p.dial.is_empty());
    }

    #[test]
    fn a_dropped_record_without_a_session_is_no_longer_dialled() {
        let (discovered, none, own) = (set(&[2, 3]), BTreeSet::new(), [addr(1)]);
        let connected = set(&[3]);
        let p = plan(view(&discovered, &none, &own, &connected), &[]);
        assert_eq!(p.forget, vec![addr(2)]);
        assert_eq!(p.keep_as_peer, vec![addr(3)]);
        assert!(p.discovered.is_empty());
    }

    #[test]
    fn static_seeds_are_neither_discovered_nor_forgotten() {
        let (none, own) = (BTreeSet::new(), [addr(1)]);
        let static_seeds = set(&[2]);
        let p = plan(view(&none, &static_seeds, &own, &none), &[addr(2), addr(3)]);
        assert_eq!(p.dial, vec![addr(3)]);
        assert_eq!(p.discovered, set(&[3]));
        // DNS dropping every record leaves the static seed alone: it was never DNS's.
        let p = plan(view(&p.discovered, &static_seeds, &own, &none), &[]);
        assert_eq!(p.forget, vec![addr(3)]);
        assert!(!p.forget.contains(&addr(2)) && !p.keep_as_peer.contains(&addr(2)));
    }

    #[test]
    fn an_answer_is_bounded_to_the_same_lowest_addresses_on_every_node() {
        let (none, own) = (BTreeSet::new(), [addr(1)]);
        let answer: Vec<SocketAddr> = (0..=(MAX_SEEDS_PER_ANSWER as u32 + 40))
            .rev()
            .map(|i| SocketAddr::from(([10, 233, (i / 256) as u8, (i % 256) as u8], 7100)))
            .collect();
        let p = plan(view(&none, &none, &own, &none), &answer);
        assert_eq!(p.discovered.len(), MAX_SEEDS_PER_ANSWER);
        assert_eq!(p.dial.len(), MAX_SEEDS_PER_ANSWER);
        // 297 addresses, one of which is the node itself.
        assert_eq!(p.truncated, answer.len() - 1 - MAX_SEEDS_PER_ANSWER);
        let lowest: BTreeSet<SocketAddr> = answer
            .iter()
            .copied()
            .filter(|a| *a != addr(1))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .take(MAX_SEEDS_PER_ANSWER)
            .collect();
        assert_eq!(p.discovered, lowest);
    }

    #[test]
    fn a_lingering_peer_is_forgotten_once_its_session_is_gone_or_a_seed_again_when_listed() {
        let own = [addr(1)];
        let (discovered, connected) = (set(&[2, 3]), set(&[2, 3]));
        // DNS drops 2 while it is connected: it lingers.
        let p = plan(view(&discovered, &NONE, &own, &connected), &[addr(3)]);
        assert_eq!(p.lingering, set(&[2]));
        assert!(p.forget.is_empty());
        // Still connected at the next answer: it goes on lingering, nothing is dialled.
        let v = DiscoveryView {
            lingering: &p.lingering,
            ..view(&p.discovered, &NONE, &own, &connected)
        };
        let q = plan(v, &[addr(3)]);
        assert_eq!(q.lingering, set(&[2]));
        assert!(q.forget.is_empty() && q.dial.is_empty() && q.keep_as_peer.is_empty());
        // Its session gone (the pod replaced): forgotten, no longer dialled.
        let only_3 = set(&[3]);
        let v = DiscoveryView {
            lingering: &q.lingering,
            ..view(&q.discovered, &NONE, &own, &only_3)
        };
        let r = plan(v, &[addr(3)]);
        assert_eq!(r.forget, vec![addr(2)]);
        assert!(r.lingering.is_empty());
        // Listed again while lingering: a seed again, no longer lingering.
        let v = DiscoveryView {
            lingering: &q.lingering,
            ..view(&q.discovered, &NONE, &own, &connected)
        };
        let s = plan(v, &[addr(2), addr(3)]);
        assert_eq!(s.discovered, set(&[2, 3]));
        assert!(s.lingering.is_empty() && s.forget.is_empty());
    }

    #[test]
    fn no_sequence_of_answers_ever_forgets_a_connected_address() {
        // Every answer drawn from subsets of five addresses, in sequence, with the sessions
        // changing too: an address is forgotten only when it has no session, and every address
        // DNS dropped is either forgotten or lingers.
        let own = [addr(1)];
        let mut discovered = BTreeSet::new();
        let mut lingering = BTreeSet::new();
        for (step, mask) in (0u8..32).chain((0u8..32).rev()).enumerate() {
            let answer: Vec<SocketAddr> = (0..5)
                .filter(|bit| mask & (1 << bit) != 0)
                .map(|bit| addr(bit + 1))
                .collect();
            let connected = if step % 3 == 0 {
                set(&[2, 4])
            } else {
                set(&[2, 3, 5])
            };
            let v = DiscoveryView {
                lingering: &lingering,
                ..view(&discovered, &NONE, &own, &connected)
            };
            let p = plan(v, &answer);
            for a in &p.forget {
                assert!(!connected.contains(a), "{a} forgotten while connected");
            }
            for a in discovered.union(&lingering) {
                if !p.discovered.contains(a) {
                    assert!(p.forget.contains(a) != p.lingering.contains(a), "{a}");
                }
            }
            assert!(p.lingering.is_disjoint(&p.discovered));
            assert!(!p.discovered.contains(&addr(1)));
            discovered = p.discovered;
            lingering = p.lingering;
        }
    }
}
