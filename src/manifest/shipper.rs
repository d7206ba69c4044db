//! The manifest shipper: carries out [`crate::core::manifest_ship::ShipQueue`]'s decisions
//! against a [`RemoteManifest`], as an actor the hub supervises.
//!
//! Two halves. The handle, [`ManifestShipper`], holds the coalescing queue: the leader calls
//! [`ManifestShipper::offer`] after every committed mutation, which only takes a short lock and
//! wakes the actor, so a slow or failing manifest never delays a command. The actor ships one
//! version at a time; versions offered meanwhile coalesce to the newest; a failure is reported
//! through the callback (the hub fires `manifest_ship_failed`) and retried after the backoff,
//! on a timer, with the newest version waiting by then.
//!
//! The queue lives in the handle, not in the actor, so an actor that fails and is restarted by
//! its supervisor (the HubSupervisor, in a hub) picks up the versions still waiting.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SpawnErr};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{ManifestError, RemoteManifest, ShipOutcome};
use crate::core::declared::list::DeclaredList;
use crate::core::manifest_ship::{Offer, ShipBackoff, ShipQueue, ShipStep};

/// A failed ship, as reported to the failure callback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShipFailure {
    /// The version that failed to ship.
    pub version: u64,
    /// Consecutive failures so far (1 for the first).
    pub failures: u32,
    /// When the shipper tries again, in ms from now.
    pub retry_in_ms: u64,
    /// The manifest's location.
    pub location: String,
    /// What went wrong.
    pub error: ManifestError,
}

/// Called after each failed attempt, from the actor: keep it short (send a message, fire a
/// hook).
pub type OnShipFailure = Arc<dyn Fn(ShipFailure) + Send + Sync>;

struct Shared {
    manifest: Arc<dyn RemoteManifest>,
    queue: Mutex<ShipQueue>,
    shipped: watch::Sender<Option<u64>>,
    /// The running actor, woken by offers (none between a failure and its restart: the offer
    /// waits in the queue for the next one).
    actor: Mutex<Option<ActorRef<ShipperMsg>>>,
    epoch: Instant,
    /// The hub and node its ships are counted for, once named ([`ManifestShipper::label_metrics`]).
    labels: std::sync::OnceLock<(String, String)>,
}

impl Shared {
    fn queue(&self) -> std::sync::MutexGuard<'_, ShipQueue> {
        // The queue is plain data: a panic elsewhere cannot leave it half-updated.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn wake(&self) {
        let actor = self.actor.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(actor) = actor.as_ref() {
            let _ = actor.cast(ShipperMsg::Wake);
        }
    }
}

/// The shipper's handle: the coalescing queue and what has shipped. Clone it freely.
#[derive(Clone)]
pub struct ManifestShipper {
    shared: Arc<Shared>,
}

impl ManifestShipper {
    /// A shipper for `manifest` with no actor yet (see [`ManifestShipper::start`]): offers
    /// queue until one runs.
    pub fn new(manifest: Arc<dyn RemoteManifest>, backoff: ShipBackoff) -> Self {
        let (shipped, _) = watch::channel(None);
        Self {
            shared: Arc::new(Shared {
                manifest,
                queue: Mutex::new(ShipQueue::new(backoff)),
                shipped,
                actor: Mutex::new(None),
                epoch: Instant::now(),
                labels: std::sync::OnceLock::new(),
            }),
        }
    }

    /// A shipper with its actor running unsupervised, until [`ManifestShipper::stop`].
    pub async fn spawn(
        manifest: Arc<dyn RemoteManifest>,
        backoff: ShipBackoff,
        on_failure: impl Fn(ShipFailure) + Send + Sync + 'static,
    ) -> Result<Self, SpawnErr> {
        let shipper = Self::new(manifest, backoff);
        shipper.start(Arc::new(on_failure), None).await?;
        Ok(shipper)
    }

    /// Names the hub and node whose metrics count this shipper's ships (the first naming
    /// holds); ships before it are not counted, so that no series lacks `hub` and `node`.
    pub(crate) fn label_metrics(&self, hub: &str, node: &str) {
        let _ = self.shared.labels.set((hub.to_owned(), node.to_owned()));
    }

    /// Starts (or, after a failure, restarts) the shipping actor, linked under `supervisor`
    /// when given; it ships whatever the queue holds.
    pub async fn start(
        &self,
        on_failure: OnShipFailure,
        supervisor: Option<ActorCell>,
    ) -> Result<ActorCell, SpawnErr> {
        let args = ShipperArgs {
            shared: self.shared.clone(),
            on_failure,
        };
        let (actor, _) = match supervisor {
            Some(sup) => Actor::spawn_linked(None, ShipperActor, args, sup).await?,
            None => Actor::spawn(None, ShipperActor, args).await?,
        };
        Ok(actor.get_cell())
    }

    /// Stops the actor (a ship in flight is abandoned; the next leader ships its own newest
    /// version).
    pub fn stop(&self) {
        let actor = self
            .shared
            .actor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(actor) = actor {
            actor.stop(None);
        }
    }

