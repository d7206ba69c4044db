//! What the single-node recovery tests share: a hub with auto-recovery on a data directory,
//! every recovery hook recorded, and small helpers for specs and the declared list.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use process_hub::{
    AutoRecoveryConfig, ChildId, ChildSpec, HookEvent, HookHandler, HookKey, Hub, ManifestLocation,
    ProcessHub,
};
use tokio::task::JoinHandle;

pub fn recovery() -> AutoRecoveryConfig {
    AutoRecoveryConfig {
        reconcile_grace_ms: 50,
        reconcile_interval_ms: 1000,
        ..AutoRecoveryConfig::default()
    }
}

pub fn config(hub_id: &str, dir: &Path) -> ProcessHub {
    ProcessHub::builder(hub_id)
        .node_name("a@127.0.0.1")
        .data_dir(dir)
        .auto_recovery(recovery())
        .build()
        .unwrap()
}

pub fn hub_dir(dir: &Path, hub_id: &str) -> PathBuf {
    dir.join("process_hub").join(hub_id)
}

/// Hook events recorded in order.
#[derive(Clone, Default)]
pub struct Recorded(pub Arc<Mutex<Vec<HookEvent>>>);

impl Recorded {
    pub fn handler(&self, id: &str) -> HookHandler {
        let events = self.0.clone();
        HookHandler::observe(id, 0, move |e| events.lock().unwrap().push(e.clone()))
    }

    pub fn count(&self, pred: impl Fn(&HookEvent) -> bool) -> usize {
        self.0.lock().unwrap().iter().filter(|e| pred(e)).count()
    }

    pub fn any(&self, pred: impl Fn(&HookEvent) -> bool) -> bool {
        self.count(pred) > 0
    }
}

pub const RECOVERY_KEYS: [HookKey; 8] = [
    HookKey::RecoveryStateChanged,
    HookKey::PreRecoveryReplay,
    HookKey::PostRecoveryReplay,
    HookKey::ReconcileRound,
    HookKey::ReconcileDuplicate,
    HookKey::DeclaredTiebreak,
    HookKey::DeclaredParked,
    HookKey::ManifestShipFailed,
];

pub async fn spawn(config: ProcessHub, recorded: &Recorded) -> (Hub, JoinHandle<()>) {
    let mut builder = Hub::builder(config, process_hub_actors::default_kinds());
    for key in RECOVERY_KEYS {
        builder = builder.hook(key, recorded.handler("rec"));
    }
    builder.spawn().await.expect("hub spawns")
}

/// Shuts the hub down and waits until its stores are closed (so this process may reopen them).
pub async fn stop(hub: Hub, join: JoinHandle<()>) {
    hub.shutdown().await.unwrap();
    drop(hub);
    join.await.unwrap();
}

pub fn specs(ids: &[&str]) -> Vec<ChildSpec> {
    ids.iter()
        .map(|id| ChildSpec::new(*id, "counter"))
        .collect()
}

pub fn declared_ids(hub: &Hub) -> Vec<String> {
    hub.declared_children()
        .unwrap()
        .children
        .iter()
        .map(|c| c.spec.id.to_string())
        .collect()
}

pub fn runs_here(hub: &Hub, id: &str) -> bool {
    hub.local_child(&ChildId::from(id)).is_some()
}

/// A config whose manifest goes to `location`.
pub fn with_manifest(hub_id: &str, dir: &Path, location: ManifestLocation) -> ProcessHub {
    ProcessHub {
        auto_recovery: Some(AutoRecoveryConfig {
            remote_manifest: Some(location),
            ..recovery()
        }),
        ..config(hub_id, dir)
    }
}
