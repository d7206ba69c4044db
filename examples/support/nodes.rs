//! Running one binary as several ractor_cluster nodes on this machine: the scaffolding shared by
//! `examples/multi_node.rs` and `examples/chat.rs`. Copy it into your own project to try a
//! cluster of your binary without a deployment.
//!
//! The parent process starts one OS process of itself per node (`current_exe()` with a role
//! argument), each a node on a free loopback port. They share a cookie the parent generates,
//! and every node is given every other node as a seed. Parent and nodes talk over lines:
//! a node prints `key words...` on stdout, the parent waits for lines by key, and it sends a
//! node commands on its stdin.
//!
//! Teardown whatever happens: dropping [`Nodes`] (normal exit, `?`, panic) kills every node
//! still running, and a node exits by itself when its stdin closes, which is what happens when
//! the parent dies in a way that runs no destructor (SIGKILL).

#![allow(dead_code)] // each example uses a part

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use process_hub::{ClusterConfig, ClusterNode};

/// The argument that makes the binary a node rather than the parent.
const NODE_ROLE: &str = "--node";
/// How the parent hands the cookie to its nodes: not on the command line, where `ps` shows it.
const COOKIE_ENV: &str = "PROCESS_HUB_EXAMPLE_COOKIE";

/// Anything that went wrong while running the nodes.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// One node process, as its parent sees it.
struct NodeProcess {
    child: Child,
    stdin: Option<ChildStdin>,
}

/// The running nodes, by name. Dropping it kills those still running.
pub struct Nodes {
    processes: BTreeMap<String, NodeProcess>,
    lines: mpsc::Receiver<(String, String)>,
    /// Lines read while waiting for another one, by node.
    pending: Vec<(String, String)>,
}

