//! The HubSupervisor actor: the root of one hub on one node, and the `ActorRef<HubMsg>` users
//! talk to.
//!
//! It spawns its actors linked under itself, in the order Registry (the others write to it),
//! ChildSupervisor, Janitor, DeclaredLeader (with auto-recovery), Coordinator, Reconciler (with
//! auto-recovery), and restarts any of them that ends (a restarted ChildSupervisor restores the
//! node's children from the registry; a restarted DeclaredLeader reopens its store). More than
//! `hub_max_restarts` restarts within `max_seconds` and it gives up: it fails, which its own
//! supervisor (if the hub was spawned linked) sees as `ActorFailed`.
//!
//! Requests that change things are handed to the Coordinator (declared-list requests to the
//! DeclaredLeader); lookups are answered from the registry view. A graceful stop
//! (`Hub::shutdown`) runs `coordinator_shutdown` hooks, then stops, within one shutdown budget,
//! the Reconciler, the Coordinator, the DeclaredLeader, the Janitor, the children (each with its
//! shutdown grace) and last the Registry, so every write that was acknowledged is committed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent,
};

use super::child_supervisor::{ChildSupArgs, ChildSupervisor};
use super::coordinator::Coordinator;
use super::declared::{DeclaredLeader, DeclaredLeaderArgs};
use super::endpoint::{Endpoint, EndpointArgs};
use super::janitor::Janitor;
use super::protocol::{DeclaredMsg, StartReplyPort, StopReplyPort};
use super::reads;
use super::reconciler::{Reconciler, ReconcilerArgs};
use super::registry::{Registry, RegistryArgs};
use super::HubShared;
use crate::core::{IntensityVerdict, RestartIntensity};
use crate::events::HubEvent;
use crate::hooks::{HookEvent, HookKey};
use crate::hub::protocol::endpoint::endpoint_name;
use crate::hub::protocol::HubMsg;
use crate::manifest::OnShipFailure;
use crate::model::{ChildId, ChildSpec};
use crate::types::{RecoveryError, StartError, StopError};
use crate::types::{StartOptions, StopOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    Registry,
    ChildSupervisor,
    Coordinator,
    Janitor,
    DeclaredLeader,
    Reconciler,
    Endpoint,
    ManifestShipper,
}

impl Role {
    fn name(&self) -> &'static str {
        match self {
            Role::Registry => "registry",
            Role::ChildSupervisor => "child_supervisor",
            Role::Coordinator => "coordinator",
            Role::Janitor => "janitor",
            Role::DeclaredLeader => "declared_leader",
            Role::Reconciler => "reconciler",
            Role::Endpoint => "endpoint",
            Role::ManifestShipper => "manifest_shipper",
        }
    }
}

pub(crate) struct HubSupervisor;

pub(crate) struct HubSupState {
    shared: Arc<HubShared>,
    roles: BTreeMap<ActorId, (Role, ActorCell)>,
    intensity: RestartIntensity,
    /// `ShutdownAndWait` callers, answered at the end of `post_stop`.
    shutdown_waiters: Vec<RpcReplyPort<()>>,
}

/// The hub gave up restarting its own actors.
#[derive(Debug, thiserror::Error)]
#[error(
    "hub {hub_id}: actor {actor} failed more than {max} times within {seconds} s; stopping the hub"
)]
struct HubIntensityExceeded {
    hub_id: String,
    actor: &'static str,
    max: u32,
    seconds: u32,
}

