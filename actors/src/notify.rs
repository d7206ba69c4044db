//! systemd's readiness protocol (`sd_notify`): a `Type=notify` service tells its manager when
//! it is ready (`READY=1`), when it begins to stop (`STOPPING=1`) and what it is doing
//! (`STATUS=...`, shown by `systemctl status`), each as one datagram of `KEY=VALUE` lines on
//! the unix socket named by `$NOTIFY_SOCKET`.
//!
//! The protocol is a few lines over [`std::os::unix::net::UnixDatagram`], written here rather
//! than taken from the `sd-notify` crate: that crate sends to a socket in the abstract
//! namespace (`@name`, which systemd and test harnesses use) as if it were a file path, and
//! needs a newer Rust than this workspace's MSRV. Without `$NOTIFY_SOCKET` (not under systemd,
//! or under Kubernetes) there is no notifier and nothing is sent.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable that names the manager's socket.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// The longest `STATUS=` text sent: systemd shows one line, and a datagram must stay small.
pub const MAX_STATUS_CHARS: usize = 512;

/// Why the manager's socket cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `$NOTIFY_SOCKET` is neither an absolute path nor `@` and an abstract name.
    #[error("{NOTIFY_SOCKET}={0:?} is neither an absolute path nor an @abstract name")]
    Address(String),
    /// The socket could not be created, or the datagram not sent.
    #[error("{NOTIFY_SOCKET}: {0}")]
    Io(#[from] std::io::Error),
}

/// A connection to the service manager's notification socket.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    address: SocketAddr,
}

impl Notifier {
    /// The notifier `$NOTIFY_SOCKET` names; `None` when it is unset or empty (the process is
    /// not a notify service: nothing to tell).
    pub fn from_env() -> Result<Option<Self>, NotifyError> {
        match std::env::var_os(NOTIFY_SOCKET) {
            Some(address) if !address.is_empty() => Self::new(&address).map(Some),
            _ => Ok(None),
        }
    }

    /// A notifier sending to `address`: an absolute path, or `@name` for a socket in the
    /// abstract namespace.
    pub fn new(address: &OsStr) -> Result<Self, NotifyError> {
        let bytes = address.as_bytes();
        let address = match bytes.first() {
            Some(b'/') => SocketAddr::from_pathname(std::path::Path::new(address))?,
            Some(b'@') if bytes.len() > 1 => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(&bytes[1..])?
            }
            _ => return Err(NotifyError::Address(address.to_string_lossy().into_owned())),
        };
        Ok(Self {
            socket: UnixDatagram::unbound()?,
            address,
        })
    }

    /// Sends `READY=1` with a status line: the node is ready (see `crate::node`).
    pub fn ready(&self, status: &str) -> Result<(), NotifyError> {
        self.send(&format!("READY=1\nSTATUS={}\n", status_text(status)))
    }

    /// Sends `STOPPING=1` with a status line: the node begins its graceful leave.
    pub fn stopping(&self, status: &str) -> Result<(), NotifyError> {
        self.send(&format!("STOPPING=1\nSTATUS={}\n", status_text(status)))
    }

    /// Sends a `STATUS=` line.
    pub fn status(&self, status: &str) -> Result<(), NotifyError> {
        self.send(&format!("STATUS={}\n", status_text(status)))
    }

    fn send(&self, message: &str) -> Result<(), NotifyError> {
        self.socket
            .send_to_addr(message.as_bytes(), &self.address)?;
        Ok(())
    }
}

/// `text` as one status line: no line breaks (a break would start another `KEY=VALUE`),
/// at most [`MAX_STATUS_CHARS`] characters.
fn status_text(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_STATUS_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::linux::net::SocketAddrExt;

    #[test]
    fn messages_reach_a_path_and_an_abstract_socket_as_key_value_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::new(path.as_os_str()).unwrap();
        notifier.ready("ready: node a").unwrap();
        let mut buf = [0u8; 1024];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=ready: node a\n");

        let name = format!("process-hub-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        let notifier = Notifier::new(OsStr::new(&format!("@{name}"))).unwrap();
        notifier.stopping("leaving\nINJECTED=1").unwrap();
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1\nSTATUS=leaving INJECTED=1\n");
        notifier.status(&"x".repeat(5000)).unwrap();
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(n, "STATUS=\n".len() + MAX_STATUS_CHARS);
    }

    #[test]
    fn an_address_that_is_neither_a_path_nor_abstract_is_refused() {
        for bad in ["", "@", "relative/sock", "notify"] {
            assert!(
                matches!(Notifier::new(OsStr::new(bad)), Err(NotifyError::Address(_))),
                "{bad:?}"
            );
        }
    }
}
