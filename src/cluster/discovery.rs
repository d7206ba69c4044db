//! Seeds from DNS: a name whose A/AAAA records ([`Discovery::Dns`]) or SRV records
//! ([`Discovery::DnsSrv`]) list the nodes of the cluster, re-resolved periodically, as
//! Kubernetes' headless services publish them (Elixir's libcluster `Kubernetes.DNS` and
//! `Kubernetes.DNSSRV` do the same).
//!
//! Every resolved address that is not the node itself becomes a seed the node dials, the same
//! way as a static seed ([`ClusterConfig::seeds`](super::node::ClusterConfig)); the two
//! combine. An address DNS stops listing leaves the seed set, but DNS never takes a member out
//! of the cluster: only the failure detector and the reachability rules do
//! ([`crate::core::discovery`] makes that decision, without IO).
//!
//! A failed resolution (timeout, refused, server unreachable) is logged and retried at the next
//! interval; it changes nothing. An answer that names no record (NXDOMAIN, or no data) is an
//! empty answer: DNS lists no node.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{LookupIpStrategy, NameServerConfigGroup, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::{ResolveError, TokioResolver};

use crate::core::discovery::MAX_SEEDS_PER_ANSWER;

/// How often DNS is asked again, by default: often enough that a new pod is dialled within
/// seconds, rarely enough to be nothing for the DNS server.
pub const DEFAULT_DISCOVERY_INTERVAL: Duration = Duration::from_secs(5);

/// The range of a discovery interval, in ms: below 100 ms is a query storm, above an hour is
/// no discovery.
pub const DISCOVERY_INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=3_600_000;

/// How a node finds seeds in DNS, beside its static seeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovery {
    /// The A and AAAA records of `name`, each address on `port` (the node's own cluster port
    /// when `None`: every node of the cluster listens on the same port).
    Dns {
        /// The DNS name (e.g. a headless service, `orders.default.svc.cluster.local`).
        name: String,
        /// The port of every address; `None` for this node's own port.
        port: Option<u16>,
        /// How often the name is resolved again.
        interval: Duration,
    },
    /// The SRV records of `name`: each record's target (resolved to its A/AAAA addresses) and
    /// port.
    DnsSrv {
        /// The DNS name of the SRV records (e.g. `_cluster._tcp.orders.default.svc.cluster.local`).
        name: String,
        /// How often the name is resolved again.
        interval: Duration,
    },
}

/// Why a discovery specification was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// The specification is not `dns:NAME[:PORT]` or `dns-srv:NAME`.
    #[error("{spec:?} is not dns:NAME[:PORT] or dns-srv:NAME")]
    Form {
        /// The rejected specification.
        spec: String,
    },
    /// The name is not a DNS name.
    #[error("{name:?} is not a DNS name: {reason}")]
    Name {
        /// The rejected name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The port is not a number in 1..=65535.
    #[error("{port:?} is not a port (1-65535)")]
    Port {
        /// The rejected port.
        port: String,
    },
    /// The interval is out of [`DISCOVERY_INTERVAL_MS`].
    #[error("interval {ms} ms is outside [100, 3600000]")]
    Interval {
        /// The rejected interval, in ms.
        ms: u128,
    },
}

/// Checks a DNS name: 1-253 characters, labels of 1-63 characters of `[A-Za-z0-9_-]`, an
/// optional final dot.
fn check_name(name: &str) -> Result<(), DiscoveryError> {
    let bad = |reason| {
        Err(DiscoveryError::Name {
            name: name.to_owned(),
            reason,
        })
    };
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if trimmed.is_empty() || trimmed.len() > 253 {
        return bad("must be 1-253 characters");
    }
    for label in trimmed.split('.') {
        if label.is_empty() || label.len() > 63 {
            return bad("every label must be 1-63 characters");
        }
        if !label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        {
            return bad("labels are letters, digits, '-' and '_'");
        }
    }
    Ok(())
}

