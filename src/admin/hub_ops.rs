//! The admin API answered by a real [`Hub`]: the mapping between the hub's typed API and the
//! admin API's JSON shapes and error codes.
//!
//! Reads come from this node's registry copy (no actor round trip); starts and stops go through
//! the hub and are awaited. Per-child failures keep the hub's stable snake_case codes
//! (`already_started`, `unknown_kind`, `invalid_args`, ...), which the routes turn into HTTP
//! statuses when a request names a single child.

use std::time::Duration;

use crate::api::Hub;
use crate::core::isolation::Connectivity;
use crate::model::{ChildId, ChildSpec, Restart};
use crate::types::{ChildInfo, StopOptions};
use crate::types::{ChildStartError, ChildStopError, StartError, StartOptions, StopError};

use super::bodies::{
    ChildView, Health, LoadsResponse, NodeLoad, NodePid, PendingChild,
    StartError as AdminStartError, StartResponse, StartSpec, StartedChild, StopResponse,
    StoppedChild, UnreachedSeedView,
};
use super::{AdminError, AdminOps, ChildrenPage, RegistrySummary};

/// How long an admin start or stop may wait for the nodes: admin requests carry batches of
/// thousands of children, far more than the hub's per-request default is sized for.
pub const ADMIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The stable code of a per-child start failure (the `code` of its serde form).
pub fn start_error_code(e: &ChildStartError) -> &'static str {
    match e {
        ChildStartError::AlreadyStarted => "already_started",
        ChildStartError::InvalidId { .. } => "invalid_id",
        ChildStartError::UnknownKind { .. } => "unknown_kind",
        ChildStartError::InvalidArgs { .. } => "invalid_args",
        ChildStartError::StartupFailed { .. } => "startup_failed",
        ChildStartError::NodeReceiveTimeout => "node_receive_timeout",
        ChildStartError::NodeUnavailable { .. } => "node_unavailable",
        ChildStartError::Storage { .. } => "storage",
        ChildStartError::DurableRequiresPermanent { .. } => "durable_requires_permanent",
        ChildStartError::TooLarge { .. } => "too_large",
        ChildStartError::InvalidSpec { .. } => "invalid_spec",
        ChildStartError::InsufficientStorage { .. } => "insufficient_storage",
        ChildStartError::ChildMappingMissing => "child_mapping_missing",
        ChildStartError::ChildMappingInvalid { .. } => "child_mapping_invalid",
        ChildStartError::ChildMappingMismatch { .. } => "child_mapping_mismatch",
        ChildStartError::Partitioned => "partitioned",
    }
}

/// The stable code of a per-child stop failure.
pub fn stop_error_code(e: &ChildStopError) -> &'static str {
    match e {
        ChildStopError::NotFound => "not_found",
        ChildStopError::NodeReceiveTimeout => "node_receive_timeout",
        ChildStopError::NodeUnavailable { .. } => "node_unavailable",
        ChildStopError::Storage { .. } => "storage",
        ChildStopError::InsufficientStorage { .. } => "insufficient_storage",
        ChildStopError::OutcomeUnknown { .. } => "outcome_unknown",
    }
}

/// A child as the admin API shows it, each instance with its role (`Hub::replica_roles`), in
/// role order: the instance messages go to first.
fn view(hub: &Hub, info: ChildInfo, durable: Option<bool>) -> ChildView {
    let pids: std::collections::BTreeMap<crate::model::NodeName, u64> =
        info.nodes.into_iter().collect();
    let nodes = hub
        .replica_roles(&info.spec.id, info.metadata.as_ref(), pids.keys())
        .into_iter()
        .map(|(node, role)| NodePid {
            pid: pids[&node],
            node,
            role: Some(role),
        })
        .collect();
    ChildView {
        id: info.spec.id.to_string(),
        kind: info.spec.kind.clone(),
        nodes,
        metadata: info.metadata.unwrap_or_default(),
        durable,
    }
}

