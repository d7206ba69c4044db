//! How a node is configured: its identity (`name@host`), where it listens, its cookie, seeds
//! and TLS.

use std::net::{IpAddr, SocketAddr};

use crate::cluster::discovery::Discovery;
use crate::cluster::gateway::WirePolicy;
use crate::core::backoff::BackoffConfig;
use crate::core::failure_detector::DetectorConfig;

/// The node could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No free port could be reserved, or the name is unusable.
    #[error("invalid node configuration: {0}")]
    Config(String),
    /// An actor of the node failed to spawn.
    #[error("cannot start {what}: {reason}")]
    Spawn {
        /// Which actor.
        what: &'static str,
        /// Why.
        reason: String,
    },
}

/// TLS for node-to-node connections (rustls through tokio-rustls).
///
/// [`TlsConfig::mutual`] builds mutual TLS from PEM files (what the `process-hub` binary's
/// `--tls-*` flags do). Or build the acceptor from the node's certificate chain and key
/// (`rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(chain, key)`) and the
/// connector from the CA that signed the peers' certificates
/// (`rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()`);
/// `server_name` is the name the peers' certificates are issued for.
#[derive(Clone)]
pub struct TlsConfig {
    /// Accepts incoming connections.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// Opens outgoing connections.
    pub connector: tokio_rustls::TlsConnector,
    /// The name checked against the peers' certificates.
    pub server_name: tokio_rustls::rustls::pki_types::ServerName<'static>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// How to run a node: who it is (`name@host`), where it listens, the cookie it shares with its
/// peers, and which nodes it joins.
///
/// The node's identity is two parts: `name` (without `@`) and `host`, the address peers reach
/// it at. Hubs on the node are known as `name@host` (the `NodeName` in their registries); peers
/// dial `host:port`. [`ClusterConfig::for_node`] takes the whole `name@host` at once.
///
/// See [`ClusterNode`] for a complete example.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The node's short name, without `@`; its cluster identity is `name@host`.
    pub name: String,
    /// The host peers reach this node at; it is also advertised as `host:port`.
    pub host: String,
    /// TCP port to listen on; 0 picks a free one (see [`ClusterNode::port`]).
    pub port: u16,
    /// Address to listen on. `None` (the default) listens on loopback only: `host` when it is a
    /// loopback IP literal, else `127.0.0.1`, so a node is never reachable from other machines
    /// unless asked. Set `0.0.0.0` / `::` (every interface) or one interface's address for a
    /// cluster that spans machines.
    pub bind: Option<IpAddr>,
    /// Shared secret every node of the cluster must have.
    pub cookie: String,
    /// `host:port` of nodes to join; retried with backoff for as long as the node runs.
    pub seeds: Vec<String>,
    /// TLS; `None` for plain TCP.
    pub tls: Option<TlsConfig>,
    /// Heartbeat interval and timeout of the hubs' failure detectors.
    pub heartbeat: DetectorConfig,
    /// Reconnection schedule.
    pub reconnect: BackoffConfig,
    /// Which wire versions the hubs speak and accept (sealed frames by default; see
    /// [`crate::cluster::gateway`]).
    pub wire: WirePolicy,
    /// How long a node given seeds may have no authenticated peer before it reports itself
    /// isolated (health `status: "isolated"`, not ready). Default
    /// [`DEFAULT_ISOLATED_AFTER`](crate::core::isolation::DEFAULT_ISOLATED_AFTER), 10 s.
    /// A node without seeds is never isolated.
    pub isolated_after: std::time::Duration,
    /// Seeds found in DNS beside [`ClusterConfig::seeds`] (see [`crate::cluster::discovery`]);
    /// `None` for the static seeds only. While DNS lists no other node (and there are no
    /// static seeds) the node is alone by design, not isolated: a one-node deployment, or the
    /// first pod of a StatefulSet, is ready on its own.
    pub discovery: Option<Discovery>,
    /// The nameserver discovery asks (`IP:PORT`); `None` for the system's (`/etc/resolv.conf`).
    pub dns_server: Option<SocketAddr>,
}

