//! What a hub with `auto_recovery` shares between its DeclaredLeader, its Reconciler and its
//! handles: the configuration, the published recovery state, the declared list as last
//! persisted (read without an actor round trip), the remote manifest, and the store opened at
//! spawn for the DeclaredLeader to take.
//!
//! Who leads, owns and peers is read from the membership the Coordinator publishes
//! ([`HubShared::leader`](crate::hub::shared::HubShared::leader),
//! [`HubShared::ring`](crate::hub::shared::HubShared::ring),
//! [`HubShared::peers`](crate::hub::shared::HubShared::peers)).
//!
//! A leaf of the hub: `HubShared` holds it, so it names neither `HubShared` nor the
//! environment (the simulator's disk arrives as a [`DeclaredMedium`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::cluster::wire::WireMsg;
use crate::config::{AutoRecoveryConfig, DeclaredCommit, LeaderElector, ProcessHub};
use crate::core::declared::list::{announced_ahead, DeclaredList};
use crate::core::manifest_ship::ShipBackoff;
use crate::core::recovery::RecoveryState;
use crate::events::{EventBus, HubEvent};
use crate::hub::reconciler::state_watch::RecoveryStateWatch;
use crate::manifest::{open_manifest, ManifestShipper, RemoteManifest};
use crate::model::NodeName;
use crate::storage::declared_store::{DeclaredStore, StoredList};
use crate::storage::engine::{CommitMode, DiskOptions};
use crate::storage::{FileIdentity, StorageError};

/// How the declared store of a hub with `config` is opened: the default disk options, with the
/// commit mode of `declared_commit` (group commit unless the per-mutation knob is set).
pub(crate) fn declared_disk_options(config: &AutoRecoveryConfig) -> DiskOptions {
    DiskOptions {
        commit_mode: match config.declared_commit {
            DeclaredCommit::Group => CommitMode::Group,
            DeclaredCommit::PerMutation => CommitMode::PerOperation,
        },
        ..DiskOptions::default()
    }
}

/// Where a hub's declared store lives.
pub(crate) enum DeclaredMedium {
    /// `declared.lmdb` and its marker in this directory.
    Dir { dir: PathBuf, options: DiskOptions },
    /// The simulator's in-memory disk.
    #[cfg(feature = "sim")]
    Simulated(Arc<crate::storage::SimulatedDisk>),
}

impl DeclaredMedium {
    fn open(&self) -> Result<(DeclaredStore, StoredList), StorageError> {
        match self {
            Self::Dir { dir, options } => DeclaredStore::open(dir, options),
            #[cfg(feature = "sim")]
            Self::Simulated(disk) => Ok(DeclaredStore::open_simulated(disk.clone())),
        }
    }
}

/// The published snapshot, and the incarnation of the DeclaredLeader that published it.
#[derive(Default)]
struct Published {
    snapshot: DeclaredSnapshot,
    incarnation: u64,
}

/// The declared list as this node last persisted it, and whether it is parked.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeclaredSnapshot {
    pub list: Arc<DeclaredList>,
    pub parked: bool,
}

/// What a publish changed in the snapshot, reported as events (`DeclaredVersionChanged`,
/// `DeclaredParked`, `DeclaredUnparked`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SnapshotChange {
    /// The new version, when it differs from the one published before.
    pub version: Option<u64>,
    /// The new parked flag, when it differs.
    pub parked: Option<bool>,
}

impl SnapshotChange {
    fn between(before: &DeclaredSnapshot, list: &DeclaredList, parked: bool) -> Self {
        Self {
            version: (before.list.version() != list.version()).then_some(list.version()),
            parked: (before.parked != parked).then_some(parked),
        }
    }

    /// Publishes the events for this change of `node`'s copy on the hub's bus.
    pub fn report(self, node: &NodeName, events: &EventBus) {
        match self.parked {
            Some(true) => events.publish(|| HubEvent::DeclaredParked { node: node.clone() }),
            Some(false) => events.publish(|| HubEvent::DeclaredUnparked { node: node.clone() }),
            None => {}
        }
        if let Some(version) = self.version {
            events.publish(|| HubEvent::DeclaredVersionChanged {
                node: node.clone(),
                version,
            });
        }
    }
}

/// Recovery state shared by the hub's actors and handles (present only with `auto_recovery`).
pub(crate) struct RecoveryShared {
    pub config: AutoRecoveryConfig,
    /// Where the declared store lives (beside the registry).
    pub medium: DeclaredMedium,
    pub state: RecoveryStateWatch,
    /// The store opened at spawn (so a newer format fails the spawn), taken by the first
    /// DeclaredLeader; a restarted one reopens the directory.
    pub boot_store: Mutex<Option<(DeclaredStore, StoredList)>>,
    pub manifest: Option<Arc<dyn RemoteManifest>>,
    /// The manifest shipper's queue; its actor runs under the HubSupervisor, and the leader
    /// offers it every committed version.
    pub shipper: Option<ManifestShipper>,
    snapshot: RwLock<Published>,
    /// Peers whose copy this node has adopted or weighed since they came up.
    offered_by: Mutex<BTreeSet<NodeName>>,
    /// The latest version (and its mutator) each peer announced (`WireMsg::DeclaredVersion`).
    announced: Mutex<BTreeMap<NodeName, (u64, Option<NodeName>)>>,
    /// How many announcements each peer made, so a round can tell its query's answer from an
    /// older announcement; the watch wakes the rounds waiting for one.
    heard: tokio::sync::watch::Sender<BTreeMap<NodeName, u64>>,
    /// The user's leader elector (`HubBuilder::elector`), set once at spawn.
    pub elector: OnceLock<Arc<dyn LeaderElector>>,
    /// The declared store's last failed write, until a write succeeds again (health says so).
    write_fault: Mutex<Option<StorageError>>,
    /// The declared store's file as opened, so health can tell it was removed without writing.
    store_identity: Mutex<Option<Arc<FileIdentity>>>,
}

