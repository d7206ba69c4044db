//! The hub's Prometheus metrics, recorded through the `metrics` facade: a process that installs
//! a recorder (the node binary installs the Prometheus exporter, served at `GET /metrics`) gets
//! them; one that does not pays only the facade's no-op.
//!
//! Three sources: the hub's own events (one subscriber per hub turns each into counters,
//! `crate::events::metrics`), a few
//! timings taken where they happen (a start or stop request, a storage commit, a frame), and
//! gauges set from the hub's state when they are scraped ([`set_gauges`], read by the hub). Every series carries
//! `hub` and `node`; the other labels take a bounded set of values (a kind the hub registered,
//! a reason code, a member's name) and never a child id.

use std::collections::BTreeMap;
use std::time::Duration;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

use crate::model::NodeName;

/// Children this node runs, by kind.
pub const CHILDREN: &str = "process_hub_children";
/// Rows in this node's registry copy.
pub const REGISTRY_ROWS: &str = "process_hub_registry_rows";
/// Rows no node runs (stubs waiting for a re-placement).
pub const REGISTRY_UNBOUND_ROWS: &str = "process_hub_registry_unbound_rows";
/// Members this node sees, itself included.
pub const MEMBERS: &str = "process_hub_members";
/// Child starts on this node.
pub const STARTS: &str = "process_hub_child_starts_total";
/// Child starts that failed on this node, by reason.
pub const START_FAILURES: &str = "process_hub_child_start_failures_total";
/// Child exits on this node, by reason (`normal`, `killed`, `failed`).
pub const EXITS: &str = "process_hub_child_exits_total";
/// Child restarts on this node.
pub const RESTARTS: &str = "process_hub_child_restarts_total";
/// Child stops on request on this node.
pub const STOPS: &str = "process_hub_child_stops_total";
/// Time of a start request made on this node, from the call to its answer.
pub const START_SECONDS: &str = "process_hub_start_duration_seconds";
/// Time of a stop request made on this node.
pub const STOP_SECONDS: &str = "process_hub_stop_duration_seconds";
/// Children that moved off this node, by why.
pub const MOVED: &str = "process_hub_children_moved_total";
/// Children this node started again elsewhere because their node was gone, by why.
pub const REPLACED: &str = "process_hub_children_replaced_total";
/// Hot moves off this node, by outcome (`imported`, `fell_back_cold`).
pub const HANDOVERS: &str = "process_hub_handovers_total";
/// Redistribution passes this node ran.
pub const REDISTRIBUTIONS: &str = "process_hub_redistribution_passes_total";
/// Membership changes this node saw, by change (`up`, `down`, `left`).
pub const MEMBERSHIP: &str = "process_hub_membership_changes_total";
/// 1 while this node's side of a split has no quorum.
pub const PARTITIONED: &str = "process_hub_partitioned";
/// Redistribution work waiting (moves in flight, retries armed).
pub const PENDING_WORK: &str = "process_hub_pending_work";
/// The declared list's version on this node.
pub const DECLARED_VERSION: &str = "process_hub_declared_version";
/// Children in the declared list on this node.
pub const DECLARED_CHILDREN: &str = "process_hub_declared_children";
/// 1 while the declared list is parked on this node.
pub const DECLARED_PARKED: &str = "process_hub_declared_parked";
/// 1 on the node whose declared list was last mutated by itself (the leader that wrote it).
pub const DECLARED_LAST_MUTATOR: &str = "process_hub_declared_last_mutator";
/// Reconcile rounds this node completed, by whether they were parked.
pub const RECONCILE_ROUNDS: &str = "process_hub_reconcile_rounds_total";
/// What reconcile rounds did, by action (`started`, `duplicates`, ...).
pub const RECONCILE_CHILDREN: &str = "process_hub_reconcile_children_total";
/// 1 once this node's recovery state is `normal`.
pub const RECOVERY_NORMAL: &str = "process_hub_recovery_normal";
/// Remote manifest ships that succeeded (process-wide: the shipper serves one hub per node).
pub const MANIFEST_SHIPS: &str = "process_hub_manifest_ships_total";
/// Remote manifest ships that failed.
pub const MANIFEST_SHIP_FAILURES: &str = "process_hub_manifest_ship_failures_total";
/// Hub actors that failed and were restarted, by actor.
pub const ACTOR_RESTARTS: &str = "process_hub_actor_restarts_total";
/// How far this node's registry copy is behind a peer's, by peer: the age of the oldest frame
/// of its stream not yet applied, or how long its next full sync (or gossip round caught up
/// with) is overdue past one and a half sync periods (`crate::core::sync_lag`). 0 when idle.
pub const SYNC_LAG: &str = "process_hub_sync_lag_seconds";
/// Peer input this node refused, by reason.
pub const REFUSED: &str = "process_hub_refused_peer_input_total";
/// Wire frames by peer and direction (`in`, `out`).
pub const FRAMES: &str = "process_hub_wire_frames_total";
/// Wire bytes by peer and direction.
pub const BYTES: &str = "process_hub_wire_bytes_total";
/// Wire frames that could not be sent, by peer.
pub const FRAMES_DROPPED: &str = "process_hub_wire_frames_dropped_total";
/// Seconds since a peer was last heard (its heartbeats or frames), by peer.
pub const PEER_SILENCE: &str = "process_hub_peer_silence_seconds";
/// 1 while the failure detector suspects a peer (or holds it down), by peer.
pub const PEER_SUSPECTED: &str = "process_hub_peer_suspected";
/// A registry storage commit (one disk sync for a group of batches).
pub const COMMIT_SECONDS: &str = "process_hub_storage_commit_duration_seconds";
/// Batches (writes) per storage commit.
pub const WRITES_PER_COMMIT: &str = "process_hub_storage_writes_per_commit";