impl Discovery {
    /// Reads `dns:NAME[:PORT]` or `dns-srv:NAME` (the `--discovery` flag), resolved every
    /// `interval`.
    pub fn parse(spec: &str, interval: Duration) -> Result<Self, DiscoveryError> {
        let form = || DiscoveryError::Form {
            spec: spec.to_owned(),
        };
        let discovery = if let Some(rest) = spec.strip_prefix("dns-srv:") {
            check_name(rest)?;
            Discovery::DnsSrv {
                name: rest.to_owned(),
                interval,
            }
        } else if let Some(rest) = spec.strip_prefix("dns:") {
            let (name, port) = match rest.split_once(':') {
                Some((name, port)) => {
                    let parsed = port
                        .parse::<u16>()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| DiscoveryError::Port {
                            port: port.to_owned(),
                        })?;
                    (name, Some(parsed))
                }
                None => (rest, None),
            };
            check_name(name)?;
            Discovery::Dns {
                name: name.to_owned(),
                port,
                interval,
            }
        } else {
            return Err(form());
        };
        discovery.check_interval()?;
        Ok(discovery)
    }

    /// How often the name is resolved again.
    pub fn interval(&self) -> Duration {
        match self {
            Discovery::Dns { interval, .. } | Discovery::DnsSrv { interval, .. } => *interval,
        }
    }

    /// The name resolved.
    pub fn name(&self) -> &str {
        match self {
            Discovery::Dns { name, .. } | Discovery::DnsSrv { name, .. } => name,
        }
    }

    /// Refuses a name or an interval a node could not work with (a config built by hand rather
    /// than by [`Discovery::parse`]).
    pub fn validate(&self) -> Result<(), DiscoveryError> {
        check_name(self.name())?;
        if let Discovery::Dns { port: Some(0), .. } = self {
            return Err(DiscoveryError::Port { port: "0".into() });
        }
        self.check_interval()
    }

    fn check_interval(&self) -> Result<(), DiscoveryError> {
        let ms = self.interval().as_millis();
        if !(u128::from(*DISCOVERY_INTERVAL_MS.start())..=u128::from(*DISCOVERY_INTERVAL_MS.end()))
            .contains(&ms)
        {
            return Err(DiscoveryError::Interval { ms });
        }
        Ok(())
    }
}

impl fmt::Display for Discovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Discovery::Dns {
                name,
                port: Some(port),
                ..
            } => write!(f, "dns:{name}:{port}"),
            Discovery::Dns { name, .. } => write!(f, "dns:{name}"),
            Discovery::DnsSrv { name, .. } => write!(f, "dns-srv:{name}"),
        }
    }
}

/// A resolver for one [`Discovery`]: asks the configured nameserver, or the system's
/// (`/etc/resolv.conf`), without caching (every round asks DNS afresh).
pub(crate) struct DnsSeeds {
    resolver: TokioResolver,
    discovery: Discovery,
    /// The port of an A/AAAA answer when the discovery names none: the node's own.
    own_port: u16,
}

/// Why one resolution gave no answer (nothing is changed; retried at the next interval).
#[derive(Debug, thiserror::Error)]
#[error("resolving {name}: {source}")]
pub(crate) struct ResolutionFailed {
    name: String,
    source: ResolveError,
}

impl DnsSeeds {
    /// A resolver asking `server` (`None`: the system's configuration).
    pub(crate) fn new(
        discovery: Discovery,
        server: Option<SocketAddr>,
        own_port: u16,
    ) -> Result<Self, ResolveError> {
        let mut builder = match server {
            Some(server) => TokioResolver::builder_with_config(
                ResolverConfig::from_parts(
                    None,
                    vec![],
                    NameServerConfigGroup::from_ips_clear(&[server.ip()], server.port(), true),
                ),
                TokioConnectionProvider::default(),
            ),
            None => TokioResolver::builder_tokio()?,
        };
        let options = builder.options_mut();
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        options.cache_size = 0;
        options.timeout = options
            .timeout
            .min(discovery.interval().max(Duration::from_secs(1)));
        Ok(Self {
            resolver: builder.build(),
            discovery,
            own_port,
        })
    }

