//! A blocking client of one node's admin API, for the demo, the benchmarks and the
//! multi-process tests: everything outside a node drives it the way an operator would.

use std::net::SocketAddr;
use std::time::Duration;

use process_hub::admin::{
    CastAccepted, ChildAnswer, ChildView, ClearResponse, DeclaredResponse, Health, RegistrySummary,
    StartResponse, StartSpec, StopResponse,
};
use serde::de::DeserializeOwned;

/// Why an admin call did not give the expected answer.
#[derive(Debug, thiserror::Error)]
pub enum AdminClientError {
    /// The node could not be reached (not up yet, or dead).
    #[error("admin API at {addr} unreachable: {message}")]
    Unreachable {
        /// The node's admin address.
        addr: SocketAddr,
        /// The transport error.
        message: String,
    },
    /// The node answered with an error status.
    #[error("admin API at {addr} answered {status}: {body}")]
    Status {
        /// The node's admin address.
        addr: SocketAddr,
        /// The HTTP status.
        status: u16,
        /// The error body (`{"error", "message"}`).
        body: String,
    },
    /// The body did not decode as the expected JSON.
    #[error("admin API at {addr} sent an unexpected body: {message}")]
    Decode {
        /// The node's admin address.
        addr: SocketAddr,
        /// The decoder's error.
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

/// A client of one node's admin API.
#[derive(Clone)]
pub struct AdminClient {
    addr: SocketAddr,
    agent: ureq::Agent,
    token: Option<String>,
}

/// Children per `GET /v1/children` page the client asks for (the API's largest page).
const PAGE: usize = 10_000;

impl AdminClient {
    /// A client for the node whose admin API listens on `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(120)))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            addr,
            agent,
            token: None,
        }
    }

    /// The same client presenting `token` as its bearer token on every request.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    fn auth<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) => request.header("authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    /// The node's admin address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    fn finish<T: DeserializeOwned>(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<T, AdminClientError> {
        let body = self.body(response)?;
        serde_json::from_str(&body).map_err(|e| AdminClientError::Decode {
            addr: self.addr,
            message: e.to_string(),
        })
    }

    /// The body of a successful answer; an error status is [`AdminClientError::Status`].
    fn body(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<String, AdminClientError> {
        let mut response = response.map_err(|e| AdminClientError::Unreachable {
            addr: self.addr,
            message: e.to_string(),
        })?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .map_err(|e| AdminClientError::Unreachable {
                addr: self.addr,
                message: e.to_string(),
            })?;
        if !(200..300).contains(&status) {
            return Err(AdminClientError::Status {
                addr: self.addr,
                status,
                body,
            });
        }
        Ok(body)
    }

    /// `GET path` as text, whatever its content type (`/metrics`).
    pub fn get_text(&self, path: &str) -> Result<String, AdminClientError> {
        self.body(self.auth(self.agent.get(&self.url(path))).call())
    }

    /// `GET /v1/health`.
    pub fn health(&self) -> Result<Health, AdminClientError> {
        self.finish(self.auth(self.agent.get(&self.url("/v1/health"))).call())
    }

    /// `GET /v1/ready`: the health when the node is ready (status `ok`), else the 503
    /// `not_ready` as [`AdminClientError::Status`].
    pub fn ready(&self) -> Result<Health, AdminClientError> {
        self.finish(self.auth(self.agent.get(&self.url("/v1/ready"))).call())
    }

    /// `GET /v1/children`, every page of it.
    pub fn children(&self) -> Result<Vec<ChildView>, AdminClientError> {
        let mut all = Vec::new();
        // The cursor as the node sent it: already percent-encoded for the query.
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                Some(after) => format!("/v1/children?limit={PAGE}&after={after}"),
                None => format!("/v1/children?limit={PAGE}"),
            };
            let response = self.auth(self.agent.get(&self.url(&path))).call();
            let next = response
                .as_ref()
                .ok()
                .and_then(|r| r.headers().get("x-next-after"))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let page: Vec<ChildView> = self.finish(response)?;
            all.extend(page);
            match next {
                Some(next) => after = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// `GET /v1/registry/summary`: counts of the node's registry copy, cheap to poll.
    pub fn registry_summary(&self) -> Result<RegistrySummary, AdminClientError> {
        self.finish(
            self.auth(self.agent.get(&self.url("/v1/registry/summary")))
                .call(),
        )
    }

    /// `GET /v1/children/{id}`.
    pub fn child(&self, id: &str) -> Result<ChildView, AdminClientError> {
        self.finish(
            self.auth(self.agent.get(&self.url(&format!("/v1/children/{id}"))))
                .call(),
        )
    }

    /// `POST /v1/children` with an array of specs, awaited.
    pub fn start(&self, specs: &[StartSpec]) -> Result<StartResponse, AdminClientError> {
        self.finish(
            self.auth(self.agent.post(&self.url("/v1/children")))
                .send_json(specs),
        )
    }

    /// `POST /v1/children` with one spec (not an array), awaited: a child that does not start
    /// is the request's error status.
    pub fn start_one(&self, spec: &StartSpec) -> Result<StartResponse, AdminClientError> {
        self.finish(
            self.auth(self.agent.post(&self.url("/v1/children")))
                .send_json(spec),
        )
    }

    /// `DELETE /v1/children/{id}`, awaited.
    pub fn stop(&self, id: &str) -> Result<StopResponse, AdminClientError> {
        self.finish(
            self.auth(self.agent.delete(&self.url(&format!("/v1/children/{id}"))))
                .call(),
        )
    }

    /// `POST /v1/children/{id}/call?timeout_ms=`: `command` to the child wherever it runs,
    /// and its JSON answer.
    pub fn call(
        &self,
        id: &str,
        command: &serde_json::Value,
        timeout_ms: u64,
    ) -> Result<ChildAnswer, AdminClientError> {
        let path = format!("/v1/children/{id}/call?timeout_ms={timeout_ms}");
        self.finish(
            self.auth(self.agent.post(&self.url(&path)))
                .send_json(command),
        )
    }

    /// `POST /v1/children/{id}/cast`: `command` to the child wherever it runs, not awaited.
    pub fn cast(
        &self,
        id: &str,
        command: &serde_json::Value,
    ) -> Result<CastAccepted, AdminClientError> {
        let path = format!("/v1/children/{id}/cast");
        self.finish(
            self.auth(self.agent.post(&self.url(&path)))
                .send_json(command),
        )
    }

    /// `GET /v1/loads`: the members' loads this node places new children by.
    pub fn loads(&self) -> Result<process_hub::admin::LoadsResponse, AdminClientError> {
        self.finish(self.auth(self.agent.get(&self.url("/v1/loads"))).call())
    }

    /// `GET /v1/declared`: this node's copy of the declared list.
    pub fn declared(&self) -> Result<DeclaredResponse, AdminClientError> {
        self.finish(self.auth(self.agent.get(&self.url("/v1/declared"))).call())
    }

    /// `POST /v1/declared/clear`: the operator's clear.
    pub fn clear_declared(&self) -> Result<ClearResponse, AdminClientError> {
        self.finish(
            self.auth(self.agent.post(&self.url("/v1/declared/clear")))
                .send_empty(),
        )
    }
}