/// Peers refused for their cookie since the node started (a session that closed before
/// authenticating, with no session to that peer authenticated since); 0 from the first scrape.
pub const PEER_AUTH_FAILURES: &str = "process_hub_peer_auth_failures_total";
/// 1 while the node was given seeds and no peer has authenticated for longer than its
/// threshold (health `status: "isolated"`).
pub const ISOLATED: &str = "process_hub_isolated";

/// Typed calls and command calls made on this node, by outcome (`ok` or the error's code).
pub const CALLS: &str = "process_hub_calls_total";
/// Time of a call made on this node, from the send to the answer (or the failure).
pub const CALL_SECONDS: &str = "process_hub_call_duration_seconds";
/// Typed casts and command casts made on this node, by outcome (`ok` or the error's code).
pub const CASTS: &str = "process_hub_casts_total";
/// 1, labelled with the hub's `version` (what a dashboard shows per node, and what an alert
/// on mixed versions during a rolling upgrade groups by).
pub const BUILD_INFO: &str = "process_hub_build_info";
/// The process's resident memory (bytes).
pub const PROCESS_RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
/// The process's virtual memory (bytes).
pub const PROCESS_VIRTUAL_MEMORY: &str = "process_virtual_memory_bytes";
/// CPU time the process used, user and system (seconds; a gauge that only grows).
pub const PROCESS_CPU_SECONDS: &str = "process_cpu_seconds_total";
/// File descriptors the process holds open.
pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
/// The process's limit of open file descriptors.
pub const PROCESS_MAX_FDS: &str = "process_max_fds";
/// When the process started (seconds since the Unix epoch).
pub const PROCESS_START_TIME: &str = "process_start_time_seconds";
/// Threads of the process.
pub const PROCESS_THREADS: &str = "process_threads";

/// The process metrics (Prometheus' usual names), read from `/proc` when scraped (Linux).
pub const PROCESS: [&str; 7] = [
    PROCESS_RESIDENT_MEMORY,
    PROCESS_VIRTUAL_MEMORY,
    PROCESS_CPU_SECONDS,
    PROCESS_OPEN_FDS,
    PROCESS_MAX_FDS,
    PROCESS_START_TIME,
    PROCESS_THREADS,
];

