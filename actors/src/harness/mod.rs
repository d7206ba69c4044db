//! Driving real `process-hub node` processes from outside, as an operator would: spawn them on
//! loopback, talk to their admin APIs, kill and restart them. Used by `process-hub demo`, the
//! cluster benchmarks and the multi-process tests in `actors/tests/`.

pub mod admin_client;
pub mod local_cluster;

pub use admin_client::{AdminClient, AdminClientError};
pub use local_cluster::{
    free_port, wait_for, ClusterOptions, HarnessError, LocalCluster, NodeProcess,
};
