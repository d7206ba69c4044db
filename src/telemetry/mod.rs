//! What a hub tells its operators beyond logs: Prometheus metrics ([`metrics`]), recorded
//! through the `metrics` facade so that the library never imposes an exporter, and the
//! Prometheus exporter the admin API serves ([`install_prometheus`], with the `admin`
//! feature). It imports no other layer: the layers above push into it (`refusals`: peer input
//! refused, counted by every actor that refuses it).

pub(crate) mod failure_tally;
pub(crate) mod messaging;
pub mod metrics;
pub mod process;
#[cfg(feature = "admin")]
mod prometheus;
pub(crate) mod refusals;
pub(crate) mod zero;

#[cfg(feature = "admin")]
pub use prometheus::{install_prometheus, prometheus};
