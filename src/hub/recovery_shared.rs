//! What a hub with `auto_recovery` shares between its DeclaredLeader, its Reconciler and its
//! handles: the configuration, the published recovery state, the declared list as last
//! persisted (read without an actor round trip), the remote manifest, and the store opened at
//! spawn for the DeclaredLeader to take.
//!
//! It also holds the **cluster seam** of recovery ([`leader`], [`owner_of`], [`peers`]): the
//! few decisions that depend on who else is in the hub. On one node the node is its own leader
//! and owner and has no peers; the cluster answers them from its membership and ring without
//! changing the actors.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::HubShared;
use crate::core::declared_list::{announced_ahead, DeclaredList};
use crate::core::declared_state::choose_leader;
use crate::core::placement::HashRing;
use crate::core::recovery::RecoveryState;
use crate::core::recovery_config::{AutoRecoveryConfig, DeclaredCommit};
use crate::model::{ChildId, NodeName};
use crate::recovery::declared_store::{DeclaredStore, StoredList};
use crate::recovery::elector::LeaderElector;
use crate::recovery::manifest::RemoteManifest;
use crate::recovery::state_watch::RecoveryStateWatch;
use crate::storage::engine::{CommitMode, DiskOptions};

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

/// The declared list as this node last persisted it, and whether it is parked.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeclaredSnapshot {
    pub list: Arc<DeclaredList>,
    pub parked: bool,
}

/// Recovery state shared by the hub's actors and handles (present only with `auto_recovery`).
pub(crate) struct RecoveryShared {
    pub config: AutoRecoveryConfig,
    /// The directory of the declared store (beside the registry).
    pub dir: PathBuf,
    pub state: RecoveryStateWatch,
    /// The store opened at spawn (so a newer format fails the spawn), taken by the first
    /// DeclaredLeader; a restarted one reopens the directory.
    pub boot_store: Mutex<Option<(DeclaredStore, StoredList)>>,
    pub manifest: Option<Arc<dyn RemoteManifest>>,
    snapshot: RwLock<DeclaredSnapshot>,
    /// Peers whose copy this node has adopted or weighed since they came up.
    offered_by: Mutex<BTreeSet<NodeName>>,
    /// The latest version (and its mutator) each peer announced (`WireMsg::DeclaredVersion`).
    announced: Mutex<BTreeMap<NodeName, (u64, Option<NodeName>)>>,
    /// How many announcements each peer made, so a round can tell its query's answer from an
    /// older announcement; the watch wakes the rounds waiting for one.
    heard: tokio::sync::watch::Sender<BTreeMap<NodeName, u64>>,
    /// The user's leader elector (`HubBuilder::elector`), set once at spawn.
    pub elector: OnceLock<Arc<dyn LeaderElector>>,
}

impl RecoveryShared {
    pub fn new(
        config: AutoRecoveryConfig,
        dir: PathBuf,
        store: (DeclaredStore, StoredList),
        manifest: Option<Arc<dyn RemoteManifest>>,
    ) -> Self {
        Self {
            config,
            dir,
            state: RecoveryStateWatch::new(RecoveryState::Recovering),
            boot_store: Mutex::new(Some(store)),
            manifest,
            snapshot: RwLock::new(DeclaredSnapshot::default()),
            offered_by: Mutex::new(BTreeSet::new()),
            announced: Mutex::new(BTreeMap::new()),
            heard: tokio::sync::watch::Sender::new(BTreeMap::new()),
            elector: OnceLock::new(),
        }
    }

    /// The list as last persisted here.
    pub fn snapshot(&self) -> DeclaredSnapshot {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Publishes a persisted list. Concurrent persists may finish out of order: an older
    /// version never replaces a newer one (a whole replacement by adoption or clear always
    /// carries a higher version, or ends a park).
    pub fn publish(&self, list: &DeclaredList, parked: bool) {
        let mut current = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        let newer = list.version() > current.list.version()
            || current.parked != parked
            || (list.version() == current.list.version() && *list != *current.list);
        if newer {
            *current = DeclaredSnapshot {
                list: Arc::new(list.clone()),
                parked,
            };
        }
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

    pub fn take_boot_store(&self) -> Option<(DeclaredStore, StoredList)> {
        self.boot_store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

/// The hub's members as a set (this node included).
fn members(hub: &HubShared) -> BTreeSet<NodeName> {
    let members = hub.members.read().unwrap_or_else(|e| e.into_inner());
    let mut set: BTreeSet<NodeName> = members.iter().cloned().collect();
    set.insert(hub.node.clone());
    set
}

/// The declared-list leader: [`choose_leader`] over the hub's members, with the elector's
/// choice when there is one (validated: a non-member falls back to the lowest member). On one
/// node, this node.
pub(crate) fn leader(hub: &HubShared) -> Option<NodeName> {
    let members = members(hub);
    let elected = hub
        .recovery
        .as_ref()
        .and_then(|r| r.elector.get())
        .and_then(|e| e.elect(&members));
    choose_leader(&members, elected.as_deref())
}

/// The placement ring over the hub's members, as the reconcile plans with it (the same ring the
/// Coordinator routes starts with, built from the published members).
pub(crate) fn ring(hub: &HubShared) -> HashRing {
    HashRing::new(members(hub))
}

/// The ring owner of a child (this node when the ring is empty).
pub(crate) fn owner_of(hub: &HubShared, ring: &HashRing, id: &ChildId) -> NodeName {
    ring.owner(id).cloned().unwrap_or_else(|| hub.node.clone())
}

/// The members a new declared version is broadcast to (every member but this node). On one
/// node there are none; the cluster sends the list to each.
pub(crate) fn peers(hub: &HubShared) -> Vec<NodeName> {
    members(hub)
        .into_iter()
        .filter(|n| n != &hub.node)
        .collect()
}

/// Whether this node's view is the whole hub (no peers), so that every interval counts as a
/// completed synchronisation round.
pub(crate) fn alone(hub: &HubShared) -> bool {
    peers(hub).is_empty()
}
