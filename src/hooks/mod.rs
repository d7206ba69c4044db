//! Hooks: user code the hub runs at fixed points of its work, by the original's hook keys.
//!
//! A hook key names a moment (`registry_pid_insert`, `pre_children_start`, ...). Handlers are
//! registered under a key with an id unique for that key and a priority; higher priorities run
//! first, equal priorities in registration order. Most hooks *observe* (they receive a
//! [`HookEvent`] by reference); the one alter hook, `child_data_alter`, may modify each child's
//! spec right before it starts.
//!
//! Handlers run synchronously inside the hub actor that reaches the moment, so they must be quick
//! and must not call back into the hub and wait for an answer (send to a channel or an actor
//! instead). A handler that panics is caught and logged; the hub carries on.
//!
//! Hooks are not events: an event ([`crate::HubEvent`]) is delivered asynchronously to
//! subscribers and can never slow the hub, a hook runs in line and can alter what happens.

use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::core::reconcile::RoundStats;
use crate::core::recovery::RecoveryState;
use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Pid};

/// The moments a handler can be attached to. These are the original's keys that apply to one
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
}

impl HookKey {
    /// The original's name of the key.
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
}

type ObserveFn = dyn Fn(&HookEvent) + Send + Sync;
type AlterFn = dyn Fn(&mut ChildSpec, &Metadata) + Send + Sync;

/// What a handler does.
#[derive(Clone)]
pub enum HookAction {
    /// Look at the event.
    Observe(Arc<ObserveFn>),
    /// Modify a child's spec before it starts (only for `child_data_alter`); the child's
    /// metadata is given for reference.
    Alter(Arc<AlterFn>),
}

/// A handler: an id unique for its key, a priority (higher runs first) and an action.
#[derive(Clone)]
pub struct HookHandler {
    /// Unique among the handlers of one key; used to cancel it.
    pub id: String,
    /// Higher runs first; equal priorities run in registration order.
    pub priority: i32,
    /// The code to run.
    pub action: HookAction,
}

impl fmt::Debug for HookHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.action {
            HookAction::Observe(_) => "observe",
            HookAction::Alter(_) => "alter",
        };
        f.debug_struct("HookHandler")
            .field("id", &self.id)
            .field("priority", &self.priority)
            .field("action", &kind)
            .finish()
    }
}

impl HookHandler {
    /// An observing handler.
    pub fn observe(
        id: impl Into<String>,
        priority: i32,
        f: impl Fn(&HookEvent) + Send + Sync + 'static,
    ) -> Self {
        Self {
            id: id.into(),
            priority,
            action: HookAction::Observe(Arc::new(f)),
        }
    }

    /// An altering handler for `child_data_alter`.
    pub fn alter(
        id: impl Into<String>,
        priority: i32,
        f: impl Fn(&mut ChildSpec, &Metadata) + Send + Sync + 'static,
    ) -> Self {
        Self {
            id: id.into(),
            priority,
            action: HookAction::Alter(Arc::new(f)),
        }
    }
}

/// Why registering or cancelling a handler failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// A handler with this id is already registered for the key.
    #[error("hook `{key}` already has a handler with id {id:?}")]
    DuplicateHandlerId {
        /// The key.
        key: HookKey,
        /// The repeated id.
        id: String,
    },
    /// No handler with this id is registered for the key.
    #[error("hook `{key}` has no handler with id {id:?}")]
    UnknownHandler {
        /// The key.
        key: HookKey,
        /// The id asked for.
        id: String,
    },
    /// An observing handler was given to the alter hook, or an altering one to another hook.
    #[error("hook `{key}` takes {expected} handlers")]
    WrongHandlerKind {
        /// The key.
        key: HookKey,
        /// `"alter"` or `"observe"`.
        expected: &'static str,
    },
}

