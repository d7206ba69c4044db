//! The probe routes: `GET /v1/health` and `GET /v1/ready` for an orchestrator's liveness and
//! readiness probes, served without a token on a listener of their own.
//!
//! A kubelet's HTTP probe cannot present a secret (its headers are written in the manifest),
//! and the admin API asks every request for its token, `/v1/health` included. So a node can
//! serve these two answers apart (`process-hub node --probe HOST:PORT`): they say only the
//! health's `status` and `recovery_state` (no member names, no problems, no seeds), and they
//! change nothing.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/health` | 200 `{"status", "recovery_state"}` whatever the status, while the hub runs (liveness: a node that is only not ready must not be restarted for it); 503 `not_ready` once the hub is stopping |
//! | `GET /v1/ready` | 200 the same when [`Health::not_ready`] finds nothing; else 503 `not_ready` naming the status or the recovery state |

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminOps, Health};

/// What a probe route answers: the two fields a probe needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAnswer {
    /// The health's `status` (`ok`, `isolated`, `partitioned`, `set_aside`, `degraded`).
    pub status: String,
    /// `recovering` until the first reconcile round completes, then `normal`.
    pub recovery_state: String,
}

impl From<&Health> for ProbeAnswer {
    fn from(health: &Health) -> Self {
        Self {
            status: health.status.clone(),
            recovery_state: health.recovery_state.clone(),
        }
    }
}

/// The probe routes over `ops` (see the module): no token, no other route.
pub fn probe_router<O: AdminOps>(ops: O) -> Router {
    Router::new()
        .route("/v1/health", get(live::<O>))
        .route("/v1/ready", get(ready::<O>))
        .fallback(|| async {
            AdminError::NotFound("the probe listener serves /v1/health and /v1/ready".into())
        })
        .with_state(ops)
}

async fn live<O: AdminOps>(State(ops): State<O>) -> Result<Json<ProbeAnswer>, AdminError> {
    let health = ops.health().await?;
    Ok(Json(ProbeAnswer::from(&health)))
}

async fn ready<O: AdminOps>(State(ops): State<O>) -> Result<Json<ProbeAnswer>, AdminError> {
    let health = ops.health().await?;
    match health.not_ready() {
        None => Ok(Json(ProbeAnswer::from(&health))),
        Some(_) => Err(AdminError::NotReady(format!(
            "status {}, recovery_state {}",
            health.status, health.recovery_state
        ))),
    }
}