fn start_refused(e: StartError) -> AdminError {
    match e {
        StartError::HubUnavailable(m) => AdminError::NotReady(m),
        StartError::NoChildren
        | StartError::ReservedMetadataKey(_)
        | StartError::InvalidOption { .. } => AdminError::InvalidInput(e.to_string()),
        StartError::Declared(r) => declared_refused(r),
        StartError::Partitioned => AdminError::Partitioned(e.to_string()),
        StartError::OutcomeUnknown { .. } => AdminError::OutcomeUnknown(e.to_string()),
    }
}

fn stop_refused(e: StopError) -> AdminError {
    match e {
        StopError::HubUnavailable(m) => AdminError::NotReady(m),
        StopError::NoChildren | StopError::InvalidOption { .. } => {
            AdminError::InvalidInput(e.to_string())
        }
        StopError::Declared(r) => declared_refused(r),
        StopError::Partitioned => AdminError::Partitioned(e.to_string()),
        StopError::OutcomeUnknown { .. } => AdminError::OutcomeUnknown(e.to_string()),
    }
}

/// A refusal of the declared list: `no_leader` is 503; a parked list is 409 `declared_parked`
/// (the operator's `clear` or a restored manifest ends it); a hub without auto-recovery cannot
/// take the request (`invalid_input`); a write the disk did not take is 507 when it is full,
/// 503 `storage_failed` otherwise.
fn declared_refused(e: crate::RecoveryError) -> AdminError {
    use crate::RecoveryError as R;
    match e {
        R::NoLeader { .. } => AdminError::NoLeader(e.to_string()),
        R::HubUnavailable { .. } => AdminError::NotReady(e.to_string()),
        R::DeclaredParked => AdminError::DeclaredParked(e.to_string()),
        R::AutoRecoveryDisabled => AdminError::InvalidInput(e.to_string()),
        R::Storage { .. } => AdminError::StorageFailed(e.to_string()),
        R::NoSpace { .. } => AdminError::InsufficientStorage(e.to_string()),
        R::OutcomeUnknown { .. } => AdminError::OutcomeUnknown(e.to_string()),
    }
}

/// Specs grouped so that each group can be one hub request: the hub takes metadata and
/// durability per request, the admin API per child. Consecutive specs with equal metadata and
/// durability share a request, so the usual batch is a single request.
fn group_by_metadata<K: PartialEq>(specs: Vec<(ChildSpec, K)>) -> Vec<(K, Vec<ChildSpec>)> {
    let mut groups: Vec<(K, Vec<ChildSpec>)> = Vec::new();
    for (spec, metadata) in specs {
        match groups.last_mut() {
            Some((m, group)) if *m == metadata => group.push(spec),
            _ => groups.push((metadata, vec![spec])),
        }
    }
    groups
}

/// The host this node's registry names for a child (its first binding), if any.
fn host_of(hub: &Hub, id: &ChildId) -> Option<String> {
    hub.get_pids(id).into_iter().next().map(|(node, _)| node)
}

/// The admin API's form of the hub's stop answer; an error without a node is this node's.
fn stop_response(node: &str, result: crate::types::StopResult) -> StopResponse {
    StopResponse {
        stopped: result
            .stopped
            .into_iter()
            .map(|s| StoppedChild {
                id: s.id.to_string(),
                nodes: s.nodes,
            })
            .collect(),
        errors: result
            .errors
            .into_iter()
            .map(|e| AdminStartError {
                id: e.id.to_string(),
                node: e.node.unwrap_or_else(|| node.to_owned()),
                code: stop_error_code(&e.reason).into(),
                reason: e.reason.to_string(),
            })
            .collect(),
        pending: result
            .pending
            .into_iter()
            .map(|p| PendingChild {
                id: p.id.to_string(),
                nodes: p.nodes,
                code: stop_error_code(&p.reason).into(),
                reason: p.reason.to_string(),
            })
            .collect(),
    }
}