/// Every metric the hub records, by name (what a dashboard may chart; the process metrics are
/// in [`PROCESS`]).
pub const ALL: [&str; 43] = [
    CHILDREN,
    REGISTRY_ROWS,
    REGISTRY_UNBOUND_ROWS,
    MEMBERS,
    STARTS,
    START_FAILURES,
    EXITS,
    RESTARTS,
    STOPS,
    START_SECONDS,
    STOP_SECONDS,
    MOVED,
    REPLACED,
    HANDOVERS,
    REDISTRIBUTIONS,
    MEMBERSHIP,
    PARTITIONED,
    PENDING_WORK,
    DECLARED_VERSION,
    DECLARED_CHILDREN,
    DECLARED_PARKED,
    DECLARED_LAST_MUTATOR,
    RECONCILE_ROUNDS,
    RECONCILE_CHILDREN,
    RECOVERY_NORMAL,
    MANIFEST_SHIPS,
    MANIFEST_SHIP_FAILURES,
    ACTOR_RESTARTS,
    SYNC_LAG,
    REFUSED,
    FRAMES,
    BYTES,
    FRAMES_DROPPED,
    PEER_SILENCE,
    PEER_SUSPECTED,
    COMMIT_SECONDS,
    WRITES_PER_COMMIT,
    PEER_AUTH_FAILURES,
    ISOLATED,
    CALLS,
    CALL_SECONDS,
    CASTS,
    BUILD_INFO,
];

/// Whether this process records the hub's metrics (on by default; a recorder still has to be
/// installed for them to go anywhere).
static ENABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns the recording of the hub's metrics on or off for the whole process: off, every
/// recording point returns at once (what `bench start --telemetry compare` measures against).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the hub's metrics are recorded.
pub fn enabled() -> bool {
    ENABLED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Gives every metric its help text, once per process (the exporter shows it as `# HELP`).
pub fn describe() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        describe_gauge!(CHILDREN, "Children this node runs, by kind.");
        describe_gauge!(REGISTRY_ROWS, "Rows in this node's registry copy.");
        describe_gauge!(REGISTRY_UNBOUND_ROWS, "Registry rows no node runs (stubs).");
        describe_gauge!(MEMBERS, "Members this node sees, itself included.");
        describe_counter!(STARTS, "Child starts on this node.");
        describe_counter!(START_FAILURES, "Child starts that failed, by reason.");
        describe_counter!(EXITS, "Child exits, by reason.");
        describe_counter!(RESTARTS, "Child restarts.");
        describe_counter!(STOPS, "Child stops on request.");
        describe_histogram!(
            START_SECONDS,
            metrics::Unit::Seconds,
            "Start requests, call to answer."
        );
        describe_histogram!(
            STOP_SECONDS,
            metrics::Unit::Seconds,
            "Stop requests, call to answer."
        );
        describe_counter!(MOVED, "Children that moved off this node, by why.");
        describe_counter!(REPLACED, "Children re-placed by this node, by why.");
        describe_counter!(HANDOVERS, "Hot moves off this node, by outcome.");
        describe_counter!(REDISTRIBUTIONS, "Redistribution passes.");
        describe_counter!(MEMBERSHIP, "Membership changes seen, by change.");
        describe_gauge!(PARTITIONED, "1 while this side of a split has no quorum.");
        describe_gauge!(PENDING_WORK, "Redistribution work waiting.");
        describe_gauge!(DECLARED_VERSION, "The declared list's version.");
        describe_gauge!(DECLARED_CHILDREN, "Children in the declared list.");
        describe_gauge!(DECLARED_PARKED, "1 while the declared list is parked.");
        describe_gauge!(
            DECLARED_LAST_MUTATOR,
            "1 where the declared list was last written by this node."
        );
        describe_counter!(RECONCILE_ROUNDS, "Reconcile rounds completed.");
        describe_counter!(RECONCILE_CHILDREN, "What reconcile rounds did, by action.");
        describe_gauge!(RECOVERY_NORMAL, "1 once recovery is normal.");
        describe_counter!(MANIFEST_SHIPS, "Remote manifest ships that succeeded.");
        describe_counter!(MANIFEST_SHIP_FAILURES, "Remote manifest ships that failed.");
        describe_counter!(ACTOR_RESTARTS, "Hub actors restarted, by actor.");
        describe_gauge!(
            SYNC_LAG,
            metrics::Unit::Seconds,
            "How far this node's registry is behind the peer's (0 when in sync)."
        );
        describe_counter!(REFUSED, "Peer input refused, by reason.");
        describe_counter!(FRAMES, "Wire frames, by peer and direction.");
        describe_counter!(
            BYTES,
            metrics::Unit::Bytes,
            "Wire bytes, by peer and direction."
        );
        describe_counter!(FRAMES_DROPPED, "Wire frames not sent, by peer.");
        describe_gauge!(
            PEER_SILENCE,
            metrics::Unit::Seconds,
            "Since a peer was last heard."
        );
        describe_gauge!(
            PEER_SUSPECTED,
            "1 while the failure detector suspects a peer."
        );
        describe_histogram!(
            COMMIT_SECONDS,
            metrics::Unit::Seconds,
            "Registry storage commits."
        );
        describe_histogram!(WRITES_PER_COMMIT, "Writes per storage commit.");
        describe_counter!(PEER_AUTH_FAILURES, "Peers refused for their cookie.");
        describe_gauge!(
            ISOLATED,
            "1 while seeds were given and no peer authenticated."
        );
        describe_counter!(CALLS, "Calls to children made here, by outcome.");
        describe_histogram!(
            CALL_SECONDS,
            metrics::Unit::Seconds,
            "Calls to children made here, send to answer."
        );
        describe_counter!(CASTS, "Casts to children made here, by outcome.");
        describe_gauge!(BUILD_INFO, "1, labelled with the hub's version.");
        super::process::describe();
    });
}

