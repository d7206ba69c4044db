//! A cluster of real `process-hub node` processes on loopback ports, for the demo, the cluster
//! benchmarks and the multi-process tests.
//!
//! Each node is a separate OS process (ractor's registries are process-global, so that is the only
//! honest way to run several real nodes on one machine). Nodes log to files in the cluster's work
//! directory so that a failing run can show what each node said.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::admin_client::AdminClient;
use crate::cli::node_settings::BackendChoice;

/// What went wrong while running a local cluster.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A node process could not be started.
    #[error("cannot start node {name}: {source}")]
    Spawn {
        /// The node's short name.
        name: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A free port or work directory could not be had.
    #[error("local setup failed: {0}")]
    Setup(#[from] std::io::Error),
    /// The work directory asked for could not be created.
    #[error("cannot create the work directory {}: {source}", path.display())]
    Workdir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A condition did not hold before its deadline.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
    },
}

/// How to start the nodes of a local cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The hub id every node runs.
    pub hub: String,
    /// The cookie every node presents (the default is random, new for every cluster).
    pub cookie: String,
    /// The registry backend of every node.
    pub backend: BackendChoice,
    /// Extra flags passed to every `node` (e.g. recovery settings).
    pub extra_args: Vec<String>,
    /// Value of `RUST_LOG` for the nodes.
    pub log_filter: String,
    /// A bearer token for every node's admin API (written to a private file in the work
    /// directory and passed as `--admin-token-file`); the nodes' clients present it.
    pub admin_token: Option<String>,
    /// Every node lists every node's address as its seeds (one shared seed list, as a
    /// deployment would write it), so nodes started together dial each other; otherwise node 0
    /// has no seed and the others join it.
    pub mesh: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            hub: "demo".into(),
            cookie: crate::cli::secrets::random_secret(),
            backend: BackendChoice::Memory,
            extra_args: Vec::new(),
            log_filter: "info".into(),
            admin_token: None,
            mesh: false,
        }
    }
}

/// A port on loopback that was free a moment ago, and that this process has not handed out
/// before: the OS may offer a just-released port again, and a node given the same port for its
/// cluster listener and its admin API fails to start. Taken below the ephemeral range (Linux
/// hands out 32768-60999 as the source ports of outgoing connections): the port is released
/// before the node binds it, and in that moment any outgoing connection may take one of those.
pub fn free_port() -> Result<u16, std::io::Error> {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1_000 {
        let port = rand::Rng::gen_range(&mut rand::thread_rng(), 20_000..32_000);
        if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed_out.insert(port);
            return Ok(port);
        }
    }
    loop {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
}

