//! The inputs of a node's settings: its command-line flags and the same settings as a TOML file.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Deserialize;

/// Which registry backend the node uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// In memory; rebuilt from peers after a restart.
    #[default]
    Memory,
    /// LMDB on disk.
    Lmdb,
    /// Memory reads, synchronous LMDB mirror.
    Durable,
}

/// How a node writes its log lines to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// One line of text per event (colours only when stderr is a terminal).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`, `spans`), for log
    /// shippers.
    Json,
}

/// `process-hub node` flags. Every flag may also come from `--config FILE.toml` (same names,
/// with underscores); a flag given on the command line wins over the file.
#[derive(Args, Debug, Clone, Default)]
pub struct NodeFlags {
    /// The hub id: nodes with the same hub id form one hub.
    #[arg(long)]
    pub hub: Option<String>,
    /// This node's name; the node's identity is NAME@HOST, HOST taken from --listen. A
    /// template: `{ip}` is the --listen IP (`:` written `-`), `{port}` its port, `{hostname}`
    /// this machine's host name (e.g. `--name '{hostname}'`, `--name 'node-{ip}'`), `{{` and
    /// `}}` a brace; the result must be 1-64 characters of [A-Za-z0-9_.-].
    #[arg(long)]
    pub name: Option<String>,
    /// Where the cluster listener binds (HOST:PORT).
    #[arg(long)]
    pub listen: Option<String>,
    /// Where the admin HTTP API binds (HOST:PORT; loopback by default).
    #[arg(long)]
    pub admin: Option<String>,
    /// Seed nodes to join (HOST:PORT,...).
    #[arg(long, value_delimiter = ',')]
    pub join: Vec<String>,
    /// Seeds from DNS, beside --join: `dns:NAME[:PORT]` (every A/AAAA record of NAME, on
    /// PORT, by default this node's cluster port) or `dns-srv:NAME` (every SRV record's target
    /// and port), resolved again every --discovery-interval-ms. Addresses DNS stops listing
    /// are no longer dialled; a member is never downed because DNS dropped it.
    #[arg(long)]
    pub discovery: Option<String>,
    /// How often --discovery resolves its name again, in ms (default 5000, range
    /// [100, 3600000]).
    #[arg(long)]
    pub discovery_interval_ms: Option<u64>,
    /// The nameserver --discovery asks (IP:PORT; default: the system's, from
    /// /etc/resolv.conf).
    #[arg(long)]
    pub dns_server: Option<String>,
    /// Directory for the disk backends and the declared list.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The shared secret every node of the cluster must present (visible in the process
    /// list: prefer --cookie-file, or the environment variable PROCESS_HUB_COOKIE, which a
    /// Kubernetes Secret can fill). Default: $HOME/.process-hub.cookie, created when missing.
    #[arg(long, env = "PROCESS_HUB_COOKIE", hide_env_values = true)]
    pub cookie: Option<String>,
    /// A file holding the cookie (mode 0600: a file group or others can read is refused).
    #[arg(long)]
    pub cookie_file: Option<PathBuf>,
    /// A file holding the admin API's bearer token (mode 0600); every request must then
    /// carry `Authorization: Bearer <token>`. Required to bind --admin beyond loopback.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// Where to serve the orchestrator's probes, `GET /v1/health` (liveness) and
    /// `GET /v1/ready` (readiness), without a token (HOST:PORT; off by default). They answer
    /// only the health's status and recovery state: a kubelet's probe cannot present a secret.
    #[arg(long)]
    pub probe: Option<String>,
    /// Mutual TLS for the cluster transport: this node's certificate chain (PEM).
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// Mutual TLS: this node's private key (PEM).
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: the CA that signed every node's certificate (PEM).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Mutual TLS: the DNS name (or IP) every node's certificate is issued for.
    #[arg(long)]
    pub tls_server_name: Option<String>,
    /// Registry backend.
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// A TOML file with any of these settings.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// How long a node that went down may come back before its children are re-placed, in ms
    /// (the hub's `nodedown_grace_ms`; default 1000).
    #[arg(long)]
    pub nodedown_grace_ms: Option<u64>,
    /// How long the cluster's reachability must be stable before a partial partition is
    /// resolved (a node reached by some members only through others is set aside), and how
    /// long a set-aside node must then be fully connected before it comes back, in ms (the
    /// hub's `stable_after_ms`; default 5000, range [100, 600000]).
    #[arg(long)]
    pub stable_after_ms: Option<u64>,
    /// How often this node sends heartbeats to its peers, in ms (default 500, range
    /// [10, 60000]; every node of a cluster should use the same value).
    #[arg(long)]
    pub heartbeat_ms: Option<u64>,
    /// How long a silent peer takes to be seen unreachable, in ms (the failure detector's
    /// timeout; default 5000, range [2 x heartbeat, 600000]). A crashed process is seen at
    /// once by its connection closing.
    #[arg(long)]
    pub failure_timeout_ms: Option<u64>,
    /// On a disk backend without `--auto-recovery`: how long a restarting node waits for its
    /// peers before it restarts the children its registry rows say it ran, in ms (the hub's
    /// `recovery_replay_wait_ms`; default 3000). A node given `--join` also waits until it has
    /// heard at least one peer, however long it is isolated.
    #[arg(long)]
    pub recovery_replay_wait_ms: Option<u64>,
    /// How new children are placed: `consistent-hash` (default: on their ring owner),
    /// `guided` (on the node each start names; a start without one is refused per child) or
    /// `load-balanced` (in proportion to each node's spare capacity, as the leader gathers it;
    /// timing in the file's `[load_balancer]` table).
    #[arg(long, value_parser = super::parse_distribution)]
    pub distribution: Option<process_hub::Distribution>,
    /// With --distribution load-balanced: how often loads are reported, in ms (default 5000).
    #[arg(long)]
    pub load_push_interval_ms: Option<u64>,
    /// With --distribution load-balanced: move children when the busiest and the idlest
    /// node's children differ by more than this percentage of the mean (default 0: never).
    #[arg(long)]
    pub load_rebalance_threshold_percent: Option<u32>,
    /// What a side of a split without quorum does: `divergence` (default: both sides keep
    /// running), `static-quorum:N[:confirm]`, `dynamic-quorum:PERCENT:MS` or
    /// `majority-quorum[:N]` (the side without quorum stops its children and answers
    /// `partitioned` until quorum returns; the file's `[partition_tolerance]` table says the
    /// same).
    #[arg(long, value_parser = crate::cli::partition_tolerance::parse_partition_tolerance)]
    pub partition_tolerance: Option<process_hub::PartitionTolerance>,
    /// How registry changes reach the other nodes: `pubsub` (default: every change to every
    /// peer) or `gossip[:INTERVAL_MS[:RECIPIENTS[:all]]]` (each change to a few peers that pass
    /// it on; for large clusters; the file's `[sync]` table says the same).
    #[arg(long, value_parser = crate::cli::sync::parse_sync)]
    pub sync: Option<process_hub::SyncStrategy>,
    /// Record no metrics and serve none (`GET /metrics` answers 404 `metrics_off`); by
    /// default the node records them and serves them to Prometheus.
    #[arg(long)]
    pub no_metrics: bool,
    /// Keep what the allocator freed after a burst instead of returning it to the operating
    /// system (by default a watcher thread returns it once a burst is over; see
    /// `process_hub::memory_release`).
    #[arg(long)]
    pub no_memory_release: bool,
    /// How children move when nodes join or leave: `cold` (default: stopped, then started
    /// elsewhere) or `hot` (kinds that hand over, like counter and kv_shard, keep their state;
    /// timing in the file's `[hot_swap]` table).
    #[arg(long)]
    pub migration: Option<process_hub::Migration>,
    /// How many nodes run each child (its first k ring owners; 1..=8, default 1). With 2 or
    /// more, a child survives the loss of a node without a restart.
    #[arg(long)]
    pub replication_factor: Option<usize>,
    /// With --replication-factor 2 or more: `active-passive` (default: one replica answers,
    /// the others stand by) or `active-active` (every replica is active).
    #[arg(long)]
    pub replication_model: Option<process_hub::ReplicationModel>,
    /// Which replicas are told their role when it changes: none (default), active, passive,
    /// all (kinds that opt in with `ChildKinds::redundancy`).
    #[arg(long)]
    pub redundancy_signal: Option<process_hub::RedundancySignal>,
    /// Restart intensity: at most this many restarts of this node's children within
    /// --max-seconds; one more escalates to the hub supervisor (default 100).
    #[arg(long)]
    pub max_restarts: Option<u32>,
    /// The window of --max-restarts and --hub-max-restarts, in seconds (default 4).
    #[arg(long)]
    pub max_seconds: Option<u32>,
    /// How many failed hub actors the hub restarts within --max-seconds before it stops for
    /// good, and with it the process (exit 1) (default 3).
    #[arg(long)]
    pub hub_max_restarts: Option<u32>,
    /// Keep a durable declared list and bring every declared child back after any outage.
    #[arg(long)]
    pub auto_recovery: bool,
    /// Delay before the first reconcile round, in ms (default 30000, range [50, 600000]).
    #[arg(long)]
    pub reconcile_grace_ms: Option<u64>,
    /// Minimum spacing between reconcile rounds, in ms (default 15000, range [1000, 600000]).
    #[arg(long)]
    pub reconcile_interval_ms: Option<u64>,
    /// An off-cluster copy of the declared list: a directory path or `s3://BUCKET/PREFIX`.
    #[arg(long)]
    pub remote_manifest: Option<String>,
    /// Admission control: sustained recovery starts per second on this node (bursts up to one
    /// second's worth; default 100000, range [1, 10000000]).
    #[arg(long)]
    pub recovery_starts_per_second: Option<u32>,
    /// Admission control: most recovery starts one reconcile round submits from this node; the
    /// rest wait for the next round (default unlimited, range [1, 10000000]).
    #[arg(long)]
    pub recovery_starts_per_round: Option<u32>,
    /// Benchmarking/compat knob: commit the declared list with one fsync per mutation instead
    /// of group commit (the baseline of `bench recovery`). Needs --auto-recovery.
    #[arg(long, hide = true)]
    pub declared_fsync_per_mutation: bool,
    /// Refuse peers that speak only wire version 1 (builds before sealed frames), whose frames
    /// cannot be checked for their sender. Set it once every node of the cluster is upgraded.
    #[arg(long)]
    pub refuse_open_peers: bool,
    /// How log lines are written to stderr: `text` (default; colours only on a terminal) or
    /// `json` (one object per line, for log shippers).
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// How long a node given --join seeds may have no authenticated peer before its health
    /// says `isolated` (and `GET /v1/ready` answers 503), in ms (default 10000, range
    /// [100, 3600000]).
    #[arg(long)]
    pub isolated_after_ms: Option<u64>,
    /// Testing knob: the newest wire version this node speaks (1 behaves as a build before
    /// sealed frames, 2 as one before compact frames, to rehearse a rolling upgrade; default 3).
    #[arg(long, hide = true)]
    pub max_wire_version: Option<u16>,
}

