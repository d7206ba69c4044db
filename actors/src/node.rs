//! `process-hub node`: one node of a hub, as an OS process.
//!
//! It first reads its secrets (the cookie, the admin token, the TLS files; see
//! [`crate::cli::secrets`]) and refuses to serve the admin API beyond loopback without a token.
//! It starts, in order: the cluster node (`ClusterNode`: listener, cookie, optional mutual TLS,
//! seeds from `--join` and from DNS with `--discovery`),
//! the hub (the kinds of this crate, the registry backend of `--backend` under `--data-dir`),
//! and the admin HTTP API on `--admin` (loopback unless told otherwise). Each step logs a line to
//! stderr; the last one starts with `ready:` and names the bound addresses (useful when a port
//! was 0). With `--probe`, it also serves the unauthenticated probe routes there. Under
//! systemd (`$NOTIFY_SOCKET` set, see [`crate::notify`]) it sends `READY=1` once the node is
//! ready by the rule of `GET /v1/ready` (status `ok`, the first reconcile round done),
//! `STATUS=` lines while it is not, and `STOPPING=1` when it begins to leave. SIGTERM or SIGINT leaves the cluster gracefully ([`Hub::leave`]): the admin API stops,
//! peers are told, the node's children are started on their next owners, the hub shuts down,
//! the node's sessions close, and the process exits 0.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;

use process_hub::admin::{AdminConfig, AdminToken, AdminTokenError};
use process_hub::cluster::node::{ClusterConfig, ClusterError, ClusterNode, TlsConfig};
use process_hub::cluster::{Network, TlsError};
use process_hub::storage::{BackendConfig, DataDirLock, DataDirLockError};
use process_hub::{Hub, ProcessHub, SpawnError};
use tokio::signal::unix::{signal, SignalKind};

use crate::cli::node_settings::{BackendChoice, NodeSettings};
use crate::cli::secrets::{self, SecretError};

