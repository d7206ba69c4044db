//! The library's integration tests, in one binary: the hub through its public API, in-process
//! clusters of hubs (`common::cluster`), the admin routes, storage and recovery, and the
//! cluster transport between real nodes (`cluster_node_*`: this binary re-executed as the
//! second node, `common::peers`). One module per concern; a test's name is its module's path
//! (`cargo test -p process_hub --test in_process cluster_faults::`).
//!
//! The tests run side by side in one process. A test that needs the process to itself (a real
//! `ractor_cluster` node, a global tracing subscriber or metrics recorder, a counting allocator,
//! the resident size) re-executes the binary to run alone (`common::alone`).
//!
//! Elsewhere: the layer rule (`tests/architecture.rs`), the simulator (`tests/simulation.rs`),
//! the S3 manifest against a real server (`tests/object_store/`), and the tests that run
//! `process-hub` processes (`actors/tests/`).

mod common;

mod admin_api;
mod admin_explain_events;
mod admin_hub;
mod admin_messaging;
mod child_ref;
mod cluster_faults;
mod cluster_hub;
mod cluster_node_cookie;
mod cluster_node_down;
mod cluster_node_forgery;
mod cluster_node_freeze;
mod cluster_node_mesh;
mod cluster_node_restart;
mod cluster_node_tls;
mod cluster_node_upgrade;
mod cluster_node_upgrade_done;
mod coordinator_state;
mod custom_storage;
mod examples;
mod footprint;
mod gossip_sync;
mod guided_placement;
mod hot_swap;
mod hub_api;
mod hub_durable;
mod hub_hooks_events;
mod hub_msg;
mod hub_supervision;
mod large_children;
mod load_placement;
mod manifest_validation;
mod memory_release;
mod metrics;
mod partition_tolerance;
mod recovery_cluster;
mod recovery_delta;
mod recovery_faults;
mod recovery_manifest;
mod recovery_migration;
mod recovery_single;
mod replication;
mod storage_backends;
mod storage_crash;
mod traces;
mod typed_serde;

/// The second node of the `cluster_node_*` tests: the binary re-executed with the peer's
/// settings in its environment (`common::peers::Peer`).
#[test]
#[ignore = "runs as the second node of the multi-process tests"]
fn peer_node_entry() {
    common::peers::peer_node_entry();
}