async fn spawn_role(
    role: Role,
    shared: &Arc<HubShared>,
    myself: ActorCell,
    first_boot: bool,
) -> Result<ActorCell, ActorProcessingErr> {
    let cell = match role {
        Role::Registry => {
            let args = RegistryArgs {
                shared: shared.clone(),
                strip_local: first_boot,
            };
            let (r, _) = Actor::spawn_linked(None, Registry, args, myself).await?;
            shared.set_refs(|refs| refs.registry = Some(r.clone()));
            r.get_cell()
        }
        Role::ChildSupervisor => {
            let args = ChildSupArgs {
                shared: shared.clone(),
                restore: !first_boot,
            };
            let (r, _) = Actor::spawn_linked(None, ChildSupervisor, args, myself).await?;
            shared.set_refs(|refs| refs.child_supervisor = Some(r.clone()));
            r.get_cell()
        }
        Role::Coordinator => {
            let (r, _) = Actor::spawn_linked(None, Coordinator, shared.clone(), myself).await?;
            shared.set_refs(|refs| refs.coordinator = Some(r.clone()));
            r.get_cell()
        }
        Role::Janitor => {
            let (r, _) = Actor::spawn_linked(None, Janitor, shared.clone(), myself).await?;
            r.get_cell()
        }
        Role::DeclaredLeader => {
            let args = DeclaredLeaderArgs {
                hub: shared.clone(),
                recovery: recovery_of(shared)?,
            };
            let (r, _) = Actor::spawn_linked(None, DeclaredLeader, args, myself).await?;
            shared.set_refs(|refs| refs.declared_leader = Some(r.clone()));
            r.get_cell()
        }
        Role::Reconciler => {
            let args = ReconcilerArgs {
                hub: shared.clone(),
                recovery: recovery_of(shared)?,
            };
            let (r, _) = Actor::spawn_linked(None, Reconciler, args, myself).await?;
            shared.set_refs(|refs| refs.reconciler = Some(r.clone()));
            r.get_cell()
        }
        Role::ManifestShipper => {
            let shipper = shared
                .recovery
                .as_ref()
                .and_then(|r| r.shipper.clone())
                .ok_or_else(|| Box::new(NoRecovery) as ActorProcessingErr)?;
            // Weak: the hub's shared state holds the shipper, which must not keep it alive.
            let hub = Arc::downgrade(shared);
            let on_failure: OnShipFailure = Arc::new(move |failure| {
                let Some(hub) = hub.upgrade() else {
                    return;
                };
                crate::telemetry::metrics::manifest_ship_failed(&hub.config.hub_id, &hub.node);
                hub.hooks.fire(HookKey::ManifestShipFailed, || {
                    HookEvent::ManifestShipFailed {
                        node: hub.node.clone(),
                        version: failure.version,
                        failures: failure.failures,
                        retry_in_ms: failure.retry_in_ms,
                        location: failure.location.clone(),
                        error: failure.error.to_string(),
                    }
                })
            });
            shipper.label_metrics(&shared.config.hub_id, &shared.node);
            shipper.start(on_failure, Some(myself)).await?
        }
        Role::Endpoint => {
            let name = endpoint_name(&shared.config.hub_id, &shared.node, rand::random());
            let args = EndpointArgs {
                hub: shared.clone(),
                // The root's own cell, whose message type is `HubMsg`.
                root: ActorRef::from(myself.clone()),
            };
            let (r, _) = Actor::spawn_linked(Some(name), Endpoint, args, myself).await?;
            r.get_cell()
        }
    };
    Ok(cell)
}

/// The recovery roles exist only with `auto_recovery`.
#[derive(Debug, thiserror::Error)]
#[error("recovery actor spawned without auto_recovery")]
struct NoRecovery;

fn recovery_of(
    shared: &HubShared,
) -> Result<Arc<crate::hub::declared::recovery_shared::RecoveryShared>, ActorProcessingErr> {
    shared
        .recovery
        .clone()
        .ok_or_else(|| Box::new(NoRecovery) as ActorProcessingErr)
}

impl HubSupState {
    fn cell_of(&self, role: Role) -> Option<ActorCell> {
        self.roles
            .values()
            .find(|(r, _)| *r == role)
            .map(|(_, c)| c.clone())
    }

    /// Whether this node is partitioned, so refuses its callers' starts and stops.
    fn refuses_without_quorum(&self) -> bool {
        self.shared.partition.partitioned()
            && !self
                .shared
                .has_bug(crate::hub::simulation::InjectedBug::AcceptWithoutQuorum)
    }

