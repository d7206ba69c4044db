//! Monitors from a client node: [`RemoteHub::monitor`], and the down sink that receives them.
//!
//! A client process runs one small remotable actor, its down sink (spawned at its first remote
//! monitor), in a pg group of its own ([`super::down_sink_group`]: its process id and a random
//! nonce). A monitor asks one endpoint of the hub to set a hub monitor on the child whose down
//! the endpoint forwards to that sink; the client keeps the monitor in its table, keyed by a
//! monitor id of its own, naming the endpoint it went through.
//!
//! **Exactly once.** The table is the client's promise ([`ClientMonitors`]): whichever comes
//! first takes the entry and delivers, the forwarded down (only from the endpoint the monitor
//! went through) or the endpoint going away: it left its pg group (it stopped, or the session
//! to its node closed), or it did not answer the sink's probe (every [`PROBE_EVERY`], within
//! [`PROBE_TIMEOUT`]: its node froze, or the connection is half-open, which TCP alone does
//! not tell); either is `node_down` naming the endpoint's node. Everything later finds nothing.
//!
//! **Untrusted both ways.** A forwarded down is decoded with the endpoint's limits; garbage is
//! dropped and logged. The endpoint bounds what one sink holds and refuses an unknown sink.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::pg::GroupChangeMessage;
use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, SupervisionEvent};
use tokio::sync::mpsc;

use super::client::{send, unexpected, RemoteHub, RemoteHubError};
use super::{
    decode, down_sink_group, endpoint_group, endpoint_group_hub, endpoint_node, DownSinkMsg,
    EndpointMsg, EndpointReply, EndpointRequest, RemoteDown, PROBE_EVERY, PROBE_TIMEOUT,
};
use crate::core::remote_monitors::{ClientEntry, ClientMonitors};
use crate::model::{ChildId, DownReason};
use crate::types::monitor::{ChildDown, DownSink, MonitorId, MonitorOptions};

type Table = Arc<Mutex<ClientMonitors<DownSink>>>;

/// This process's down sink and its monitors.
struct Client {
    group: String,
    sink: ActorRef<DownSinkMsg>,
    table: Table,
    /// Hubs whose endpoint group the sink watches.
    watched: Mutex<BTreeSet<String>>,
}

static CLIENT: Mutex<Option<Arc<Client>>> = Mutex::new(None);
static SPAWNING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static NEXT_MONITOR: AtomicU64 = AtomicU64::new(0);

/// Attempts of a monitor the endpoint answered `unknown_sink` (the sink's pg membership
/// travels to the endpoint's node on its own).
const UNKNOWN_SINK_RETRIES: u64 = 5;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running client, if its sink is alive.
fn current() -> Option<Arc<Client>> {
    lock(&CLIENT)
        .as_ref()
        .filter(|c| {
            !matches!(
                c.sink.get_status(),
                ActorStatus::Stopping | ActorStatus::Stopped
            )
        })
        .cloned()
}

/// The running client, its sink spawned if there is none (yet, or any more).
async fn client() -> Result<Arc<Client>, RemoteHubError> {
    if let Some(c) = current() {
        return Ok(c);
    }
    let _spawning = SPAWNING.lock().await;
    if let Some(c) = current() {
        return Ok(c);
    }
    let group = down_sink_group(std::process::id(), rand::random());
    let table = Table::default();
    let args = SinkState {
        group: group.clone(),
        table: table.clone(),
        prober: None,
    };
    let (sink, _) = Actor::spawn(Some(group.clone()), DownSinkActor, args)
        .await
        .map_err(|e| RemoteHubError::SinkUnavailable {
            reason: e.to_string(),
        })?;
    let client = Arc::new(Client {
        group,
        sink,
        table,
        watched: Mutex::default(),
    });
    *lock(&CLIENT) = Some(client.clone());
    Ok(client)
}

impl Client {
    /// Watches hub `hub_id`'s endpoint group, so that an endpoint leaving fires the monitors
    /// set through it.
    fn watch_hub(&self, hub_id: &str) {
        if lock(&self.watched).insert(hub_id.to_owned()) {
            ractor::pg::monitor(endpoint_group(hub_id), self.sink.get_cell());
        }
    }
}

