//! Whether a node that was told whom to join has found anyone, and which of the peers that
//! reached it were refused for a wrong cookie.
//!
//! A node started with seeds and a cookie that matches nobody sees no member but itself, which
//! is also what a healthy single node sees: without this module its health says `ok` and a
//! readiness probe sends it traffic. [`SeedWatch`] tells the two apart: a node given seeds that
//! has had no authenticated peer session for longer than [`SeedWatch::isolated_after`] is
//! *isolated*, and names each seed it could not reach with the last reason
//! ([`SeedFailure`]). A node without seeds (a deliberate single node) is never isolated.
//!
//! ractor_cluster closes a session before authentication for two unrelated reasons: the peer's
//! cookie differs (a real misconfiguration), or two nodes dialled each other at once and its
//! election closed one of the two sessions (ordinary, and frequent when nodes start together).
//! Nothing in the closed session tells which. [`ClosesBeforeAuth`] decides later: a close is a
//! duplicate when an authenticated session to the same peer exists within
//! [`CLOSE_VERDICT_GRACE`] of it (the surviving twin authenticates within milliseconds), and a
//! refusal when none does. [`AuthRefusals`] counts the refusals per peer and says which one is
//! the first for its peer, so that it is logged once.
//!
//! Pure: time is an input; the membership actor of [`crate::cluster::node`] feeds it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a node given seeds may go without any authenticated peer before it reports itself
/// isolated, by default: two failure-detector timeouts (2 × 5 s), long enough for a node that
/// starts a little before its seeds, short enough that a probe stops routing to a node that
/// will never join.
pub const DEFAULT_ISOLATED_AFTER: Duration = Duration::from_secs(10);

/// How long after a session closed before authenticating an authenticated session to the same
/// peer still makes it a duplicate (the loser of a simultaneous dial) rather than a refusal.
pub const CLOSE_VERDICT_GRACE: Duration = Duration::from_secs(3);

/// The most peers whose refusals are counted apart (and logged once each): peers name
/// themselves, so without a bound a stream of names could grow the map without end. Refusals
/// beyond it still count in the total.
pub const MAX_REFUSED_PEERS: usize = 256;

/// Why a seed could not be reached, as health reports it (`reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SeedFailure {
    /// A session opened and the peer named itself, but it closed before authenticating: the
    /// cookies differ (`cookie_refused`).
    CookieRefused,
    /// The TCP connection could not be opened: nothing listens there, or the network drops it
    /// (`no_route`).
    NoRoute,
    /// The TLS handshake failed: a certificate, CA or server name that does not match (`tls`).
    Tls,
    /// Not tried yet, or a connection opened and no session authenticated on it yet
    /// (`unanswered`).
    Unanswered,
}

impl SeedFailure {
    /// The reason's code in health's `unreached_seeds`.
    pub fn code(self) -> &'static str {
        match self {
            SeedFailure::CookieRefused => "cookie_refused",
            SeedFailure::NoRoute => "no_route",
            SeedFailure::Tls => "tls",
            SeedFailure::Unanswered => "unanswered",
        }
    }
}

/// A seed an isolated node could not reach, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnreachedSeed {
    /// The seed as given (`host:port`).
    pub seed: String,
    /// The last reason.
    pub reason: SeedFailure,
    /// The last failure in words (an OS error, the peer that refused).
    pub detail: String,
}

/// What a node knows of its connection to the cluster, at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Connectivity {
    /// No seeds: a deliberate single node (or one that is only ever joined by others).
    Alone,
    /// At least one peer session is authenticated.
    Connected,
    /// Seeds given, no authenticated peer, but not for longer than the threshold yet.
    Joining {
        /// How long the node has had no peer.
        alone_for: Duration,
    },
    /// Seeds given and no authenticated peer for longer than the threshold.
    Isolated {
        /// How long the node has had no peer.
        alone_for: Duration,
        /// Every seed, with the last reason it was not reached.
        unreached: Vec<UnreachedSeed>,
    },
}

impl Connectivity {
    /// Whether the node reports itself isolated.
    pub fn is_isolated(&self) -> bool {
        matches!(self, Connectivity::Isolated { .. })
    }
}

/// The seeds of a node, the last reason each was not reached, and since when the node has had
/// no authenticated peer.
#[derive(Clone, Debug)]
pub struct SeedWatch {
    seeds: BTreeMap<String, Option<(SeedFailure, String)>>,
    isolated_after: Duration,
    /// Authenticated peer sessions at the last count.
    peers: usize,
    /// When the node last went without peers (its start, its last peer's loss, or its first
    /// seed found by discovery).
    alone_since: Instant,
}