impl AdminOps for Hub {
    async fn cluster(&self) -> Result<super::ClusterResponse, AdminError> {
        Ok(super::cluster::of_hub(self).await)
    }

    async fn health(&self) -> Result<Health, AdminError> {
        // Not `is_alive`: right after spawn the root may still report `Starting` for a moment,
        // and that is a hub that answers; only a stopping or stopped hub is not ready.
        let status = self.actor().get_status();
        if matches!(
            status,
            ractor::ActorStatus::Stopping | ractor::ActorStatus::Stopped
        ) {
            return Err(AdminError::NotReady("the hub is not running".into()));
        }
        let mut problems = self.storage_problems();
        let storage_problem = !problems.is_empty();
        let set_aside = self.is_set_aside();
        if set_aside {
            problems.push(
                "set_aside: this node reaches some members only through others; the cluster \
                 set it aside, its children are stopped and it refuses starts and stops until \
                 it is fully connected again"
                    .into(),
            );
        }
        let partitioned = self.shared().partition.quorum_lost();
        if partitioned {
            problems.push(
                "partitioned: this node's side of the cluster has no quorum; its children are \
                 stopped and it refuses starts and stops until quorum returns"
                    .into(),
            );
        }
        let connection = self.connection();
        let unreached_seeds: Vec<UnreachedSeedView> =
            match connection.as_ref().map(|c| &c.connectivity) {
                Some(Connectivity::Isolated {
                    alone_for,
                    unreached,
                }) => {
                    problems.push(format!(
                        "isolated: no peer has authenticated for {} s although seeds were given; \
                     see unreached_seeds",
                        alone_for.as_secs()
                    ));
                    unreached
                        .iter()
                        .map(|u| UnreachedSeedView {
                            seed: u.seed.clone(),
                            reason: u.reason.code().to_owned(),
                            detail: u.detail.clone(),
                        })
                        .collect()
                }
                _ => Vec::new(),
            };
        let isolated = connection
            .as_ref()
            .is_some_and(|c| c.connectivity.is_isolated());
        Ok(Health {
            node: self.node().clone(),
            hub: self.hub_id().to_owned(),
            members: self.nodes(true),
            recovery_state: match self.recovery_state() {
                crate::RecoveryState::Recovering => "recovering".into(),
                crate::RecoveryState::Normal => "normal".into(),
            },
            parked: self.declared_parked().unwrap_or(false),
            status: crate::core::health::status(set_aside, partitioned, isolated, storage_problem)
                .into(),
            problems,
            partitioned,
            set_aside,
            indirectly_connected: self.indirectly_connected(),
            pending_work: self.pending_work(),
            refused_peer_input: self
                .refused_peer_input()
                .into_iter()
                .map(|(reason, n)| (reason.to_owned(), n))
                .collect(),
            isolated,
            unreached_seeds,
            peer_auth_failures: connection.as_ref().map_or(0, |c| c.auth_refusals.total()),
            peer_auth_failures_by_peer: connection
                .map(|c| c.auth_refusals.per_peer().clone())
                .unwrap_or_default(),
        })
    }

    fn known_kinds(&self) -> Option<Vec<String>> {
        Some(self.shared().kinds.names())
    }

    async fn metrics_text(&self) -> Option<String> {
        let handle = crate::telemetry::prometheus()?;
        self.refresh_metrics();
        Some(handle.render())
    }

    async fn loads(&self) -> Result<LoadsResponse, AdminError> {
        Ok(LoadsResponse {
            node: self.node().clone(),
            distribution: self.shared().config.distribution.name().to_owned(),
            leader: self.shared().leader(),
            nodes: self
                .load_table()
                .into_iter()
                .map(|(node, s)| NodeLoad {
                    node,
                    children: s.children,
                    busy_permille: s.busy_permille,
                    run_queue: s.run_queue,
                    memory_bytes: s.memory_bytes,
                })
                .collect(),
        })
    }