/// The `hub` and `node` labels of one hub's series.
#[derive(Clone, Debug)]
pub(crate) struct HubLabels {
    hub: String,
    node: String,
}

impl HubLabels {
    pub(crate) fn new(hub: &str, node: &str) -> Self {
        Self {
            hub: hub.to_owned(),
            node: node.to_owned(),
        }
    }

    pub(crate) fn base(&self) -> Vec<(&'static str, String)> {
        vec![("hub", self.hub.clone()), ("node", self.node.clone())]
    }

    pub(crate) fn with(
        &self,
        key: &'static str,
        value: impl Into<String>,
    ) -> Vec<(&'static str, String)> {
        let mut labels = self.base();
        labels.push((key, value.into()));
        labels
    }

    pub(crate) fn count(&self, name: &'static str, extra: Option<(&'static str, String)>) {
        if !enabled() {
            return;
        }
        let labels = match extra {
            Some((k, v)) => self.with(k, v),
            None => self.base(),
        };
        counter!(name, &labels).increment(1);
    }

    /// A start or stop request's time.
    pub(crate) fn request_took(&self, name: &'static str, took: Duration) {
        if !enabled() {
            return;
        }
        histogram!(name, &self.base()).record(took.as_secs_f64());
    }

    /// A frame to or from `peer`.
    pub(crate) fn frame(&self, peer: &str, direction: &'static str, bytes: usize) {
        if !enabled() {
            return;
        }
        let mut labels = self.with("peer", peer);
        labels.push(("direction", direction.to_owned()));
        counter!(FRAMES, &labels).increment(1);
        counter!(BYTES, &labels).increment(bytes as u64);
    }

    /// The failure detector's view of `peer`.
    pub(crate) fn peer_health(&self, peer: &str, silent: Duration, suspected: bool) {
        if !enabled() {
            return;
        }
        let labels = self.with("peer", peer);
        gauge!(PEER_SILENCE, &labels).set(silent.as_secs_f64());
        gauge!(PEER_SUSPECTED, &labels).set(f64::from(u8::from(suspected)));
    }

    /// `peer` came up: its frame counters exist from now on, at zero until a frame counts.
    pub(crate) fn peer_up(&self, peer: &str) {
        if !enabled() {
            return;
        }
        for direction in ["in", "out"] {
            let mut labels = self.with("peer", peer);
            labels.push(("direction", direction.to_owned()));
            counter!(FRAMES, &labels).increment(0);
            counter!(BYTES, &labels).increment(0);
        }
        counter!(FRAMES_DROPPED, &self.with("peer", peer)).increment(0);
    }

    /// A frame to `peer` that could not be sent.
    pub(crate) fn frame_dropped(&self, peer: &str) {
        if !enabled() {
            return;
        }
        counter!(FRAMES_DROPPED, &self.with("peer", peer)).increment(1);
    }
}

