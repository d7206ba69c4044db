//! The shipping task: carries out [`crate::core::manifest_ship::ShipQueue`]'s decisions against a
//! [`RemoteManifest`].
//!
//! The leader calls [`ManifestShipper::offer`] after every committed mutation. The call only
//! takes a short lock and wakes the task, so a slow or failing manifest never delays a command.
//! The task ships one version at a time; versions offered meanwhile coalesce to the newest; a
//! failure is reported through the callback (the hub fires `manifest_ship_failed`) and retried
//! after the backoff with the newest version waiting by then.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{ManifestError, RemoteManifest, ShipOutcome};
use crate::core::declared_list::DeclaredList;
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

struct Shared {
    queue: Mutex<ShipQueue>,
    wake: Notify,
    shipped: watch::Sender<Option<u64>>,
}

impl Shared {
    fn queue(&self) -> std::sync::MutexGuard<'_, ShipQueue> {
        // The queue is plain data: a panic elsewhere cannot leave it half-updated.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running shipper. Dropping it stops the task (a ship in flight is abandoned; the next
/// leader ships its own newest version).
pub struct ManifestShipper {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl ManifestShipper {
    /// Starts the shipping task on the current tokio runtime. `on_failure` is called from the
    /// task after each failed attempt; keep it short (send a message, fire a hook).
    pub fn spawn(
        manifest: Arc<dyn RemoteManifest>,
        backoff: ShipBackoff,
        on_failure: impl Fn(ShipFailure) + Send + Sync + 'static,
    ) -> Self {
        let (shipped, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            queue: Mutex::new(ShipQueue::new(backoff)),
            wake: Notify::new(),
            shipped,
        });
        let task = tokio::spawn(run(shared.clone(), manifest, on_failure));
        Self { shared, task }
    }

    /// Offers a committed version for shipping. Never blocks on the manifest.
    pub fn offer(&self, list: &DeclaredList) -> Offer {
        let offer = self.shared.queue().offer(list.clone());
        if offer != Offer::Stale {
            self.shared.wake.notify_one();
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

impl Drop for ManifestShipper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    shared: Arc<Shared>,
    manifest: Arc<dyn RemoteManifest>,
    on_failure: impl Fn(ShipFailure) + Send + Sync + 'static,
) {
    let epoch = Instant::now();
    let now_ms = || epoch.elapsed().as_millis() as u64;
    loop {
        let step = shared.queue().next(now_ms());
        match step {
            ShipStep::Ship(list) => {
                let version = list.version();
                match manifest.ship(&list).await {
                    Ok(outcome) => {
                        if let ShipOutcome::KeptNewer { stored_version } = outcome {
                            tracing::info!(
                                version,
                                stored_version,
                                location = %manifest.location(),
                                "the remote manifest already holds this version or a newer one"
                            );
                        }
                        shared.queue().on_shipped(version);
                        shared.shipped.send_modify(|v| {
                            *v = Some(v.map_or(version, |old| old.max(version)));
                        });
                    }
                    Err(error) => {
                        let (retry_in_ms, failures) = {
                            let mut queue = shared.queue();
                            let delay = queue.on_failed(list, now_ms());
                            (delay, queue.failures())
                        };
                        tracing::warn!(
                            version,
                            failures,
                            retry_in_ms,
                            %error,
                            "manifest ship failed; retrying"
                        );
                        on_failure(ShipFailure {
                            version,
                            failures,
                            retry_in_ms,
                            location: manifest.location(),
                            error,
                        });
                    }
                }
            }
            ShipStep::WaitUntil(at) => {
                let wait = Duration::from_millis(at.saturating_sub(now_ms()));
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shared.wake.notified() => {}
                }
            }
            ShipStep::Idle => shared.wake.notified().await,
        }
    }
}