    async fn registry_summary(&self) -> Result<RegistrySummary, AdminError> {
        let members = self.nodes(true);
        if let Some(counts) = self.shared().storage.counts() {
            if let Some(summary) = RegistrySummary::of_counts(self.node(), members.clone(), &counts)
            {
                return Ok(summary);
            }
        }
        let mut summary = RegistrySummary::new(self.node().clone(), members.clone());
        let up: std::collections::BTreeSet<&str> = members.iter().map(String::as_str).collect();
        self.for_each_placement(|p| summary.add_placement(p.kind, p.nodes, &up));
        Ok(summary)
    }

    async fn list_children(&self) -> Result<Vec<ChildView>, AdminError> {
        Ok(self
            .registry_dump()
            .into_values()
            .map(|row| {
                let durable = Some(row.hub.durable);
                view(
                    self,
                    ChildInfo {
                        nodes: row.node_pids.into_iter().collect(),
                        metadata: Some(row.metadata),
                        spec: row.spec,
                    },
                    durable,
                )
            })
            .collect())
    }

    async fn list_children_page(
        &self,
        after: Option<ChildId>,
        limit: usize,
    ) -> Result<ChildrenPage, AdminError> {
        // The page's rows in id order, and one more if another page follows.
        let mut rows = self.registry_page(after.as_ref(), limit);
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next_after = rows
            .last()
            .filter(|_| more)
            .map(|r| r.spec.id.as_str().to_owned());
        let children = rows
            .into_iter()
            .map(|row| {
                let durable = Some(row.hub.durable);
                view(
                    self,
                    ChildInfo {
                        nodes: row.node_pids.into_iter().collect(),
                        metadata: Some(row.metadata),
                        spec: row.spec,
                    },
                    durable,
                )
            })
            .collect();
        Ok(ChildrenPage {
            children,
            next_after,
        })
    }

    async fn get_child(&self, id: ChildId) -> Result<Option<ChildView>, AdminError> {
        Ok(self.child_lookup_with_metadata(&id).map(|info| {
            let durable = self.shared().storage.get(&id).map(|row| row.hub.durable);
            view(self, info, durable)
        }))
    }

    async fn start_children(&self, specs: Vec<StartSpec>) -> Result<StartResponse, AdminError> {
        let node = self.node().clone();
        let mut out = StartResponse::default();
        let mut accepted = Vec::with_capacity(specs.len());
        let mut mapping = std::collections::BTreeMap::new();
        for raw in specs {
            let id = raw.id.clone();
            let fallback = raw.guided_fallback;
            let nodes = raw.nodes.clone();
            let (spec, metadata, durable) = raw.into_spec()?;
            // `declared_parked`, not `declared_children`: the latter copies the whole list,
            // which per child made a request of n durable starts cost O(n * list length).
            if durable && (spec.restart != Restart::Permanent || self.declared_parked().is_none()) {
                // Refuse per child rather than start it without the promise it asked for.
                let (code, reason) = if spec.restart != Restart::Permanent {
                    (
                        "durable_requires_permanent",
                        "a durable child must be permanent",
                    )
                } else {
                    (
                        "durable_unavailable",
                        "durable starts need auto-recovery, which this node does not run",
                    )
                };
                out.errors.push(AdminStartError {
                    id,
                    node: node.clone(),
                    reason: reason.into(),
                    code: code.into(),
                });
                continue;
            }
            if let Some(nodes) = nodes {
                mapping.insert(spec.id.clone(), nodes);
            }
            accepted.push((spec, (metadata, durable, fallback)));
        }
        for ((metadata, durable, fallback), group) in group_by_metadata(accepted) {
            let mut opts = StartOptions::new()
                .timeout(ADMIN_REQUEST_TIMEOUT)
                .durable(durable)
                .guided_fallback(fallback);
            opts.metadata = metadata;
            for spec in &group {
                if let Some(nodes) = mapping.get(&spec.id) {
                    opts.child_mapping.insert(spec.id.clone(), nodes.clone());
                }
            }
            let result = Hub::start_children(self, group, opts)
                .await
                .map_err(start_refused)?;
            out.started.extend(result.started.into_iter().map(|s| {
                StartedChild {
                    id: s.id.to_string(),
                    nodes: s
                        .nodes
                        .into_iter()
                        .map(|(node, pid)| NodePid {
                            node,
                            pid,
                            role: None,
                        })
                        .collect(),
                }
            }));
            out.errors
                .extend(result.errors.into_iter().map(|e| AdminStartError {
                    id: e.id.to_string(),
                    node: e.node,
                    code: start_error_code(&e.reason).into(),
                    reason: e.reason.to_string(),
                }));
            out.pending
                .extend(result.pending.into_iter().map(|p| PendingChild {
                    id: p.id.to_string(),
                    nodes: vec![p.node],
                    code: start_error_code(&p.reason).into(),
                    reason: p.reason.to_string(),
                }));
        }
        Ok(out)
    }

