//! The routes and the seam to the hub behind them.

use std::future::Future;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use crate::model::ChildId;

use super::dto::{
    ChildView, ClearResponse, DeclaredResponse, Health, StartResponse, StartSpec, StopResponse,
};
use super::summary::RegistrySummary;
use super::AdminError;

/// What the admin API needs from a hub. Implemented by the hub handle; a test double is enough
/// to exercise the HTTP contract.
pub trait AdminOps: Clone + Send + Sync + 'static {
    /// This node's view of the hub.
    fn health(&self) -> impl Future<Output = Result<Health, AdminError>> + Send;
    /// Every child in this node's registry copy.
    fn list_children(&self) -> impl Future<Output = Result<Vec<ChildView>, AdminError>> + Send;
    /// One child, or `None` when unknown.
    fn get_child(
        &self,
        id: ChildId,
    ) -> impl Future<Output = Result<Option<ChildView>, AdminError>> + Send;
    /// Starts the children and waits for the outcome of each.
    fn start_children(
        &self,
        specs: Vec<StartSpec>,
    ) -> impl Future<Output = Result<StartResponse, AdminError>> + Send;
    /// Stops one child and waits; `None` when the id is unknown.
    fn stop_child(
        &self,
        id: ChildId,
    ) -> impl Future<Output = Result<Option<StopResponse>, AdminError>> + Send;
    /// This node's copy of the declared list. A hub without declared lists answers 404, which
    /// is what the default does.
    fn declared(&self) -> impl Future<Output = Result<DeclaredResponse, AdminError>> + Send {
        async {
            Err(AdminError::NotFound(
                "auto-recovery is off on this node: there is no declared list".into(),
            ))
        }
    }
    /// Counts of this node's registry copy (`GET /v1/registry/summary`). Optional: the
    /// default answers 404.
    fn registry_summary(&self) -> impl Future<Output = Result<RegistrySummary, AdminError>> + Send {
        async {
            Err(AdminError::NotFound(
                "this node does not summarize its registry".into(),
            ))
        }
    }
    /// Empties the declared list (the operator's way out of a parked hub). Same default.
    fn clear_declared(&self) -> impl Future<Output = Result<ClearResponse, AdminError>> + Send {
        async {
            Err(AdminError::NotFound(
                "auto-recovery is off on this node: there is no declared list".into(),
            ))
        }
    }
}

/// The admin routes over `ops`, ready to be served or merged into an application's router.
pub fn router<O: AdminOps>(ops: O) -> Router {
    Router::new()
        .route("/v1/health", get(health::<O>))
        .route("/v1/children", get(list::<O>).post(start::<O>))
        .route("/v1/children/{id}", get(get_one::<O>).delete(stop::<O>))
        .route("/v1/registry/summary", get(registry_summary::<O>))
        .route("/v1/declared", get(declared::<O>))
        .route(
            "/v1/declared/clear",
            axum::routing::post(clear_declared::<O>),
        )
        .with_state(ops)
}

async fn health<O: AdminOps>(State(ops): State<O>) -> Result<Json<Health>, AdminError> {
    ops.health().await.map(Json)
}

async fn list<O: AdminOps>(State(ops): State<O>) -> Result<Json<Vec<ChildView>>, AdminError> {
    let mut children = ops.list_children().await?;
    children.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(Json(children))
}

fn parse_id(raw: String) -> Result<ChildId, AdminError> {
    ChildId::parse(raw).map_err(|e| AdminError::InvalidInput(e.to_string()))
}

async fn get_one<O: AdminOps>(
    State(ops): State<O>,
    Path(id): Path<String>,
) -> Result<Json<ChildView>, AdminError> {
    let id = parse_id(id)?;
    match ops.get_child(id.clone()).await? {
        Some(child) => Ok(Json(child)),
        None => Err(AdminError::NotFound(format!("no child with id {id}"))),
    }
}

/// The body of `POST /v1/children`: one spec or several.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    Many(Vec<StartSpec>),
    One(Box<StartSpec>),
}

async fn start<O: AdminOps>(State(ops): State<O>, body: Bytes) -> Result<Response, AdminError> {
    // Parsed by hand so that a bad body gets the API's error shape, not the framework's.
    let parsed: OneOrMany = serde_json::from_slice(&body).map_err(|e| {
        AdminError::InvalidInput(format!(
            "body must be a child spec {{\"id\", \"kind\", \"args\"?, \"restart\"?, \"metadata\"?, \"durable\"?}} or an array of them: {e}"
        ))
    })?;
    let (specs, single) = match parsed {
        OneOrMany::Many(specs) => (specs, false),
        OneOrMany::One(spec) => (vec![*spec], true),
    };
    if specs.is_empty() {
        return Err(AdminError::InvalidInput(
            "no children in the request".into(),
        ));
    }
    for spec in &specs {
        // Validate every spec before starting any, so a typo starts nothing.
        spec.clone().into_spec()?;
    }
    let response = ops.start_children(specs).await?;
    if single && response.started.is_empty() {
        if let Some(err) = response.errors.first() {
            // A single child that could not start is the request's outcome: answer with the
            // matching status rather than a 200 that hides it.
            let message = format!("child {}: {}", err.id, err.reason);
            match err.code.as_str() {
                "already_started" => return Err(AdminError::AlreadyStarted(message)),
                "unknown_kind" | "invalid_args" | "invalid_metadata" => {
                    return Err(AdminError::InvalidInput(message))
                }
                "durable_requires_permanent" => {
                    return Err(AdminError::DurableRequiresPermanent(message))
                }
                "no_leader" => return Err(AdminError::NoLeader(message)),
                code => {
                    if let Some(refusal) = storage_refusal(code, message) {
                        return Err(refusal);
                    }
                }
            }
        }
    }
    Ok((StatusCode::OK, Json(response)).into_response())
}

async fn stop<O: AdminOps>(
    State(ops): State<O>,
    Path(id): Path<String>,
) -> Result<Json<StopResponse>, AdminError> {
    let id = parse_id(id)?;
    match ops.stop_child(id.clone()).await? {
        Some(result) => {
            if result.stopped.is_empty() {
                if let Some(err) = result.errors.first() {
                    let message = format!("child {}: {}", err.id, err.reason);
                    if let Some(refusal) = storage_refusal(&err.code, message) {
                        return Err(refusal);
                    }
                }
            }
            Ok(Json(result))
        }
        None => Err(AdminError::NotFound(format!("no child with id {id}"))),
    }
}

/// The answer to a single-child request whose registry write failed: 507 when the disk is full
/// (the same request succeeds once space returns), 503 `storage_failed` otherwise.
fn storage_refusal(code: &str, message: String) -> Option<AdminError> {
    match code {
        "insufficient_storage" => Some(AdminError::InsufficientStorage(message)),
        "storage" => Some(AdminError::StorageFailed(message)),
        _ => None,
    }
}

async fn registry_summary<O: AdminOps>(
    State(ops): State<O>,
) -> Result<Json<RegistrySummary>, AdminError> {
    ops.registry_summary().await.map(Json)
}

async fn declared<O: AdminOps>(State(ops): State<O>) -> Result<Json<DeclaredResponse>, AdminError> {
    ops.declared().await.map(Json)
}

async fn clear_declared<O: AdminOps>(
    State(ops): State<O>,
) -> Result<Json<ClearResponse>, AdminError> {
    ops.clear_declared().await.map(Json)
}