    /// Offers a committed version for shipping. Never blocks on the manifest.
    pub fn offer(&self, list: &DeclaredList) -> Offer {
        let offer = self.shared.queue().offer(list.clone());
        if offer != Offer::Stale {
            self.shared.wake();
        }
        offer
    }

    /// The newest version confirmed stored (or found newer) in the manifest.
    pub fn last_shipped(&self) -> Option<u64> {
        *self.shared.shipped.borrow()
    }

    /// Watches the newest version confirmed shipped.
    pub fn subscribe(&self) -> watch::Receiver<Option<u64>> {
        self.shared.shipped.subscribe()
    }

    /// Waits until `version` (or a newer one) is confirmed shipped.
    pub async fn wait_shipped(&self, version: u64) {
        let mut rx = self.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|v| v.is_some_and(|v| v >= version)).await;
    }
}

/// What wakes the shipping actor.
pub enum ShipperMsg {
    /// A version was offered.
    Wake,
    /// A backoff delay is over.
    Due,
    /// The ship under way ended (its outcome is in the queue).
    Shipped,
}

impl ractor::Message for ShipperMsg {}

struct ShipperActor;

struct ShipperArgs {
    shared: Arc<Shared>,
    on_failure: OnShipFailure,
}

struct ShipperState {
    shared: Arc<Shared>,
    on_failure: OnShipFailure,
    /// The backoff timer, while one is armed.
    timer: Option<tokio::task::JoinHandle<Result<(), ractor::MessagingErr<ShipperMsg>>>>,
    /// The ship under way, in a task of its own so that the actor answers (and stops) while a
    /// store hangs, with the list it carries.
    in_flight: Option<(tokio::task::JoinHandle<()>, DeclaredList)>,
}

impl Actor for ShipperActor {
    type Msg = ShipperMsg;
    type State = ShipperState;
    type Arguments = ShipperArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ShipperArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        *args.shared.actor.lock().unwrap_or_else(|p| p.into_inner()) = Some(myself.clone());
        // Whatever waited while no actor ran.
        let _ = myself.cast(ShipperMsg::Wake);
        Ok(ShipperState {
            shared: args.shared,
            on_failure: args.on_failure,
            timer: None,
            in_flight: None,
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        if let Some((ship, list)) = state.in_flight.take() {
            // Abandoned, not finished: the next shipper ships the list again.
            ship.abort();
            let now = state.shared.now_ms();
            state.shared.queue().on_failed(list, now);
        }
        let mut actor = state.shared.actor.lock().unwrap_or_else(|p| p.into_inner());
        if actor
            .as_ref()
            .is_some_and(|a| a.get_id() == myself.get_id())
        {
            *actor = None;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: ShipperMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if matches!(msg, ShipperMsg::Shipped) {
            state.in_flight = None;
        }
        if state.in_flight.is_some() {
            // The end of the ship under way looks at the queue again.
            return Ok(());
        }
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        // Ships the next version, or waits for its backoff. Offers made while a ship is under
        // way land in the shared queue and coalesce there; its end looks at the queue again.
        let step = state.shared.queue().next(state.shared.now_ms());
        match step {
            ShipStep::Ship(list) => {
                let shared = state.shared.clone();
                let on_failure = state.on_failure.clone();
                let me = myself.clone();
                let carried = list.clone();
                let ship = tokio::spawn(async move {
                    ship(&shared, &on_failure, list).await;
                    let _ = me.cast(ShipperMsg::Shipped);
                });
                state.in_flight = Some((ship, carried));
            }
            ShipStep::WaitUntil(at) => {
                let wait = Duration::from_millis(at.saturating_sub(state.shared.now_ms()));
                state.timer = Some(myself.send_after(wait, || ShipperMsg::Due));
            }
            ShipStep::Idle => {}
        }
        Ok(())
    }
}

/// Ships `list` once and records the outcome in the queue.
async fn ship(shared: &Shared, on_failure: &OnShipFailure, list: DeclaredList) {
    let version = list.version();
    match shared.manifest.ship(&list).await {
        Ok(outcome) => {
            if let ShipOutcome::KeptNewer { stored_version } = outcome {
                tracing::info!(
                    version,
                    stored_version,
                    location = %shared.manifest.location(),
                    "the remote manifest already holds this version or a newer one"
                );
            }
            shared.queue().on_shipped(version);
            if let Some((hub, node)) = shared.labels.get() {
                crate::telemetry::metrics::manifest_shipped(hub, node);
            }
            shared.shipped.send_modify(|v| {
                *v = Some(v.map_or(version, |old| old.max(version)));
            });
        }
        Err(error) => {
            let (retry_in_ms, failures) = {
                let mut queue = shared.queue();
                let delay = queue.on_failed(list, shared.now_ms());
                (delay, queue.failures())
            };
            tracing::warn!(
                version,
                failures,
                retry_in_ms,
                %error,
                "manifest ship failed; retrying"
            );
            (on_failure)(ShipFailure {
                version,
                failures,
                retry_in_ms,
                location: shared.manifest.location(),
                error,
            });
        }
    }
}