    async fn stop_child(&self, id: ChildId) -> Result<Option<StopResponse>, AdminError> {
        let result = Hub::stop_child(self, id, StopOptions::new().timeout(ADMIN_REQUEST_TIMEOUT))
            .await
            .map_err(stop_refused)?;
        // 404 only for a stop that changed nothing: a pending stop did.
        if result.stopped.is_empty()
            && result.pending.is_empty()
            && result
                .errors
                .iter()
                .any(|e| e.reason == ChildStopError::NotFound)
        {
            return Ok(None);
        }
        Ok(Some(stop_response(self.node(), result)))
    }

    async fn stop_children(&self, ids: Vec<ChildId>) -> Result<StopResponse, AdminError> {
        // One hub request: one removal from the declared list for the durable children, one
        // batch per owner node for the others.
        let result =
            Hub::stop_children(self, ids, StopOptions::new().timeout(ADMIN_REQUEST_TIMEOUT))
                .await
                .map_err(stop_refused)?;
        Ok(stop_response(self.node(), result))
    }

    async fn call_child(
        &self,
        id: ChildId,
        command: Vec<u8>,
        timeout: Duration,
    ) -> Result<super::CallOutcome, AdminError> {
        let answer = Hub::call_child(self, id.clone(), command, timeout)
            .await
            .map_err(|e| super::message_error(&e.code, e.to_string()))?;
        Ok(super::CallOutcome {
            node: host_of(self, &id),
            answer,
        })
    }

    async fn cast_child(
        &self,
        id: ChildId,
        command: Vec<u8>,
    ) -> Result<super::CastAccepted, AdminError> {
        // A cast reports nothing back: refuse here an id the registry does not hold, rather
        // than accept a command that goes nowhere. A row without a binding (its node is down,
        // the child is being re-placed) is accepted: the hub routes it to the owner.
        if self.child_lookup(&id).is_none() {
            return Err(AdminError::NotFound(format!("no child with id {id}")));
        }
        Hub::cast_child(self, id.clone(), command)
            .map_err(|e| super::message_error(&e.code, e.to_string()))?;
        Ok(super::CastAccepted {
            node: host_of(self, &id),
            id: id.to_string(),
        })
    }

    async fn explain_child(
        &self,
        id: ChildId,
    ) -> Result<Option<super::ChildExplanation>, AdminError> {
        Ok(super::explain::of_hub(self, &id))
    }

    async fn members(&self) -> Result<super::MembersResponse, AdminError> {
        Ok(super::members::of_hub(self))
    }

    async fn recent_events(&self, limit: usize) -> Result<Vec<super::EventView>, AdminError> {
        // The hub's own `recent_events` (the ring), not this trait's method of the same name.
        Ok(Hub::recent_events(self)
            .last(limit)
            .iter()
            .map(|e| super::EventView::of(e))
            .collect())
    }

