//! `watch`: the node's hub events as they happen (`GET /v1/events`), one line each, until the
//! operator interrupts it or the node goes away.
//!
//! Each line is flushed as it is printed, so `watch | grep child_started` sees an event at
//! once. A `lagged` event means this watcher fell behind and the node dropped events for it
//! rather than hold them; the line says how many.

use std::io::Write;

use super::outcome::CtlError;
use super::read::event_line;
use crate::admin_client::AdminClient;

/// Follows the node's events; ends only with an error (the stream ended: exit 3) or when
/// stdout is closed (exit 0).
pub fn watch(client: &AdminClient, json: bool) -> Result<(), CtlError> {
    let stdout = std::io::stdout();
    let connected = || eprintln!("watching the events of {} (Ctrl-C to stop)", client.base());
    client
        .follow_events(connected, |kind, data| {
            let line = if json {
                data.to_owned()
            } else if kind == "lagged" {
                let lost = serde_json::from_str::<serde_json::Value>(data)
                    .ok()
                    .and_then(|v| v["lost"].as_u64())
                    .unwrap_or(0);
                format!("lagged: this watcher fell behind and {lost} events were dropped")
            } else {
                match serde_json::from_str(data) {
                    Ok(event) => event_line(&event),
                    Err(_) => format!("{kind}  {data}"),
                }
            };
            let mut out = stdout.lock();
            // A closed stdout (`watch | head`) ends the watch.
            writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
        })
        .map_err(CtlError::from)
}
