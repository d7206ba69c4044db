//! What a hub tells its operators beyond logs: Prometheus metrics ([`metrics`]), recorded
//! through the `metrics` facade so that the library never imposes an exporter, and the
//! Prometheus exporter the admin API serves ([`install_prometheus`], with the `admin`
//! feature).

pub(crate) mod failure_tally;
pub mod metrics;
#[cfg(feature = "admin")]
mod prometheus;

#[cfg(feature = "admin")]
pub use prometheus::{install_prometheus, prometheus};
