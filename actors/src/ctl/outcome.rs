//! How a `process-hub ctl` command ends: its exit code, and the errors that choose it.
//!
//! Scripts branch on the exit code, so each failure class has one code, documented in
//! docs/operations.md ("Admin CLI"):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | the node refused or failed the operation (a start error, an unknown child, ...) |
//! | 2 | usage: bad flags, bad JSON in `--args` or a command, an unreadable file |
//! | 3 | the admin API cannot be reached, or answered something that is not the API |
//! | 4 | unauthorized: no token, a wrong token, or a request the node forbids |

/// The exit code of a command that did what it was asked.
pub const EXIT_OK: i32 = 0;
/// The exit code of an operation the node refused or that failed there.
pub const EXIT_REFUSED: i32 = 1;
/// The exit code of a usage error (what clap uses for bad flags too).
pub const EXIT_USAGE: i32 = 2;
/// The exit code when the admin API cannot be reached.
pub const EXIT_UNREACHABLE: i32 = 3;
/// The exit code of a request the node did not authorize.
pub const EXIT_UNAUTHORIZED: i32 = 4;

/// Why a ctl command failed.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// The command line or a file it names is not usable; nothing was sent.
    #[error("{0}")]
    Usage(String),
    /// The node answered with an error status (not 401/403).
    #[error("{code}: {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The API's snake_case error code.
        code: String,
        /// The API's message.
        message: String,
        /// The error body as the node sent it (printed as is with `--json`).
        body: String,
    },
    /// Some children of a request failed (the others did not).
    #[error("{failed} of {total} children failed")]
    PartlyFailed {
        /// Children that did not start.
        failed: usize,
        /// Children asked for.
        total: usize,
    },
    /// The node answered 401 or 403.
    #[error("{code}: {message}")]
    Unauthorized {
        /// The HTTP status.
        status: u16,
        /// The API's error code (`unauthorized`, `forbidden`).
        code: String,
        /// The API's message.
        message: String,
        /// The error body as the node sent it.
        body: String,
    },
    /// The node could not be reached, the connection broke, or what came back is not the
    /// API's JSON.
    #[error("admin API at {url}: {message}")]
    Unreachable {
        /// The admin URL.
        url: String,
        /// What went wrong.
        message: String,
    },
}

impl From<crate::admin_client::AdminClientError> for CtlError {
    /// What an admin call's failure means to ctl: a transport error or an answer that is not
    /// the API's JSON is `unreachable` (exit 3), an error status the node's own refusal or
    /// `unauthorized` ([`CtlError::from_status`]), a body that does not encode a usage error.
    fn from(e: crate::admin_client::AdminClientError) -> Self {
        use crate::admin_client::AdminClientError as E;
        match e {
            E::Unreachable { addr, message } | E::Decode { addr, message } => {
                CtlError::Unreachable { url: addr, message }
            }
            E::Status { status, body, .. } => CtlError::from_status(status, body),
            E::Encode { message } => CtlError::Usage(message),
        }
    }
}

impl CtlError {
    /// The exit code of this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            CtlError::Usage(_) => EXIT_USAGE,
            CtlError::Refused { .. } | CtlError::PartlyFailed { .. } => EXIT_REFUSED,
            CtlError::Unreachable { .. } => EXIT_UNREACHABLE,
            CtlError::Unauthorized { .. } => EXIT_UNAUTHORIZED,
        }
    }

    /// The node's error body, when the node answered one.
    pub fn body(&self) -> Option<&str> {
        match self {
            CtlError::Refused { body, .. } | CtlError::Unauthorized { body, .. } => Some(body),
            _ => None,
        }
    }

    /// The error a node's answer of `status` with `body` means.
    pub fn from_status(status: u16, body: String) -> CtlError {
        let parsed: Option<serde_json::Value> = serde_json::from_str(&body).ok();
        let field = |name: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get(name))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let code = field("error").unwrap_or_else(|| format!("http_{status}"));
        let message = field("message").unwrap_or_else(|| body.trim().to_owned());
        if status == 401 || status == 403 {
            CtlError::Unauthorized {
                status,
                code,
                message,
                body,
            }
        } else {
            CtlError::Refused {
                status,
                code,
                message,
                body,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_the_documented_exit_codes() {
        let body = r#"{"error":"unauthorized","message":"invalid admin token"}"#.to_owned();
        let e = CtlError::from_status(401, body);
        assert_eq!(e.exit_code(), EXIT_UNAUTHORIZED);
        assert_eq!(e.to_string(), "unauthorized: invalid admin token");
        assert_eq!(CtlError::from_status(403, String::new()).exit_code(), 4);
        let e = CtlError::from_status(404, r#"{"error":"not_found","message":"no"}"#.into());
        assert_eq!(e.exit_code(), EXIT_REFUSED);
        let e = CtlError::from_status(502, "bad gateway".into());
        assert_eq!(e.to_string(), "http_502: bad gateway");
        assert_eq!(CtlError::Usage("x".into()).exit_code(), EXIT_USAGE);
        let e = CtlError::Unreachable {
            url: "u".into(),
            message: "m".into(),
        };
        assert_eq!(e.exit_code(), EXIT_UNREACHABLE);
    }

    #[test]
    fn the_admin_clients_failures_keep_ctls_codes_and_texts() {
        use crate::admin_client::AdminClientError as E;
        let e = CtlError::from(E::Unreachable {
            addr: "http://h:1".into(),
            message: "connection refused".into(),
        });
        assert_eq!(e.exit_code(), EXIT_UNREACHABLE);
        assert_eq!(e.to_string(), "admin API at http://h:1: connection refused");
        let e = CtlError::from(E::Decode {
            addr: "http://h:1".into(),
            message: "answered 200 with a body that is not JSON: x".into(),
        });
        assert_eq!(e.exit_code(), EXIT_UNREACHABLE);
        let e = CtlError::from(E::Status {
            addr: "http://h:1".into(),
            status: 401,
            body: r#"{"error":"unauthorized","message":"no token"}"#.into(),
        });
        assert_eq!(e.exit_code(), EXIT_UNAUTHORIZED);
        assert_eq!(e.to_string(), "unauthorized: no token");
        let e = CtlError::from(E::Encode {
            message: "bad".into(),
        });
        assert_eq!(e.exit_code(), EXIT_USAGE);
    }
}