/// Fires every monitor held through the endpoint actor named `via`: `node_down` naming its
/// node.
fn fire_via(table: &Table, via: &str) {
    let fired = lock(table).take_via(via);
    for (monitor, entry) in fired {
        tracing::debug!(hub = %entry.hub_id, endpoint = %entry.endpoint, child = %entry.id, monitor, "remote monitor fired: its endpoint went away");
        entry.sink.deliver(ChildDown {
            monitor: MonitorId(monitor),
            id: entry.id,
            reason: DownReason::NodeDown {
                node: entry.endpoint,
            },
        });
    }
}

/// Whether the endpoint actor named `via` of `hub_id` is there and answers within
/// [`PROBE_TIMEOUT`] (any answer, a refusal included).
async fn answers(hub_id: &str, via: &str, sink: &str) -> bool {
    let found = ractor::pg::get_members(&endpoint_group(hub_id))
        .into_iter()
        .find(|cell| cell.get_name().as_deref() == Some(via));
    let Some(cell) = found else {
        return false;
    };
    let node = endpoint_node(hub_id, via).unwrap_or_default().to_owned();
    // The name says it is an endpoint, whose message type is `EndpointMsg`.
    let endpoint: ActorRef<EndpointMsg> = ActorRef::from(cell);
    let request = EndpointRequest::Held {
        sink: sink.to_owned(),
    };
    match send(node, &endpoint, request, PROBE_TIMEOUT).await {
        Ok(_) | Err(RemoteHubError::Refused { .. } | RemoteHubError::Decode { .. }) => true,
        Err(e) => {
            tracing::warn!(hub = hub_id, endpoint = via, error = %e, "an endpoint holding remote monitors does not answer");
            false
        }
    }
}

/// Probes every endpoint monitors are held through, every [`PROBE_EVERY`], and fires the
/// monitors of one that is gone or does not answer.
async fn probe(owner: ractor::ActorCell, sink: String, table: Table) {
    let mut every = tokio::time::interval(PROBE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        // A killed sink skips its `post_stop`: the probe ends with it all the same.
        if owner.get_status() >= ActorStatus::Stopping {
            return;
        }
        let vias = lock(&table).vias();
        let probes = vias.into_iter().map(|(hub_id, via)| {
            let (sink, table) = (sink.clone(), table.clone());
            async move {
                if !answers(&hub_id, &via, &sink).await {
                    fire_via(&table, &via);
                }
            }
        });
        futures::future::join_all(probes).await;
    }
}

struct DownSinkActor;

struct SinkState {
    group: String,
    table: Table,
    /// The probe of endpoints, owned by the sink: it ends with it.
    prober: Option<tokio::task::JoinHandle<()>>,
}

