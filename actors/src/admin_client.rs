//! The one client of a node's admin API, blocking: `process-hub ctl` drives a node with it the
//! way an operator would, and so do the demo, the benchmarks and the multi-process tests.
//!
//! It speaks plain HTTP (the admin API serves no TLS), presents the bearer token when it has
//! one, and reads each answer whole up to a bound. An answer is a typed value (`health`,
//! `start`, ...) or the node's JSON as it came (`get`, `post`, ...), which `ctl` prints; a
//! status outside 2xx is [`AdminClientError::Status`] with the node's error body, so each
//! caller decides what it means (ctl: an exit code).

use std::io::BufRead;
use std::net::SocketAddr;
use std::time::Duration;

use process_hub::admin::{
    CastAccepted, ChildAnswer, ChildView, ClearResponse, DeclaredResponse, Health, LoadsResponse,
    RegistrySummary, StartResponse, StartSpec, StopManyResponse, StopResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Why an admin call did not give the expected answer.
#[derive(Debug, thiserror::Error)]
pub enum AdminClientError {
    /// The node could not be reached (not up yet, or dead), or the connection broke.
    #[error("admin API at {addr} unreachable: {message}")]
    Unreachable {
        /// The node's admin address (`http://host:port`, or `host:port`).
        addr: String,
        /// The transport error.
        message: String,
    },
    /// The node answered with an error status.
    #[error("admin API at {addr} answered {status}: {body}")]
    Status {
        /// The node's admin address.
        addr: String,
        /// The HTTP status.
        status: u16,
        /// The error body (`{"error", "message"}`).
        body: String,
    },
    /// The body did not decode as the expected JSON.
    #[error("admin API at {addr} sent an unexpected body: {message}")]
    Decode {
        /// The node's admin address.
        addr: String,
        /// What was wrong with it.
        message: String,
    },
    /// The request's body could not be encoded as JSON; nothing was sent.
    #[error("{message}")]
    Encode {
        /// The encoder's error.
        message: String,
    },
}

impl AdminClientError {
    /// The HTTP status, if the node answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            AdminClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// An admin URL the client cannot use (the message names the flag's value and the fix).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AdminUrlError(pub String);

/// How long a request may take and how much of an answer is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// The longest a request may take, answer included (not the event stream, which lasts as
    /// long as the caller reads it).
    pub request_timeout: Duration,
    /// How long connecting may take before the node counts as unreachable (`None`: within the
    /// request's timeout).
    pub connect_timeout: Option<Duration>,
    /// The largest answer read.
    pub max_body: u64,
}

impl Default for ClientLimits {
    /// The harness's: two minutes a request (a start of a large batch waits for every child),
    /// up to 1 GiB an answer.
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(120),
            connect_timeout: None,
            max_body: 1 << 30,
        }
    }
}

/// Children per `GET /v1/children` page the client asks for (the API's largest page).
const PAGE: usize = 10_000;

/// The largest error body read from an event stream the node refused.
const MAX_STREAM_ERROR_BODY: u64 = 1 << 20;

/// Percent-encodes one path segment (a child id may hold any character).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The admin URL as the client uses it: `http://host:port` (a bare `host:port` gets
/// `http://`), without a trailing slash.
pub fn normalize_url(url: &str) -> Result<String, AdminUrlError> {
    let url = url.trim().trim_end_matches('/');
    let url = if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        AdminUrlError(format!(
            "--admin {url}: only http:// admin URLs are supported (the admin API serves plain HTTP)"
        ))
    })?;
    if rest.is_empty() || rest.contains('/') {
        return Err(AdminUrlError(format!(
            "--admin {url}: give the node's admin address as http://HOST:PORT"
        )));
    }
    Ok(url)
}

/// A 2xx answer: its body and the `x-next-after` cursor of a listing page.
struct Answer {
    status: u16,
    body: String,
    next: Option<String>,
}

/// A client of one node's admin API.
#[derive(Clone)]
pub struct AdminClient {
    /// `http://host:port`, without a trailing slash.
    base: String,
    /// How errors name the node: `host:port` for a client made from a socket address.
    addr: String,
    token: Option<String>,
    limits: ClientLimits,
    agent: ureq::Agent,
    /// No overall timeout: an event stream lasts as long as the caller reads it.
    streaming: ureq::Agent,
}

