//! The routes and the seam to the hub behind them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use tower_http::limit::RequestBodyLimitLayer;

use crate::model::ChildId;

use super::bodies::{
    CastAccepted, ChildView, ClearResponse, DeclaredResponse, Health, KindsResponse, LoadsResponse,
    StartResponse, StartSpec, StopResponse,
};
use super::cluster::ClusterResponse;
use super::events::{self, EventFeed, EventView};
use super::explain::{self, ChildExplanation};
use super::members::MembersResponse;
use super::messaging::{self, CallOutcome};
use super::page::ChildrenPage;
use super::summary::RegistrySummary;
use super::{batch_stop, guard, strict, ui, AdminConfig, AdminError, AdminLimits};

/// What the admin API needs from a hub. Implemented by the hub handle; a test double is enough
/// to exercise the HTTP contract.
pub trait AdminOps: Clone + Send + Sync + 'static {
    /// This node's view of the hub.
    fn health(&self) -> impl Future<Output = Result<Health, AdminError>> + Send;
    /// Every child in this node's registry copy.
    fn list_children(&self) -> impl Future<Output = Result<Vec<ChildView>, AdminError>> + Send;
    /// The children after the id `after` (exclusive), in id order, at most `limit`. The
    /// default sorts [`AdminOps::list_children`]; a hub overrides it to keep only the page.
    fn list_children_page(
        &self,
        after: Option<ChildId>,
        limit: usize,
    ) -> impl Future<Output = Result<ChildrenPage, AdminError>> + Send {
        async move {
            let children = self.list_children().await?;
            Ok(ChildrenPage::of(
                children,
                after.as_ref().map(ChildId::as_str),
                limit,
            ))
        }
    }
    /// One child, or `None` when unknown.
    fn get_child(
        &self,
        id: ChildId,
    ) -> impl Future<Output = Result<Option<ChildView>, AdminError>> + Send;
    /// The kinds this node can start, sorted; `None` when it cannot tell (the default). A
    /// start naming another kind is refused whole, listing these, before anything starts.
    /// `GET /v1/kinds` answers them (404 on `None`).
    fn known_kinds(&self) -> Option<Vec<String>> {
        None
    }
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
    /// Stops the children `ids` (distinct, valid) in one request and waits
    /// (`POST /v1/children/stop`): each id in one of `stopped`, `pending` and `errors` (an
    /// unknown id an error `not_found`). An error of the whole request means nothing changed
    /// (or, `outcome_unknown`, that it cannot be told). The default stops them one by one with
    /// [`AdminOps::stop_child`] (a refusal of the first is the request's; of a later one, that
    /// child's error); a hub overrides it to stop them as one batch.
    fn stop_children(
        &self,
        ids: Vec<ChildId>,
    ) -> impl Future<Output = Result<StopResponse, AdminError>> + Send {
        async move {
            let mut out = StopResponse::default();
            let mut node: Option<String> = None;
            for (i, id) in ids.into_iter().enumerate() {
                let (code, reason) = match self.stop_child(id.clone()).await {
                    Ok(Some(one)) => {
                        out.stopped.extend(one.stopped);
                        out.errors.extend(one.errors);
                        out.pending.extend(one.pending);
                        continue;
                    }
                    Ok(None) => (
                        "not_found".to_owned(),
                        crate::types::ChildStopError::NotFound.to_string(),
                    ),
                    // Nothing was asked of the hub before: the refusal is the request's.
                    Err(e) if i == 0 => return Err(e),
                    // Later, the refusal is this child's: the others are asked all the same.
                    Err(e) => (e.code().to_owned(), e.to_string()),
                };
                if node.is_none() {
                    node = Some(self.health().await.map(|h| h.node).unwrap_or_default());
                }
                out.errors.push(super::StartError {
                    id: id.to_string(),
                    node: node.clone().unwrap_or_default(),
                    reason,
                    code,
                });
            }
            Ok(out)
        }
    }
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
    /// The members' loads this node places new children by (`GET /v1/loads`). Optional: the
    /// default answers 404.
    fn loads(&self) -> impl Future<Output = Result<LoadsResponse, AdminError>> + Send {
        async {
            Err(AdminError::NotFound(
                "this node does not report loads".into(),
            ))
        }
    }
    /// Sends `command` (JSON, checked) to child `id` wherever it runs and waits up to
    /// `timeout` for the kind's answer (`POST /v1/children/{id}/call`). Optional: the default
    /// answers 404.
    fn call_child(
        &self,
        id: ChildId,
        command: Vec<u8>,
        timeout: Duration,
    ) -> impl Future<Output = Result<CallOutcome, AdminError>> + Send {
        let _ = (id, command, timeout);
        async {
            Err(AdminError::NotFound(
                "this node does not message children".into(),
            ))
        }
    }
    /// Sends `command` to child `id` wherever it runs without waiting
    /// (`POST /v1/children/{id}/cast`). Same default.
    fn cast_child(
        &self,
        id: ChildId,
        command: Vec<u8>,
    ) -> impl Future<Output = Result<CastAccepted, AdminError>> + Send {
        let _ = (id, command);
        async {
            Err(AdminError::NotFound(
                "this node does not message children".into(),
            ))
        }
    }
    /// This process's metrics in the Prometheus text format (`GET /metrics`), read after the
    /// gauges taken from state are refreshed. Optional: the default, and a process that never
    /// installed the exporter ([`crate::telemetry::install_prometheus`]), answer 404
    /// `metrics_off`.
    fn metrics_text(&self) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }
    /// Where child `id` runs, where it belongs and why (`GET /v1/children/{id}/explain`);
    /// `None` when neither the registry nor the declared list knows the id (404). Optional:
    /// the default answers 404.
    fn explain_child(
        &self,
        id: ChildId,
    ) -> impl Future<Output = Result<Option<ChildExplanation>, AdminError>> + Send {
        let _ = id;
        async {
            Err(AdminError::NotFound(
                "this node does not explain children".into(),
            ))
        }
    }
    /// The members with their state (`GET /v1/members`). Optional: the default answers 404.
    fn members(&self) -> impl Future<Output = Result<MembersResponse, AdminError>> + Send {
        async {
            Err(AdminError::NotFound(
                "this node does not list members".into(),
            ))
        }
    }
    /// The last `limit` events of the hub's bounded ring, oldest first
    /// (`GET /v1/events/recent`). Optional: the default answers 404.
    fn recent_events(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<EventView>, AdminError>> + Send {
        let _ = limit;
        async {
            Err(AdminError::NotFound(
                "this node does not record events".into(),
            ))
        }
    }
    /// The live feed of the hub's events (`GET /v1/events`). Optional: the default answers
    /// 404.
    fn watch_events(&self) -> impl Future<Output = Result<EventFeed, AdminError>> + Send {
        async {
            Err(AdminError::NotFound(
                "this node does not stream events".into(),
            ))
        }
    }
    /// Every member's figures, gathered over the cluster wire (`GET /v1/cluster`). Optional:
    /// the default answers 404.
    fn cluster(&self) -> impl Future<Output = Result<ClusterResponse, AdminError>> + Send {
        async {
            Err(AdminError::NotFound(
                "this node does not gather the cluster's figures".into(),
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

/// The admin routes over `ops` with no token and the default limits (see [`router_with`]).
pub fn router<O: AdminOps>(ops: O) -> Router {
    router_with(ops, AdminConfig::default())
}

/// The admin routes over `ops`, protected and bounded as `config` says, ready to be served or
/// nested into an application's router. Unknown paths answer the API's JSON 404 (the router
/// has a fallback: nest it under a prefix rather than merge it into a router with its own).
pub fn router_with<O: AdminOps>(ops: O, config: AdminConfig) -> Router {
    let limits = config.limits;
    Router::new()
        .route("/v1/health", get(health::<O>))
        .route("/v1/ready", get(ready::<O>))
        .route("/v1/children", get(list::<O>).post(start::<O>))
        .route("/v1/children/{id}", get(get_one::<O>).delete(stop::<O>))
        .route(
            "/v1/children/stop",
            axum::routing::post(batch_stop::stop_many::<O>)
                .get(batch_stop::get_child_named_stop::<O>)
                .delete(batch_stop::stop_child_named_stop::<O>),
        )
        .route(
            "/v1/children/{id}/call",
            axum::routing::post(messaging::call::<O>),
        )
        .route(
            "/v1/children/{id}/cast",
            axum::routing::post(messaging::cast::<O>),
        )
        .route("/v1/registry/summary", get(registry_summary::<O>))
        .route("/v1/declared", get(declared::<O>))
        .route("/v1/loads", get(loads::<O>))
        .route("/v1/kinds", get(kinds::<O>))
        .route("/metrics", get(metrics_text::<O>))
        .route("/v1/members", get(members::<O>))
        .route("/v1/cluster", get(cluster::<O>))
        .route("/v1/children/{id}/explain", get(explain::route::<O>))
        .route("/v1/events", get(events::stream::<O>))
        .route("/v1/events/recent", get(events::recent::<O>))
        .route(
            "/v1/declared/clear",
            axum::routing::post(clear_declared::<O>),
        )
        .merge(ui::routes())
        .fallback(unknown_path)
        .with_state(Routes {
            ops,
            limits,
            streams: events::stream_slots(&limits),
        })
        // The limit is tower-http's alone (axum's own default would cut at 2 MiB): a body
        // declared longer is refused 413 before a byte of it is read, one without a declared
        // length is cut at the limit as a route reads it. Inside the guard, so a request
        // without the token is refused 401 whatever its size.
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(config),
            guard::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            limits.max_body_bytes,
            guard::json_errors,
        ))
}

/// What every route reads: the hub behind the API, the request bounds, and the permits of
/// the event streams open at once.
#[derive(Clone)]
pub(super) struct Routes<O> {
    pub(super) ops: O,
    pub(super) limits: AdminLimits,
    pub(super) streams: Arc<tokio::sync::Semaphore>,
}

async fn unknown_path(uri: Uri) -> AdminError {
    AdminError::NotFound(format!("no route {}", uri.path()))
}

async fn health<O: AdminOps>(State(r): State<Routes<O>>) -> Result<Json<Health>, AdminError> {
    r.ops.health().await.map(Json)
}

/// Ready only when healthy and recovered ([`Health::not_ready`]): 200 with the health, else
/// 503 `not_ready` naming the status or the recovery state and why (an isolated node serves
/// only itself; a recovering one has not restarted what it owes yet).
async fn ready<O: AdminOps>(State(r): State<Routes<O>>) -> Result<Json<Health>, AdminError> {
    let health = r.ops.health().await?;
    match health.not_ready() {
        None => Ok(Json(health)),
        Some(why) => Err(AdminError::NotReady(why)),
    }
}

/// `GET /v1/children`'s query: `limit` children after the id `after`.
#[derive(Deserialize)]
struct PageQuery {
    limit: Option<usize>,
    after: Option<String>,
}

async fn list<O: AdminOps>(
    State(r): State<Routes<O>>,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, AdminError> {
    let Query(query) = query.map_err(|e| {
        AdminError::InvalidInput(format!(
            "query must be `limit` (1-{}) and `after` (a child id): {}",
            r.limits.max_page,
            e.body_text()
        ))
    })?;
    let limit = query.limit.unwrap_or(r.limits.default_page);
    if limit == 0 || limit > r.limits.max_page {
        return Err(AdminError::InvalidInput(format!(
            "limit {limit} is out of range 1-{}",
            r.limits.max_page
        )));
    }
    let after = query.after.map(parse_id).transpose()?;
    let page = r.ops.list_children_page(after, limit).await?;
    let mut response = Json(page.children).into_response();
    if let Some(next) = page.next_after {
        // The cursor travels percent-encoded: an id may hold any character.
        let encoded =
            percent_encoding::utf8_percent_encode(&next, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        let link = format!("</v1/children?limit={limit}&after={encoded}>; rel=\"next\"");
        for (name, value) in [("x-next-after", encoded), ("link", link)] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
    }
    Ok(response)
}

pub(super) fn parse_id(raw: String) -> Result<ChildId, AdminError> {
    ChildId::parse(raw).map_err(|e| AdminError::InvalidInput(e.to_string()))
}

pub(super) async fn get_one<O: AdminOps>(
    State(r): State<Routes<O>>,
    Path(id): Path<String>,
) -> Result<Json<ChildView>, AdminError> {
    let id = parse_id(id)?;
    match r.ops.get_child(id.clone()).await? {
        Some(child) => Ok(Json(child)),
        None => Err(AdminError::NotFound(format!("no child with id {id}"))),
    }
}

async fn start<O: AdminOps>(
    State(r): State<Routes<O>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AdminError> {
    let body = body.map_err(|e| AdminError::of_body(e, r.limits.max_body_bytes))?;
    // Read strictly by hand: a bad body gets the API's error shape naming the field and
    // where, and an unknown field is refused rather than ignored (see `strict`).
    let (specs, single) = strict::parse_start_body(&body)?;
    if specs.is_empty() {
        return Err(AdminError::InvalidInput(
            "no children in the request".into(),
        ));
    }
    if specs.len() > r.limits.max_specs_per_request {
        return Err(AdminError::PayloadTooLarge(format!(
            "{} children in one request; at most {} are taken",
            specs.len(),
            r.limits.max_specs_per_request
        )));
    }
    // Validate every spec before starting any, so a typo starts nothing.
    strict::check_values(&specs, single)?;
    if let Some(known) = r.ops.known_kinds() {
        strict::check_kinds(&specs, single, &known)?;
    }
    let response = r.ops.start_children(specs).await?;
    if !response.pending.is_empty() {
        // Declared for good, started not confirmed: acknowledged, not done.
        return Ok((StatusCode::ACCEPTED, Json(response)).into_response());
    }
    if single && response.started.is_empty() {
        if let Some(err) = response.errors.first() {
            // A single child that could not start is the request's outcome: answer with the
            // status of its reason rather than a 200 that hides it.
            let message = format!("child {}: {}", err.id, err.reason);
            return Err(AdminError::for_child(&err.code, message));
        }
    }
    Ok((StatusCode::OK, Json(response)).into_response())
}

pub(super) async fn stop<O: AdminOps>(
    State(r): State<Routes<O>>,
    Path(id): Path<String>,
) -> Result<Response, AdminError> {
    let id = parse_id(id)?;
    match r.ops.stop_child(id.clone()).await? {
        // Undeclared for good, instances not confirmed stopped: acknowledged, not done.
        Some(result) if !result.pending.is_empty() => {
            Ok((StatusCode::ACCEPTED, Json(result)).into_response())
        }
        Some(result) if result.stopped.is_empty() && !result.errors.is_empty() => {
            // Like a single start: a stop that did not happen is not a 200.
            let err = &result.errors[0];
            let message = format!("child {} on {}: {}", err.id, err.node, err.reason);
            Err(AdminError::for_child(&err.code, message))
        }
        Some(result) => Ok(Json(result).into_response()),
        None => Err(AdminError::NotFound(format!("no child with id {id}"))),
    }
}

async fn registry_summary<O: AdminOps>(
    State(r): State<Routes<O>>,
) -> Result<Json<RegistrySummary>, AdminError> {
    r.ops.registry_summary().await.map(Json)
}

async fn loads<O: AdminOps>(State(r): State<Routes<O>>) -> Result<Json<LoadsResponse>, AdminError> {
    r.ops.loads().await.map(Json)
}

async fn kinds<O: AdminOps>(State(r): State<Routes<O>>) -> Result<Json<KindsResponse>, AdminError> {
    match r.ops.known_kinds() {
        Some(kinds) => Ok(Json(KindsResponse { kinds })),
        None => Err(AdminError::NotFound(
            "this node does not list the kinds it can start".into(),
        )),
    }
}

async fn metrics_text<O: AdminOps>(
    State(r): State<Routes<O>>,
) -> Result<axum::response::Response, AdminError> {
    use axum::response::IntoResponse;
    match r.ops.metrics_text().await {
        Some(text) => Ok((
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response()),
        None => Err(AdminError::Child {
            status: axum::http::StatusCode::NOT_FOUND,
            code: "metrics_off".into(),
            message:
                "this process does not export metrics (the Prometheus exporter is not installed)"
                    .into(),
        }),
    }
}

async fn members<O: AdminOps>(
    State(r): State<Routes<O>>,
) -> Result<Json<MembersResponse>, AdminError> {
    r.ops.members().await.map(Json)
}

async fn declared<O: AdminOps>(
    State(r): State<Routes<O>>,
) -> Result<Json<DeclaredResponse>, AdminError> {
    r.ops.declared().await.map(Json)
}

async fn clear_declared<O: AdminOps>(
    State(r): State<Routes<O>>,
) -> Result<Json<ClearResponse>, AdminError> {
    r.ops.clear_declared().await.map(Json)
}

async fn cluster<O: AdminOps>(
    State(r): State<Routes<O>>,
) -> Result<Json<ClusterResponse>, AdminError> {
    r.ops.cluster().await.map(Json)
}