impl SeedWatch {
    /// A node started at `now` with `seeds` (its own address already left out), isolated after
    /// `isolated_after` without a peer.
    pub fn new(
        seeds: impl IntoIterator<Item = String>,
        isolated_after: Duration,
        now: Instant,
    ) -> Self {
        Self {
            seeds: seeds.into_iter().map(|s| (s, None)).collect(),
            isolated_after,
            peers: 0,
            alone_since: now,
        }
    }

    /// A seed found by discovery at `now`; no effect when it is already a seed. The first seed
    /// of a node that was alone by design (DNS listed no other node) starts the isolation
    /// clock: the node was not failing to join while there was no one to join.
    pub fn add_seed(&mut self, seed: String, now: Instant) {
        if self.seeds.is_empty() && self.peers == 0 {
            self.alone_since = now;
        }
        self.seeds.entry(seed).or_insert(None);
    }

    /// A seed discovery no longer lists: it no longer counts for isolation.
    pub fn forget_seed(&mut self, seed: &str) {
        self.seeds.remove(seed);
    }

    /// The threshold in use.
    pub fn isolated_after(&self) -> Duration {
        self.isolated_after
    }

    /// Whether `target` is one of the seeds.
    pub fn is_seed(&self, target: &str) -> bool {
        self.seeds.contains_key(target)
    }

    /// The number of authenticated peer sessions, counted at `now`. Losing the last one starts
    /// the clock again.
    pub fn sessions(&mut self, authenticated: usize, now: Instant) {
        if self.peers > 0 && authenticated == 0 {
            self.alone_since = now;
        }
        self.peers = authenticated;
    }

    /// An attempt to reach `seed` failed for `failure`; ignored for a target that is not a seed.
    /// A later `Unanswered` does not hide an earlier, more precise reason.
    pub fn failed(&mut self, seed: &str, failure: SeedFailure, detail: impl Into<String>) {
        if let Some(last) = self.seeds.get_mut(seed) {
            if failure == SeedFailure::Unanswered && last.is_some() {
                return;
            }
            *last = Some((failure, detail.into()));
        }
    }

    /// `seed` has an authenticated session: its last failure is forgotten.
    pub fn reached(&mut self, seed: &str) {
        if let Some(last) = self.seeds.get_mut(seed) {
            *last = None;
        }
    }

    /// The node's connectivity at `now`.
    pub fn verdict(&self, now: Instant) -> Connectivity {
        if self.seeds.is_empty() {
            return Connectivity::Alone;
        }
        if self.peers > 0 {
            return Connectivity::Connected;
        }
        let alone_for = now.saturating_duration_since(self.alone_since);
        if alone_for <= self.isolated_after {
            return Connectivity::Joining { alone_for };
        }
        let unreached = self
            .seeds
            .iter()
            .map(|(seed, last)| {
                let (reason, detail) = last.clone().unwrap_or((
                    SeedFailure::Unanswered,
                    "no session with this seed authenticated yet".to_owned(),
                ));
                UnreachedSeed {
                    seed: seed.clone(),
                    reason,
                    detail,
                }
            })
            .collect();
        Connectivity::Isolated {
            alone_for,
            unreached,
        }
    }
}

/// What a node reports about its connection to the cluster (health, `/metrics`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionReport {
    /// Whether it is connected, joining, alone by design, or isolated.
    pub connectivity: Connectivity,
    /// Peers refused for a wrong cookie since it started.
    pub auth_refusals: AuthRefusals,
}

/// Peers refused for a wrong cookie: a total, and a count per peer (bounded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthRefusals {
    total: u64,
    per_peer: BTreeMap<String, u64>,
}

impl AuthRefusals {
    /// Counts one refusal of `peer`; `true` when it is the first of that peer (the one to log
    /// loudly).
    pub fn refused(&mut self, peer: &str) -> bool {
        self.total += 1;
        if let Some(n) = self.per_peer.get_mut(peer) {
            *n += 1;
            return false;
        }
        if self.per_peer.len() >= MAX_REFUSED_PEERS {
            return false;
        }
        self.per_peer.insert(peer.to_owned(), 1);
        true
    }

    /// Refusals since the node started.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Refusals per peer (the first [`MAX_REFUSED_PEERS`] peers).
    pub fn per_peer(&self) -> &BTreeMap<String, u64> {
        &self.per_peer
    }
}