/// A start failure's reason as a bounded label: its leading code when it is one of the hub's,
/// else `other` (a reason may carry a kind's own message).
pub fn failure_code(reason: &str) -> &'static str {
    let head = reason
        .split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
        .next()
        .unwrap_or_default();
    START_FAILURE_CODES
        .into_iter()
        .find(|c| *c == head)
        .unwrap_or("other")
}

/// The `reason` values of [`START_FAILURES`]: the hub's own codes, then `other`.
pub const START_FAILURE_CODES: [&str; 10] = [
    "unknown_kind",
    "invalid_args",
    "invalid_child",
    "pre_start_failed",
    "already_started",
    "timeout",
    "partitioned",
    "node_unavailable",
    "registry_write_failed",
    "other",
];

/// The series of one store's commits ([`COMMIT_SECONDS`], [`WRITES_PER_COMMIT`]): a store is
/// opened before the hub that uses it knows its node's name, so the hub names them once it
/// does ([`StoreMetrics::label`]); commits before that are not recorded, so that no series
/// lacks `hub` and `node`.
#[derive(Default)]
pub(crate) struct StoreMetrics(std::sync::OnceLock<(metrics::Histogram, metrics::Histogram)>);

impl StoreMetrics {
    /// Names the hub and node of this store (`store`: `registry`, `declared`); the first
    /// naming holds. Registers both histograms, so they are present before the first commit.
    pub(crate) fn label(&self, hub: &str, node: &str, store: &'static str) {
        let labels = HubLabels::new(hub, node).with("store", store);
        let _ = self.0.set((
            histogram!(COMMIT_SECONDS, &labels),
            histogram!(WRITES_PER_COMMIT, &labels),
        ));
    }

    /// A commit of `writes` batches that took `took`.
    pub(crate) fn commit(&self, took: Duration, writes: usize) {
        if !enabled() {
            return;
        }
        if let Some((seconds, per_commit)) = self.0.get() {
            seconds.record(took.as_secs_f64());
            per_commit.record(writes as f64);
        }
    }
}

/// A redistribution pass of hub `hub` on `node` ran.
pub(crate) fn redistribution_pass(hub: &str, node: &str) {
    HubLabels::new(hub, node).count(REDISTRIBUTIONS, None);
}

/// A remote manifest ship of hub `hub` on `node` succeeded.
pub(crate) fn manifest_shipped(hub: &str, node: &str) {
    HubLabels::new(hub, node).count(MANIFEST_SHIPS, None);
}

/// A remote manifest ship of hub `hub` on `node` failed.
pub(crate) fn manifest_ship_failed(hub: &str, node: &str) {
    HubLabels::new(hub, node).count(MANIFEST_SHIP_FAILURES, None);
}

