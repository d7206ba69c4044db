//! Hooks: user code the hub runs at fixed points of its work, by Elixir's ProcessHub's hook keys.
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
//!
//! This file holds the handlers and the table that runs them; `key` the moments ([`HookKey`])
//! and `event` the payloads ([`HookEvent`]), re-exported here.

mod event;
mod key;

pub use event::HookEvent;
pub use key::HookKey;

use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

use crate::model::{ChildSpec, Metadata};

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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_budgeted_hook_waits_for_each_handler_at_most_its_budget() {
        let hooks = Hooks::new();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Mutex::new(held);
        let (slow_done, finished) = std::sync::mpsc::channel::<&str>();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (slow_log, quick_log) = (log.clone(), log.clone());
        hooks
            .register(
                HookKey::PreRecoveryReplay,
                HookHandler::observe("slow", 10, move |_| {
                    slow_log.lock().unwrap().push("slow began");
                    // Blocks until the test releases it, long after the budget.
                    let _ = held.lock().unwrap().recv();
                    let _ = slow_done.send("slow");
                }),
            )
            .unwrap();
        hooks
            .register(
                HookKey::PreRecoveryReplay,
                HookHandler::observe("quick", 0, move |_| {
                    quick_log.lock().unwrap().push("quick");
                }),
            )
            .unwrap();
        let event = || HookEvent::PreRecoveryReplay {
            node: "n@h".into(),
            version: 3,
            declared: 2,
        };
        // Without the budget this would wait for "slow", which waits for the test: a hang, caught
        // by the outer timeout.
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            hooks.fire_budgeted(
                HookKey::PreRecoveryReplay,
                // Long enough for a trivial handler on a loaded machine, far shorter than "slow".
                std::time::Duration::from_secs(1),
                event,
            ),
        )
        .await
        .expect("the budget bounds the wait for the slow handler");
        // Both ran, in priority order, and the quick one before the call returned.
        assert_eq!(*log.lock().unwrap(), ["slow began", "quick"]);
        // The slow handler was left running, not cancelled: it finishes once released.
        assert!(
            finished.try_recv().is_err(),
            "the slow handler is still waiting"
        );
        release.send(()).unwrap();
        assert_eq!(
            finished.recv_timeout(std::time::Duration::from_secs(30)),
            Ok("slow")
        );
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
