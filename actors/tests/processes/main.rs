//! The multi-process tests, in one binary: `process-hub node` processes on loopback (or, for the
//! partition tests, in network namespaces of their own), driven through their admin API, `ctl`,
//! signals and faults; the `demo` and `bench` reports; client nodes of a cluster. One module per
//! concern; a test's name is its module's path
//! (`cargo test -p process_hub_actors --test processes durable_processes::`).
//!
//! The tests run side by side in one process. A test that joins a cluster as a node of its own
//! (ractor's registries and pg groups are process-global) re-executes the binary to run alone
//! (`common::alone`).
//!
//! Elsewhere: the dashboard in a browser (`tests/browser/`) and `process-hub simulate`
//! (`tests/simulate.rs`).

mod common;
mod partition;

mod admin_messaging_processes;
mod admin_security;
mod baseline_pg;
mod bench_recovery;
mod bench_storage;
mod cluster_processes;
mod cluster_secrets;
mod ctl_processes;
mod demo;
mod deploy_files;
mod dns_discovery_processes;
mod durable_processes;
mod forgery_processes;
mod gossip_processes;
mod guided_processes;
mod hot_swap_processes;
mod large_children_processes;
mod load_balanced_processes;
mod node_process;
mod partial_partition_processes;
mod partition_processes;
mod remote_hub;
mod remote_hub_monitor;
mod replication_processes;
mod storage_faults;
mod typed_processes;
