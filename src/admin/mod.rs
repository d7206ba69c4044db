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
//! | `GET /v1/children` | `[`[`ChildView`]`]` (this node's registry copy) |
//! | `GET /v1/children/{id}` | [`ChildView`] or 404 |
//! | `POST /v1/children` | one [`StartSpec`] or an array, awaited -> [`StartResponse`] |
//! | `DELETE /v1/children/{id}` | [`StopResponse`] or 404 |
//! | `GET /v1/registry/summary` | [`RegistrySummary`]: counts of this node's copy (cheap to poll) |
//! | `GET /v1/declared` | [`DeclaredResponse`], or 404 without auto-recovery |
//! | `POST /v1/declared/clear` | [`ClearResponse`] (the operator's clear of a parked list) |
//!
//! Errors are `{"error": "snake_case_code", "message": "..."}` with 400 for invalid input, 404
//! for unknown ids, 409 when the child is already started, 503 when the hub is not ready.
//! [`crate::Hub`] implements [`AdminOps`] (see `hub_ops`), so `router(hub)` serves a real hub.
//! Bind it to loopback unless the network in between is trusted: it has no authentication.

mod dto;
mod error;
mod hub_ops;
mod routes;
mod summary;

pub use dto::{
    ChildView, ClearResponse, DeclaredChildView, DeclaredResponse, Health, NodePid, StartError,
    StartResponse, StartSpec, StartedChild, StopResponse, StoppedChild,
};
pub use error::AdminError;
pub use hub_ops::{start_error_code, stop_error_code, ADMIN_REQUEST_TIMEOUT};
pub use routes::{router, AdminOps};
pub use summary::RegistrySummary;
