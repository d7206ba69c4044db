//! The read side of the hub: answered from the registry view, without an actor round trip
//! (the handle and the root actor's `HubMsg` reads both answer from here).

use std::collections::BTreeMap;

use super::HubShared;
use crate::core::declared::list::DeclaredView;
use crate::model::{ChildId, NodeName, Pid, Row};
use crate::telemetry::metrics::{DeclaredGauges, Gauges};
use crate::types::results::{ChildInfo, ProcessEntry, ProcessScope};

fn nodes_of(row: &Row) -> Vec<(NodeName, Pid)> {
    row.node_pids.iter().map(|(n, p)| (n.clone(), *p)).collect()
}

pub(crate) fn child_lookup(
    hub: &HubShared,
    id: &ChildId,
    with_metadata: bool,
) -> Option<ChildInfo> {
    hub.storage.get(id).map(|row| ChildInfo {
        nodes: nodes_of(&row),
        metadata: with_metadata.then(|| row.metadata.clone()),
        spec: row.spec,
    })
}

pub(crate) fn get_pids(hub: &HubShared, id: &ChildId) -> Vec<(NodeName, Pid)> {
    hub.storage
        .get(id)
        .map(|row| nodes_of(&row))
        .unwrap_or_default()
}

fn sorted(mut entries: Vec<ProcessEntry>) -> Vec<ProcessEntry> {
    entries.sort_by(|a, b| a.id.cmp(&b.id));
    entries
}

pub(crate) fn process_list(hub: &HubShared, scope: ProcessScope) -> Vec<ProcessEntry> {
    let rows = hub.storage.export_all();
    let entries = match scope {
        ProcessScope::Global => rows
            .iter()
            .map(|row| ProcessEntry {
                id: row.spec.id.clone(),
                nodes: nodes_of(row),
            })
            .collect(),
        ProcessScope::Local => rows
            .iter()
            .filter_map(|row| {
                row.node_pids.get(&hub.node).map(|pid| ProcessEntry {
                    id: row.spec.id.clone(),
                    nodes: vec![(hub.node.clone(), *pid)],
                })
            })
            .collect(),
    };
    sorted(entries)
}

pub(crate) fn registry_dump(hub: &HubShared) -> BTreeMap<ChildId, Row> {
    hub.storage
        .export_all()
        .into_iter()
        .map(|row| (row.spec.id.clone(), row))
        .collect()
}

pub(crate) fn tag_query(hub: &HubShared, tag: &str) -> Vec<ProcessEntry> {
    sorted(
        hub.storage
            .export_all()
            .iter()
            .filter(|row| row.tag() == Some(tag))
            .map(|row| ProcessEntry {
                id: row.spec.id.clone(),
                nodes: nodes_of(row),
            })
            .collect(),
    )
}

pub(crate) fn nodes(hub: &HubShared, include_local: bool) -> Vec<NodeName> {
    let mut members: Vec<NodeName> = hub
        .members()
        .into_iter()
        .filter(|n| include_local || *n != hub.node)
        .collect();
    members.sort();
    members
}

/// This node's copy of the declared list (`None` without `auto_recovery`).
pub(crate) fn declared_children(hub: &HubShared) -> Option<DeclaredView> {
    let snapshot = hub.recovery.as_ref()?.snapshot();
    Some(DeclaredView {
        version: snapshot.list.version(),
        last_mutated_by: snapshot.list.last_mutated_by().map(str::to_owned),
        children: snapshot.list.children().values().cloned().collect(),
        parked: snapshot.parked,
    })
}

/// What keeps this node from writing what it must (see `Hub::storage_problems`).
pub(crate) fn storage_problems(hub: &HubShared) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(fault) = hub.registry_fault.get() {
        problems.push(format!("registry: {fault}"));
    }
    if let Some(reason) = hub.storage.fault() {
        problems.push(format!("registry: {reason}"));
    }
    if let Some(recovery) = &hub.recovery {
        problems.extend(recovery.storage_problems());
    }
    problems
}

/// `Recovering` until the first round completed; `Normal` without `auto_recovery`.
pub(crate) fn recovery_state(hub: &HubShared) -> crate::core::recovery::RecoveryState {
    hub.recovery
        .as_ref()
        .map_or(crate::core::recovery::RecoveryState::Normal, |r| {
            r.state.current()
        })
}

impl HubShared {
    /// The hub's recovery state (see [`recovery_state`]).
    pub(crate) fn recovery_state(&self) -> crate::core::recovery::RecoveryState {
        recovery_state(self)
    }
}

/// The hub's state the metrics' gauges show, read now (`Hub::refresh_metrics`).
pub(crate) fn gauges(shared: &HubShared) -> Gauges {
    let mut kinds: BTreeMap<String, u64> =
        shared.kinds.names().into_iter().map(|k| (k, 0)).collect();
    // One pass over the rows, none copied: the children this node runs are the rows bound here.
    let (mut rows, mut unbound) = (0u64, 0u64);
    shared.storage.for_each_placement(&mut |p| {
        rows += 1;
        if p.nodes.is_empty() {
            unbound += 1;
        } else if p.nodes.iter().any(|(n, _)| *n == shared.node) {
            if let Some(n) = kinds.get_mut(p.kind) {
                *n += 1;
            }
        }
    });
    let declared = shared.recovery.as_ref().map(|recovery| {
        let snapshot = recovery.snapshot();
        DeclaredGauges {
            version: snapshot.list.version(),
            children: snapshot.list.len(),
            parked: snapshot.parked,
            last_mutator: snapshot.list.last_mutated_by() == Some(shared.node.as_str()),
        }
    });
    let sync_lag = shared
        .sync_lags()
        .into_iter()
        .map(|(peer, lag)| (peer, lag.as_secs_f64()))
        .collect();
    let connection = shared.network.as_ref().and_then(|n| n.connection());
    Gauges {
        kinds,
        rows,
        unbound,
        members: shared.members().len(),
        partitioned: shared.partition.partitioned(),
        pending_work: shared.partition.pending_work(),
        declared,
        recovery_normal: shared.recovery_state() == crate::core::recovery::RecoveryState::Normal,
        sync_lag,
        refused: shared.refusals.snapshot().into_iter().collect(),
        peer_auth_failures: connection.as_ref().map(|c| c.auth_refusals.total()),
        isolated: connection.as_ref().map(|c| c.connectivity.is_isolated()),
    }
}
