//! `GET /ui`: the operator's dashboard, a page served by the admin listener itself.
//!
//! The page and its assets are compiled into the binary (`include_str!` of the files beside
//! this one), so a node serves its dashboard with no network, no CDN and no build step, and the
//! page a node serves always matches the API it reads. The page holds no data: its script
//! reads the same JSON routes as any client (`/v1/health`, `/v1/members`, `/v1/cluster`,
//! `/v1/registry/summary`, `/v1/children`, `/v1/declared`, `/v1/children/{id}/explain`,
//! `/v1/events` and `/v1/events/recent`), with same-origin requests that the guard lets through
//! like any other. The other members' figures come through this node (`/v1/cluster` asks them
//! over the cluster wire), so the page never reaches another origin.
//!
//! Two decisions follow from "the page holds no data":
//! - **The assets need no token** (see `guard`): a browser cannot attach a bearer token to a
//!   navigation, and what would be protected is public anyway (it is in the source). The
//!   page asks the operator for the token (a password field), keeps it in the tab's memory
//!   only and sends it as `Authorization: Bearer` on its own requests; every route with data
//!   still refuses a request without it. For the same reason an asset may be reached from a
//!   link on another site: only its `GET` and `HEAD` are exempt from the origin check.
//! - **A strict Content-Security-Policy** on every asset: scripts, styles, images and
//!   connections only from the node itself, no inline script (the script is its own asset),
//!   no framing (`frame-ancestors 'none'` and `X-Frame-Options: DENY`, so no other page can
//!   dress the dashboard up as a click target), and `nosniff` so each asset is only ever what
//!   its content type says. Whatever a child id or an event field holds, the script renders it
//!   as text, never as HTML.

use axum::extract::Path;
use axum::http::{header, HeaderValue, Method};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::AdminError;

/// The policy every asset is served with. `style-src 'self'` still lets the script set
/// properties through the CSSOM (the ring's colours, the bars' widths); markup style
/// attributes are refused.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// One file of the dashboard.
struct Asset {
    /// Its name under `/ui/` (the page itself is `/ui`).
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

/// The page.
const INDEX: Asset = Asset {
    name: "",
    content_type: "text/html; charset=utf-8",
    body: include_str!("index.html"),
};

/// Everything the page loads, by name: nothing else is served under `/ui/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "dashboard.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("dashboard.js"),
    },
    Asset {
        name: "dashboard.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("dashboard.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_str!("favicon.svg"),
    },
];

/// The dashboard's routes, to be merged into the admin router (behind its guard).
pub(super) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(|| async { serve(&INDEX) }))
        // The page names its assets relative to `/ui`; from `/ui/` they would miss.
        .route("/ui/", get(|| async { Redirect::permanent("../ui") }))
        .route("/ui/{asset}", get(asset))
}

/// Whether a request only reads the dashboard's static files, which hold no data: the guard
/// serves those without a token and from any origin (see the module doc).
pub(super) fn is_static(method: &Method, path: &str) -> bool {
    matches!(*method, Method::GET | Method::HEAD) && (path == "/ui" || path.starts_with("/ui/"))
}

async fn asset(Path(name): Path<String>) -> Result<Response, AdminError> {
    ASSETS
        .iter()
        .find(|a| a.name == name)
        .map(serve)
        .ok_or_else(|| AdminError::NotFound(format!("no dashboard asset {name:?}")))
}

fn serve(asset: &Asset) -> Response {
    let headers = [
        (header::CONTENT_TYPE, asset.content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        // Small and served from memory: revalidating costs nothing, and an upgraded node's
        // page never runs a stale script against a newer API.
        (header::CACHE_CONTROL, "no-cache"),
    ];
    let mut response = asset.body.into_response();
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests;