/// A session that closed before authenticating, after its peer named itself.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingClose {
    peer: String,
    seed: Option<String>,
    at: Instant,
}

/// What a close before authentication turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseVerdict {
    /// Another session to the same peer authenticated: the loser of a simultaneous dial.
    Duplicate {
        /// The peer's name.
        peer: String,
    },
    /// No session to the peer authenticated within the grace: its cookie differs.
    Refused {
        /// The peer's name (as it claimed it: unauthenticated).
        peer: String,
        /// The seed the session was dialled to, if it was.
        seed: Option<String>,
    },
}

/// Closes before authentication awaiting their verdict (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct ClosesBeforeAuth {
    pending: Vec<PendingClose>,
}

/// The most closes awaiting a verdict: more are judged at once as refusals would be, oldest
/// first (a peer that dials in a loop must not grow the list).
const MAX_PENDING_CLOSES: usize = 1024;

impl ClosesBeforeAuth {
    /// A session to `peer` (dialled to `seed`, if it was) closed before authenticating at `at`.
    pub fn closed(&mut self, peer: String, seed: Option<String>, at: Instant) {
        // One pending close per peer and seed is enough to reach a verdict.
        if self
            .pending
            .iter()
            .any(|p| p.peer == peer && p.seed == seed)
        {
            return;
        }
        if self.pending.len() >= MAX_PENDING_CLOSES {
            self.pending.remove(0);
        }
        self.pending.push(PendingClose { peer, seed, at });
    }