/// Why a node could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The cluster node did not start (port taken, bad name).
    #[error("cluster node: {0}")]
    Cluster(#[from] ClusterError),
    /// The hub's configuration was refused.
    #[error("hub configuration: {0}")]
    Config(#[from] process_hub::ConfigError),
    /// The hub did not start (e.g. its data directory cannot be opened).
    #[error("hub: {0}")]
    Hub(#[from] SpawnError),
    /// The admin API address cannot be bound.
    #[error("admin API on {addr}: {source}")]
    Admin {
        /// The `--admin` address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The `--probe` address cannot be bound.
    #[error("probe listener on {addr}: {source}")]
    Probe {
        /// The `--probe` address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The signal handlers could not be installed.
    #[error("signal handlers: {0}")]
    Signals(std::io::Error),
    /// The cookie or the admin token file cannot be had, or is exposed to other users.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The admin token in `--admin-token-file` is unusable.
    #[error("--admin-token-file: {0}")]
    AdminToken(#[from] AdminTokenError),
    /// The TLS files do not make a configuration.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// `--admin` is not a loopback address and no token protects the API.
    #[error("refusing to serve the admin API on {0} without a token: a non-loopback --admin needs --admin-token-file")]
    AdminUnprotected(SocketAddr),
    /// The hub did not shut down within its shutdown timeout.
    #[error(transparent)]
    Shutdown(#[from] process_hub::ShutdownTimedOut),
    /// The data directory is held by another process, or cannot be locked.
    #[error(transparent)]
    DataDir(#[from] DataDirLockError),
    /// The hub stopped for good (its supervisor gave up) while the node was running: the process
    /// exits non-zero so that its service manager restarts it.
    #[error("hub {hub} stopped unexpectedly; exiting so that the node is restarted")]
    HubStopped {
        /// The hub id.
        hub: String,
    },
}

/// Whether the node's status lines are written as JSON log events (`--log-format json`).
static STATUS_AS_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The tracing target of the node's status lines when they are JSON log events: always on
/// (`init_tracing` enables it), so that every line a log shipper reads is one JSON object.
pub const STATUS_TARGET: &str = "process_hub::status";

/// Writes the node's status lines (`cluster: ...`, `ready: ...`) as JSON log events on
/// target [`STATUS_TARGET`] rather than as plain lines.
pub fn status_lines_as_json(on: bool) {
    STATUS_AS_JSON.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn say(line: &str) {
    // Operator-facing status lines of a command (not library logging): stderr, one per step.
    if STATUS_AS_JSON.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(target: STATUS_TARGET, "{line}");
    } else {
        eprintln!("{line}");
    }
}

/// Writes the line a command ends with when it fails (`error: ...`): a JSON log event at
/// ERROR under `--log-format json`, else a plain line.
pub fn say_error(line: &str) {
    if STATUS_AS_JSON.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::error!(target: STATUS_TARGET, "{line}");
    } else {
        eprintln!("{line}");
    }
}

/// The hub configuration of a node.
pub fn hub_config(settings: &NodeSettings) -> Result<ProcessHub, process_hub::ConfigError> {
    let backend = match settings.backend {
        BackendChoice::Memory => BackendConfig::Memory,
        BackendChoice::Lmdb => BackendConfig::Lmdb { path: None },
        BackendChoice::Durable => BackendConfig::Durable { path: None },
    };
    let mut config = ProcessHub::builder(settings.hub.clone())
        .node_name(settings.node_name.clone())
        .registry_backend(backend)
        .data_dir(settings.data_dir.clone())
        .build_unchecked();
    if let Some(grace) = settings.nodedown_grace_ms {
        config.nodedown_grace_ms = grace;
    }
    if let Some(stable) = settings.stable_after_ms {
        config.stable_after_ms = stable;
    }
    if let Some(wait) = settings.recovery_replay_wait_ms {
        config.recovery_replay_wait_ms = wait;
    }
    if let Some(distribution) = settings.distribution {
        config.distribution = distribution;
    }
    if let Some(migration) = settings.migration {
        config.migration = migration;
    }
    if let Some(factor) = settings.replication_factor {
        config.replication_factor = factor;
    }
    if let Some(model) = settings.replication_model {
        config.replication_model = model;
    }
    if let Some(signal) = settings.redundancy_signal {
        config.redundancy_signal = signal;
    }
    if let Some(hot_swap) = &settings.hot_swap {
        config.hot_swap = hot_swap.clone();
    }
    if let Some(load_balancer) = &settings.load_balancer {
        config.load_balancer = load_balancer.clone();
    }
    if let Some(strategy) = &settings.partition_tolerance {
        config.partition_tolerance = strategy.clone();
    }
    if let Some(strategy) = &settings.sync {
        config.sync = strategy.clone();
    }
    let intensity = &settings.restart_intensity;
    if let Some(n) = intensity.max_restarts {
        config.max_restarts = n;
    }
    if let Some(seconds) = intensity.max_seconds {
        config.max_seconds = seconds;
    }
    if let Some(n) = intensity.hub_max_restarts {
        config.hub_max_restarts = n;
    }
    if let Some(recovery) = &settings.auto_recovery {
        let mut auto = process_hub::AutoRecoveryConfig::default();
        if let Some(grace) = recovery.reconcile_grace_ms {
            auto.reconcile_grace_ms = grace;
        }
        if let Some(interval) = recovery.reconcile_interval_ms {
            auto.reconcile_interval_ms = interval;
        }
        auto.remote_manifest = recovery.remote_manifest.clone();
        if let Some(per_second) = recovery.recovery_starts_per_second {
            auto.start_budget.max_starts_per_second = per_second;
        }
        auto.start_budget.max_starts_per_round = recovery.recovery_starts_per_round;
        if recovery.declared_fsync_per_mutation {
            auto.declared_commit = process_hub::DeclaredCommit::PerMutation;
        }
        config.auto_recovery = Some(auto);
    }
    config.validate()?;
    Ok(config)
}

/// The cluster node configuration of a node presenting `cookie`.
pub fn cluster_config(settings: &NodeSettings, cookie: String) -> ClusterConfig {
    let short = settings
        .node_name
        .split('@')
        .next()
        .unwrap_or(&settings.node_name)
        .to_owned();
    let mut config = ClusterConfig::new(
        short,
        settings.listen.ip().to_string(),
        settings.listen.port(),
        cookie,
    );
    config.bind = Some(settings.listen.ip());
    config.seeds = settings.join.iter().map(SocketAddr::to_string).collect();
    config.discovery = settings.discovery.clone();
    config.dns_server = settings.dns_server;
    config.wire = settings.wire;
    config.isolated_after = settings.isolated_after;
    config.heartbeat = settings.heartbeat;
    config
}

/// The secrets a node needs before it starts anything.
struct Secrets {
    cookie: String,
    admin: AdminConfig,
    tls: Option<TlsConfig>,
}

fn secrets(settings: &NodeSettings) -> Result<Secrets, NodeError> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let cookie = secrets::cookie(&settings.cookie, home.as_deref())?;
    let token = settings
        .admin_token_file
        .as_deref()
        .map(|path| secrets::read_secret_file("admin token file", path))
        .transpose()?
        .map(AdminToken::new)
        .transpose()?;
    if token.is_none() && !settings.admin.ip().is_loopback() {
        return Err(NodeError::AdminUnprotected(settings.admin));
    }
    let tls = match &settings.tls {
        Some(t) => {
            secrets::check_private_file("TLS key file", &t.key)?;
            Some(TlsConfig::mutual(&t.cert, &t.key, &t.ca, &t.server_name)?)
        }
        None => None,
    };
    Ok(Secrets {
        cookie,
        admin: AdminConfig {
            token,
            ..AdminConfig::default()
        },
        tls,
    })
}

/// Resolves when SIGTERM or SIGINT arrives; returns the signal's name.
async fn termination() -> Result<impl std::future::Future<Output = &'static str>, NodeError> {
    let mut term = signal(SignalKind::terminate()).map_err(NodeError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(NodeError::Signals)?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

/// Runs a node until SIGTERM/SIGINT, then leaves gracefully.
pub async fn run(settings: NodeSettings) -> Result<(), NodeError> {
    // Installed first, so that a signal during startup is not the default (abrupt) exit.
    let stop = termination().await?;
    let secrets = secrets(&settings)?;
    let config = hub_config(&settings)?;
    // Held until the process ends: a second process on the same directory would boot on this
    // one's files. Taken before anything is opened, and only when the directory is used.
    let _data_dir_lock =
        if settings.backend != BackendChoice::Memory || settings.auto_recovery.is_some() {
            Some(DataDirLock::acquire(&settings.data_dir)?)
        } else {
            None
        };
    // Before the hub: its metrics are recorded from its first event on, and served by the
    // admin API's `GET /metrics`.
    if !settings.metrics {
        process_hub::telemetry::metrics::set_enabled(false);
    } else if let Err(e) = process_hub::telemetry::install_prometheus() {
        tracing::warn!(error = %e, "metrics exporter not installed: GET /metrics answers metrics_off");
    }
    if settings.memory_release
        && !process_hub::memory_release::start(process_hub::memory_release::MemoryRelease::default())
        && !process_hub::memory_release::supported()
    {
        tracing::info!("no glibc: the memory a burst frees stays with the allocator");
    }
    let mut cluster_config = cluster_config(&settings, secrets.cookie);
    let tls_on = secrets.tls.is_some();
    cluster_config.tls = secrets.tls;
    let cluster = Arc::new(ClusterNode::start(cluster_config).await?);
    let discovery = settings.discovery.as_ref().map_or(String::new(), |d| {
        format!(", discovery: {d} every {:?}", d.interval())
    });
    say(&format!(
        "cluster: node {} listening on {} ({}, seeds: {:?}{discovery})",
        cluster.local_node(),
        settings.listen,
        if tls_on { "mutual TLS" } else { "plain TCP" },
        settings.join
    ));
    let (hub, join) = Hub::builder(config, crate::default_kinds())
        .network(cluster.clone())
        .spawn()
        .await?;
    say(&format!(
        "hub: {} on {} ({:?} backend, data dir {})",
        hub.hub_id(),
        hub.node(),
        settings.backend,
        settings.data_dir.display()
    ));
    let listener = tokio::net::TcpListener::bind(settings.admin)
        .await
        .map_err(|source| NodeError::Admin {
            addr: settings.admin,
            source,
        })?;
    let admin = listener.local_addr().map_err(|source| NodeError::Admin {
        addr: settings.admin,
        source,
    })?;
    let (admin_stop_tx, admin_stop) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(
            listener,
            process_hub::admin::router_with(hub.clone(), secrets.admin),
        )
        .with_graceful_shutdown(async move {
            let _ = admin_stop.await;
        })
        .into_future(),
    );
    let probes = match settings.probe {
        Some(addr) => Some(serve_probes(addr, hub.clone()).await?),
        None => None,
    };
    say(&format!(
        "ready: node {} hub {} cluster {} admin http://{admin}{}",
        hub.node(),
        hub.hub_id(),
        settings.listen,
        probes
            .as_ref()
            .map(|p| format!(" probes http://{}", p.addr))
            .unwrap_or_default()
    ));
    // Under systemd (`Type=notify`): READY=1 once the node is ready as `GET /v1/ready` says.
    let notifier = match crate::notify::Notifier::from_env() {
        Ok(notifier) => notifier.map(Arc::new),
        Err(e) => {
            tracing::warn!(error = %e, "the service manager's socket is unusable: no READY=1 is sent");
            None
        }
    };
    let readiness = notifier
        .clone()
        .map(|n| tokio::spawn(report_readiness(hub.clone(), n)));

    let mut join = join;
    let signal_name = tokio::select! {
        signal_name = stop => signal_name,
        _ = &mut join => {
            // The supervisor gave up (its children failed too often): nothing will restart the
            // hub inside this process, so the process ends and its service manager restarts it.
            say(&format!("hub {} stopped: exiting", hub.hub_id()));
            let _ = admin_stop_tx.send(());
            cluster.shutdown();
            let _ = server.await;
            return Err(NodeError::HubStopped { hub: hub.hub_id().to_owned() });
        }
    };
    say(&format!("{signal_name}: leaving the cluster"));
    if let Some(task) = readiness {
        task.abort();
    }
    if let Some(notifier) = &notifier {
        if let Err(e) = notifier.stopping(&format!(
            "{signal_name}: leaving the cluster, handing children over"
        )) {
            tracing::warn!(error = %e, "STOPPING=1 not sent");
        }
    }
    let _ = admin_stop_tx.send(());
    if let Some(probes) = probes {
        probes.stop().await;
    }
    // Peers are told, this node's children start on their next owners, then the hub stops.
    let left = hub.leave().await;
    drop(hub);
    let _ = join.await;
    cluster.shutdown();
    let _ = server.await;
    left?;
    if let Some(notifier) = &notifier {
        let _ = notifier.status("stopped: left the cluster");
    }
    say("stopped");
    Ok(())
}

/// How often the readiness is looked at until the node is ready, then afterwards (for the
/// `STATUS=` line `systemctl status` shows).
const READINESS_POLL: std::time::Duration = std::time::Duration::from_millis(200);
const STATUS_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Tells the service manager the node's readiness: `STATUS=` lines naming why it is not ready
/// yet, `READY=1` once [`process_hub::admin::Health::not_ready`] finds nothing (the rule of
/// `GET /v1/ready`: status `ok` and the first reconcile round done), then a `STATUS=` line at
/// each change of the health's status. Runs until aborted.
async fn report_readiness(hub: Hub, notifier: Arc<crate::notify::Notifier>) {
    use process_hub::admin::AdminOps;
    let mut ready_sent = false;
    let mut last = String::new();
    loop {
        let line = match AdminOps::health(&hub).await {
            Ok(health) => match health.not_ready() {
                None => format!("ready: {} members", health.members.len()),
                Some(why) => format!("not ready: {why}"),
            },
            Err(e) => format!("not ready: {e}"),
        };
        let ready = line.starts_with("ready");
        let sent = if ready && !ready_sent {
            ready_sent = true;
            notifier.ready(&line)
        } else if line != last {
            notifier.status(&line)
        } else {
            Ok(())
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "the service manager's socket refused a notification");
        }
        last = line;
        tokio::time::sleep(if ready_sent {
            STATUS_POLL
        } else {
            READINESS_POLL
        })
        .await;
    }
}

/// The probe listener (`--probe`) while it serves.
struct Probes {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), std::io::Error>>,
}

impl Probes {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Serves [`process_hub::admin::probe_router`] on `addr`.
async fn serve_probes(addr: SocketAddr, hub: Hub) -> Result<Probes, NodeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| NodeError::Probe { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| NodeError::Probe { addr, source })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(
        axum::serve(listener, process_hub::admin::probe_router(hub))
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .into_future(),
    );
    Ok(Probes {
        addr: bound,
        stop,
        task,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::node_settings::NodeFlags;

    fn settings(backend: BackendChoice) -> NodeSettings {
        NodeFlags {
            hub: Some("orders".into()),
            name: Some("a".into()),
            listen: Some("127.0.0.1:4100".into()),
            join: vec!["127.0.0.1:4101".into(), "127.0.0.1:4102".into()],
            data_dir: Some("/tmp/ph-a".into()),
            cookie: Some("secret".into()),
            backend: Some(backend),
            ..Default::default()
        }
        .resolve()
        .expect("valid flags")
    }

    #[test]
    fn auto_recovery_flags_reach_the_hub_config() {
        let mut flags = NodeFlags {
            hub: Some("orders".into()),
            name: Some("a".into()),
            listen: Some("127.0.0.1:4100".into()),
            auto_recovery: true,
            reconcile_grace_ms: Some(500),
            reconcile_interval_ms: Some(2_000),
            remote_manifest: Some("/tmp/ph-manifest".into()),
            recovery_starts_per_second: Some(500),
            recovery_starts_per_round: Some(2_000),
            ..Default::default()
        };
        let config = hub_config(&flags.clone().resolve().unwrap()).unwrap();
        let auto = config.auto_recovery.expect("auto-recovery on");
        assert_eq!(auto.reconcile_grace_ms, 500);
        assert_eq!(auto.reconcile_interval_ms, 2_000);
        assert!(auto.remote_manifest.is_some());
        assert_eq!(auto.start_budget.max_starts_per_second, 500);
        assert_eq!(auto.start_budget.max_starts_per_round, Some(2_000));
        assert_eq!(auto.declared_commit, process_hub::DeclaredCommit::Group);

        // The hidden benchmarking knob selects one fsync per mutation.
        let per_mutation = NodeFlags {
            declared_fsync_per_mutation: true,
            ..flags.clone()
        };
        let config = hub_config(&per_mutation.resolve().unwrap()).unwrap();
        assert_eq!(
            config.auto_recovery.map(|a| a.declared_commit),
            Some(process_hub::DeclaredCommit::PerMutation)
        );

        // Out of range: refused by the hub's config, naming the option.
        let zero = NodeFlags {
            recovery_starts_per_second: Some(0),
            ..flags.clone()
        };
        let err = hub_config(&zero.resolve().unwrap()).unwrap_err();
        assert!(err.to_string().contains("max_starts_per_second"), "{err}");
        flags.reconcile_grace_ms = Some(10);
        let err = hub_config(&flags.clone().resolve().unwrap()).unwrap_err();
        assert!(err.to_string().contains("reconcile_grace_ms"), "{err}");

        // A recovery setting without --auto-recovery is a mistake worth reporting.
        flags.auto_recovery = false;
        let err = flags.resolve().unwrap_err();
        assert!(err.to_string().contains("--reconcile-grace-ms"), "{err}");
    }

    #[test]
    fn restart_intensity_flags_reach_the_hub_config() {
        let defaults = hub_config(&settings(BackendChoice::Memory)).unwrap();
        let flags = NodeFlags {
            hub: Some("orders".into()),
            name: Some("a".into()),
            listen: Some("127.0.0.1:4100".into()),
            max_restarts: Some(defaults.max_restarts + 1),
            max_seconds: Some(defaults.max_seconds + 1),
            hub_max_restarts: Some(defaults.hub_max_restarts + 1),
            ..Default::default()
        };
        let config = hub_config(&flags.clone().resolve().unwrap()).unwrap();
        assert_eq!(config.max_restarts, defaults.max_restarts + 1);
        assert_eq!(config.max_seconds, defaults.max_seconds + 1);
        assert_eq!(config.hub_max_restarts, defaults.hub_max_restarts + 1);
        // Out of range: refused by the hub's config, naming the option.
        let zero = NodeFlags {
            max_seconds: Some(0),
            ..flags
        };
        let err = hub_config(&zero.resolve().unwrap()).unwrap_err();
        assert!(err.to_string().contains("max_seconds"), "{err}");
    }

    #[test]
    fn the_cluster_node_is_name_at_listen_host_with_the_seeds_and_cookie() {
        let c = cluster_config(&settings(BackendChoice::Memory), "secret".into());
        assert_eq!(c.name, "a");
        assert_eq!(c.host, "127.0.0.1");
        assert_eq!(c.port, 4100);
        assert_eq!(c.bind, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(c.cookie, "secret");
        assert_eq!(c.seeds, vec!["127.0.0.1:4101", "127.0.0.1:4102"]);
    }

    #[test]
    fn the_hub_gets_the_node_name_backend_and_data_dir() {
        for (choice, expected) in [
            (BackendChoice::Memory, BackendConfig::Memory),
            (BackendChoice::Lmdb, BackendConfig::Lmdb { path: None }),
            (
                BackendChoice::Durable,
                BackendConfig::Durable { path: None },
            ),
        ] {
            let h = hub_config(&settings(choice)).expect("valid hub config");
            assert_eq!(h.hub_id, "orders");
            assert_eq!(h.node_name, "a@127.0.0.1");
            assert_eq!(h.registry_backend, expected);
            assert_eq!(h.data_dir, std::path::PathBuf::from("/tmp/ph-a"));
        }
    }
}