    /// A start: `durable: true` goes through the DeclaredLeader (declare, then start).
    fn route_start(&self, specs: Vec<ChildSpec>, mut opts: StartOptions, reply: StartReplyPort) {
        if self.refuses_without_quorum() {
            let _ = reply.send(Err(StartError::Partitioned));
            return;
        }
        self.shared.place_by_load(&specs, &mut opts);
        if !opts.durable {
            return self.shared.start_through_coordinator(specs, opts, reply);
        }
        if self.shared.recovery.is_none() {
            let _ = reply.send(Err(StartError::Declared(
                RecoveryError::AutoRecoveryDisabled,
            )));
            return;
        }
        let unavailable = || StartError::HubUnavailable("declared leader is restarting".into());
        let Some(leader) = self.shared.declared_leader() else {
            let _ = reply.send(Err(unavailable()));
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(DeclaredMsg::DurableStart { reply, .. })) =
            leader.cast(DeclaredMsg::DurableStart { specs, opts, reply })
        {
            let _ = reply.send(Err(unavailable()));
        }
    }

    /// A stop: with recovery on, through the DeclaredLeader (a declared child is undeclared
    /// before it is terminated).
    fn route_stop(&self, ids: Vec<ChildId>, opts: StopOptions, reply: StopReplyPort) {
        if self.refuses_without_quorum() {
            let _ = reply.send(Err(StopError::Partitioned));
            return;
        }
        if self.shared.recovery.is_none() {
            return self.shared.stop_through_coordinator(ids, opts, reply);
        }
        let unavailable = || StopError::HubUnavailable("declared leader is restarting".into());
        let Some(leader) = self.shared.declared_leader() else {
            let _ = reply.send(Err(unavailable()));
            return;
        };
        if let Err(ractor::MessagingErr::SendErr(DeclaredMsg::Stop { reply, .. })) =
            leader.cast(DeclaredMsg::Stop { ids, opts, reply })
        {
            let _ = reply.send(Err(unavailable()));
        }
    }
}