impl ClusterConfig {
    /// A plain-TCP node `name@host` on `port` with `cookie`, default timings, no seeds.
    pub fn new(
        name: impl Into<String>,
        host: impl Into<String>,
        port: u16,
        cookie: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            host: host.into(),
            port,
            bind: None,
            cookie: cookie.into(),
            seeds: Vec::new(),
            tls: None,
            heartbeat: DetectorConfig::default(),
            reconnect: BackoffConfig::default(),
            wire: WirePolicy::default(),
            isolated_after: crate::core::isolation::DEFAULT_ISOLATED_AFTER,
            discovery: None,
            dns_server: None,
        }
    }

    /// A plain-TCP node from its whole cluster identity `name@host` (as a hub's `node_name`
    /// is written), on `port` with `cookie`. Fails when `node` is not `name@host` with both
    /// parts non-empty.
    pub fn for_node(
        node: impl AsRef<str>,
        port: u16,
        cookie: impl Into<String>,
    ) -> Result<Self, ClusterError> {
        let node = node.as_ref();
        match node.split_once('@') {
            Some((name, host)) if !name.is_empty() && !host.is_empty() && !host.contains('@') => {
                Ok(Self::new(name, host, port, cookie))
            }
            _ => Err(ClusterError::Config(format!(
                "node {node:?} is not `name@host` (for example \"a@127.0.0.1\")"
            ))),
        }
    }

    /// The same config joining `seeds` (`host:port` of nodes already running).
    pub fn with_seeds<S: Into<String>>(mut self, seeds: impl IntoIterator<Item = S>) -> Self {
        self.seeds = seeds.into_iter().map(Into::into).collect();
        self
    }

    /// The same config finding seeds in DNS too, beside [`ClusterConfig::seeds`]:
    ///
    /// ```
    /// use std::time::Duration;
    /// use process_hub::{ClusterConfig, Discovery};
    ///
    /// let config = ClusterConfig::for_node("a@10.0.0.1", 4000, "cookie")
    ///     .unwrap()
    ///     .with_bind("0.0.0.0".parse().unwrap())
    ///     // Every A/AAAA record of the headless service, on this node's port (4000).
    ///     .with_discovery(Discovery::Dns {
    ///         name: "orders.default.svc.cluster.local".into(),
    ///         port: None,
    ///         interval: Duration::from_secs(5),
    ///     });
    /// assert!(config.discovery.is_some());
    /// ```
    pub fn with_discovery(mut self, discovery: Discovery) -> Self {
        self.discovery = Some(discovery);
        self
    }

    /// The same config asking `server` (`IP:PORT`) for discovery, not the system's resolver.
    pub fn with_dns_server(mut self, server: SocketAddr) -> Self {
        self.dns_server = Some(server);
        self
    }

    /// The same config listening on `bind` rather than loopback.
    pub fn with_bind(mut self, bind: IpAddr) -> Self {
        self.bind = Some(bind);
        self
    }

    /// The same config over TLS (every node then needs a seed; see the module's Security).
    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The address the node listens on: [`ClusterConfig::bind`], or loopback.
    pub fn listen_ip(&self) -> IpAddr {
        if let Some(bind) = self.bind {
            return bind;
        }
        match self.host.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => ip,
            _ => IpAddr::from([127, 0, 0, 1]),
        }
    }
}

/// Whether peers elsewhere could reach `host` (not a loopback literal, nor `localhost`).
pub(super) fn advertises_beyond_loopback(host: &str) -> bool {
    match host.parse::<IpAddr>() {
        Ok(ip) => !ip.is_loopback(),
        Err(_) => !host.eq_ignore_ascii_case("localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_listens_on_loopback_unless_told_otherwise() {
        let local = ClusterConfig::new("a", "127.0.0.1", 0, "cookie");
        assert_eq!(local.listen_ip(), IpAddr::from([127, 0, 0, 1]));
        let v6 = ClusterConfig::new("a", "::1", 0, "cookie");
        assert_eq!(v6.listen_ip(), "::1".parse::<IpAddr>().unwrap());
        // A routable host does not open the node to the network by itself.
        let routable = ClusterConfig::new("a", "10.0.0.1", 0, "cookie");
        assert_eq!(routable.listen_ip(), IpAddr::from([127, 0, 0, 1]));
        let open = routable.with_bind(IpAddr::from([0, 0, 0, 0]));
        assert_eq!(open.listen_ip(), IpAddr::from([0, 0, 0, 0]));
    }

    #[test]
    fn for_node_splits_name_at_host_and_refuses_anything_else() {
        let config = ClusterConfig::for_node("a@10.0.0.1", 4000, "cookie")
            .expect("name@host")
            .with_seeds(["10.0.0.2:4000"]);
        assert_eq!(
            (config.name.as_str(), config.host.as_str(), config.port),
            ("a", "10.0.0.1", 4000)
        );
        assert_eq!(config.seeds, vec!["10.0.0.2:4000".to_owned()]);
        for bad in ["a", "@host", "a@", "a@b@c", ""] {
            assert!(
                matches!(
                    ClusterConfig::for_node(bad, 0, "c"),
                    Err(ClusterError::Config(_))
                ),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn only_loopback_hosts_are_private() {
        assert!(!advertises_beyond_loopback("127.0.0.1"));
        assert!(!advertises_beyond_loopback("::1"));
        assert!(!advertises_beyond_loopback("LOCALHOST"));
        assert!(advertises_beyond_loopback("10.0.0.1"));
        assert!(advertises_beyond_loopback("node-a.internal"));
    }
}