    /// The discovery this resolver serves.
    pub(crate) fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// Every address the name lists now (at most a bounded number); empty when DNS lists
    /// none.
    pub(crate) async fn resolve(&self) -> Result<Vec<SocketAddr>, ResolutionFailed> {
        let failed = |source: ResolveError| ResolutionFailed {
            name: self.discovery.name().to_owned(),
            source,
        };
        match &self.discovery {
            Discovery::Dns { name, port, .. } => {
                let port = port.unwrap_or(self.own_port);
                let ips = match self.resolver.lookup_ip(name.as_str()).await {
                    Ok(ips) => ips.iter().collect::<Vec<IpAddr>>(),
                    Err(e) if no_records(&e) => Vec::new(),
                    Err(e) => return Err(failed(e)),
                };
                Ok(bounded(ips.into_iter().map(|ip| SocketAddr::new(ip, port))))
            }
            Discovery::DnsSrv { name, .. } => {
                let lookup = match self.resolver.srv_lookup(name.as_str()).await {
                    Ok(lookup) => lookup,
                    Err(e) if no_records(&e) => return Ok(Vec::new()),
                    Err(e) => return Err(failed(e)),
                };
                // The addresses the answer carried along (its additional section), by name.
                let mut known: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
                for record in lookup.as_lookup().records() {
                    let ip = match record.data() {
                        RData::A(a) => IpAddr::V4(a.0),
                        RData::AAAA(a) => IpAddr::V6(a.0),
                        _ => continue,
                    };
                    known
                        .entry(record.name().to_ascii().to_ascii_lowercase())
                        .or_default()
                        .push(ip);
                }
                // The lowest targets, so that every node asks for the same ones.
                let targets: BTreeSet<(String, u16)> = lookup
                    .iter()
                    .take(4 * MAX_SEEDS_PER_ANSWER)
                    .map(|srv| (srv.target().to_ascii().to_ascii_lowercase(), srv.port()))
                    .filter(|(_, port)| *port != 0)
                    .collect();
                let mut addrs = Vec::new();
                for (target, port) in targets.into_iter().take(MAX_SEEDS_PER_ANSWER) {
                    let ips = match known.get(&target) {
                        Some(ips) => ips.clone(),
                        None => match self.resolver.lookup_ip(target.as_str()).await {
                            Ok(ips) => ips.iter().collect(),
                            Err(e) => {
                                // One target without addresses does not void the others.
                                tracing::debug!(%target, error = %e, "SRV target does not resolve");
                                Vec::new()
                            }
                        },
                    };
                    addrs.extend(ips.into_iter().map(|ip| SocketAddr::new(ip, port)));
                    if addrs.len() > 2 * MAX_SEEDS_PER_ANSWER {
                        break;
                    }
                }
                Ok(bounded(addrs.into_iter()))
            }
        }
    }
}

/// Resolves `seeds` now and then every interval, for as long as `deliver` takes the answers
/// (it returns `false` once their receiver is gone). A failed resolution is logged (a warning
/// when DNS stops answering, at debug while it goes on failing) and changes nothing.
pub(crate) async fn poll(seeds: DnsSeeds, deliver: impl Fn(Vec<SocketAddr>) -> bool) {
    let mut interval = tokio::time::interval(seeds.discovery().interval());
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        interval.tick().await;
        match seeds.resolve().await {
            Ok(addrs) => {
                if failing {
                    tracing::info!(discovery = %seeds.discovery(), "discovery: DNS answers again");
                }
                failing = false;
                tracing::debug!(discovery = %seeds.discovery(), addresses = ?addrs, "discovery: resolved");
                if !deliver(addrs) {
                    return;
                }
            }
            Err(error) => {
                if failing {
                    tracing::debug!(%error, "discovery: DNS still does not answer");
                } else {
                    tracing::warn!(discovery = %seeds.discovery(), %error,
                        "discovery: DNS did not answer; the seeds stay as they were, retried every interval");
                }
                failing = true;
            }
        }
    }
}