impl Actor for HubSupervisor {
    type Msg = HubMsg;
    type State = HubSupState;
    type Arguments = Arc<HubShared>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        shared: Arc<HubShared>,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut roles = BTreeMap::new();
        // Registry first (the others write to it), coordinator last (it accepts requests);
        // with auto_recovery the DeclaredLeader boots the list before the coordinator accepts
        // requests, and the Reconciler plans from it once everything runs.
        let mut order = vec![Role::Registry, Role::ChildSupervisor, Role::Janitor];
        if shared
            .recovery
            .as_ref()
            .is_some_and(|r| r.shipper.is_some())
        {
            order.push(Role::ManifestShipper);
        }
        if shared.recovery.is_some() {
            order.push(Role::DeclaredLeader);
        }
        order.push(Role::Coordinator);
        if shared.recovery.is_some() {
            order.push(Role::Reconciler);
        }
        if shared
            .network
            .as_ref()
            .is_some_and(|n| n.serves_remote_clients())
        {
            order.push(Role::Endpoint);
        }
        for role in order {
            let cell = spawn_role(role, &shared, myself.get_cell(), true).await?;
            roles.insert(cell.get_id(), (role, cell));
        }
        let cfg = &shared.config;
        Ok(HubSupState {
            intensity: RestartIntensity::new(cfg.hub_max_restarts, cfg.max_seconds),
            shared,
            roles,
            shutdown_waiters: Vec::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let shared = &state.shared;
        tracing::info!(hub = %shared.config.hub_id, "hub shutting down");
        shared.events.publish(|| HubEvent::HubStopping {
            reason: "shutdown".into(),
        });
        shared.hooks.fire(HookKey::CoordinatorShutdown, || {
            HookEvent::CoordinatorShutdown {
                hub_id: shared.config.hub_id.clone(),
                node: shared.node.clone(),
            }
        });
        // One budget for the whole shutdown, shared by the steps in order.
        let deadline = Instant::now() + shared.config.shutdown_timeout();
        for role in [
            Role::Endpoint,
            Role::Reconciler,
            Role::Coordinator,
            Role::DeclaredLeader,
            Role::ManifestShipper,
            Role::Janitor,
            Role::ChildSupervisor,
            Role::Registry,
        ] {
            if let Some(cell) = state.cell_of(role) {
                let wait = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(10));
                if cell
                    .stop_and_wait(Some("hub shutdown".into()), Some(wait))
                    .await
                    .is_err()
                {
                    tracing::warn!(actor = role.name(), "did not stop in time; killing it");
                    cell.kill();
                }
            }
        }
        shared.set_refs(|refs| *refs = Default::default());
        for waiter in state.shutdown_waiters.drain(..) {
            let _ = waiter.send(());
        }
        // Monitors set here that nothing fired: their owner learns the hub is gone.
        shared.monitors_hub_stopped();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let hub = &state.shared;
        match msg {
            HubMsg::StartChild { spec, opts, reply } => state.route_start(vec![spec], opts, reply),
            HubMsg::StartChildren { specs, opts, reply } => state.route_start(specs, opts, reply),
            HubMsg::StopChild { id, opts, reply } => state.route_stop(vec![id], opts, reply),
            HubMsg::StopChildren { ids, opts, reply } => state.route_stop(ids, opts, reply),
            HubMsg::DeclaredChildren { reply } => {
                let _ = reply.send(reads::declared_children(hub));
            }
            HubMsg::ClearDeclared { reply } => hub.clear_through_declared_leader(reply),
            HubMsg::ChildLookup {
                id,
                with_metadata,
                reply,
            } => {
                let _ = reply.send(reads::child_lookup(hub, &id, with_metadata));
            }
            HubMsg::GetPids { id, reply } => {
                let _ = reply.send(reads::get_pids(hub, &id));
            }
            HubMsg::ProcessList { scope, reply } => {
                let _ = reply.send(reads::process_list(hub, scope));
            }
            HubMsg::RegistryDump { reply } => {
                let _ = reply.send(reads::registry_dump(hub));
            }
            HubMsg::TagQuery { tag, reply } => {
                let _ = reply.send(reads::tag_query(hub, &tag));
            }
            HubMsg::Nodes {
                include_local,
                reply,
            } => {
                let _ = reply.send(reads::nodes(hub, include_local));
            }
            HubMsg::Subscribe { sink, reply } => {
                let id = hub.events.subscribe(sink);
                if let Some(reply) = reply {
                    let _ = reply.send(id);
                }
            }
            HubMsg::Unsubscribe { id } => {
                hub.events.unsubscribe(id);
            }
            HubMsg::RegisterHook {
                key,
                handler,
                reply,
            } => {
                let _ = reply.send(hub.hooks.register(key, handler));
            }
            HubMsg::CastChild { id, payload } => hub.cast_child_through_coordinator(id, payload),
            HubMsg::CallChild {
                id,
                payload,
                timeout,
                reply,
            } => hub.call_child_through_coordinator(id, payload, timeout, reply),
            HubMsg::Leave { reply } => hub.leave_through_coordinator(reply),
            HubMsg::ResetClusterSize { size, reply } => {
                hub.reset_cluster_size_through_coordinator(size, reply)
            }
            HubMsg::Shutdown => myself.stop(Some("shutdown".into())),
            HubMsg::ShutdownAndWait { reply } => {
                state.shutdown_waiters.push(reply);
                myself.stop(Some("shutdown".into()));
            }
            HubMsg::CancelHook {
                key,
                handler_id,
                reply,
            } => {
                let _ = reply.send(hub.hooks.cancel(key, &handler_id));
            }
            // Listed, not a catch-all: a new variant must be routed somewhere on purpose.
            msg @ (HubMsg::AwaitNormal { .. }
            | HubMsg::RecoveryState { .. }
            | HubMsg::ClusterSettled { .. }
            | HubMsg::WaitClusterSettled { .. }
            | HubMsg::WaitForMembers { .. }
            | HubMsg::StorageProblems { .. }
            | HubMsg::RefusedPeerInput { .. }
            | HubMsg::LocalChild { .. }
            | HubMsg::HookHandlers { .. }
            | HubMsg::Info { .. }) => answer_read(hub, msg),
            HubMsg::Monitor {
                id,
                target,
                options,
                reply,
            } => {
                let _ = reply.send(hub.monitor(id, target, options));
            }
            HubMsg::Demonitor { monitor, reply } => {
                let _ = reply.send(hub.demonitor(monitor));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Never the default (which would stop the hub when any of its actors ends).
        let (cell, why) = match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "stopped".into()))
            }
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            _ => return Ok(()),
        };
        let Some((role, _)) = state.roles.remove(&cell.get_id()) else {
            return Ok(());
        };
        let shared = state.shared.clone();
        tracing::error!(hub = %shared.config.hub_id, actor = role.name(), reason = %why, "hub actor ended; restarting it");
        shared.set_refs(|refs| match role {
            Role::Registry => refs.registry = None,
            Role::ChildSupervisor => refs.child_supervisor = None,
            Role::Coordinator => refs.coordinator = None,
            Role::DeclaredLeader => refs.declared_leader = None,
            Role::Reconciler => refs.reconciler = None,
            Role::Janitor | Role::Endpoint | Role::ManifestShipper => {}
        });
        if state.intensity.record(shared.mono_ms()) == IntensityVerdict::Exceeded {
            let err = HubIntensityExceeded {
                hub_id: shared.config.hub_id.clone(),
                actor: role.name(),
                max: shared.config.hub_max_restarts,
                seconds: shared.config.max_seconds,
            };
            shared.events.publish(|| HubEvent::HubStopping {
                reason: err.to_string(),
            });
            return Err(Box::new(err));
        }
        let cell = spawn_role(role, &shared, myself.get_cell(), false).await?;
        state.roles.insert(cell.get_id(), (role, cell));
        shared.events.publish(|| HubEvent::HubActorRestarted {
            actor: role.name().to_owned(),
        });
        Ok(())
    }
}

