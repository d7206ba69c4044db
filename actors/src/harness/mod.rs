//! Driving real `process-hub node` processes from outside, as an operator would: spawn them on
//! loopback, talk to their admin APIs, kill and restart them. Used by `process-hub demo`, the
//! cluster benchmarks and the multi-process tests in `actors/tests/`.

pub mod admin_client;
pub mod census;
pub mod double_run;
pub mod join;
pub mod local_cluster;
pub mod outage;

pub use admin_client::{AdminClient, AdminClientError};
pub use census::Census;
pub use double_run::{DoubleRun, Timeline, Watch};
pub use join::{measure_join, JoinReport};
pub use local_cluster::{
    free_port, wait_for, write_private, ClusterOptions, HarnessError, LocalCluster, NodeProcess,
};
pub use outage::{whole_cluster_outage, OutageReport, OutageSettings};
