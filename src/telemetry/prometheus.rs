//! The Prometheus exporter of this process's metrics: installed once, rendered by the admin
//! API's `GET /metrics` (the text exposition format).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Latency buckets, in seconds: a local start takes about 100 µs, a remote one a few ms, a
/// commit on disk a few ms, a request waiting for a node's grace seconds.
const SECONDS_BUCKETS: [f64; 14] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

/// Writes per commit: a lone write, then groups of concurrent writers.
const WRITES_BUCKETS: [f64; 8] = [1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0];

/// Installs the Prometheus recorder as this process's `metrics` recorder, once; later calls
/// return the same handle. Fails when another recorder was installed first.
pub fn install_prometheus() -> Result<PrometheusHandle, BuildError> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
            &SECONDS_BUCKETS,
        )?
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full(super::metrics::WRITES_PER_COMMIT.into()),
            &WRITES_BUCKETS,
        )?
        .install_recorder()?;
    super::metrics::describe();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// The installed exporter, if [`install_prometheus`] was called.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    HANDLE.get()
}