/// The hub's state the gauges show, read when a scrape asks (`crate::hub::reads::gauges`):
/// telemetry is handed the values and never reads the hub.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gauges {
    /// Children this node runs, by kind (every registered kind, 0 included).
    pub(crate) kinds: BTreeMap<String, u64>,
    /// Rows in this node's registry copy.
    pub(crate) rows: u64,
    /// Rows no node runs.
    pub(crate) unbound: u64,
    /// Members this node sees, itself included.
    pub(crate) members: usize,
    /// This node's side of a split has no quorum.
    pub(crate) partitioned: bool,
    /// Redistribution work waiting.
    pub(crate) pending_work: usize,
    /// The declared list on this node (`None` without `auto_recovery`).
    pub(crate) declared: Option<DeclaredGauges>,
    /// The recovery state is `normal`.
    pub(crate) recovery_normal: bool,
    /// Seconds since each peer's registry was last heard from.
    pub(crate) sync_lag: Vec<(NodeName, f64)>,
    /// Peer input refused since the hub started, by reason.
    pub(crate) refused: Vec<(&'static str, u64)>,
    /// Peers refused for their cookie (`None` without a network connection).
    pub(crate) peer_auth_failures: Option<u64>,
    /// Seeds were given and no peer authenticated (`None` without a network connection).
    pub(crate) isolated: Option<bool>,
}

/// The declared list's gauges on one node.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeclaredGauges {
    /// The list's version.
    pub(crate) version: u64,
    /// Children in the list.
    pub(crate) children: usize,
    /// The list is parked.
    pub(crate) parked: bool,
    /// This node last mutated the list.
    pub(crate) last_mutator: bool,
}

/// Sets the gauges to the hub's state as read: what a scrape shows is what is now.
pub(crate) fn set_gauges(labels: &HubLabels, gauges: &Gauges) {
    if !enabled() {
        return;
    }
    let base = labels.base();
    for (kind, n) in &gauges.kinds {
        gauge!(CHILDREN, &labels.with("kind", kind.clone())).set(*n as f64);
    }
    gauge!(REGISTRY_ROWS, &base).set(gauges.rows as f64);
    gauge!(REGISTRY_UNBOUND_ROWS, &base).set(gauges.unbound as f64);
    gauge!(MEMBERS, &base).set(gauges.members as f64);
    gauge!(PARTITIONED, &base).set(f64::from(u8::from(gauges.partitioned)));
    gauge!(PENDING_WORK, &base).set(gauges.pending_work as f64);
    if let Some(declared) = &gauges.declared {
        gauge!(DECLARED_VERSION, &base).set(declared.version as f64);
        gauge!(DECLARED_CHILDREN, &base).set(declared.children as f64);
        gauge!(DECLARED_PARKED, &base).set(f64::from(u8::from(declared.parked)));
        gauge!(DECLARED_LAST_MUTATOR, &base).set(f64::from(u8::from(declared.last_mutator)));
    }
    gauge!(RECOVERY_NORMAL, &base).set(f64::from(u8::from(gauges.recovery_normal)));
    for (peer, lag) in &gauges.sync_lag {
        gauge!(SYNC_LAG, &labels.with("peer", peer.clone())).set(*lag);
    }
    for (reason, n) in &gauges.refused {
        counter!(REFUSED, &labels.with("reason", *reason)).absolute(*n);
    }
    if let Some(n) = gauges.peer_auth_failures {
        counter!(PEER_AUTH_FAILURES, &base).absolute(n);
    }
    if let Some(isolated) = gauges.isolated {
        gauge!(ISOLATED, &base).set(f64::from(u8::from(isolated)));
    }
    super::process::set(labels);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_reasons_become_bounded_codes() {
        assert_eq!(failure_code("unknown_kind: no kind \"x\""), "unknown_kind");
        assert_eq!(failure_code("invalid_args: bad"), "invalid_args");
        assert_eq!(failure_code("pre_start_failed"), "pre_start_failed");
        assert_eq!(failure_code("my kind's own message c-123"), "other");
        assert_eq!(failure_code(""), "other");
    }
}
