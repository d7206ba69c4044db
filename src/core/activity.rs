//! What a node tells the dashboard about itself: the last ten minutes of its starts, stops,
//! restarts and failovers in ten-second buckets ([`ActivityHistory`]), the peers it saw go down
//! ([`DepartedNodes`]), and the figures a member answers a peer's summary query with
//! ([`NodeSummary`]), checked like any peer input ([`NodeSummary::validate`]).
//!
//! Kept on the node rather than in the page, so that a page opened a minute ago shows the same
//! ten minutes as one open for an hour, and so that one page sees every member's history
//! through the node it is served by. Time is an input: the event bus passes its clock's time,
//! so the simulator's runs stay exact.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::core::reachability::MAX_NAME_BYTES;
use crate::model::NodeName;

/// The width of one bucket of the history.
pub const BUCKET_MS: u64 = 10_000;

/// How many buckets the history keeps: ten minutes.
pub const BUCKETS: usize = 60;

/// How many departed peers a node remembers (the oldest departure is forgotten first).
pub const MAX_DEPARTED: usize = 64;

/// The longest status or state string a peer's summary may carry.
pub const MAX_STATUS_BYTES: usize = 32;

/// What the history counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// A child's first start on this node.
    Start,
    /// A child stopped on request (or moved away).
    Stop,
    /// A child restarted by its supervisor.
    Restart,
    /// A child of a node that is gone, started again on this node.
    Failover,
}

impl Activity {
    fn index(self) -> usize {
        match self {
            Activity::Start => 0,
            Activity::Stop => 1,
            Activity::Restart => 2,
            Activity::Failover => 3,
        }
    }
}

/// Counts since the node started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityTotals {
    /// Children started here.
    pub starts: u64,
    /// Children stopped here.
    pub stops: u64,
    /// Children restarted here.
    pub restarts: u64,
    /// Children of departed nodes started again on this node.
    pub failovers: u64,
}

/// The last [`BUCKETS`] buckets of the history, oldest first, the last one being the bucket
/// `at_ms` falls in (still filling).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivitySeries {
    /// The width of a bucket.
    pub bucket_ms: u64,
    /// Where the last bucket ends (ms since the Unix epoch).
    pub end_ms: u64,
    /// Starts per bucket.
    pub starts: Vec<u32>,
    /// Stops per bucket.
    pub stops: Vec<u32>,
    /// Restarts per bucket.
    pub restarts: Vec<u32>,
    /// Failovers per bucket.
    pub failovers: Vec<u32>,
}

/// A ring of per-bucket counts: memory bounded by [`BUCKETS`], whatever the event rate.
#[derive(Clone, Debug, Default)]
pub struct ActivityHistory {
    /// `(bucket index, counts)`, in increasing index, at most [`BUCKETS`].
    buckets: VecDeque<(u64, [u32; 4])>,
    totals: [u64; 4],
}

impl ActivityHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one `what` at `now_ms`. A time before the newest bucket (a clock stepped back)
    /// counts in the newest bucket, so nothing is lost.
    pub fn note(&mut self, what: Activity, now_ms: u64) {
        let index = now_ms / BUCKET_MS;
        self.totals[what.index()] = self.totals[what.index()].saturating_add(1);
        match self.buckets.back_mut() {
            Some((last, counts)) if *last >= index => {
                counts[what.index()] = counts[what.index()].saturating_add(1);
            }
            _ => {
                let mut counts = [0; 4];
                counts[what.index()] = 1;
                self.buckets.push_back((index, counts));
            }
        }
        while self
            .buckets
            .front()
            .is_some_and(|(first, _)| first + (BUCKETS as u64) <= index)
        {
            self.buckets.pop_front();
        }
    }

    /// The counts since the history began.
    pub fn totals(&self) -> ActivityTotals {
        let [starts, stops, restarts, failovers] = self.totals;
        ActivityTotals {
            starts,
            stops,
            restarts,
            failovers,
        }
    }

    /// The [`BUCKETS`] buckets ending with the one `now_ms` falls in.
    pub fn series(&self, now_ms: u64) -> ActivitySeries {
        let last = now_ms / BUCKET_MS;
        let first = (last + 1).saturating_sub(BUCKETS as u64);
        let mut columns = [
            vec![0u32; BUCKETS],
            vec![0u32; BUCKETS],
            vec![0u32; BUCKETS],
            vec![0u32; BUCKETS],
        ];
        for (index, counts) in &self.buckets {
            if *index < first || *index > last {
                continue;
            }
            // `first` may be 0 near the epoch: the columns then start at bucket 0.
            let at =
                (*index - first) as usize + BUCKETS.saturating_sub((last + 1 - first) as usize);
            for (column, n) in columns.iter_mut().zip(counts) {
                column[at] = *n;
            }
        }
        let [starts, stops, restarts, failovers] = columns;
        ActivitySeries {
            bucket_ms: BUCKET_MS,
            end_ms: (last + 1) * BUCKET_MS,
            starts,
            stops,
            restarts,
            failovers,
        }
    }
}