    async fn watch_events(&self) -> Result<super::EventFeed, AdminError> {
        let root = self.actor();
        Ok(super::EventFeed {
            events: Hub::recent_events(self).watch(),
            // The stream ends when the hub's root actor does: a node's graceful shutdown waits
            // for open responses, and a stream that outlived its hub would hold it forever.
            ended: Box::pin(async move {
                let _ = root.wait(None).await;
            }),
        })
    }

    async fn declared(&self) -> Result<crate::admin::DeclaredResponse, AdminError> {
        let view = self.declared_children().ok_or_else(|| {
            AdminError::NotFound(
                "auto-recovery is off on this node: there is no declared list".into(),
            )
        })?;
        Ok(crate::admin::DeclaredResponse {
            version: view.version,
            parked: view.parked,
            children: view
                .children
                .into_iter()
                .map(|c| crate::admin::DeclaredChildView {
                    id: c.spec.id.to_string(),
                    kind: c.spec.kind,
                    restart: c.spec.restart,
                    metadata: c.metadata,
                })
                .collect(),
        })
    }

    async fn clear_declared(&self) -> Result<crate::admin::ClearResponse, AdminError> {
        match Hub::clear_declared(self).await {
            Ok(version) => Ok(crate::admin::ClearResponse { version }),
            Err(crate::RecoveryError::AutoRecoveryDisabled) => Err(AdminError::NotFound(
                "auto-recovery is off on this node: there is no declared list".into(),
            )),
            Err(e) => Err(declared_refused(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Metadata;

    #[test]
    fn codes_match_the_serde_form_of_the_errors() {
        for e in [
            ChildStartError::AlreadyStarted,
            ChildStartError::InvalidId { reason: "x".into() },
            ChildStartError::UnknownKind {
                kind: "k".into(),
                known: vec!["counter".into()],
            },
            ChildStartError::InvalidArgs {
                kind: "k".into(),
                message: "m".into(),
            },
            ChildStartError::StartupFailed {
                message: "m".into(),
            },
            ChildStartError::NodeReceiveTimeout,
            ChildStartError::NodeUnavailable { reason: "r".into() },
            ChildStartError::Storage {
                message: "m".into(),
            },
            ChildStartError::InsufficientStorage {
                message: "m".into(),
            },
            ChildStartError::Partitioned,
        ] {
            let serde = serde_json::to_value(&e).unwrap();
            assert_eq!(serde["code"], start_error_code(&e), "{e:?}");
        }
        for e in [
            ChildStopError::NotFound,
            ChildStopError::NodeReceiveTimeout,
            ChildStopError::NodeUnavailable { reason: "r".into() },
            ChildStopError::Storage {
                message: "m".into(),
            },
            ChildStopError::InsufficientStorage {
                message: "m".into(),
            },
            ChildStopError::OutcomeUnknown { reason: "r".into() },
        ] {
            let serde = serde_json::to_value(&e).unwrap();
            assert_eq!(serde["code"], stop_error_code(&e), "{e:?}");
        }
    }

    #[test]
    fn consecutive_specs_with_equal_metadata_share_a_request() {
        let tagged: Metadata = [("tag".to_owned(), "t".to_owned())].into();
        let groups = group_by_metadata(vec![
            (ChildSpec::new("a", "counter"), Metadata::new()),
            (ChildSpec::new("b", "counter"), Metadata::new()),
            (ChildSpec::new("c", "counter"), tagged.clone()),
            (ChildSpec::new("d", "counter"), Metadata::new()),
        ]);
        let shape: Vec<(bool, usize)> = groups
            .iter()
            .map(|(m, g)| (m.is_empty(), g.len()))
            .collect();
        assert_eq!(shape, vec![(true, 2), (false, 1), (true, 1)]);
        assert_eq!(groups[1].0, tagged);
    }
}