impl Actor for DownSinkActor {
    type Msg = DownSinkMsg;
    type State = SinkState;
    type Arguments = SinkState;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SinkState,
    ) -> Result<SinkState, ActorProcessingErr> {
        ractor::pg::join(args.group.clone(), vec![myself.get_cell()]);
        let prober = tokio::spawn(probe(
            myself.get_cell(),
            args.group.clone(),
            args.table.clone(),
        ));
        Ok(SinkState {
            prober: Some(prober),
            ..args
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut SinkState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(prober) = state.prober.take() {
            prober.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: DownSinkMsg,
        state: &mut SinkState,
    ) -> Result<(), ActorProcessingErr> {
        let DownSinkMsg::Down(bytes) = msg;
        let down = match decode::<RemoteDown>(&bytes.0) {
            Ok(down) => down,
            Err(failure) => {
                tracing::warn!(sink = %state.group, error = %failure, "a forwarded down did not decode; dropped");
                return Ok(());
            }
        };
        let entry = lock(&state.table).take_reported(&down.endpoint, down.monitor);
        match entry {
            Some(entry) => entry.sink.deliver(ChildDown {
                monitor: MonitorId(down.monitor),
                id: entry.id,
                reason: down.reason,
            }),
            None => {
                tracing::debug!(endpoint = %down.endpoint, monitor = down.monitor, "a down for no monitor held through that endpoint")
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut SinkState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ProcessGroupChanged(GroupChangeMessage::Leave(_, group, cells)) =
            event
        {
            let Some(hub_id) = endpoint_group_hub(&group) else {
                return Ok(());
            };
            for cell in cells {
                let Some(name) = cell.get_name() else {
                    continue;
                };
                if endpoint_node(hub_id, &name).is_some() {
                    fire_via(&state.table, &name);
                }
            }
        }
        Ok(())
    }
}

impl RemoteHub {
    /// Monitors child `id` from this node, through one of the hub's endpoints: `target` gets
    /// exactly one [`ChildDown`] when the child exits, is stopped or moved, its node goes down,
    /// at once if no node runs it (`no_child`), or — `node_down` naming the endpoint's node —
    /// when the endpoint the monitor went through goes away first (its node stopped, this
    /// node lost its connection to it, or it left a probe unanswered for
    /// [`super::PROBE_TIMEOUT`]). Works on a client node (no hub). The counterpart of
    /// [`crate::Hub::monitor`].
    ///
    /// `Ok` carries the monitor for [`RemoteHub::demonitor`]; an `Err` means no `ChildDown`
    /// will come. Refusals: `too_many_monitors` (this node holds
    /// [`super::MAX_MONITORS_PER_CLIENT`] on that endpoint), `invalid_child`.
    pub async fn monitor(
        &self,
        id: impl Into<ChildId>,
        target: DownSink,
        options: MonitorOptions,
    ) -> Result<MonitorId, RemoteHubError> {
        let id = id.into();
        let client = client().await?;
        let (node, endpoint) = self.endpoint()?;
        let via = endpoint.get_name().unwrap_or_default();
        client.watch_hub(&self.hub_id);
        let monitor = NEXT_MONITOR.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&client.table).insert(
            monitor,
            ClientEntry {
                hub_id: self.hub_id.clone(),
                endpoint: node.clone(),
                via: via.clone(),
                id: id.clone(),
                sink: target,
            },
        );
        // The endpoint may have left before the watch was set: nothing would report it.
        let still_there = self
            .visible()
            .iter()
            .any(|(_, cell)| cell.get_name().as_deref() == Some(via.as_str()));
        if !still_there {
            fire_via(&client.table, &via);
            return Ok(MonitorId(monitor));
        }
        let request = EndpointRequest::Monitor {
            id,
            sink: client.group.clone(),
            monitor,
            follow_restarts: options.follow_restarts,
        };
        let mut attempt = 0;
        let error = loop {
            match send(node.clone(), &endpoint, request.clone(), self.timeout).await {
                Ok((_, EndpointReply::Monitoring)) => return Ok(MonitorId(monitor)),
                Ok((node, other)) => break unexpected(node, other),
                // A sink spawned a moment ago may not be advertised to that node yet.
                Err(RemoteHubError::Refused { failure, .. })
                    if failure.code == "unknown_sink" && attempt < UNKNOWN_SINK_RETRIES =>
                {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
                }
                Err(e) => break e,
            }
        };
        if lock(&client.table).take(monitor).is_none() {
            // It fired meanwhile (its endpoint went away): its one ChildDown is delivered.
            return Ok(MonitorId(monitor));
        }
        if !matches!(error, RemoteHubError::Refused { .. }) {
            // The endpoint may hold it all the same: cancel it there, best effort.
            let request = EndpointRequest::Demonitor {
                sink: client.group.clone(),
                monitor,
            };
            let timeout = self.timeout;
            tokio::spawn(async move {
                let _ = send(node, &endpoint, request, timeout).await;
            });
        }
        Err(error)
    }

    /// [`RemoteHub::monitor`] into a new channel.
    pub async fn monitor_channel(
        &self,
        id: impl Into<ChildId>,
        options: MonitorOptions,
    ) -> Result<(MonitorId, mpsc::UnboundedReceiver<ChildDown>), RemoteHubError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let monitor = self.monitor(id, DownSink::channel(tx), options).await?;
        Ok((monitor, rx))
    }

    /// Cancels a monitor set from this node with [`RemoteHub::monitor`] (of any hub): it will
    /// not fire. `false` if it already fired or was cancelled. The endpoint is told (within
    /// this `RemoteHub`'s timeout, best effort): an unreachable one dropped it anyway.
    pub async fn demonitor(&self, monitor: MonitorId) -> bool {
        let Some(client) = current() else {
            return false;
        };
        let Some(entry) = lock(&client.table).take(monitor.0) else {
            return false;
        };
        let request = EndpointRequest::Demonitor {
            sink: client.group.clone(),
            monitor: monitor.0,
        };
        let on = RemoteHub::on(entry.hub_id, entry.endpoint).timeout(self.timeout);
        if let Err(e) = on.request(request).await {
            tracing::debug!(monitor = monitor.0, error = %e, "remote demonitor not confirmed");
        }
        true
    }

    /// How many remote monitors this node holds (set, not yet fired or cancelled), all hubs.
    pub fn remote_monitors() -> usize {
        current().map_or(0, |c| lock(&c.table).len())
    }
}
