//! Requests to the admin routes (`process_hub::admin::router`) without a socket.

use process_hub::admin::AdminOps;

/// Sends one request to the admin routes over `ops` and returns the status and the JSON body
/// (`Null` when empty, a JSON string when the body is not JSON).
pub async fn call_admin<O: AdminOps>(
    ops: &O,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (axum::http::StatusCode, serde_json::Value) {
    let request = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(match body {
            Some(v) => axum::body::Body::from(v.to_string()),
            None => axum::body::Body::empty(),
        })
        .expect("a well-formed request");
    let (status, bytes) = send(process_hub::admin::router(ops.clone()), request).await;
    let value = if bytes.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::String(
            String::from_utf8_lossy(&bytes).into(),
        ))
    };
    (status, value)
}

/// Sends `request` to `router` and returns the status and the body's bytes.
pub async fn send(
    router: axum::Router,
    request: axum::http::Request<axum::body::Body>,
) -> (axum::http::StatusCode, axum::body::Bytes) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let response = router.oneshot(request).await.expect("the router answers");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a readable body")
        .to_bytes();
    (status, bytes)
}