/// Writes `text` to a new file at `path` that only its owner may read (mode 0600), as a node
/// requires of its secret files.
pub fn write_private(path: &Path, text: &str) -> Result<(), std::io::Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// Polls `probe` until it returns `Some`, or fails after `timeout`.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Result<T, HarnessError> {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return Ok(value);
        }
        if start.elapsed() > timeout {
            return Err(HarnessError::Timeout {
                what: what.to_owned(),
                waited: start.elapsed(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `process-hub node` process.
pub struct NodeProcess {
    /// Short name (`n1`).
    pub name: String,
    /// Cluster identity (`n1@127.0.0.1`).
    pub node_name: String,
    /// Cluster listener.
    pub listen: SocketAddr,
    /// Admin API.
    pub admin: SocketAddr,
    /// Data directory (kept across restarts).
    pub data_dir: PathBuf,
    log_path: PathBuf,
    binary: PathBuf,
    args: Vec<String>,
    log_filter: String,
    admin_token: Option<String>,
    child: Option<Child>,
}

impl NodeProcess {
    fn spawn(&mut self) -> Result<(), HarnessError> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log_path)?;
        let child = Command::new(&self.binary)
            .args(&self.args)
            .env("RUST_LOG", &self.log_filter)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|source| HarnessError::Spawn {
                name: self.name.clone(),
                source,
            })?;
        self.child = Some(child);
        Ok(())
    }

    /// A client of this node's admin API.
    pub fn client(&self) -> AdminClient {
        let client = AdminClient::new(self.admin);
        match &self.admin_token {
            Some(token) => client.with_token(token.clone()),
            None => client,
        }
    }

    /// The OS process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// How the process ended, once it ended by itself; `None` while it runs (or was never
    /// started).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// SIGKILL: the node dies at once, with no goodbye to its peers.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then wait up to `grace` for a clean exit (SIGKILL after that).
    /// Returns whether the node exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> bool {
        self.child.is_none() || self.terminate_status(grace).is_some()
    }

    /// SIGTERM, then wait up to `grace` for the node to exit by itself and return its exit
    /// status; `None` if it had to be killed (or was not running).
    pub fn terminate_status(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < grace {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// Starts the node again with the same flags, ports and data directory.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        self.kill();
        self.spawn()
    }

    /// The node's whole log (every start of it).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last `lines` lines of the node's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Several nodes of one hub on loopback.
pub struct LocalCluster {
    /// The nodes, in start order; node 0 is everyone's seed.
    pub nodes: Vec<NodeProcess>,
    workdir: PathBuf,
    _tempdir: Option<tempfile::TempDir>,
    binary: PathBuf,
    /// Node 0's cluster address, which later nodes join.
    seed: Option<SocketAddr>,
}

impl LocalCluster {
    /// Starts `n` nodes of `binary` (`process-hub`); node 0 first, the others joining it. Returns
    /// once every process is spawned; use [`LocalCluster::wait_formed`] to wait for the cluster.
    pub fn start(
        binary: &Path,
        n: usize,
        options: &ClusterOptions,
        workdir: Option<PathBuf>,
    ) -> Result<Self, HarnessError> {
        let (workdir, tempdir) = match workdir {
            Some(dir) => {
                std::fs::create_dir_all(&dir).map_err(|source| HarnessError::Workdir {
                    path: dir.clone(),
                    source,
                })?;
                (dir, None)
            }
            None => {
                let tmp = tempfile::Builder::new().prefix("process-hub-").tempdir()?;
                (tmp.path().to_owned(), Some(tmp))
            }
        };
        let mut ports = Vec::with_capacity(n);
        for _ in 0..n {
            ports.push((free_port()?, free_port()?));
        }
        let seed = ports
            .first()
            .map(|(port, _)| SocketAddr::from(([127, 0, 0, 1], *port)));
        let mut cluster = Self {
            nodes: Vec::with_capacity(n),
            workdir,
            _tempdir: tempdir,
            binary: binary.to_owned(),
            seed,
        };
        let everyone: Vec<SocketAddr> = ports
            .iter()
            .map(|(port, _)| SocketAddr::from(([127, 0, 0, 1], *port)))
            .collect();
        for (i, (port, admin_port)) in ports.into_iter().enumerate() {
            let join = if options.mesh {
                everyone.clone()
            } else if i > 0 {
                seed.into_iter().collect()
            } else {
                Vec::new()
            };
            cluster.spawn_node(options, port, admin_port, &join)?;
        }
        Ok(cluster)
    }

    fn spawn_node(
        &mut self,
        options: &ClusterOptions,
        port: u16,
        admin_port: u16,
        join: &[SocketAddr],
    ) -> Result<usize, HarnessError> {
        let name = format!("n{}", self.nodes.len() + 1);
        let listen = SocketAddr::from(([127, 0, 0, 1], port));
        let admin = SocketAddr::from(([127, 0, 0, 1], admin_port));
        let data_dir = self.workdir.join(&name);
        let mut args = vec![
            "node".to_owned(),
            "--hub".into(),
            options.hub.clone(),
            "--name".into(),
            name.clone(),
            "--listen".into(),
            listen.to_string(),
            "--admin".into(),
            admin.to_string(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--cookie".into(),
            options.cookie.clone(),
            "--backend".into(),
            match options.backend {
                BackendChoice::Memory => "memory",
                BackendChoice::Lmdb => "lmdb",
                BackendChoice::Durable => "durable",
            }
            .into(),
        ];
        if !join.is_empty() {
            args.push("--join".into());
            let seeds: Vec<String> = join.iter().map(SocketAddr::to_string).collect();
            args.push(seeds.join(","));
        }
        if let Some(token) = &options.admin_token {
            let path = self.workdir.join(format!("{name}.admin-token"));
            write_private(&path, token)?;
            args.push("--admin-token-file".into());
            args.push(path.display().to_string());
        }
        args.extend(options.extra_args.iter().cloned());
        let mut node = NodeProcess {
            node_name: format!("{name}@127.0.0.1"),
            log_path: self.workdir.join(format!("{name}.log")),
            name,
            listen,
            admin,
            data_dir,
            binary: self.binary.clone(),
            args,
            log_filter: options.log_filter.clone(),
            admin_token: options.admin_token.clone(),
            child: None,
        };
        node.spawn()?;
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    /// Starts one more node joining node 0, with its own options (another cookie, say); returns
    /// its index in [`LocalCluster::nodes`]. Its name continues the sequence (`n4` after three).
    pub fn add_node(&mut self, options: &ClusterOptions) -> Result<usize, HarnessError> {
        let (port, admin_port) = (free_port()?, free_port()?);
        let seed: Vec<SocketAddr> = self.seed.into_iter().collect();
        self.spawn_node(options, port, admin_port, &seed)
    }

    /// Where the nodes' data directories and logs are.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// Waits until every running node's health lists exactly the running nodes as members.
    pub fn wait_formed(&mut self, timeout: Duration) -> Result<(), HarnessError> {
        let mut expected: Vec<String> = self
            .nodes
            .iter_mut()
            .filter_map(|n| n.is_running().then(|| n.node_name.clone()))
            .collect();
        expected.sort();
        let clients: Vec<AdminClient> = self
            .nodes
            .iter_mut()
            .filter(|n| n.child.is_some())
            .map(|n| n.client())
            .collect();
        wait_for(
            &format!("every node to see members {expected:?}"),
            timeout,
            || {
                clients
                    .iter()
                    .all(|c| c.health().is_ok_and(|h| h.members == expected))
                    .then_some(())
            },
        )
    }

    /// The admin clients of the running nodes.
    pub fn live_clients(&mut self) -> Vec<AdminClient> {
        self.nodes
            .iter_mut()
            .filter_map(|n| n.is_running().then(|| n.client()))
            .collect()
    }

    /// Every node's name with its admin client (running or not), in node order.
    pub fn named_clients(&self) -> Vec<(String, AdminClient)> {
        self.nodes
            .iter()
            .map(|n| (n.node_name.clone(), n.client()))
            .collect()
    }

    /// The last `lines` of every node's log, each under its name (for a failing test's
    /// message).
    pub fn log_tails(&self, lines: usize) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- {} ---\n{}", n.name, n.log_tail(lines)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// SIGTERM every node at once, then wait up to `grace` for each (SIGKILL after that).
    pub fn shutdown(&mut self, grace: Duration) {
        for node in &self.nodes {
            if let Some(pid) = node.pid() {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            }
        }
        for node in &mut self.nodes {
            node.terminate(grace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_directory_that_cannot_be_created_is_named_in_the_error() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("a-file");
        std::fs::write(&file, b"").expect("write");
        let wanted = file.join("cluster");
        let err = match LocalCluster::start(
            Path::new("/nonexistent/process-hub"),
            3,
            &ClusterOptions::default(),
            Some(wanted.clone()),
        ) {
            Ok(_) => panic!("a directory under a file was created"),
            Err(e) => e,
        };
        let text = err.to_string();
        assert!(
            text.contains(&wanted.display().to_string()),
            "the error does not name the directory: {text}"
        );
        assert!(matches!(err, HarnessError::Workdir { .. }), "{err:?}");
    }
}
