//! Hook keys: the named moments of the hub's work a handler can be attached to, with the
//! original's names. Apart from the handler table because the keys are vocabulary shared by
//! every actor that fires a hook and by the hub handle that registers handlers.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The moments a handler can be attached to. These are Elixir's ProcessHub's keys that apply to one
/// node; the cluster and recovery keys arrive with those features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HookKey {
    /// A node's pid was recorded for a child in the registry (after the write is committed).
    RegistryPidInsert,
    /// A node's pid was removed from a child's row (after the write is committed).
    RegistryPidRemove,
    /// A node is about to start a batch of children.
    PreChildrenStart,
    /// A node finished starting a batch of children.
    PostChildrenStart,
    /// A restarted child got a new pid.
    ChildProcessPidUpdate,
    /// Alter hook: each handler may modify a child's spec (kind, args, restart, shutdown) right
    /// before it starts. The id cannot be changed.
    ChildDataAlter,
    /// The processes of a batch were spawned (child id and pid of each).
    ProcessStartups,
    /// The hub is shutting down.
    CoordinatorShutdown,
    /// Recovery: the `recovering -> normal` transition (once, after the first round).
    RecoveryStateChanged,
    /// Recovery: once, before the first reconcile round issues any start. Each handler runs on
    /// a blocking thread and the round waits for it at most `reconcile_interval_ms`: use it to
    /// wait on prerequisite services.
    PreRecoveryReplay,
    /// Recovery: once, after the first reconcile round completes.
    PostRecoveryReplay,
    /// Recovery: every reconcile round, quiet ones included, with its counters.
    ReconcileRound,
    /// Recovery: this node stops its own instance of a declared child that runs twice.
    ReconcileDuplicate,
    /// Recovery: two copies of the declared list tied on version with different content; the
    /// copy last mutated by the lowest node won.
    DeclaredTiebreak,
    /// Recovery (alarm grade): the declared list is lost on this node and the reconcile parked.
    DeclaredParked,
    /// Recovery: a ship to the remote manifest failed; the shipper retries with backoff.
    ManifestShipFailed,
    /// Cluster: a peer's hub is about to be added to the members.
    PreClusterJoin,
    /// Cluster: a peer's hub was added to the members (and the ring).
    PostClusterJoin,
    /// Cluster: a peer's hub is about to be removed from the members.
    PreClusterLeave,
    /// Cluster: a peer's hub was removed (its children move after the grace period).
    PostClusterLeave,
    /// Cluster: a redistribution pass is about to run for a batch of membership events.
    PreNodesRedistribution,
    /// Cluster: a redistribution pass has issued its migrations and re-placements.
    PostNodesRedistribution,
    /// Cluster: children this node ran (or re-placed) now run on their new owner.
    ChildrenMigrated,
    /// Cluster: a start reached a node that does not own the children and was forwarded.
    ForwardedMigration,
    /// Cluster: a redistribution pass is about to move or re-place these children (each with
    /// the node it goes to), before any of them stops.
    PreChildrenRedistribution,
    /// Cluster: the node's membership lock changed (`Hub::is_locked`): it became partitioned
    /// or a pass's moves began, or both are over.
    PriorityStateUpdated,
}

impl HookKey {
    /// The key's name, as Elixir's ProcessHub spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            HookKey::RegistryPidInsert => "registry_pid_insert",
            HookKey::RegistryPidRemove => "registry_pid_remove",
            HookKey::PreChildrenStart => "pre_children_start",
            HookKey::PostChildrenStart => "post_children_start",
            HookKey::ChildProcessPidUpdate => "child_process_pid_update",
            HookKey::ChildDataAlter => "child_data_alter",
            HookKey::ProcessStartups => "process_startups",
            HookKey::CoordinatorShutdown => "coordinator_shutdown",
            HookKey::RecoveryStateChanged => "recovery_state_changed",
            HookKey::PreRecoveryReplay => "pre_recovery_replay",
            HookKey::PostRecoveryReplay => "post_recovery_replay",
            HookKey::ReconcileRound => "reconcile_round",
            HookKey::ReconcileDuplicate => "reconcile_duplicate",
            HookKey::DeclaredTiebreak => "declared_tiebreak",
            HookKey::DeclaredParked => "declared_parked",
            HookKey::ManifestShipFailed => "manifest_ship_failed",
            HookKey::PreClusterJoin => "pre_cluster_join",
            HookKey::PostClusterJoin => "post_cluster_join",
            HookKey::PreClusterLeave => "pre_cluster_leave",
            HookKey::PostClusterLeave => "post_cluster_leave",
            HookKey::PreNodesRedistribution => "pre_nodes_redistribution",
            HookKey::PostNodesRedistribution => "post_nodes_redistribution",
            HookKey::ChildrenMigrated => "children_migrated",
            HookKey::ForwardedMigration => "forwarded_migration",
            HookKey::PreChildrenRedistribution => "pre_children_redistribution",
            HookKey::PriorityStateUpdated => "priority_state_updated",
        }
    }

    /// Whether handlers of this key alter (rather than observe).
    pub fn is_alter(&self) -> bool {
        matches!(self, HookKey::ChildDataAlter)
    }
}

impl fmt::Display for HookKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