/// The hook table of one hub, shared by its actors and its handle.
#[derive(Default)]
pub struct Hooks {
    table: RwLock<HashMap<HookKey, Vec<HookHandler>>>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

impl Hooks {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handler` under `key`. Rejects a duplicate id for the key and a handler of the
    /// wrong kind.
    pub fn register(&self, key: HookKey, handler: HookHandler) -> Result<(), HookError> {
        let is_alter = matches!(handler.action, HookAction::Alter(_));
        if is_alter != key.is_alter() {
            return Err(HookError::WrongHandlerKind {
                key,
                expected: if key.is_alter() { "alter" } else { "observe" },
            });
        }
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let handlers = table.entry(key).or_default();
        if handlers.iter().any(|h| h.id == handler.id) {
            return Err(HookError::DuplicateHandlerId {
                key,
                id: handler.id,
            });
        }
        handlers.push(handler);
        // Stable: equal priorities keep registration order.
        handlers.sort_by_key(|h| std::cmp::Reverse(h.priority));
        Ok(())
    }

    /// Removes the handler `id` from `key`.
    pub fn cancel(&self, key: HookKey, id: &str) -> Result<(), HookError> {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let handlers = table.entry(key).or_default();
        let before = handlers.len();
        handlers.retain(|h| h.id != id);
        if handlers.len() == before {
            return Err(HookError::UnknownHandler {
                key,
                id: id.to_owned(),
            });
        }
        Ok(())
    }

    /// The ids of the handlers of `key`, in the order they run.
    pub fn handler_ids(&self, key: HookKey) -> Vec<String> {
        self.handlers(key).into_iter().map(|h| h.id).collect()
    }

    /// Whether any handler is registered for `key` (so callers skip building payloads).
    pub fn has(&self, key: HookKey) -> bool {
        self.table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .is_some_and(|h| !h.is_empty())
    }

    fn handlers(&self, key: HookKey) -> Vec<HookHandler> {
        self.table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    /// Runs the observing handlers of `key` each on a blocking thread, waiting for each at most
    /// `budget` (a handler that overruns is left to finish on its own and the next one runs).
    /// For the synchronous `pre_recovery_replay`, whose handlers may wait on other services.
    pub async fn fire_budgeted(
        &self,
        key: HookKey,
        budget: std::time::Duration,
        payload: impl FnOnce() -> HookEvent,
    ) {
        let handlers = self.handlers(key);
        if handlers.is_empty() {
            return;
        }
        let event = Arc::new(payload());
        for h in handlers {
            let HookAction::Observe(f) = &h.action else {
                continue;
            };
            let (f, event) = (f.clone(), event.clone());
            let run = tokio::task::spawn_blocking(move || f(&event));
            match tokio::time::timeout(budget, run).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    tracing::error!(hook = %key, handler = %h.id, "hook handler panicked")
                }
                Err(_) => tracing::warn!(
                    hook = %key,
                    handler = %h.id,
                    budget_ms = budget.as_millis() as u64,
                    "hook handler overran its budget; carrying on without it"
                ),
            }
        }
    }

    /// Runs the observing handlers of `key`; the payload is only built when one exists. The
    /// table lock is not held while handlers run, so a handler may register or cancel handlers.
    pub fn fire(&self, key: HookKey, payload: impl FnOnce() -> HookEvent) {
        let handlers = self.handlers(key);
        if handlers.is_empty() {
            return;
        }
        let event = payload();
        for h in handlers {
            if let HookAction::Observe(f) = &h.action {
                if catch_unwind(AssertUnwindSafe(|| f(&event))).is_err() {
                    tracing::error!(hook = %key, handler = %h.id, "hook handler panicked");
                }
            }
        }
    }

    /// Runs the `child_data_alter` handlers on `spec`, in priority order. A handler cannot
    /// change the child's id: an attempt is undone and logged.
    pub fn alter(&self, spec: &mut ChildSpec, metadata: &Metadata) {
        let handlers = self.handlers(HookKey::ChildDataAlter);
        for h in handlers {
            if let HookAction::Alter(f) = &h.action {
                let id = spec.id.clone();
                if catch_unwind(AssertUnwindSafe(|| f(spec, metadata))).is_err() {
                    tracing::error!(hook = "child_data_alter", handler = %h.id, "hook handler panicked");
                }
                if spec.id != id {
                    tracing::warn!(handler = %h.id, child = %id, "an alter handler may not change a child's id; change undone");
                    spec.id = id;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn priorities_order_handlers_and_ids_are_unique() {
        let hooks = Hooks::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        for (id, prio) in [("low", 1), ("high", 10), ("mid", 5), ("mid2", 5)] {
            let log = log.clone();
            hooks
                .register(
                    HookKey::ProcessStartups,
                    HookHandler::observe(id, prio, move |_| log.lock().unwrap().push(id)),
                )
                .unwrap();
        }
        let dup = hooks.register(
            HookKey::ProcessStartups,
            HookHandler::observe("mid", 0, |_| {}),
        );
        assert!(matches!(dup, Err(HookError::DuplicateHandlerId { .. })));
        hooks.fire(HookKey::ProcessStartups, || HookEvent::ProcessStartups {
            node: "n@h".into(),
            processes: vec![],
        });
        assert_eq!(*log.lock().unwrap(), ["high", "mid", "mid2", "low"]);
        hooks.cancel(HookKey::ProcessStartups, "mid").unwrap();
        assert_eq!(
            hooks.handler_ids(HookKey::ProcessStartups),
            ["high", "mid2", "low"]
        );
        assert!(matches!(
            hooks.cancel(HookKey::ProcessStartups, "mid"),
            Err(HookError::UnknownHandler { .. })
        ));
    }

    #[test]
    fn alter_handlers_modify_specs_but_not_ids() {
        let hooks = Hooks::new();
        assert!(matches!(
            hooks.register(
                HookKey::ChildDataAlter,
                HookHandler::observe("x", 0, |_| {})
            ),
            Err(HookError::WrongHandlerKind { .. })
        ));
        hooks
            .register(
                HookKey::ChildDataAlter,
                HookHandler::alter("args", 0, |spec, _| {
                    spec.args = crate::model::ChildArgs::from_json_text("{\"start\":7}");
                    spec.id = "hijacked".into();
                }),
            )
            .unwrap();
        let mut spec = ChildSpec::new("c", "counter");
        hooks.alter(&mut spec, &Metadata::new());
        assert_eq!(spec.id.as_str(), "c");
        assert_eq!(spec.args.as_json_text(), "{\"start\":7}");
    }

    #[test]
    fn a_panicking_handler_does_not_stop_the_others() {
        let hooks = Hooks::new();
        let ran = Arc::new(Mutex::new(false));
        hooks
            .register(
                HookKey::CoordinatorShutdown,
                HookHandler::observe("boom", 9, |_| panic!("x")),
            )
            .unwrap();
        let r = ran.clone();
        hooks
            .register(
                HookKey::CoordinatorShutdown,
                HookHandler::observe("ok", 1, move |_| *r.lock().unwrap() = true),
            )
            .unwrap();
        hooks.fire(HookKey::CoordinatorShutdown, || {
            HookEvent::CoordinatorShutdown {
                hub_id: "h".into(),
                node: "n@h".into(),
            }
        });
        assert!(*ran.lock().unwrap());
    }
}