/// Peers this node saw go down and not come back, with when: a member that is gone from the
/// membership still shows on the dashboard as `down` rather than vanishing.
#[derive(Clone, Debug, Default)]
pub struct DepartedNodes {
    /// Node -> when it went down (ms since the Unix epoch).
    nodes: BTreeMap<NodeName, u64>,
}

impl DepartedNodes {
    /// Nobody departed.
    pub fn new() -> Self {
        Self::default()
    }

    /// `node` went down at `at_ms` (a later `NodeDown` or `NodeLeft` keeps the first time).
    pub fn down(&mut self, node: &str, at_ms: u64) {
        if self.nodes.contains_key(node) {
            return;
        }
        if self.nodes.len() >= MAX_DEPARTED {
            let oldest = self
                .nodes
                .iter()
                .min_by_key(|(name, at)| (**at, (*name).clone()))
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                self.nodes.remove(&oldest);
            }
        }
        self.nodes.insert(node.to_owned(), at_ms);
    }

    /// `node` is up again.
    pub fn up(&mut self, node: &str) {
        self.nodes.remove(node);
    }

    /// The departed nodes by name, each with when it went down.
    pub fn list(&self) -> Vec<(NodeName, u64)> {
        self.nodes.iter().map(|(n, at)| (n.clone(), *at)).collect()
    }
}

/// A member's figures, as it answers a peer's summary query (`WireMsg::SummaryReply`) and as
/// `GET /v1/cluster` shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// The member.
    pub node: NodeName,
    /// When it made the summary (ms since the Unix epoch, its clock).
    pub at_ms: u64,
    /// Its health status, as its `GET /v1/health` says (`ok`, `degraded`, `isolated`,
    /// `partitioned`, `set_aside`).
    pub status: String,
    /// `recovering` or `normal`.
    pub recovery_state: String,
    /// Its declared list is parked.
    pub parked: bool,
    /// Members it sees, itself included.
    pub members: u64,
    /// Children its registry copy binds to it.
    pub children: u64,
    /// Rows in its registry copy.
    pub registry_rows: u64,
    /// Rows no node runs.
    pub unbound_rows: u64,
    /// Children in its copy of the declared list (`None` without auto-recovery).
    pub declared: Option<u64>,
    /// What its Coordinator still owes the cluster.
    pub pending_work: u64,
    /// Peer input it refused since it started.
    pub refused_peer_input: u64,
    /// Its counts since it started.
    pub totals: ActivityTotals,
    /// Its last ten minutes.
    pub history: ActivitySeries,
}

impl NodeSummary {
    /// Checks what a peer's summary could carry beyond the bounds a dashboard can show: a
    /// name, status strings and a history of bounded length. A summary that fails is refused.
    pub fn validate(&self) -> Result<(), String> {
        if self.node.is_empty() || self.node.len() > MAX_NAME_BYTES {
            return Err(format!("a node name of {} bytes", self.node.len()));
        }
        for (what, text) in [
            ("status", &self.status),
            ("recovery_state", &self.recovery_state),
        ] {
            if text.len() > MAX_STATUS_BYTES
                || !text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            {
                return Err(format!("{what} is not a short snake_case word"));
            }
        }
        let h = &self.history;
        if h.bucket_ms == 0 || h.bucket_ms > 3_600_000 {
            return Err(format!("a history bucket of {} ms", h.bucket_ms));
        }
        for column in [&h.starts, &h.stops, &h.restarts, &h.failovers] {
            if column.len() > BUCKETS {
                return Err(format!(
                    "a history of {} buckets, at most {BUCKETS}",
                    column.len()
                ));
            }
        }
        Ok(())
    }
}