impl AdminClient {
    /// A client for the node whose admin API listens on `addr`, with the default limits.
    pub fn new(addr: SocketAddr) -> Self {
        Self::build(
            format!("http://{addr}"),
            addr.to_string(),
            ClientLimits::default(),
        )
    }

    /// A client of the admin API at `url` (see [`normalize_url`]) within `limits`.
    pub fn from_url(url: &str, limits: ClientLimits) -> Result<Self, AdminUrlError> {
        let base = normalize_url(url)?;
        Ok(Self::build(base.clone(), base, limits))
    }

    fn build(base: String, addr: String, limits: ClientLimits) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(limits.request_timeout))
            .timeout_connect(limits.connect_timeout)
            .http_status_as_error(false)
            .build()
            .into();
        let streaming: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(limits.connect_timeout)
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            base,
            addr,
            token: None,
            limits,
            agent,
            streaming,
        }
    }

    /// The same client presenting `token` as its bearer token on every request.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The admin URL, `http://host:port`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The node's admin address as errors name it (`host:port` for a client made by
    /// [`AdminClient::new`], the URL otherwise).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> AdminClientError {
        AdminClientError::Unreachable {
            addr: self.addr.clone(),
            message: e.to_string(),
        }
    }

    fn decode_error(&self, message: String) -> AdminClientError {
        AdminClientError::Decode {
            addr: self.addr.clone(),
            message,
        }
    }

    fn auth<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) => request.header("authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    /// Reads a whole answer; a status outside 2xx is [`AdminClientError::Status`].
    fn answer(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Answer, AdminClientError> {
        let mut response = response.map_err(|e| self.unreachable(e))?;
        let status = response.status().as_u16();
        let next = response
            .headers()
            .get("x-next-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response
            .body_mut()
            .with_config()
            .limit(self.limits.max_body)
            .read_to_string()
            .map_err(|e| self.unreachable(e))?;
        if !(200..300).contains(&status) {
            return Err(AdminClientError::Status {
                addr: self.addr.clone(),
                status,
                body,
            });
        }
        Ok(Answer { status, body, next })
    }

    /// A typed answer.
    fn typed<T: DeserializeOwned>(&self, answer: Answer) -> Result<T, AdminClientError> {
        serde_json::from_str(&answer.body).map_err(|e| self.decode_error(e.to_string()))
    }

    /// The node's JSON as it came.
    fn json(&self, answer: Answer) -> Result<Value, AdminClientError> {
        serde_json::from_str(&answer.body).map_err(|e| {
            self.decode_error(format!(
                "answered {} with a body that is not JSON: {e}",
                answer.status
            ))
        })
    }

    fn send_get(&self, path: &str) -> Result<Answer, AdminClientError> {
        self.answer(self.auth(self.agent.get(&self.url(path))).call())
    }

    fn send_post(&self, path: &str, body: &impl Serialize) -> Result<Answer, AdminClientError> {
        let bytes = serde_json::to_vec(body).map_err(|e| AdminClientError::Encode {
            message: e.to_string(),
        })?;
        self.answer(
            self.auth(self.agent.post(&self.url(path)))
                .header("content-type", "application/json")
                .send(&bytes[..]),
        )
    }

    fn send_post_empty(&self, path: &str) -> Result<Answer, AdminClientError> {
        self.answer(self.auth(self.agent.post(&self.url(path))).send_empty())
    }

    fn send_delete(&self, path: &str) -> Result<Answer, AdminClientError> {
        self.answer(self.auth(self.agent.delete(&self.url(path))).call())
    }

    /// Every item of a paged listing (`path` takes `limit` and `after`), page after page;
    /// `page` turns one page's answer into its items.
    fn every_page<T>(
        &self,
        path: &str,
        mut page: impl FnMut(Answer) -> Result<Vec<T>, AdminClientError>,
    ) -> Result<Vec<T>, AdminClientError> {
        let mut all = Vec::new();
        // The cursor as the node sent it: already percent-encoded for the query.
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                Some(after) => format!("{path}?limit={PAGE}&after={after}"),
                None => format!("{path}?limit={PAGE}"),
            };
            let answer = self.send_get(&path)?;
            let next = answer.next.clone();
            all.extend(page(answer)?);
            match next {
                Some(next) => after = Some(next),
                None => return Ok(all),
            }
        }
    }

    // ------------------------------------------------------------ the node's JSON as it came

    /// `GET path`: the node's JSON.
    pub fn get(&self, path: &str) -> Result<Value, AdminClientError> {
        self.send_get(path).and_then(|a| self.json(a))
    }

    /// `POST path` with a JSON body: the node's JSON.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, AdminClientError> {
        self.send_post(path, body).and_then(|a| self.json(a))
    }

    /// `POST path` without a body: the node's JSON.
    pub fn post_empty(&self, path: &str) -> Result<Value, AdminClientError> {
        self.send_post_empty(path).and_then(|a| self.json(a))
    }

    /// `DELETE path`: the node's JSON.
    pub fn delete(&self, path: &str) -> Result<Value, AdminClientError> {
        self.send_delete(path).and_then(|a| self.json(a))
    }

    /// `GET path` as text, whatever its content type (`/metrics`).
    pub fn get_text(&self, path: &str) -> Result<String, AdminClientError> {
        self.send_get(path).map(|a| a.body)
    }

    /// Every child of `GET /v1/children` as the node's JSON, page after page.
    pub fn all_children(&self) -> Result<Vec<Value>, AdminClientError> {
        self.every_page("/v1/children", |answer| match self.json(answer)? {
            Value::Array(children) => Ok(children),
            other => Err(self.decode_error(format!("a listing that is not an array: {other}"))),
        })
    }

    /// Follows `GET /v1/events`, calling `on_connected` once the node subscribed the stream
    /// (from then on no event is missed) and `on_event(kind, data)` for each server-sent event,
    /// until the stream ends (the node went away: [`AdminClientError::Unreachable`]) or
    /// `on_event` answers `false` (then `Ok`).
    pub fn follow_events(
        &self,
        on_connected: impl FnOnce(),
        mut on_event: impl FnMut(&str, &str) -> bool,
    ) -> Result<(), AdminClientError> {
        let response = self
            .auth(self.streaming.get(&self.url("/v1/events")))
            .header("accept", "text/event-stream")
            .call()
            .map_err(|e| self.unreachable(e))?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let mut response = response;
            let body = response
                .body_mut()
                .with_config()
                .limit(MAX_STREAM_ERROR_BODY)
                .read_to_string()
                .unwrap_or_default();
            return Err(AdminClientError::Status {
                addr: self.addr.clone(),
                status,
                body,
            });
        }
        on_connected();
        let reader = std::io::BufReader::new(response.into_body().into_reader());
        let mut kind = String::new();
        let mut data = String::new();
        for line in reader.lines() {
            let line = line.map_err(|e| self.unreachable(e))?;
            if line.is_empty() {
                // The blank line ends an event; a keep-alive comment has no data.
                if !data.is_empty() {
                    let name = if kind.is_empty() { "message" } else { &kind };
                    if !on_event(name, &data) {
                        return Ok(());
                    }
                }
                kind.clear();
                data.clear();
            } else if let Some(value) = line.strip_prefix("event:") {
                kind = value.trim_start().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        Err(self.unreachable("the node closed the event stream"))
    }

    // ------------------------------------------------------------ typed answers

    /// `GET /v1/health`.
    pub fn health(&self) -> Result<Health, AdminClientError> {
        self.send_get("/v1/health").and_then(|a| self.typed(a))
    }

    /// `GET /v1/ready`: the health when the node is ready (status `ok`), else the 503
    /// `not_ready` as [`AdminClientError::Status`].
    pub fn ready(&self) -> Result<Health, AdminClientError> {
        self.send_get("/v1/ready").and_then(|a| self.typed(a))
    }

    /// `GET /v1/children`, every page of it.
    pub fn children(&self) -> Result<Vec<ChildView>, AdminClientError> {
        self.every_page("/v1/children", |answer| self.typed(answer))
    }

    /// `GET /v1/registry/summary`: counts of the node's registry copy, cheap to poll.
    pub fn registry_summary(&self) -> Result<RegistrySummary, AdminClientError> {
        self.send_get("/v1/registry/summary")
            .and_then(|a| self.typed(a))
    }

    /// `GET /v1/children/{id}`.
    pub fn child(&self, id: &str) -> Result<ChildView, AdminClientError> {
        self.send_get(&format!("/v1/children/{id}"))
            .and_then(|a| self.typed(a))
    }

    /// `POST /v1/children` with an array of specs, awaited.
    pub fn start(&self, specs: &[StartSpec]) -> Result<StartResponse, AdminClientError> {
        self.send_post("/v1/children", &specs)
            .and_then(|a| self.typed(a))
    }

    /// `POST /v1/children` with one spec (not an array), awaited: a child that does not start
    /// is the request's error status.
    pub fn start_one(&self, spec: &StartSpec) -> Result<StartResponse, AdminClientError> {
        self.send_post("/v1/children", spec)
            .and_then(|a| self.typed(a))
    }

    /// `DELETE /v1/children/{id}`, awaited.
    pub fn stop(&self, id: &str) -> Result<StopResponse, AdminClientError> {
        self.send_delete(&format!("/v1/children/{id}"))
            .and_then(|a| self.typed(a))
    }

    /// `POST /v1/children/stop` with `ids` (at most the node's limit, 10,000 by default),
    /// awaited: every id stopped, pending or an error, with counts.
    pub fn stop_many(&self, ids: &[String]) -> Result<StopManyResponse, AdminClientError> {
        self.send_post("/v1/children/stop", &serde_json::json!({ "ids": ids }))
            .and_then(|a| self.typed(a))
    }

    /// `POST /v1/children/{id}/call?timeout_ms=`: `command` to the child wherever it runs,
    /// and its JSON answer.
    pub fn call(
        &self,
        id: &str,
        command: &Value,
        timeout_ms: u64,
    ) -> Result<ChildAnswer, AdminClientError> {
        let path = format!("/v1/children/{id}/call?timeout_ms={timeout_ms}");
        self.send_post(&path, command).and_then(|a| self.typed(a))
    }

    /// `POST /v1/children/{id}/cast`: `command` to the child wherever it runs, not awaited.
    pub fn cast(&self, id: &str, command: &Value) -> Result<CastAccepted, AdminClientError> {
        let path = format!("/v1/children/{id}/cast");
        self.send_post(&path, command).and_then(|a| self.typed(a))
    }

    /// `GET /v1/loads`: the members' loads this node places new children by.
    pub fn loads(&self) -> Result<LoadsResponse, AdminClientError> {
        self.send_get("/v1/loads").and_then(|a| self.typed(a))
    }

    /// `GET /v1/declared`: this node's copy of the declared list.
    pub fn declared(&self) -> Result<DeclaredResponse, AdminClientError> {
        self.send_get("/v1/declared").and_then(|a| self.typed(a))
    }

    /// `POST /v1/declared/clear`: the operator's clear.
    pub fn clear_declared(&self) -> Result<ClearResponse, AdminClientError> {
        self.send_post_empty("/v1/declared/clear")
            .and_then(|a| self.typed(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_a_scheme_and_lose_their_trailing_slash() {
        assert_eq!(
            normalize_url("127.0.0.1:9000").unwrap(),
            "http://127.0.0.1:9000"
        );
        assert_eq!(
            normalize_url("http://localhost:9000/").unwrap(),
            "http://localhost:9000"
        );
        assert!(normalize_url("https://h:1").is_err());
        assert!(normalize_url("http://h:1/v1").is_err());
        assert!(normalize_url("").is_err());
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(encode_segment("c-1_a.b~"), "c-1_a.b~");
        assert_eq!(encode_segment("a/b c"), "a%2Fb%20c");
        assert_eq!(encode_segment("é"), "%C3%A9");
    }

    #[test]
    fn a_client_from_an_address_names_it_as_before() {
        let client = AdminClient::new(([127, 0, 0, 1], 9000).into());
        assert_eq!(client.base(), "http://127.0.0.1:9000");
        assert_eq!(client.addr(), "127.0.0.1:9000");
    }
}
