//! Helpers shared by the hub's integration tests: spawning a hub with the ready-made kinds and
//! waiting for conditions with a generous deadline (never sleeping as an assertion).

#![allow(dead_code)]

use std::time::Duration;

use process_hub::{Hub, HubEvent, ProcessHub};
use tokio::sync::mpsc::UnboundedReceiver;

/// Generous: CI machines are slow and shared.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub async fn spawn_hub(hub_id: &str) -> Hub {
    spawn_with(ProcessHub::new(hub_id)).await
}

pub async fn spawn_with(config: ProcessHub) -> Hub {
    let (hub, _join) = Hub::spawn(config, process_hub_actors::default_kinds())
        .await
        .expect("hub spawns");
    hub
}

/// Polls `cond` until it holds or the deadline passes.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Receives events until one matches `pred`; returns it.
pub async fn wait_event(
    rx: &mut UnboundedReceiver<HubEvent>,
    what: &str,
    mut pred: impl FnMut(&HubEvent) -> bool,
) -> HubEvent {
    let found = tokio::time::timeout(DEADLINE, async {
        while let Some(e) = rx.recv().await {
            if pred(&e) {
                return Some(e);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(e)) => e,
        Ok(None) => panic!("event stream ended while waiting for: {what}"),
        Err(_) => panic!("timed out waiting for event: {what}"),
    }
}
