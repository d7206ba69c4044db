//! The admin HTTP API: JSON over HTTP for operators, scripts and the demo.
//!
//! A library feature (`admin`) so that users who embed the hub in their own binary can mount the
//! same routes next to theirs. The routes talk to the hub through [`AdminOps`], which keeps the
//! HTTP contract (paths, JSON fields, status codes) in one place, independent of how the hub
//! answers.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/health` | [`Health`] |
//! | `GET /v1/ready` | [`Health`] with 200 when its `status` is `"ok"` and its `recovery_state` `"normal"` ([`Health::not_ready`]); else 503 `not_ready` naming why (for a readiness probe: an isolated, partitioned, set-aside, degraded or recovering node is not ready) |
//! | `GET /v1/children?limit=&after=` | `[`[`ChildView`]`]`: a page of this node's registry copy in id order; `x-next-after` and `Link` name the next page |
//! | `GET /v1/children/{id}` | [`ChildView`] or 404 |
//! | `POST /v1/children` | one [`StartSpec`] or an array, awaited -> [`StartResponse`] |
//! | `DELETE /v1/children/{id}` | [`StopResponse`] or 404 |
//! | `POST /v1/children/stop` | `{"ids": [...]}` (at most [`AdminLimits::max_specs_per_request`]), awaited -> [`StopManyResponse`]: every id stopped, pending or an error, with counts |
//! | `POST /v1/children/{id}/call?timeout_ms=` | the body (a JSON command) to the child wherever it runs -> [`ChildAnswer`] |
//! | `POST /v1/children/{id}/cast` | the same without waiting -> 202 [`CastAccepted`] |
//! | `GET /v1/registry/summary` | [`RegistrySummary`]: counts of this node's copy (cheap to poll) |
//! | `GET /v1/children/{id}/explain` | [`ChildExplanation`]: where it runs, its ring owners, `why` it is there, its recent events; 404 when neither the registry nor the declared list knows the id |
//! | `GET /v1/members` | [`MembersResponse`]: the members with their state (`up`, `leaving`, `down`) |
//! | `GET /v1/cluster` | [`ClusterResponse`]: every member's figures and last ten minutes, asked over the cluster wire (at most [`MEMBER_WAIT`] each); `unreachable` for a member that did not answer, `down` for a node this one considers down |
//! | `GET /v1/kinds` | [`KindsResponse`]: the kinds this node can start, sorted; 404 when it cannot tell ([`AdminOps::known_kinds`]) |
//! | `GET /v1/loads` | [`LoadsResponse`]: the members' loads this node places by |
//! | `GET /v1/events` | server-sent events: this node's hub events as they happen ([`EventView`] per `data:`, `event:` its kind), `lagged` when the watcher fell behind; 503 `too_many_streams` beyond [`AdminLimits::max_event_streams`] |
//! | `GET /v1/events/recent?limit=` | `[`[`EventView`]`]`: the last events of the hub's bounded ring (default 100, at most 1,000) |
//! | `GET /v1/declared` | [`DeclaredResponse`], or 404 without auto-recovery |
//! | `POST /v1/declared/clear` | [`ClearResponse`] (the operator's clear of a parked list) |
//! | `GET /metrics` | the process's metrics in the Prometheus text format, or 404 `metrics_off` |
//! | `GET /ui` | the operator's dashboard (HTML; its assets under `/ui/`), served without a token: it holds no data and asks for the token itself (see `ui`) |
//!
//! Every error, the framework's own included (404 of an unknown path, 405, 413), is
//! `{"error": "snake_case_code", "message": "..."}` ([`AdminError`]).
//! [`crate::Hub`] implements [`AdminOps`] (see `hub_ops`), so `router(hub)` serves a real hub.
//!
//! [`probe_router`] serves `GET /v1/health` and `GET /v1/ready` alone, without a token, for
//! an orchestrator's probes (see `probes`).
//!
//! [`router_with`] takes an [`AdminConfig`]: a bearer token every request must present, and
//! the bounds of a request ([`AdminLimits`]). Whatever the config, cross-origin requests and
//! writes not declared `application/json` are refused (see `guard`), so a web page cannot
//! drive the API from an operator's browser.

mod batch_stop;
mod bodies;
mod cluster;
mod config;
mod error;
mod events;
mod explain;
mod guard;
mod hub_ops;
mod json_keys;
mod members;
mod messaging;
mod page;
mod probes;
mod routes;
mod start_body;
mod strict;
mod summary;
mod ui;

pub use batch_stop::{check_ids, parse_stop_body, stop_many_answer, STOP_BODY_FIELDS};
pub use bodies::{CastAccepted, ChildAnswer};
pub use bodies::{
    ChildView, ClearResponse, DeclaredChildView, DeclaredResponse, Health, KindsResponse,
    LoadsResponse, NodeLoad, NodePid, PendingChild, StartError, StartResponse, StartSpec,
    StartedChild, StopCounts, StopManyResponse, StopResponse, StoppedChild, UnreachedSeedView,
};
pub use cluster::{ClusterMemberView, ClusterResponse, MEMBER_WAIT};
pub use config::{AdminConfig, AdminLimits, AdminToken, AdminTokenError};
pub use error::AdminError;
pub use events::{EventFeed, EventView, DEFAULT_RECENT_LIMIT};
pub use explain::{ChildExplanation, EXPLAIN_EVENTS};
pub use hub_ops::{start_error_code, stop_error_code, ADMIN_REQUEST_TIMEOUT};
pub use members::{MemberView, MembersResponse};
pub use messaging::{message_error, CallOutcome, DEFAULT_CALL_TIMEOUT_MS, MAX_CALL_TIMEOUT_MS};
pub use page::{ChildrenPage, PageCollector};
pub use probes::{probe_router, ProbeAnswer};
pub use routes::{router, router_with, AdminOps};
pub use strict::{
    check_kind, check_kinds, check_values, parse_start_body, spec_from_text, start_spec_from_json,
    SpecInputError, START_SPEC_FIELDS,
};
pub use summary::RegistrySummary;
pub use ui::CONTENT_SECURITY_POLICY;