/// Why [`RecoveryShared::open`] failed: the declared store or the remote manifest could not be
/// opened. The hub's own error, so the hub need not know the API's `SpawnError`, which wraps it.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryOpenError {
    /// The declared store (or its folder) could not be opened.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The remote manifest configured in `auto_recovery` cannot be used.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::ManifestError),
}

impl RecoveryShared {
    /// Opens what `auto_recovery` needs before the actors boot: the declared store beside the
    /// registry (a newer format fails the spawn with `StorageError::NewerFormat`) and the remote
    /// manifest's adapter, in `medium` when the environment decides it (the simulator's disk),
    /// else beside the registry. `None` without `auto_recovery`.
    pub fn open(
        config: &ProcessHub,
        medium: Option<DeclaredMedium>,
    ) -> Result<Option<Arc<Self>>, RecoveryOpenError> {
        let Some(recovery) = &config.auto_recovery else {
            return Ok(None);
        };
        let medium = match medium {
            Some(medium) => medium,
            None => {
                let dir = config
                    .registry_backend
                    .disk_path(&config.data_dir, &config.hub_id)
                    .unwrap_or_else(|| DeclaredStore::dir_for(&config.data_dir, &config.hub_id));
                std::fs::create_dir_all(&dir).map_err(|e| StorageError::Open {
                    path: dir.clone(),
                    message: e.to_string(),
                })?;
                DeclaredMedium::Dir {
                    dir,
                    options: declared_disk_options(recovery),
                }
            }
        };
        let store = medium.open()?;
        let manifest = recovery
            .remote_manifest
            .as_ref()
            .map(open_manifest)
            .transpose()?;
        Ok(Some(Arc::new(Self::new(
            recovery.clone(),
            medium,
            store,
            manifest,
        ))))
    }

    /// The recovery state of a hub whose declared store was opened (its content in `store`),
    /// starting in the Recovering state.
    pub fn new(
        config: AutoRecoveryConfig,
        medium: DeclaredMedium,
        store: (DeclaredStore, StoredList),
        manifest: Option<Arc<dyn RemoteManifest>>,
    ) -> Self {
        Self {
            config,
            medium,
            state: RecoveryStateWatch::new(RecoveryState::Recovering),
            boot_store: Mutex::new(Some(store)),
            shipper: manifest
                .clone()
                .map(|m| ManifestShipper::new(m, ShipBackoff::default())),
            manifest,
            snapshot: RwLock::new(Published::default()),
            offered_by: Mutex::new(BTreeSet::new()),
            announced: Mutex::new(BTreeMap::new()),
            heard: tokio::sync::watch::Sender::new(BTreeMap::new()),
            elector: OnceLock::new(),
            write_fault: Mutex::new(None),
            store_identity: Mutex::new(None),
        }
    }

    /// Records the outcome of a declared-list write: a failure is reported by health until a
    /// later write succeeds.
    pub fn note_write(&self, outcome: Result<(), &StorageError>) {
        let mut fault = self.write_fault.lock().unwrap_or_else(|e| e.into_inner());
        match outcome {
            Ok(()) => {
                if let Some(old) = fault.take() {
                    tracing::warn!(error = %old, "declared list writes succeed again");
                }
            }
            Err(e) => *fault = Some(e.clone()),
        }
    }

    /// The declared store's last failed write, while no write has succeeded since.
    pub fn write_fault(&self) -> Option<StorageError> {
        self.write_fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The file the DeclaredLeader's store writes, for health's check.
    pub fn set_store_identity(&self, identity: Option<Arc<FileIdentity>>) {
        *self
            .store_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = identity;
    }

    /// What keeps the declared list from being written, in words for health: the last failed
    /// write, and a list file removed or replaced under the store.
    pub fn storage_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(fault) = self.write_fault() {
            problems.push(format!("declared list: {fault}"));
        }
        let identity = self
            .store_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(Err(reason)) = identity.map(|i| i.check()) {
            problems.push(format!("declared list: {reason}"));
        }
        problems
    }

    /// The list as last persisted here.
    pub fn snapshot(&self) -> DeclaredSnapshot {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot
            .clone()
    }

