//! The checks every admin request passes before a route sees it, and the layer that keeps
//! every error in the API's JSON shape.
//!
//! - **Who**: with a token, `Authorization: Bearer <token>` on every request, `/v1/health`
//!   included (a probe sends the header too), else 401. Without a token, only a `Host` that is
//!   an IP literal or `localhost`: a web page that rebinds its own DNS name to the node's
//!   address names that name in `Host`, and is refused (403).
//! - **From where**: a request whose `Origin` is not the API's own (`http://` or `https://`
//!   followed by the request's `Host`), or whose `Sec-Fetch-Site` says another site, is refused
//!   (403). Browsers send both on every cross-origin write, so a page the operator happens to
//!   open cannot start or stop children, nor clear the declared list.
//! - **How much**: a body declared longer than the limit is refused (413) before it is read,
//!   one without a declared length is cut at the limit (413) as it is read. That is
//!   `tower_http`'s `RequestBodyLimitLayer` (see `routes::router_with`); [`json_errors`] gives
//!   its answer the API's JSON shape.
//! - **What**: a write (`POST`, `PUT`, `PATCH`, `DELETE`) that carries a body, or declares a
//!   content type, must declare `application/json` (415): the content types a page may send
//!   across origins without asking (`text/plain`, forms) never reach a route.
//!
//! A read (`GET`, `HEAD`) of the dashboard's static files (`/ui`, `/ui/...`) needs neither the
//! token nor the same origin: the files hold no data (see `ui`). Without a token, the `Host`
//! check still applies to them.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use super::{ui, AdminConfig, AdminError};

/// Refuses a request that fails any of the module's checks, with its JSON error.
pub(super) async fn guard(
    State(config): State<Arc<AdminConfig>>,
    request: Request,
    next: Next,
) -> Response {
    let checked = if ui::is_static(request.method(), request.uri().path()) {
        check_static(&config, request.headers())
    } else {
        check(&config, request.method(), request.headers())
    };
    match checked {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// The checks of a read of the dashboard's static files (`ui`): they hold no data, so they
/// need no token (a browser cannot send one with a navigation) and may be linked from another
/// site; without a token the `Host` check still applies, as everywhere.
fn check_static(config: &AdminConfig, headers: &HeaderMap) -> Result<(), AdminError> {
    match config.token {
        Some(_) => Ok(()),
        None => local_host(headers),
    }
}

fn check(config: &AdminConfig, method: &Method, headers: &HeaderMap) -> Result<(), AdminError> {
    match &config.token {
        Some(token) => {
            let presented = headers
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes())
                .ok_or_else(|| {
                    AdminError::Unauthorized(
                        "this admin API needs `Authorization: Bearer <token>`".into(),
                    )
                })?;
            let credentials = presented
                .get(..7)
                .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
                .map(|_| &presented[7..])
                .ok_or_else(|| {
                    AdminError::Unauthorized(
                        "the Authorization header must be `Bearer <token>`".into(),
                    )
                })?;
            if !token.matches(credentials) {
                return Err(AdminError::Unauthorized("invalid admin token".into()));
            }
        }
        None => local_host(headers)?,
    }
    same_origin(headers)?;
    json_body(method, headers)
}

/// The body length a request declares, if it declares one that reads as a number.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// The host part of a `Host` header value (`[::1]:80` -> `[::1]`, `a:80` -> `a`).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_inclusive(']').next().unwrap_or(host);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

fn local_host(headers: &HeaderMap) -> Result<(), AdminError> {
    let Some(host) = headers.get(header::HOST) else {
        return Ok(());
    };
    let host = host.to_str().unwrap_or("");
    let name = host_name(host);
    let literal = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok();
    if literal || name.eq_ignore_ascii_case("localhost") {
        Ok(())
    } else {
        Err(AdminError::Forbidden(format!(
            "host {host:?} is not served: without an admin token this API answers only to an IP address or localhost"
        )))
    }
}

fn same_origin(headers: &HeaderMap) -> Result<(), AdminError> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("");
        if !matches!(site, "same-origin" | "none") {
            return Err(AdminError::Forbidden(format!(
                "cross-site requests are refused (Sec-Fetch-Site: {site})"
            )));
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let own = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|host| {
            ["http://", "https://"].iter().any(|scheme| {
                origin
                    .strip_prefix(scheme)
                    .is_some_and(|rest| rest.eq_ignore_ascii_case(host))
            })
        });
    if own {
        Ok(())
    } else {
        Err(AdminError::Forbidden(format!(
            "requests from origin {origin:?} are refused: the admin API takes no cross-origin requests"
        )))
    }
}