    /// Whether no close awaits a verdict.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The verdicts reached at `now`: `authenticated(peer)` says whether an authenticated
    /// session to `peer` exists now. A close with such a session is a duplicate; one without it
    /// for longer than `grace` a refusal; the others wait.
    pub fn judge(
        &mut self,
        now: Instant,
        grace: Duration,
        authenticated: impl Fn(&str) -> bool,
    ) -> Vec<CloseVerdict> {
        let mut verdicts = Vec::new();
        self.pending.retain(|p| {
            if authenticated(&p.peer) {
                verdicts.push(CloseVerdict::Duplicate {
                    peer: p.peer.clone(),
                });
                false
            } else if now.saturating_duration_since(p.at) >= grace {
                verdicts.push(CloseVerdict::Refused {
                    peer: p.peer.clone(),
                    seed: p.seed.clone(),
                });
                false
            } else {
                true
            }
        });
        verdicts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_secs(10);

    fn watch(seeds: &[&str], t0: Instant) -> SeedWatch {
        SeedWatch::new(seeds.iter().map(|s| (*s).to_owned()), AFTER, t0)
    }

    #[test]
    fn discovered_seeds_come_and_go_and_the_first_starts_the_isolation_clock() {
        let t0 = Instant::now();
        let mut w = watch(&[], t0);
        // DNS lists no other node for an hour: alone by design, not isolated.
        let hour = t0 + Duration::from_secs(3600);
        assert_eq!(w.verdict(hour), Connectivity::Alone);
        // Then a seed appears: joining from then on, isolated only after the threshold.
        w.add_seed("10.233.0.2:7100".into(), hour);
        assert!(matches!(w.verdict(hour), Connectivity::Joining { .. }));
        let later = hour + AFTER + Duration::from_secs(1);
        w.failed("10.233.0.2:7100", SeedFailure::NoRoute, "refused");
        match w.verdict(later) {
            Connectivity::Isolated { unreached, .. } => {
                assert_eq!(unreached.len(), 1);
                assert_eq!(unreached[0].reason, SeedFailure::NoRoute);
            }
            other => panic!("{other:?}"),
        }
        // A second seed does not restart the clock.
        w.add_seed("10.233.0.3:7100".into(), later);
        assert!(w.verdict(later).is_isolated());
        // Forgotten seeds no longer count; with none left the node is alone again.
        w.forget_seed("10.233.0.2:7100");
        assert!(!w.is_seed("10.233.0.2:7100"));
        w.forget_seed("10.233.0.3:7100");
        assert_eq!(w.verdict(later), Connectivity::Alone);
    }

    #[test]
    fn a_node_without_seeds_is_never_isolated() {
        let t0 = Instant::now();
        let w = watch(&[], t0);
        assert_eq!(w.verdict(t0 + AFTER * 100), Connectivity::Alone);
    }

    #[test]
    fn a_node_whose_seeds_never_answer_is_isolated_after_the_threshold_with_reasons() {
        let t0 = Instant::now();
        let mut w = watch(&["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], t0);
        w.failed("127.0.0.1:1", SeedFailure::NoRoute, "connection refused");
        w.failed("127.0.0.1:2", SeedFailure::Unanswered, "tcp connected");
        w.failed("127.0.0.1:2", SeedFailure::CookieRefused, "n2 closed");
        // A vaguer reason does not hide the precise one.
        w.failed("127.0.0.1:2", SeedFailure::Unanswered, "tcp connected");
        w.failed("10.0.0.9:9", SeedFailure::Tls, "not a seed: ignored");
        assert!(matches!(
            w.verdict(t0 + AFTER),
            Connectivity::Joining { .. }
        ));
        let Connectivity::Isolated {
            alone_for,
            unreached,
        } = w.verdict(t0 + AFTER + Duration::from_millis(1))
        else {
            panic!("not isolated");
        };
        assert!(alone_for > AFTER);
        let reasons: Vec<(&str, SeedFailure)> = unreached
            .iter()
            .map(|u| (u.seed.as_str(), u.reason))
            .collect();
        assert_eq!(
            reasons,
            vec![
                ("127.0.0.1:1", SeedFailure::NoRoute),
                ("127.0.0.1:2", SeedFailure::CookieRefused),
                ("127.0.0.1:3", SeedFailure::Unanswered),
            ]
        );
        assert_eq!(unreached[1].detail, "n2 closed");
    }

    #[test]
    fn a_peer_ends_isolation_and_losing_the_last_one_restarts_the_clock() {
        let t0 = Instant::now();
        let mut w = watch(&["s:1"], t0);
        w.failed("s:1", SeedFailure::NoRoute, "refused");
        let late = t0 + AFTER * 3;
        assert!(w.verdict(late).is_isolated());
        w.sessions(1, late);
        w.reached("s:1");
        assert_eq!(w.verdict(late), Connectivity::Connected);
        let lost = late + Duration::from_secs(1);
        w.sessions(0, lost);
        assert!(
            matches!(w.verdict(lost + AFTER), Connectivity::Joining { .. }),
            "the clock starts at the loss, not at the start"
        );
        let Connectivity::Isolated { unreached, .. } =
            w.verdict(lost + AFTER + Duration::from_secs(1))
        else {
            panic!("isolated again");
        };
        assert_eq!(
            unreached[0].reason,
            SeedFailure::Unanswered,
            "forgotten once reached"
        );
        assert_eq!(SeedFailure::CookieRefused.code(), "cookie_refused");
        assert_eq!(SeedFailure::NoRoute.code(), "no_route");
        assert_eq!(SeedFailure::Tls.code(), "tls");
    }

    #[test]
    fn refusals_are_counted_per_peer_and_the_first_of_each_is_flagged() {
        let mut r = AuthRefusals::default();
        assert!(r.refused("x@h"));
        assert!(!r.refused("x@h"));
        assert!(r.refused("y@h"));
        assert_eq!(r.total(), 3);
        assert_eq!(r.per_peer().get("x@h"), Some(&2));
        for i in 0..MAX_REFUSED_PEERS * 2 {
            r.refused(&format!("p{i}"));
        }
        assert_eq!(r.per_peer().len(), MAX_REFUSED_PEERS, "bounded");
        assert_eq!(r.total(), 3 + 2 * MAX_REFUSED_PEERS as u64);
    }

    #[test]
    fn a_close_is_a_duplicate_when_its_twin_authenticates_and_a_refusal_otherwise() {
        let t0 = Instant::now();
        let grace = CLOSE_VERDICT_GRACE;
        let mut closes = ClosesBeforeAuth::default();
        closes.closed("twin@h".into(), None, t0);
        closes.closed("wrong@h".into(), Some("s:1".into()), t0);
        closes.closed("wrong@h".into(), Some("s:1".into()), t0);
        let up = |peer: &str| peer == "twin@h";
        assert_eq!(
            closes.judge(t0, grace, up),
            vec![CloseVerdict::Duplicate {
                peer: "twin@h".into()
            }]
        );
        assert!(
            closes.judge(t0 + grace / 2, grace, up).is_empty(),
            "waits for the grace"
        );
        assert_eq!(
            closes.judge(t0 + grace, grace, up),
            vec![CloseVerdict::Refused {
                peer: "wrong@h".into(),
                seed: Some("s:1".into())
            }],
            "one verdict for repeated closes of one peer and seed"
        );
        assert!(closes.is_empty());
    }
}
