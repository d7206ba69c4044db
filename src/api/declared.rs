//! The declared list as the API shows it (`Hub::declared_children`, `HubMsg::DeclaredChildren`)
//! and the recovery side of the hub's spawn: opening the declared store and the remote manifest.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::errors::SpawnError;
use crate::config::ProcessHub;
use crate::core::declared_list::DeclaredChild;
use crate::hub::recovery_shared::{declared_disk_options, RecoveryShared};
use crate::hub::HubShared;
use crate::model::NodeName;
use crate::recovery::declared_store::DeclaredStore;
use crate::recovery::manifest::open_manifest;

/// This node's copy of the declared list, as last persisted here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredView {
    /// The list's version (the number of mutations behind it; 0 = never mutated).
    pub version: u64,
    /// The node that authored the latest mutation.
    pub last_mutated_by: Option<NodeName>,
    /// The declared children, by id.
    pub children: Vec<DeclaredChild>,
    /// The list is lost on this node and its reconcile parked (no starts, no stops) until a
    /// copy is restored or an operator clears it; `children` is then empty and means nothing.
    pub parked: bool,
}

pub(crate) fn declared_children(hub: &HubShared) -> Option<DeclaredView> {
    let snapshot = hub.recovery.as_ref()?.snapshot();
    Some(DeclaredView {
        version: snapshot.list.version(),
        last_mutated_by: snapshot.list.last_mutated_by().map(str::to_owned),
        children: snapshot.list.children().values().cloned().collect(),
        parked: snapshot.parked,
    })
}

/// Opens what `auto_recovery` needs before the actors boot: the declared store beside the
/// registry (a newer format fails the spawn with `StorageError::NewerFormat`) and the remote
/// manifest's adapter. `None` without `auto_recovery`.
pub(crate) fn open_recovery(
    config: &ProcessHub,
) -> Result<Option<Arc<RecoveryShared>>, SpawnError> {
    let Some(recovery) = &config.auto_recovery else {
        return Ok(None);
    };
    let dir = config
        .registry_backend
        .disk_path(&config.data_dir, &config.hub_id)
        .unwrap_or_else(|| DeclaredStore::dir_for(&config.data_dir, &config.hub_id));
    std::fs::create_dir_all(&dir).map_err(|e| crate::storage::StorageError::Open {
        path: dir.clone(),
        message: e.to_string(),
    })?;
    let store = DeclaredStore::open(&dir, &declared_disk_options(recovery))?;
    let manifest = recovery
        .remote_manifest
        .as_ref()
        .map(open_manifest)
        .transpose()?;
    Ok(Some(Arc::new(RecoveryShared::new(
        recovery.clone(),
        dir,
        store,
        manifest,
    ))))
}