/// Whether the error is DNS saying there is nothing (rather than not answering).
fn no_records(error: &ResolveError) -> bool {
    error.is_no_records_found() || error.is_nx_domain()
}

/// The distinct addresses of an answer, no more than twice the bound (the plan takes the
/// lowest [`MAX_SEEDS_PER_ANSWER`] after leaving out the node's own).
fn bounded(addrs: impl Iterator<Item = SocketAddr>) -> Vec<SocketAddr> {
    let set: BTreeSet<SocketAddr> = addrs.take(4 * MAX_SEEDS_PER_ANSWER).collect();
    set.into_iter().take(2 * MAX_SEEDS_PER_ANSWER).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE: Duration = Duration::from_secs(5);

    #[test]
    fn both_forms_parse_and_print_back() {
        for (spec, expected) in [
            (
                "dns:orders.default.svc.cluster.local",
                Discovery::Dns {
                    name: "orders.default.svc.cluster.local".into(),
                    port: None,
                    interval: FIVE,
                },
            ),
            (
                "dns:peers.hub.test:7100",
                Discovery::Dns {
                    name: "peers.hub.test".into(),
                    port: Some(7100),
                    interval: FIVE,
                },
            ),
            (
                "dns-srv:_ph._tcp.hub.test.",
                Discovery::DnsSrv {
                    name: "_ph._tcp.hub.test.".into(),
                    interval: FIVE,
                },
            ),
        ] {
            let parsed = Discovery::parse(spec, FIVE).expect(spec);
            assert_eq!(parsed, expected);
            assert_eq!(parsed.to_string(), spec);
            assert!(parsed.validate().is_ok());
        }
    }

    #[test]
    fn malformed_specifications_are_refused_with_the_reason() {
        for (spec, what) in [
            ("orders.svc", "form"),
            ("dns", "form"),
            ("srv:orders", "form"),
            ("dns:", "name"),
            ("dns-srv:", "name"),
            ("dns:a..b", "name"),
            ("dns:a b", "name"),
            ("dns:peers:0", "port"),
            ("dns:peers:70000", "port"),
            ("dns:peers:x", "port"),
            ("dns:peers:1:2", "port"),
            ("dns-srv:_ph._tcp.x:7100", "name"),
        ] {
            let err = Discovery::parse(spec, FIVE).expect_err(spec);
            let matches = match what {
                "form" => matches!(err, DiscoveryError::Form { .. }),
                "name" => matches!(err, DiscoveryError::Name { .. }),
                _ => matches!(err, DiscoveryError::Port { .. }),
            };
            assert!(matches, "{spec}: {err}");
        }
        let long = format!("dns:{}", "a".repeat(64));
        assert!(matches!(
            Discovery::parse(&long, FIVE),
            Err(DiscoveryError::Name { .. })
        ));
        for ms in [0, 99, 3_600_001] {
            assert!(matches!(
                Discovery::parse("dns:peers", Duration::from_millis(ms)),
                Err(DiscoveryError::Interval { .. })
            ));
        }
    }

    #[test]
    fn an_answer_is_deduplicated_and_bounded() {
        let many = (0..(10 * MAX_SEEDS_PER_ANSWER) as u32)
            .map(|i| SocketAddr::from(([10, 233, (i / 256) as u8, (i % 256) as u8], 7100)));
        let twice = many.clone().chain(many);
        let out = bounded(twice);
        assert_eq!(out.len(), 2 * MAX_SEEDS_PER_ANSWER);
        let distinct: BTreeSet<_> = out.iter().collect();
        assert_eq!(distinct.len(), out.len());
    }
}