fn json_body(method: &Method, headers: &HeaderMap) -> Result<(), AdminError> {
    if !matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) {
        return Ok(());
    }
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0");
    match headers.get(header::CONTENT_TYPE) {
        Some(ct) => {
            let ct = ct.to_str().unwrap_or("");
            let essence = ct.split(';').next().unwrap_or("").trim();
            if essence.eq_ignore_ascii_case("application/json") {
                Ok(())
            } else {
                Err(AdminError::UnsupportedMediaType(format!(
                    "a {method} body must be `Content-Type: application/json`, not {ct:?}"
                )))
            }
        }
        None if has_body => Err(AdminError::UnsupportedMediaType(format!(
            "a {method} body must be `Content-Type: application/json`"
        ))),
        None => Ok(()),
    }
}

/// Turns an error the framework answered in its own form (the body limit's plain-text 413, an
/// empty 405, a rejected path parameter) into the API's JSON shape, keeping its status and its
/// `Allow` header. A 413 names the limit, `max_body` bytes, and the declared length if any.
pub(super) async fn json_errors(
    State(max_body): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let declared = declared_length(request.headers());
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        let message = match declared {
            Some(length) if length > max_body as u64 => {
                format!("a body of {length} bytes is over the {max_body} byte limit")
            }
            _ => format!("the body is over the {max_body} byte limit"),
        };
        return AdminError::PayloadTooLarge(message).into_response();
    }
    let (parts, body) = response.into_parts();
    // The framework's messages are one line; anything longer is cut.
    let text = axum::body::to_bytes(body, 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase()
    } else {
        text
    };
    let mut json = AdminError::Http { status, message }.into_response();
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        json.headers_mut().insert(header::ALLOW, allow.clone());
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::AdminToken;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    fn code(r: Result<(), AdminError>) -> Option<u16> {
        r.err().map(|e| e.status().as_u16())
    }

    #[test]
    fn a_token_is_required_on_every_method_when_configured() {
        let config = AdminConfig {
            token: Some(AdminToken::new("0123456789abcdef").unwrap()),
            ..AdminConfig::default()
        };
        let get = Method::GET;
        assert_eq!(code(check(&config, &get, &headers(&[]))), Some(401));
        let wrong = headers(&[("authorization", "Bearer 0123456789abcdeX")]);
        assert_eq!(code(check(&config, &get, &wrong)), Some(401));
        let basic = headers(&[("authorization", "Basic 0123456789abcdef")]);
        assert_eq!(code(check(&config, &get, &basic)), Some(401));
        let right = headers(&[
            ("authorization", "bearer 0123456789abcdef"),
            ("host", "node.example:8080"),
        ]);
        assert_eq!(
            code(check(&config, &get, &right)),
            None,
            "any host with a token"
        );
    }

    #[test]
    fn without_a_token_only_ip_literals_and_localhost_are_served() {
        let config = AdminConfig::default();
        for ok in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost:1",
            "10.0.0.1",
            "LOCALHOST",
        ] {
            let mut h = HeaderMap::new();
            h.insert("host", HeaderValue::from_str(ok).unwrap());
            assert_eq!(code(check(&config, &Method::GET, &h)), None, "{ok}");
        }
        let rebound = headers(&[("host", "evil.example:8080")]);
        assert_eq!(code(check(&config, &Method::GET, &rebound)), Some(403));
    }

    #[test]
    fn other_origins_and_sites_are_forbidden() {
        let config = AdminConfig::default();
        let post = Method::POST;
        let same = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert_eq!(code(check(&config, &post, &same)), None);
        for origin in ["http://127.0.0.1:3000", "null", "http://evil.example"] {
            let mut h = headers(&[("host", "127.0.0.1:8080")]);
            h.insert("origin", HeaderValue::from_static(origin));
            assert_eq!(code(check(&config, &post, &h)), Some(403), "{origin}");
        }
        let site = headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")]);
        assert_eq!(code(check(&config, &Method::GET, &site)), Some(403));
    }

    #[test]
    fn writes_with_a_body_must_be_json() {
        let config = AdminConfig::default();
        let plain = headers(&[("content-type", "text/plain"), ("content-length", "2")]);
        assert_eq!(code(check(&config, &Method::POST, &plain)), Some(415));
        let untyped = headers(&[("content-length", "2")]);
        assert_eq!(code(check(&config, &Method::POST, &untyped)), Some(415));
        let json = headers(&[
            ("content-type", "Application/JSON; charset=utf-8"),
            ("content-length", "2"),
        ]);
        assert_eq!(code(check(&config, &Method::POST, &json)), None);
        let empty = headers(&[("content-length", "0")]);
        assert_eq!(code(check(&config, &Method::POST, &empty)), None);
        assert_eq!(code(check(&config, &Method::DELETE, &headers(&[]))), None);
        assert_eq!(code(check(&config, &Method::GET, &plain)), None);
    }
}
