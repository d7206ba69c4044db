//! `GET /v1/events` (server-sent events) and `GET /v1/events/recent`: this node's hub events,
//! live or as the hub's bounded ring of recent ones (`crate::events::recent`).
//!
//! Each event travels as JSON ([`EventView`]): its sequence number, the time it was published,
//! its snake_case `kind` and its fields. On the stream the SSE `event:` line is that kind and
//! the `id:` line its sequence number.
//!
//! Nothing a watcher does makes the node hold more: a stream reads the hub's live feed, which
//! keeps a bounded backlog per watcher; a watcher that falls further behind loses the oldest
//! events it has not read and receives one `lagged` event (`{"lost": n}`) in their place. At
//! most [`AdminLimits::max_event_streams`] streams are served at once, each holding a permit;
//! beyond that the request is refused with 503 `too_many_streams`. A stream ends when the hub
//! stops, so a node's graceful shutdown is never held open by a watcher.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, OwnedSemaphorePermit};

use crate::events::recent::{event_kind, RecordedEvent, RECENT_EVENTS};

use super::routes::Routes;
use super::{AdminError, AdminLimits, AdminOps};

/// One hub event as the admin API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    /// Its position among the hub's events since the hub started on this node (from 1).
    pub seq: u64,
    /// When it was published, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Its kind in snake_case (`child_started`, `node_down`, ...).
    pub kind: String,
    /// Its fields (`{"id": "c1", "node": "a@h", "pid": 3}` for `child_started`).
    pub event: serde_json::Value,
}

impl EventView {
    /// The view of a recorded event.
    pub fn of(recorded: &RecordedEvent) -> Self {
        // `HubEvent` serializes as `{"Variant": {fields}}`: the fields are what a reader wants
        // beside the kind.
        let event = match serde_json::to_value(&recorded.event) {
            Ok(serde_json::Value::Object(mut map)) if map.len() == 1 => map
                .values_mut()
                .next()
                .map(std::mem::take)
                .unwrap_or_default(),
            Ok(other) => other,
            Err(e) => serde_json::json!({ "unserializable": e.to_string() }),
        };
        Self {
            seq: recorded.seq,
            at_ms: recorded.at_ms,
            kind: event_kind(&recorded.event).to_owned(),
            event,
        }
    }
}

/// What a stream of events reads: the hub's live feed, and a future that completes when the
/// hub stops (the stream then ends).
pub struct EventFeed {
    /// The live feed (`RecentEvents::watch`).
    pub events: broadcast::Receiver<Arc<RecordedEvent>>,
    /// Completes when no more events will come.
    pub ended: Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// `GET /v1/events/recent`'s query.
#[derive(Deserialize)]
pub(super) struct RecentQuery {
    limit: Option<usize>,
}

/// Events per `GET /v1/events/recent` when the request gives no `limit`.
pub const DEFAULT_RECENT_LIMIT: usize = 100;

pub(super) async fn recent<O: AdminOps>(
    State(r): State<Routes<O>>,
    query: Result<Query<RecentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<EventView>>, AdminError> {
    let Query(query) = query.map_err(|e| {
        AdminError::InvalidInput(format!(
            "query must be `limit` (1-{RECENT_EVENTS}): {}",
            e.body_text()
        ))
    })?;
    let limit = query.limit.unwrap_or(DEFAULT_RECENT_LIMIT);
    if limit == 0 || limit > RECENT_EVENTS {
        return Err(AdminError::InvalidInput(format!(
            "limit {limit} is out of range 1-{RECENT_EVENTS}"
        )));
    }
    r.ops.recent_events(limit).await.map(Json)
}

/// What one open stream holds: its feed and its permit (released when the stream is dropped,
/// whether it ended or the client went away).
struct Watching {
    feed: EventFeed,
    _permit: OwnedSemaphorePermit,
}

pub(super) async fn stream<O: AdminOps>(
    State(r): State<Routes<O>>,
) -> Result<Response, AdminError> {
    let permit = r.streams.clone().try_acquire_owned().map_err(|_| {
        AdminError::TooManyStreams(format!(
            "{} event streams are open on this node, the most it serves: close one or retry later",
            r.limits.max_event_streams
        ))
    })?;
    let feed = r.ops.watch_events().await?;
    let watching = Watching {
        feed,
        _permit: permit,
    };
    let events = futures::stream::unfold(watching, |mut w| async move {
        let next = tokio::select! {
            // Events already published go out before the end is noticed.
            biased;
            got = w.feed.events.recv() => got,
            () = &mut w.feed.ended => return None,
        };
        let event = match next {
            Ok(recorded) => sse_event(&EventView::of(&recorded)),
            Err(broadcast::error::RecvError::Lagged(lost)) => {
                tracing::debug!(lost, "an admin event stream fell behind");
                Event::default()
                    .event("lagged")
                    .json_data(serde_json::json!({ "lost": lost }))
                    .unwrap_or_default()
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok::<Event, Infallible>(event), w))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn sse_event(view: &EventView) -> Event {
    Event::default()
        .event(view.kind.as_str())
        .id(view.seq.to_string())
        .json_data(view)
        .unwrap_or_else(|_| Event::default().event(view.kind.as_str()))
}

/// A semaphore with one permit per stream the limits allow.
pub(super) fn stream_slots(limits: &AdminLimits) -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(limits.max_event_streams))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::HubEvent;

    #[test]
    fn a_view_carries_the_kind_and_the_fields_of_the_event() {
        let view = EventView::of(&RecordedEvent {
            seq: 4,
            at_ms: 99,
            event: HubEvent::ChildStarted {
                id: "c1".into(),
                node: "a@h".into(),
                pid: 7,
            },
        });
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "seq": 4, "at_ms": 99, "kind": "child_started",
                "event": {"id": "c1", "node": "a@h", "pid": 7}
            })
        );
    }
}