    /// Publishes the list a (re)started DeclaredLeader booted with, whatever was published
    /// before, and returns the incarnation its later publishes carry.
    pub fn reset(&self, list: &DeclaredList, parked: bool) -> (u64, SnapshotChange) {
        let mut current = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        current.incarnation += 1;
        let change = SnapshotChange::between(&current.snapshot, list, parked);
        current.snapshot = DeclaredSnapshot {
            list: Arc::new(list.clone()),
            parked,
        };
        (current.incarnation, change)
    }

    /// Publishes a persisted list. The DeclaredLeader publishes in the order it made its
    /// operations (each waits for the one before it); a publish of a DeclaredLeader that has
    /// been replaced since (its tasks outlive it) is ignored.
    pub fn publish(&self, incarnation: u64, list: &DeclaredList, parked: bool) -> SnapshotChange {
        let mut current = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        if current.incarnation != incarnation {
            return SnapshotChange::default();
        }
        let change = SnapshotChange::between(&current.snapshot, list, parked);
        current.snapshot = DeclaredSnapshot {
            list: Arc::new(list.clone()),
            parked,
        };
        change
    }

    /// This node's declared version as announced to peers (none while parked: a parked copy
    /// means nothing). The published copy is the persisted one, and a stop's removal is
    /// published before its terminate, so an answer given after a child stopped never predates
    /// its removal.
    pub fn announcement(&self) -> Option<WireMsg> {
        let snapshot = self.snapshot();
        (!snapshot.parked).then(|| WireMsg::DeclaredVersion {
            version: snapshot.list.version(),
            last_mutated_by: snapshot.list.last_mutated_by().map(str::to_owned),
        })
    }

    /// `node`'s copy was weighed (adopted if newer).
    pub fn heard_offer(&self, node: NodeName) {
        self.offered_by
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node);
    }

    /// `node` came up again: its copy must be heard anew.
    pub fn forget_offer(&self, node: &str) {
        self.offered_by
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(node);
        self.announced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(node);
    }

    /// Records `node`'s announced version; true when it is ahead of this node's copy (the
    /// caller then asks `node` for its copy).
    pub fn note_announced(
        &self,
        node: NodeName,
        version: u64,
        last_mutated_by: Option<NodeName>,
    ) -> bool {
        let ahead = announced_ahead(&self.snapshot().list, version, last_mutated_by.as_deref());
        self.announced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node.clone(), (version, last_mutated_by));
        self.heard
            .send_modify(|heard| *heard.entry(node).or_default() += 1);
        ahead
    }

    /// How many announcements `node` made so far.
    pub fn heard_from(&self, node: &str) -> u64 {
        self.heard.borrow().get(node).copied().unwrap_or(0)
    }

    /// Waits until `node` has made more than `seen` announcements; false after `timeout`.
    pub async fn wait_heard(&self, node: &str, seen: u64, timeout: std::time::Duration) -> bool {
        let mut rx = self.heard.subscribe();
        let wait = rx.wait_for(|heard| heard.get(node).copied().unwrap_or(0) > seen);
        let answered = matches!(tokio::time::timeout(timeout, wait).await, Ok(Ok(_)));
        answered
    }

    /// The current peers that announced a copy ahead of this node's: until it has fetched
    /// theirs, this node's copy is outdated (it may still declare a child stopped since), so
    /// its rounds are planned parked.
    pub fn ahead_of_me(&self, peers: &[NodeName]) -> Vec<NodeName> {
        self.ahead_of(&self.snapshot().list, peers)
    }

    /// The current peers that announced a copy ahead of `mine`.
    pub fn ahead_of(&self, mine: &DeclaredList, peers: &[NodeName]) -> Vec<NodeName> {
        let announced = self.announced.lock().unwrap_or_else(|e| e.into_inner());
        peers
            .iter()
            .filter(|p| {
                announced
                    .get(*p)
                    .is_some_and(|(v, by)| announced_ahead(mine, *v, by.as_deref()))
            })
            .cloned()
            .collect()
    }

    /// The current peers whose copy this node has not weighed yet. Until it has, this node may
    /// hold an outdated copy (one that still declares a child stopped since): its rounds are
    /// planned parked.
    pub fn unheard(&self, peers: &[NodeName]) -> Vec<NodeName> {
        let heard = self.offered_by.lock().unwrap_or_else(|e| e.into_inner());
        peers
            .iter()
            .filter(|p| !heard.contains(*p))
            .cloned()
            .collect()
    }

    /// The disk options the declared store is (re)opened with.
    pub fn disk_options(&self) -> DiskOptions {
        declared_disk_options(&self.config)
    }

    /// The store opened at spawn, for the first DeclaredLeader; a restarted one reopens it.
    pub async fn take_or_reopen_store(&self) -> Result<(DeclaredStore, StoredList), StorageError> {
        match self.take_boot_store() {
            Some(opened) => Ok(opened),
            None => {
                #[cfg(feature = "sim")]
                if let DeclaredMedium::Simulated(disk) = &self.medium {
                    disk.settled().await;
                }
                self.medium.open()
            }
        }
    }

    fn take_boot_store(&self) -> Option<(DeclaredStore, StoredList)> {
        self.boot_store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