/// A free loopback port below the ephemeral range (Linux hands out 32768-60999 as the source
/// ports of outgoing connections): a port the OS picked for us there is released before the
/// node binds it, and in that moment any outgoing connection on the machine may take it.
fn free_port() -> std::io::Result<u16> {
    for _ in 0..1_000 {
        let port = rand::Rng::gen_range(&mut rand::thread_rng(), 20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The node's full name for short name `name`.
pub fn node_name(name: &str) -> String {
    format!("{name}@127.0.0.1")
}

impl Nodes {
    /// Starts one node process per name and relays what each prints, prefixed with its name.
    pub fn launch(names: &[&str]) -> Result<Nodes, Error> {
        let exe = std::env::current_exe()?;
        let cookie = format!("{:032x}", rand::random::<u128>());
        let mut ports = BTreeMap::new();
        for name in names {
            ports.insert(name.to_string(), free_port()?);
        }
        let (tx, lines) = mpsc::channel();
        let mut nodes = Nodes {
            processes: BTreeMap::new(),
            lines,
            pending: Vec::new(),
        };
        for (name, port) in &ports {
            let seeds: Vec<String> = ports
                .iter()
                .filter(|(other, _)| *other != name)
                .map(|(_, p)| format!("127.0.0.1:{p}"))
                .collect();
            let mut child = Command::new(&exe)
                .arg(NODE_ROLE)
                .arg(name)
                .arg(port.to_string())
                .args(&seeds)
                .env(COOKIE_ENV, &cookie)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()?;
            let stdout = child.stdout.take().ok_or("no stdout")?;
            let stdin = child.stdin.take();
            // Registered before anything can fail, so that Drop kills it.
            nodes
                .processes
                .insert(name.clone(), NodeProcess { child, stdin });
            let tx = tx.clone();
            let name = name.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    println!("  [{name}] {line}");
                    if tx.send((name.clone(), line)).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(nodes)
    }

    /// Waits until node `name` prints a line starting with `key`; returns the rest of it.
    pub fn expect(&mut self, name: &str, key: &str, timeout: Duration) -> Result<String, Error> {
        let matches = |node: &str, line: &str| node == name && line.split(' ').next() == Some(key);
        if let Some(i) = self.pending.iter().position(|(n, l)| matches(n, l)) {
            let (_, line) = self.pending.remove(i);
            return Ok(rest(&line, key));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((node, line)) if matches(&node, &line) => return Ok(rest(&line, key)),
                Ok(other) => self.pending.push(other),
                Err(_) => {
                    return Err(
                        format!("node {name} did not print `{key}` within {timeout:?}").into(),
                    )
                }
            }
        }
    }

    /// Sends node `name` one command line.
    pub fn tell(&mut self, name: &str, line: &str) -> Result<(), Error> {
        let stdin = self
            .processes
            .get_mut(name)
            .and_then(|p| p.stdin.as_mut())
            .ok_or_else(|| format!("no running node {name}"))?;
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Kills node `name` with SIGKILL, as a crash would: no handover, no goodbye.
    pub fn kill(&mut self, name: &str) -> Result<(), Error> {
        let mut process = self
            .processes
            .remove(name)
            .ok_or_else(|| format!("no running node {name}"))?;
        process.child.kill()?;
        process.child.wait()?;
        Ok(())
    }

    /// Asks every node to stop (`quit`), waits up to `timeout` for each to exit 0, and kills
    /// those that do not.
    pub fn stop_all(mut self, timeout: Duration) -> Result<(), Error> {
        let names: Vec<String> = self.processes.keys().cloned().collect();
        for name in &names {
            let _ = self.tell(name, "quit");
        }
        let deadline = Instant::now() + timeout;
        let mut failures = Vec::new();
        for name in names {
            let Some(mut process) = self.processes.remove(&name) else {
                continue;
            };
            drop(process.stdin.take());
            loop {
                match process.child.try_wait()? {
                    Some(status) if status.success() => break,
                    Some(status) => {
                        failures.push(format!("{name} exited with {status}"));
                        break;
                    }
                    None if Instant::now() >= deadline => {
                        let _ = process.child.kill();
                        let _ = process.child.wait();
                        failures.push(format!("{name} did not stop within {timeout:?}"));
                        break;
                    }
                    None => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; ").into())
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for process in self.processes.values_mut() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }
}

fn rest(line: &str, key: &str) -> String {
    line[key.len()..].trim().to_owned()
}

/// What a node process was started as.
pub struct NodeRole {
    /// Its short name (`a`); its node name is [`node_name`] of it.
    pub name: String,
    port: u16,
    seeds: Vec<String>,
    cookie: String,
}

impl NodeRole {
    /// `Some` when this process was started as a node by [`Nodes::launch`].
    pub fn from_args() -> Option<Result<NodeRole, Error>> {
        let mut args = std::env::args().skip(1);
        if args.next().as_deref() != Some(NODE_ROLE) {
            return None;
        }
        Some((|| -> Result<NodeRole, Error> {
            let name = args.next().ok_or("node name missing")?;
            let port = args.next().ok_or("port missing")?.parse()?;
            let cookie = std::env::var(COOKIE_ENV).map_err(|_| format!("{COOKIE_ENV} not set"))?;
            Ok(NodeRole {
                name,
                port,
                seeds: args.collect(),
                cookie,
            })
        })())
    }

    /// This node's full name (`a@127.0.0.1`).
    pub fn node_name(&self) -> String {
        node_name(&self.name)
    }

    /// Starts the cluster node: loopback, the shared cookie, every other node as a seed.
    pub async fn start_node(&self) -> Result<ClusterNode, Error> {
        let config = ClusterConfig::for_node(self.node_name(), self.port, self.cookie.as_str())?
            .with_seeds(self.seeds.iter().cloned());
        Ok(ClusterNode::start(config).await?)
    }

    /// The commands the parent sends, one line each. When the parent goes away (its end of
    /// stdin closes) the process exits at once: a node never outlives its parent.
    pub fn commands(&self) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                let quit = line == "quit";
                if tx.send(line).is_err() || quit {
                    return;
                }
            }
            std::process::exit(0);
        });
        rx
    }
}

/// Prints one line for the parent (`key words...`).
pub fn say(line: impl std::fmt::Display) {
    println!("{line}");
}
