//! The dashboard as a browser meets it through the admin router: its page and assets with
//! their content types and security headers, a page without inline script, unknown assets in
//! the API's JSON 404, and the token's exemption limited to the static files.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::{ASSETS, CONTENT_SECURITY_POLICY, INDEX};
use crate::admin::{
    router_with, AdminConfig, AdminError, AdminOps, AdminToken, ChildView, Health, StartResponse,
    StartSpec, StopResponse,
};
use crate::model::ChildId;

/// A hub that answers only its health: the dashboard's routes need nothing of it.
#[derive(Clone)]
struct Idle;

impl AdminOps for Idle {
    async fn health(&self) -> Result<Health, AdminError> {
        Err(AdminError::NotReady("idle".into()))
    }
    async fn list_children(&self) -> Result<Vec<ChildView>, AdminError> {
        Ok(Vec::new())
    }
    async fn get_child(&self, _: ChildId) -> Result<Option<ChildView>, AdminError> {
        Ok(None)
    }
    async fn start_children(&self, _: Vec<StartSpec>) -> Result<StartResponse, AdminError> {
        Ok(StartResponse::default())
    }
    async fn stop_child(&self, _: ChildId) -> Result<Option<StopResponse>, AdminError> {
        Ok(None)
    }
}

const TOKEN: &str = "ui-test-token-0123456789abcdef";

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(&name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no {name} header"))
    }
}

async fn get(config: AdminConfig, path: &str, extra: &[(&str, &str)]) -> Answer {
    let mut request = Request::get(path).header("host", "127.0.0.1:8080");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = router_with(Idle, config)
        .oneshot(request.body(Body::empty()).expect("a request"))
        .await
        .expect("the router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

fn with_token() -> AdminConfig {
    AdminConfig {
        token: Some(AdminToken::new(TOKEN).expect("a valid token")),
        ..AdminConfig::default()
    }
}

fn assert_hardened(answer: &Answer) {
    assert_eq!(
        answer.header(header::CONTENT_SECURITY_POLICY),
        CONTENT_SECURITY_POLICY
    );
    let csp = answer.header(header::CONTENT_SECURITY_POLICY);
    assert!(csp.starts_with("default-src 'self'"), "{csp}");
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(answer.header(header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    assert_eq!(answer.header(header::X_FRAME_OPTIONS), "DENY");
}

#[tokio::test]
async fn the_page_is_html_with_a_strict_policy_and_no_inline_script() {
    let page = get(AdminConfig::default(), "/ui", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        page.header(header::CONTENT_TYPE),
        "text/html; charset=utf-8"
    );
    assert_hardened(&page);
    assert_eq!(page.body, INDEX.body);
    assert!(page
        .body
        .contains("<script src=\"ui/dashboard.js\" defer></script>"));
    assert_eq!(
        page.body.matches("<script").count(),
        1,
        "one script, by src"
    );
    for id in [
        "member-count",
        "child-count",
        "search-input",
        "events",
        "declared-state",
    ] {
        assert!(
            page.body.contains(&format!("id=\"{id}\"")),
            "the page has #{id}"
        );
    }
}

#[tokio::test]
async fn every_asset_has_its_content_type_and_the_same_headers() {
    for (name, content_type) in [
        ("dashboard.js", "text/javascript; charset=utf-8"),
        ("dashboard.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let answer = get(AdminConfig::default(), &format!("/ui/{name}"), &[]).await;
        assert_eq!(answer.status, StatusCode::OK, "{name}");
        assert_eq!(answer.header(header::CONTENT_TYPE), content_type, "{name}");
        assert_hardened(&answer);
        let asset = ASSETS.iter().find(|a| a.name == name).expect("served");
        assert_eq!(answer.body, asset.body);
    }
}

#[tokio::test]
async fn an_unknown_asset_is_the_apis_json_404() {
    for path in [
        "/ui/nope.js",
        "/ui/dashboard.js.map",
        "/ui/..%2Fv1%2Fhealth",
    ] {
        let answer = get(AdminConfig::default(), path, &[]).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert!(answer
            .header(header::CONTENT_TYPE)
            .starts_with("application/json"));
        let json: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON");
        assert_eq!(json["error"], "not_found", "{path}");
        assert!(json["message"].is_string());
    }
    let slash = get(AdminConfig::default(), "/ui/", &[]).await;
    assert_eq!(slash.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(slash.header(header::LOCATION), "../ui");
}

#[tokio::test]
async fn with_a_token_the_static_files_need_none_but_the_data_does() {
    let page = get(with_token(), "/ui", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    let script = get(
        with_token(),
        "/ui/dashboard.js",
        &[("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!(
        script.status,
        StatusCode::OK,
        "no data: linkable from anywhere"
    );
    let members = get(with_token(), "/v1/members", &[]).await;
    assert_eq!(members.status, StatusCode::UNAUTHORIZED);
    let bearer = format!("Bearer {TOKEN}");
    let health = get(
        with_token(),
        "/v1/health",
        &[
            ("authorization", &bearer),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await;
    assert_eq!(
        health.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "past the guard"
    );
    let cross = get(
        with_token(),
        "/v1/health",
        &[("authorization", &bearer), ("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!(
        cross.status,
        StatusCode::FORBIDDEN,
        "data stays same-origin"
    );
}

#[tokio::test]
async fn without_a_token_the_host_check_still_covers_the_page() {
    let request = Request::get("/ui")
        .header("host", "rebound.example:8080")
        .body(Body::empty())
        .expect("a request");
    let response = router_with(Idle, AdminConfig::default())
        .oneshot(request)
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[test]
fn the_page_has_no_inline_script_nor_inline_style() {
    let page = INDEX.body;
    let mut rest = page;
    while let Some(at) = rest.find("<script") {
        let tag_end = rest[at..].find('>').map(|e| at + e).expect("a closed tag");
        let tag = &rest[at..tag_end];
        assert!(tag.contains("src="), "an inline script: {tag}");
        assert!(
            rest[tag_end + 1..].starts_with("</script>"),
            "a script with a body"
        );
        rest = &rest[tag_end..];
    }
    for attribute in [
        " style=",
        " onclick=",
        " onload=",
        " onsubmit=",
        "javascript:",
        "<style",
    ] {
        assert!(!page.contains(attribute), "the page has {attribute}");
    }
}

#[test]
fn every_asset_the_page_names_is_served() {
    for name in ["dashboard.js", "dashboard.css", "favicon.svg"] {
        assert!(
            INDEX.body.contains(&format!("\"ui/{name}\"")),
            "the page loads {name}"
        );
        assert!(ASSETS.iter().any(|a| a.name == name), "{name} is served");
    }
}

#[test]
fn only_reads_of_the_dashboard_are_static() {
    use super::is_static;
    use axum::http::Method;
    assert!(is_static(&Method::GET, "/ui"));
    assert!(is_static(&Method::HEAD, "/ui/dashboard.js"));
    assert!(!is_static(&Method::POST, "/ui"));
    assert!(!is_static(&Method::GET, "/uix"));
    assert!(!is_static(&Method::GET, "/v1/health"));
}
