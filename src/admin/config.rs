//! What an admin API instance enforces: who may call it ([`AdminToken`]) and how much one
//! request may ask of a node ([`AdminLimits`]).
//!
//! Everything an HTTP caller sends is untrusted: a body is read only up to
//! [`AdminLimits::max_body_bytes`], a start or a batch stop names at most
//! [`AdminLimits::max_specs_per_request`] children, and a listing returns at most
//! [`AdminLimits::max_page`] children, so no request makes a node allocate in proportion to
//! what the caller chose or to the size of the registry.

/// The bearer token every request must present (`Authorization: Bearer <token>`).
///
/// Its `Debug` form never shows the secret, so a token can sit in a logged config.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminTokenError {
    /// Shorter than [`AdminToken::MIN_LEN`]: guessable.
    #[error("the admin token is {len} bytes; at least {min} are needed")]
    TooShort {
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// A character that cannot travel in an HTTP header.
    #[error("the admin token must be printable ASCII without spaces")]
    NotPrintable,
}

impl AdminToken {
    /// The shortest token accepted (16 random bytes as hex are 32 characters).
    pub const MIN_LEN: usize = 16;

    /// Validates a token: printable ASCII without spaces (it travels in a header) and at
    /// least [`Self::MIN_LEN`] bytes. Surrounding whitespace (a file's final newline) is
    /// dropped.
    pub fn new(token: impl AsRef<str>) -> Result<Self, AdminTokenError> {
        let token = token.as_ref().trim();
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(AdminTokenError::NotPrintable);
        }
        if token.len() < Self::MIN_LEN {
            return Err(AdminTokenError::TooShort {
                len: token.len(),
                min: Self::MIN_LEN,
            });
        }
        Ok(Self(token.to_owned()))
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(presented).into()
    }
}

/// Bounds on what one request may ask of the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminLimits {
    /// The largest request body read (413 `payload_too_large` beyond). Default 8 MiB.
    pub max_body_bytes: usize,
    /// The most child specs one `POST /v1/children` may carry, and the most ids one
    /// `POST /v1/children/stop` may name (413 beyond). Default 10,000.
    pub max_specs_per_request: usize,
    /// Children per `GET /v1/children` page when the request gives no `limit`. Default 1,000.
    pub default_page: usize,
    /// The largest `limit` a listing accepts (400 beyond). Default 10,000.
    pub max_page: usize,
    /// The most `GET /v1/events` streams served at once (503 `too_many_streams` beyond): each
    /// holds a connection and a backlog for as long as its watcher stays. Default 16.
    pub max_event_streams: usize,
}

impl Default for AdminLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 8 * 1024 * 1024,
            max_specs_per_request: 10_000,
            default_page: 1_000,
            max_page: 10_000,
            max_event_streams: 16,
        }
    }
}

/// How an admin API instance is protected.
///
/// Without a token, the API trusts whoever can reach its socket, so it should listen on
/// loopback only; it still refuses other origins and host names other than IP literals and
/// `localhost` (a browser tricked by DNS rebinding names the attacker's host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminConfig {
    /// The bearer token every request must present; `None` accepts any caller.
    pub token: Option<AdminToken>,
    /// Request bounds.
    pub limits: AdminLimits,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_trimmed_printable_and_long_enough() {
        let token = AdminToken::new("0123456789abcdef\n").expect("valid");
        assert!(token.matches(b"0123456789abcdef"));
        assert!(!token.matches(b"0123456789abcdeF"));
        assert!(!token.matches(b"0123456789abcde"));
        assert!(!token.matches(b""));
        assert_eq!(
            AdminToken::new("short"),
            Err(AdminTokenError::TooShort { len: 5, min: 16 })
        );
        assert_eq!(
            AdminToken::new("0123456789 abcdef"),
            Err(AdminTokenError::NotPrintable)
        );
        assert!(!format!("{token:?}").contains("0123"));
    }
}