/// The same settings as read from a TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSettings {
    pub(super) hub: Option<String>,
    pub(super) name: Option<String>,
    pub(super) listen: Option<String>,
    pub(super) admin: Option<String>,
    #[serde(default)]
    pub(super) join: Vec<String>,
    pub(super) discovery: Option<String>,
    pub(super) discovery_interval_ms: Option<u64>,
    pub(super) dns_server: Option<String>,
    pub(super) data_dir: Option<PathBuf>,
    pub(super) cookie: Option<String>,
    pub(super) cookie_file: Option<PathBuf>,
    pub(super) admin_token_file: Option<PathBuf>,
    pub(super) probe: Option<String>,
    pub(super) tls_cert: Option<PathBuf>,
    pub(super) tls_key: Option<PathBuf>,
    pub(super) tls_ca: Option<PathBuf>,
    pub(super) tls_server_name: Option<String>,
    pub(super) backend: Option<BackendChoice>,
    pub(super) nodedown_grace_ms: Option<u64>,
    pub(super) stable_after_ms: Option<u64>,
    pub(super) heartbeat_ms: Option<u64>,
    pub(super) failure_timeout_ms: Option<u64>,
    pub(super) recovery_replay_wait_ms: Option<u64>,
    pub(super) distribution: Option<process_hub::Distribution>,
    pub(super) migration: Option<process_hub::Migration>,
    pub(super) replication_factor: Option<usize>,
    pub(super) replication_model: Option<process_hub::ReplicationModel>,
    pub(super) redundancy_signal: Option<process_hub::RedundancySignal>,
    pub(super) hot_swap: Option<process_hub::HotSwapConfig>,
    pub(super) load_balancer: Option<process_hub::LoadBalancerConfig>,
    pub(super) partition_tolerance: Option<process_hub::PartitionTolerance>,
    pub(super) sync: Option<process_hub::SyncStrategy>,
    pub(super) max_restarts: Option<u32>,
    pub(super) max_seconds: Option<u32>,
    pub(super) hub_max_restarts: Option<u32>,
    #[serde(default)]
    pub(super) auto_recovery: bool,
    pub(super) reconcile_grace_ms: Option<u64>,
    pub(super) reconcile_interval_ms: Option<u64>,
    pub(super) remote_manifest: Option<String>,
    pub(super) recovery_starts_per_second: Option<u32>,
    pub(super) recovery_starts_per_round: Option<u32>,
    #[serde(default)]
    pub(super) declared_fsync_per_mutation: bool,
    #[serde(default)]
    pub(super) refuse_open_peers: bool,
    pub(super) max_wire_version: Option<u16>,
    pub(super) log_format: Option<LogFormat>,
    pub(super) isolated_after_ms: Option<u64>,
}