/// The health a dashboard shows for a node: `down` when this node considers it down,
/// `unreachable` when it is a member that did not answer, else what it answered (`recovering`
/// when it is `ok` but its first reconcile round has not completed).
pub fn shown_health(down: bool, answer: Option<&NodeSummary>) -> String {
    match (down, answer) {
        (true, _) => "down".into(),
        (false, None) => "unreachable".into(),
        (false, Some(s)) if s.status == "ok" && s.recovery_state == "recovering" => {
            "recovering".into()
        }
        (false, Some(s)) => s.status.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;

    #[test]
    fn counts_land_in_their_bucket_and_the_series_ends_now() {
        let mut h = ActivityHistory::new();
        h.note(Activity::Start, T0);
        h.note(Activity::Start, T0 + 1);
        h.note(Activity::Restart, T0 + BUCKET_MS);
        h.note(Activity::Failover, T0 + 3 * BUCKET_MS);
        let s = h.series(T0 + 3 * BUCKET_MS);
        assert_eq!(s.starts.len(), BUCKETS);
        assert_eq!(s.starts[BUCKETS - 4], 2);
        assert_eq!(s.restarts[BUCKETS - 3], 1);
        assert_eq!(s.failovers[BUCKETS - 1], 1);
        assert_eq!(s.stops.iter().sum::<u32>(), 0);
        assert_eq!(s.end_ms, (T0 / BUCKET_MS + 4) * BUCKET_MS);
        assert_eq!(
            h.totals(),
            ActivityTotals {
                starts: 2,
                stops: 0,
                restarts: 1,
                failovers: 1
            }
        );
    }

    #[test]
    fn buckets_older_than_ten_minutes_leave_the_series_and_the_ring() {
        let mut h = ActivityHistory::new();
        h.note(Activity::Stop, T0);
        let later = T0 + BUCKETS as u64 * BUCKET_MS;
        assert_eq!(
            h.series(later).stops.iter().sum::<u32>(),
            0,
            "out of the window"
        );
        assert_eq!(
            h.series(later - BUCKET_MS).stops[0],
            1,
            "the oldest bucket shown"
        );
        for i in 0..10 * BUCKETS as u64 {
            h.note(Activity::Start, T0 + i * BUCKET_MS);
        }
        assert!(
            h.buckets.len() <= BUCKETS,
            "{} buckets kept",
            h.buckets.len()
        );
        assert_eq!(
            h.totals().starts,
            10 * BUCKETS as u64,
            "totals keep counting"
        );
    }

    #[test]
    fn a_clock_stepped_back_counts_in_the_newest_bucket() {
        let mut h = ActivityHistory::new();
        h.note(Activity::Start, T0 + 5 * BUCKET_MS);
        h.note(Activity::Start, T0);
        let s = h.series(T0 + 5 * BUCKET_MS);
        assert_eq!(s.starts[BUCKETS - 1], 2);
    }

    #[test]
    fn near_the_epoch_the_series_is_still_full_length() {
        let mut h = ActivityHistory::new();
        h.note(Activity::Start, 0);
        let s = h.series(BUCKET_MS);
        assert_eq!(s.starts.len(), BUCKETS);
        assert_eq!(s.starts[BUCKETS - 2], 1);
    }

    #[test]
    fn departed_nodes_are_bounded_and_forget_a_node_that_came_back() {
        let mut d = DepartedNodes::new();
        d.down("b@h", 10);
        d.down("b@h", 20);
        assert_eq!(
            d.list(),
            vec![("b@h".to_owned(), 10)],
            "the first time stays"
        );
        d.up("b@h");
        assert!(d.list().is_empty());
        for i in 0..(MAX_DEPARTED as u64 + 5) {
            d.down(&format!("n{i}@h"), i);
        }
        let list = d.list();
        assert_eq!(list.len(), MAX_DEPARTED);
        assert!(
            !list.iter().any(|(n, _)| n == "n0@h"),
            "the oldest left first"
        );
    }

    fn summary() -> NodeSummary {
        NodeSummary {
            node: "a@h".into(),
            status: "ok".into(),
            recovery_state: "normal".into(),
            history: ActivityHistory::new().series(T0),
            ..NodeSummary::default()
        }
    }

    #[test]
    fn a_summary_out_of_bounds_is_refused() {
        assert_eq!(summary().validate(), Ok(()));
        let mut long = summary();
        long.history.starts.push(1);
        assert!(long.validate().is_err());
        let mut name = summary();
        name.node = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(name.validate().is_err());
        let mut status = summary();
        status.status = "<script>".into();
        assert!(status.validate().is_err());
        let mut bucket = summary();
        bucket.history.bucket_ms = 0;
        assert!(bucket.validate().is_err());
    }

    #[test]
    fn the_shown_health_names_down_unreachable_and_recovering() {
        let mut s = summary();
        assert_eq!(shown_health(true, Some(&s)), "down");
        assert_eq!(shown_health(false, None), "unreachable");
        assert_eq!(shown_health(false, Some(&s)), "ok");
        s.recovery_state = "recovering".into();
        assert_eq!(shown_health(false, Some(&s)), "recovering");
        s.status = "partitioned".into();
        assert_eq!(shown_health(false, Some(&s)), "partitioned");
    }
}
