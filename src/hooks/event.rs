//! Hook payloads: what an observing handler receives at each moment, one variant per
//! [`HookKey`](super::HookKey) that observes. Apart from the handler table because the payloads
//! grow with every feature (cluster, recovery) while the table's rules do not.

use crate::core::reconcile::RoundStats;
use crate::core::recovery::RecoveryState;
use crate::model::{ChildId, ChildSpec, NodeName, Pid};

/// What an observing handler receives.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HookEvent {
    /// `registry_pid_insert`.
    RegistryPidInsert {
        /// The child.
        id: ChildId,
        /// The node now running it.
        node: NodeName,
        /// Its pid there.
        pid: Pid,
    },
    /// `registry_pid_remove`.
    RegistryPidRemove {
        /// The child.
        id: ChildId,
        /// The node that no longer runs it.
        node: NodeName,
    },
    /// `pre_children_start`.
    PreChildrenStart {
        /// The node starting them.
        node: NodeName,
        /// The specs about to start (before the alter hook).
        specs: Vec<ChildSpec>,
    },
    /// `post_children_start`.
    PostChildrenStart {
        /// The node that started them.
        node: NodeName,
        /// Children started, with their pids.
        started: Vec<(ChildId, Pid)>,
        /// Children that failed to start, with the reason.
        failed: Vec<(ChildId, String)>,
    },
    /// `child_process_pid_update`.
    ChildProcessPidUpdate {
        /// The child.
        id: ChildId,
        /// The node running it.
        node: NodeName,
        /// The pid before the restart.
        old_pid: Pid,
        /// The pid after.
        new_pid: Pid,
    },
    /// `process_startups`.
    ProcessStartups {
        /// The node.
        node: NodeName,
        /// Each spawned child and its pid.
        processes: Vec<(ChildId, Pid)>,
    },
    /// `coordinator_shutdown`.
    CoordinatorShutdown {
        /// The hub shutting down.
        hub_id: String,
        /// The node it runs on.
        node: NodeName,
    },
    /// `recovery_state_changed`.
    RecoveryStateChanged {
        /// The node.
        node: NodeName,
        /// The state left.
        from: RecoveryState,
        /// The state entered.
        to: RecoveryState,
    },
    /// `pre_recovery_replay`.
    PreRecoveryReplay {
        /// The node about to run its first round.
        node: NodeName,
        /// The declared version the round plans from.
        version: u64,
        /// Declared children.
        declared: usize,
    },
    /// `post_recovery_replay`.
    PostRecoveryReplay {
        /// The node.
        node: NodeName,
        /// The first round's counters.
        stats: RoundStats,
    },
    /// `reconcile_round`.
    ReconcileRound {
        /// The node that ran the round.
        node: NodeName,
        /// Its counters (candidates, orphans, started, skipped_pending, duplicates,
        /// stopped_undeclared, removed_stale, elapsed_ms).
        stats: RoundStats,
        /// The round was parked (the list is lost or outdated here): it did nothing.
        parked: bool,
    },
    /// `reconcile_duplicate`.
    ReconcileDuplicate {
        /// The child.
        id: ChildId,
        /// The node stopping its instance (this one).
        node: NodeName,
        /// The instance stopped.
        pid: Pid,
        /// The node whose instance is kept.
        keep: NodeName,
    },
    /// `declared_tiebreak`.
    DeclaredTiebreak {
        /// The node that resolved it.
        node: NodeName,
        /// The tied version.
        version: u64,
        /// The node that last mutated the winning copy.
        winner: Option<NodeName>,
        /// The node that last mutated the losing copy.
        loser: Option<NodeName>,
    },
    /// `declared_parked`.
    DeclaredParked {
        /// The parked node.
        node: NodeName,
        /// The local list was corrupt (else missing).
        corrupt: bool,
        /// The seeded marker was found.
        seeded_marker: bool,
        /// Durable rows found in the registry.
        durable_rows: usize,
        /// The remote manifest's failure, when its fetch failed.
        manifest_error: Option<String>,
    },
    /// `manifest_ship_failed`.
    ManifestShipFailed {
        /// The node shipping.
        node: NodeName,
        /// The version that failed to ship.
        version: u64,
        /// Consecutive failures so far.
        failures: u32,
        /// When the shipper tries again, in ms.
        retry_in_ms: u64,
        /// The manifest's location.
        location: String,
        /// What went wrong.
        error: String,
    },
    /// `pre_cluster_join`.
    PreClusterJoin {
        /// The peer.
        node: NodeName,
    },
    /// `post_cluster_join`.
    PostClusterJoin {
        /// The peer.
        node: NodeName,
    },
    /// `pre_cluster_leave`.
    PreClusterLeave {
        /// The peer.
        node: NodeName,
    },
    /// `post_cluster_leave`.
    PostClusterLeave {
        /// The peer.
        node: NodeName,
    },
    /// `pre_nodes_redistribution`.
    PreNodesRedistribution {
        /// Peers that joined (or synced) in this batch.
        joined: Vec<NodeName>,
        /// Peers gone for good in this batch.
        left: Vec<NodeName>,
    },
    /// `post_nodes_redistribution`.
    PostNodesRedistribution {
        /// Children this node is migrating to their new owners.
        migrating: usize,
        /// Children without a live node this pass re-places.
        replacing: usize,
    },
    /// `children_migrated`.
    ChildrenMigrated {
        /// Children now running on their owner, with the node.
        children: Vec<(ChildId, NodeName)>,
    },
    /// `forwarded_migration`.
    ForwardedMigration {
        /// The owner the children were forwarded to.
        to: NodeName,
        /// The children.
        ids: Vec<ChildId>,
    },
    /// `pre_children_redistribution`.
    PreChildrenRedistribution {
        /// Children this node is about to move, each with the node it goes to.
        migrating: Vec<(ChildId, NodeName)>,
        /// Children this node is about to re-place (their node is gone), each with the node it
        /// goes to.
        replacing: Vec<(ChildId, NodeName)>,
    },
    /// `priority_state_updated`.
    PriorityStateUpdated {
        /// The node.
        node: NodeName,
        /// Whether it is locked now (`Hub::is_locked`).
        locked: bool,
        /// Whether it is partitioned now (`Hub::is_partitioned`).
        partitioned: bool,
    },
}
