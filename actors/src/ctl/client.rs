//! The HTTP side of `process-hub ctl`: one admin API, its token, and the mapping of every
//! answer to JSON or to a [`CtlError`] (and so to an exit code).

use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::outcome::CtlError;

/// How long one request may take: a start of a large batch waits for every child.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(150);

/// How long connecting may take before the node counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer read (a listing page of 10,000 children is a few MB).
const MAX_BODY: u64 = 256 * 1024 * 1024;

/// A client of one node's admin API.
pub struct CtlClient {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    /// No overall timeout: an event stream lasts as long as the operator watches.
    streaming: ureq::Agent,
}

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
pub fn normalize_url(url: &str) -> Result<String, CtlError> {
    let url = url.trim().trim_end_matches('/');
    let url = if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        CtlError::Usage(format!(
            "--admin {url}: only http:// admin URLs are supported (the admin API serves plain HTTP)"
        ))
    })?;
    if rest.is_empty() || rest.contains('/') {
        return Err(CtlError::Usage(format!(
            "--admin {url}: give the node's admin address as http://HOST:PORT"
        )));
    }
    Ok(url)
}

/// Reads the bearer token from `path` (surrounding whitespace dropped).
pub fn read_token(path: &Path) -> Result<String, CtlError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CtlError::Usage(format!("--token-file {}: {e}", path.display())))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(CtlError::Usage(format!(
            "--token-file {}: the file is empty",
            path.display()
        )));
    }
    Ok(token.to_owned())
}

impl CtlClient {
    /// A client of the admin API at `url` (see [`normalize_url`]), presenting `token`.
    pub fn new(url: &str, token: Option<String>) -> Result<Self, CtlError> {
        let base = normalize_url(url)?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(REQUEST_TIMEOUT))
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        let streaming: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Self {
            base,
            token,
            agent,
            streaming,
        })
    }

    /// The admin URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> CtlError {
        CtlError::Unreachable {
            url: self.base.clone(),
            message: e.to_string(),
        }
    }

    fn auth<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) => request.header("authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    /// The JSON of a 2xx answer, or the error its status means.
    fn finish(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<(Value, Option<String>), CtlError> {
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
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| self.unreachable(e))?;
        if !(200..300).contains(&status) {
            return Err(CtlError::from_status(status, body));
        }
        let value = serde_json::from_str(&body).map_err(|e| {
            self.unreachable(format!(
                "answered {status} with a body that is not JSON: {e}"
            ))
        })?;
        Ok((value, next))
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Value, CtlError> {
        self.get_paged(path).map(|(v, _)| v)
    }

    /// `GET path`, with the `x-next-after` cursor of a listing page.
    pub fn get_paged(&self, path: &str) -> Result<(Value, Option<String>), CtlError> {
        self.finish(self.auth(self.agent.get(&self.url(path))).call())
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, CtlError> {
        let bytes = serde_json::to_vec(body).map_err(|e| CtlError::Usage(e.to_string()))?;
        self.finish(
            self.auth(self.agent.post(&self.url(path)))
                .header("content-type", "application/json")
                .send(&bytes[..]),
        )
        .map(|(v, _)| v)
    }

    /// `POST path` without a body.
    pub fn post_empty(&self, path: &str) -> Result<Value, CtlError> {
        self.finish(self.auth(self.agent.post(&self.url(path))).send_empty())
            .map(|(v, _)| v)
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Result<Value, CtlError> {
        self.finish(self.auth(self.agent.delete(&self.url(path))).call())
            .map(|(v, _)| v)
    }

    /// Every child of `GET /v1/children`, page after page.
    pub fn all_children(&self) -> Result<Vec<Value>, CtlError> {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                // The cursor as the node sent it: already percent-encoded.
                Some(after) => format!("/v1/children?limit=10000&after={after}"),
                None => "/v1/children?limit=10000".to_owned(),
            };
            let (page, next) = self.get_paged(&path)?;
            match page {
                Value::Array(children) => all.extend(children),
                other => {
                    return Err(self.unreachable(format!("a listing that is not an array: {other}")))
                }
            }
            match next {
                Some(next) => after = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// Follows `GET /v1/events`, calling `on_event(kind, data)` for each server-sent event
    /// until the stream ends (the node went away: [`CtlError::Unreachable`]) or `on_event`
    /// answers `false` (then `Ok`).
    pub fn follow_events(
        &self,
        on_connected: impl FnOnce(),
        mut on_event: impl FnMut(&str, &str) -> bool,
    ) -> Result<(), CtlError> {
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
                .limit(1 << 20)
                .read_to_string()
                .unwrap_or_default();
            return Err(CtlError::from_status(status, body));
        }
        // The node subscribed this stream before it answered: from here no event is missed.
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
}
