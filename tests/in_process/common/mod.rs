//! What the integration tests share: one deadline, one way to wait for a condition (never
//! sleeping as an assertion), one way to pick a free port, and the fixtures.
//!
//! - [`cluster`]: in-process clusters of hubs (plain, or durable with auto-recovery), judged by
//!   the simulator's invariants (`process_hub::sim::invariants`).
//! - [`recovery_hub`]: one hub with auto-recovery on a data directory, its hooks recorded.
//! - [`admin`]: requests to the admin routes.
//! - [`fault_map`]: an example custom registry backend, with injected faults.
//! - [`peers`]: real `ractor_cluster` nodes in separate OS processes on loopback.
//!
//! - [`alone`]: running a test in a process of its own.
//!
//! The binary declares `mod common;` once; each test module uses what it needs.

#![allow(dead_code)]

pub mod admin;
pub mod alone;
pub mod cluster;
pub mod fault_map;
pub mod peers;
pub mod recovery_hub;

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use process_hub::{Hub, ProcessHub, StartOptions};
use tokio::sync::mpsc::UnboundedReceiver;

/// How long any test waits for anything. Generous: CI machines are slow and shared.
pub const DEADLINE: Duration = Duration::from_secs(40);

/// How often a waited-for condition is checked again.
const POLL: Duration = Duration::from_millis(10);

/// Polls `cond` until it holds; panics when it still does not hold after [`DEADLINE`].
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    wait_for(what, || {
        if cond() {
            Ok(())
        } else {
            Err("it still does not hold")
        }
    })
    .await;
}

/// Polls `check` until it is `Ok`; panics with `what` and the last reason when it is still
/// `Err` after [`DEADLINE`].
pub async fn wait_for<E: Display>(what: &str, mut check: impl FnMut() -> Result<(), E>) {
    let start = tokio::time::Instant::now();
    loop {
        match check() {
            Ok(()) => return,
            Err(why) if start.elapsed() > DEADLINE => {
                panic!("timed out waiting for: {what}: {why}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// [`wait_for`] with a check that has to await (a call to an actor, a node's stats).
pub async fn wait_for_async<E, F, Fut>(what: &str, mut check: F)
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let start = tokio::time::Instant::now();
    loop {
        match check().await {
            Ok(()) => return,
            Err(why) if start.elapsed() > DEADLINE => {
                panic!("timed out waiting for: {what}: {why}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// Receives events (a hub's `HubEvent`s, a transport's events) until one matches `pred`;
/// returns it. Panics when none does within [`DEADLINE`] or the stream ends.
pub async fn wait_event<T>(
    rx: &mut UnboundedReceiver<T>,
    what: &str,
    mut pred: impl FnMut(&T) -> bool,
) -> T {
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

/// A loopback port nothing listens on, never the same one twice in one test process: the OS
/// may offer a just-released port again before the process that was given it binds it.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if handed_out.insert(port) {
            return port;
        }
    }
}

/// A single hub with the ready-made kinds.
pub async fn spawn_hub(hub_id: &str) -> Hub {
    spawn_with(ProcessHub::new(hub_id)).await
}

/// A single hub on `config` with the ready-made kinds.
pub async fn spawn_with(config: ProcessHub) -> Hub {
    let (hub, _join) = Hub::spawn(config, process_hub_actors::default_kinds())
        .await
        .expect("hub spawns");
    hub
}

/// The options of a durable start.
pub fn durable() -> StartOptions {
    StartOptions::new().durable(true)
}
