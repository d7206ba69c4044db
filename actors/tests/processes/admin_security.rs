//! The admin API of real `process-hub node` processes as an operator (and an attacker's web
//! page) meets it: the bearer token, the refusal of other origins and of writes that are not
//! JSON, every error in the JSON shape, the limits, paginated listings, and the stop of an id
//! no node knows answering 404 whichever node owns it.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use process_hub::core::placement::HashRing;
use process_hub_actors::harness::{wait_for, write_private, ClusterOptions, LocalCluster};
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(60);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn formed(n: usize, options: &ClusterOptions) -> LocalCluster {
    let mut cluster = LocalCluster::start(binary(), n, options, None).expect("nodes spawn");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    cluster
}

/// One answer of the admin API: status, headers, JSON body (`Null` when empty).
struct Answer {
    status: u16,
    headers: ureq::http::HeaderMap,
    body: Value,
}

/// Sends one request with exactly `headers` (and a body, if any) and returns the answer.
fn send(
    admin: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(120)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{admin}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = match body {
        Some(body) => agent.run(request.body(body.to_owned()).expect("request")),
        None => agent.run(request.body(()).expect("request")),
    };
    let mut response = response.expect("the node answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response
        .body_mut()
        .read_to_string()
        .expect("a readable body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
    };
    Answer {
        status,
        headers,
        body,
    }
}

/// Asserts the API's error shape with `status` and `code`.
fn assert_error(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    assert_eq!(answer.body["error"], code, "{}", answer.body);
    assert!(
        answer.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        answer.body
    );
}

fn spec(id: &str) -> String {
    json!({"id": id, "kind": "counter"}).to_string()
}

#[test]
fn a_token_guards_every_route_and_every_error_is_json() {
    let token = process_hub_actors::cli::secrets::random_secret();
    let options = ClusterOptions {
        admin_token: Some(token.clone()),
        ..ClusterOptions::default()
    };
    let mut cluster = formed(1, &options);
    let admin = cluster.nodes[0].admin;
    let bearer = format!("Bearer {token}");
    let auth = ("authorization", bearer.as_str());
    let json_ct = ("content-type", "application/json");

    // No token, a wrong one, another scheme: 401 on every route, probes included.
    for path in [
        "/v1/health",
        "/v1/children",
        "/v1/registry/summary",
        "/v1/nowhere",
    ] {
        let answer = send(admin, "GET", path, &[], None);
        assert_error(&answer, 401, "unauthorized");
        assert_eq!(
            answer.headers.get("www-authenticate").map(|v| v.as_bytes()),
            Some(&b"Bearer"[..])
        );
    }
    // The token with its last character changed (to another one whatever it was).
    let last = if token.ends_with('x') { 'y' } else { 'x' };
    let wrong = format!("Bearer {}{last}", &token[..token.len() - 1]);
    let answer = send(
        admin,
        "GET",
        "/v1/health",
        &[("authorization", &wrong)],
        None,
    );
    assert_error(&answer, 401, "unauthorized");
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[json_ct, ("authorization", &format!("Basic {token}"))],
        Some(&spec("nope")),
    );
    assert_error(&answer, 401, "unauthorized");
    assert_eq!(send(admin, "GET", "/v1/health", &[auth], None).status, 200);

    // A write that is not JSON, or comes from another origin, starts nothing.
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[auth, ("content-type", "text/plain")],
        Some(&spec("csrf")),
    );
    assert_error(&answer, 415, "unsupported_media_type");
    let answer = send(admin, "POST", "/v1/children", &[auth], Some(&spec("csrf")));
    assert_error(&answer, 415, "unsupported_media_type");
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[auth, json_ct, ("origin", "http://attacker.example")],
        Some(&spec("csrf")),
    );
    assert_error(&answer, 403, "forbidden");
    let answer = send(admin, "GET", "/v1/children/csrf", &[auth], None);
    assert_error(&answer, 404, "not_found");

    // The framework's own errors, in the API's shape.
    assert_error(
        &send(admin, "GET", "/v1/nowhere", &[auth], None),
        404,
        "not_found",
    );
    let answer = send(admin, "PUT", "/v1/children", &[auth, json_ct], Some("[]"));
    assert_error(&answer, 405, "method_not_allowed");
    assert!(answer.headers.contains_key("allow"));
    assert_error(
        &send(
            admin,
            "POST",
            "/v1/children",
            &[auth, json_ct],
            Some("{not json"),
        ),
        400,
        "invalid_input",
    );

    // A single spec that fails answers the status of its reason.
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[auth, json_ct],
        Some(
            &json!({"id": "boom", "kind": "crasher", "args": {"fail_in_pre_start": true}})
                .to_string(),
        ),
    );
    assert_error(&answer, 422, "startup_failed");
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[auth, json_ct],
        Some(&json!({"id": "d", "kind": "counter", "durable": true}).to_string()),
    );
    assert_error(&answer, 400, "durable_unavailable");
    assert_eq!(
        send(
            admin,
            "POST",
            "/v1/children",
            &[auth, json_ct],
            Some(&spec("one"))
        )
        .status,
        200
    );
    assert_error(
        &send(
            admin,
            "POST",
            "/v1/children",
            &[auth, json_ct],
            Some(&spec("one")),
        ),
        409,
        "already_started",
    );

    // Limits: specs per request, then body size (sent as a declared length: the node refuses
    // it from the headers without reading a byte of the body).
    let many: Vec<Value> = (0..10_001)
        .map(|i| json!({"id": format!("m{i}"), "kind": "counter"}))
        .collect();
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[auth, json_ct],
        Some(&Value::Array(many).to_string()),
    );
    assert_error(&answer, 413, "payload_too_large");
    assert_error(
        &send(admin, "GET", "/v1/children/m0", &[auth], None),
        404,
        "not_found",
    );
    let oversize = raw_post_declaring(admin, &bearer, 9 * 1024 * 1024);
    assert!(oversize.starts_with("HTTP/1.1 413"), "{oversize}");
    let body = oversize.split("\r\n\r\n").nth(1).unwrap_or("");
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {oversize}"));
    assert_eq!(body["error"], "payload_too_large", "{body}");

    // Pagination: pages of `limit` in id order, each naming the next, until the last.
    let ids: Vec<String> = (0..25).map(|i| format!("p{i:02}")).collect();
    let specs: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "kind": "counter"}))
        .collect();
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[auth, json_ct],
        Some(&Value::Array(specs).to_string()),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let mut expected: Vec<String> = ids.clone();
    expected.push("one".into());
    expected.sort();
    let mut seen = Vec::new();
    let mut path = "/v1/children?limit=10".to_owned();
    let mut pages = 0;
    loop {
        let answer = send(admin, "GET", &path, &[auth], None);
        assert_eq!(answer.status, 200, "{}", answer.body);
        let page: Vec<String> = answer
            .body
            .as_array()
            .expect("an array")
            .iter()
            .map(|c| c["id"].as_str().expect("an id").to_owned())
            .collect();
        assert!(page.len() <= 10);
        seen.extend(page);
        pages += 1;
        match answer.headers.get("x-next-after") {
            Some(next) => {
                let next = next.to_str().expect("ascii");
                assert_eq!(Some(&next.to_owned()), seen.last());
                assert!(answer.headers.contains_key("link"));
                path = format!("/v1/children?limit=10&after={next}");
            }
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(pages, 3);
    for bad in ["limit=0", "limit=10001", "limit=ten"] {
        assert_error(
            &send(admin, "GET", &format!("/v1/children?{bad}"), &[auth], None),
            400,
            "invalid_input",
        );
    }
    cluster.shutdown(Duration::from_secs(30));
}

/// A `POST /v1/children` that declares a `length`-byte JSON body and sends only its first
/// bytes; returns what the node answered.
fn raw_post_declaring(admin: SocketAddr, bearer: &str, length: usize) -> String {
    raw(
        admin,
        &format!(
            "POST /v1/children HTTP/1.1\r\nHost: {admin}\r\nAuthorization: {bearer}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n["
        ),
    )
}

/// Writes `request` as is on a new connection and returns the node's answer (head and body).
fn raw(admin: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(admin).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("writes");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the body the node announced has arrived (or it closes).
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let declared = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|n| n.trim().parse::<usize>().ok());
            if declared.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn unknown_ids_are_not_found_on_every_node_and_pages_refuse_cross_site_writes() {
    let mut cluster = formed(2, &ClusterOptions::default());
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
    let ring = HashRing::new(names.iter().cloned());
    let clients: Vec<_> = cluster.nodes.iter().map(|n| n.client()).collect();
    let started = clients[0]
        .start(
            &(0..6)
                .map(|i| process_hub::admin::StartSpec::new(format!("real-{i}"), "counter"))
                .collect::<Vec<_>>(),
        )
        .expect("start answers");
    assert_eq!(started.started.len(), 6, "{started:?}");
    wait_for("both registries to list the children", DEADLINE, || {
        clients
            .iter()
            .all(|c| c.registry_summary().is_ok_and(|s| s.complete(6)))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));

    // Many ids no node ever started, half of them owned by the node not asked.
    let ghosts: Vec<String> = (0..40).map(|i| format!("ghost-{i}")).collect();
    for (asking, node) in cluster.nodes.iter().enumerate() {
        let elsewhere = ghosts
            .iter()
            .filter(|g| ring.owner(&process_hub::ChildId::from(g.as_str())) != Some(&names[asking]))
            .count();
        assert!(elsewhere > 5, "the ring sends some ids to the other node");
        for ghost in &ghosts {
            let answer = send(
                node.admin,
                "DELETE",
                &format!("/v1/children/{ghost}"),
                &[],
                None,
            );
            assert_error(&answer, 404, "not_found");
        }
    }
    // A known child stops (200, on its node) from the node that does not host it; then it is
    // gone: a second stop is 404.
    let id = "real-0";
    let host = clients[0].child(id).expect("listed").nodes[0].node.clone();
    let other = cluster
        .nodes
        .iter()
        .find(|n| n.node_name != host)
        .map(|n| n.admin)
        .unwrap_or(cluster.nodes[0].admin);
    let answer = send(other, "DELETE", &format!("/v1/children/{id}"), &[], None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["stopped"][0]["nodes"], json!([host]));
    wait_for("the stop to reach every registry", DEADLINE, || {
        clients
            .iter()
            .all(|c| c.registry_summary().is_ok_and(|s| s.complete(5)))
            .then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let answer = send(other, "DELETE", &format!("/v1/children/{id}"), &[], None);
    assert_error(&answer, 404, "not_found");

    // Without a token: what a web page in the operator's browser can send is refused, and so
    // is a host name (DNS rebinding); the same write from a script is accepted.
    let admin = cluster.nodes[0].admin;
    let host = admin.to_string();
    for headers in [
        vec![("content-type", "text/plain")],
        vec![("content-type", "application/x-www-form-urlencoded")],
    ] {
        let answer = send(admin, "POST", "/v1/children", &headers, Some(&spec("csrf")));
        assert_error(&answer, 415, "unsupported_media_type");
    }
    let answer = send(
        admin,
        "POST",
        "/v1/declared/clear",
        &[("origin", "http://localhost:3000")],
        None,
    );
    assert_error(&answer, 403, "forbidden");
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[
            ("content-type", "application/json"),
            ("sec-fetch-site", "cross-site"),
        ],
        Some(&spec("csrf")),
    );
    assert_error(&answer, 403, "forbidden");
    let rebound = raw(
        admin,
        &format!(
            "GET /v1/health HTTP/1.1\r\nHost: rebound.example:{}\r\nConnection: close\r\n\r\n",
            admin.port()
        ),
    );
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    assert!(rebound.contains("\"forbidden\""), "{rebound}");
    let same_origin = format!("http://{host}");
    let answer = send(
        admin,
        "POST",
        "/v1/children",
        &[
            ("content-type", "application/json"),
            ("origin", &same_origin),
        ],
        Some(&spec("from-script")),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let listed: BTreeSet<String> = clients[0]
        .children()
        .expect("lists")
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert!(
        listed.contains("from-script") && !listed.contains("csrf"),
        "{listed:?}"
    );
    cluster.shutdown(Duration::from_secs(30));
}

#[test]
fn a_node_refuses_an_exposed_admin_or_token_file_with_status_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listen = format!(
        "127.0.0.1:{}",
        process_hub_actors::harness::free_port().expect("port")
    );
    let run = |extra: &[&str]| {
        let out = Command::new(binary())
            .args(["node", "--hub", "h", "--name", "a", "--listen", &listen])
            .args(["--cookie", "c", "--data-dir"])
            .arg(dir.path())
            .args(extra)
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Every interface, no token.
    let (code, stderr) = run(&["--admin", "0.0.0.0:0"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--admin-token-file"), "{stderr}");
    // A token file others may read.
    let token = dir.path().join("token");
    write_private(&token, "0123456789abcdef0123").expect("writes");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("chmod");
    let token_arg = token.display().to_string();
    let (code, stderr) = run(&["--admin-token-file", &token_arg]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    // A token too short to be a secret.
    std::fs::remove_file(&token).expect("rm");
    write_private(&token, "short").expect("writes");
    let (code, stderr) = run(&["--admin-token-file", &token_arg]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("at least 16"), "{stderr}");
}