/// The operations that read the hub's state or wait on it, answered without another actor. A
/// wait runs beside the actor (bounded by the caller's timeout) so the hub keeps serving.
fn answer_read(hub: &Arc<HubShared>, msg: HubMsg) {
    match msg {
        HubMsg::AwaitNormal { timeout, reply } => match hub.recovery.clone() {
            None => {
                let _ = reply.send(Ok(()));
            }
            Some(recovery) => {
                tokio::spawn(async move {
                    let _ = reply.send(recovery.state.await_normal(timeout).await);
                });
            }
        },
        HubMsg::RecoveryState { reply } => {
            let _ = reply.send(reads::recovery_state(hub));
        }
        HubMsg::ClusterSettled { reply } => {
            let _ = reply.send(*hub.settled.borrow());
        }
        HubMsg::WaitClusterSettled { timeout, reply } => {
            let mut settled = hub.settled.subscribe();
            tokio::spawn(async move {
                let done = tokio::time::timeout(timeout, settled.wait_for(|s| *s))
                    .await
                    .is_ok_and(|r| r.is_ok());
                let _ = reply.send(done);
            });
        }
        HubMsg::WaitForMembers { n, timeout, reply } => {
            let hub = hub.clone();
            tokio::spawn(async move {
                let _ = reply.send(hub.wait_for_members(n, timeout).await);
            });
        }
        HubMsg::StorageProblems { reply } => {
            let _ = reply.send(reads::storage_problems(hub));
        }
        HubMsg::RefusedPeerInput { reply } => {
            let _ = reply.send(hub.refusals.snapshot());
        }
        HubMsg::LocalChild { id, reply } => {
            let _ = reply.send(hub.local_children.get(&id).map(|c| c.value().clone()));
        }
        HubMsg::HookHandlers { key, reply } => {
            let _ = reply.send(hub.hooks.handler_ids(key));
        }
        HubMsg::Info { reply } => {
            let _ = reply.send(crate::hub::protocol::supervisor::HubInfo {
                hub_id: hub.config.hub_id.clone(),
                node: hub.node.clone(),
                clustered: hub.network.is_some(),
            });
        }
        _ => {}
    }
}
