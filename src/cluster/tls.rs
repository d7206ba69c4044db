//! Mutual TLS for the cluster transport, from PEM files.
//!
//! The cookie proves a peer knows the shared secret; TLS adds privacy and, with mutual
//! authentication, proof that each end holds a key its operator's CA certified. Both
//! directions are checked: a node accepts a session only from a client presenting a
//! certificate signed by the CA, and connects only to a server presenting one for the cluster's
//! server name. A peer with the cookie but no such certificate cannot even complete the
//! handshake.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ractor::ActorRef;
use ractor_cluster::{BoxRead, BoxWrite, ClientConnectErr, ClusterBidiStream, NodeServerMessage};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::node::TlsConfig;

/// Why the TLS files could not become a configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be read or holds nothing usable.
    #[error("{what} {path}: {reason}")]
    File {
        /// Which file (certificate, key, CA).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The server name is not a DNS name or an IP address.
    #[error("TLS server name {0:?} is not a DNS name or IP address")]
    ServerName(String),
    /// rustls refused the combination (a key that does not match the certificate, ...).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The largest PEM file read: certificate chains and keys are a few kilobytes.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

fn read_pem(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read;
    let fail = |reason: String| TlsError::File {
        what,
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(fail(format!("larger than {MAX_PEM_BYTES} bytes")));
    }
    Ok(bytes)
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_pem(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::File {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            what,
            path: path.to_owned(),
            reason: "no PEM certificate in it".into(),
        });
    }
    Ok(certs)
}

impl TlsConfig {
    /// Mutual TLS: this node presents the chain in `cert` with the private key in `key` both as
    /// a server and as a client, and accepts only peers whose certificates the CA in `ca`
    /// signed; outgoing connections check the server's certificate against `server_name`, the
    /// name every node's certificate is issued for.
    pub fn mutual(
        cert: &Path,
        key: &Path,
        ca: &Path,
        server_name: &str,
    ) -> Result<TlsConfig, TlsError> {
        let chain = certificates("certificate", cert)?;
        let key_pem = read_pem("key", key)?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::File {
            what: "key",
            path: key.to_owned(),
            reason: e.to_string(),
        })?;
        let mut roots = rustls::RootCertStore::empty();
        for ca_cert in certificates("CA", ca)? {
            roots.add(ca_cert).map_err(|e| TlsError::File {
                what: "CA",
                path: ca.to_owned(),
                reason: e.to_string(),
            })?;
        }
        let roots = Arc::new(roots);
        let name = ServerName::try_from(server_name.to_owned())
            .map_err(|_| TlsError::ServerName(server_name.to_owned()))?;
        let clients = rustls::server::WebPkiClientVerifier::builder(roots.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let server = rustls::ServerConfig::builder()
            .with_client_cert_verifier(clients)
            .with_single_cert(chain.clone(), private.clone_key())
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let client = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, private)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        Ok(TlsConfig {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
            server_name: name,
        })
    }
}

/// Called at most once with the TLS error that ended an outgoing session before its peer sent
/// a byte (see [`dial`]).
pub(crate) type TlsRefused = Box<dyn FnOnce(String) + Send>;

/// Opens an outgoing TLS session to `addr` for `server`, as `ractor_cluster::client_connect_enc`
/// does, and calls `refused` with the TLS error that ends it, if one does before the peer sent
/// anything.
///
/// A certificate this node does not accept (another CA, another server name) fails the
/// handshake here, as an `Encryption` error. A peer that does not accept *this* node's
/// certificate does not: under TLS 1.3 the client's side of the handshake completes before the
/// server checks the client's certificate, and the server's refusal (an alert) arrives on the
/// first read, where ractor_cluster's session sees only an error and closes, before the peer
/// named itself. Handing ractor_cluster the stream as an external transport (the same framing
/// over the same TLS stream) lets that read error reach the caller.
pub(crate) async fn dial(
    server: &ActorRef<NodeServerMessage>,
    addr: &str,
    tls: &super::node::TlsConfig,
    refused: TlsRefused,
) -> Result<(), ClientConnectErr> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let peer = stream.peer_addr()?;
    let local = stream.local_addr()?;
    let stream = tls
        .connector
        .connect(tls.server_name.clone(), stream)
        .await
        .map_err(ClientConnectErr::Encryption)?;
    ractor_cluster::client_connect_external(
        server,
        Box::new(Dialled {
            stream,
            peer,
            local,
            refused,
        }),
    )
    .await
}

/// An outgoing TLS stream whose read half reports a TLS error before the first byte.
struct Dialled {
    stream: tokio_rustls::client::TlsStream<TcpStream>,
    peer: SocketAddr,
    local: SocketAddr,
    refused: TlsRefused,
}

impl ClusterBidiStream for Dialled {
    fn split(self: Box<Self>) -> (BoxRead, BoxWrite) {
        let (read, write) = tokio::io::split(self.stream);
        (
            Box::new(Watched {
                inner: read,
                refused: Some(self.refused),
            }),
            Box::new(write),
        )
    }

    // The socket addresses, as ractor_cluster names the sessions it opens itself.
    fn peer_label(&self) -> Option<String> {
        Some(self.peer.to_string())
    }

    fn local_label(&self) -> Option<String> {
        Some(self.local.to_string())
    }
}

/// A read half that calls `refused` with the first TLS error read before any byte.
struct Watched<R> {
    inner: R,
    refused: Option<TlsRefused>,
}

/// Whether an I/O error from a TLS stream is TLS's own (an alert received, a bad record), not
/// the socket's.
fn is_tls_error(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.is::<rustls::Error>())
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                // The peer answered: later errors are not a refusal of the handshake.
                self.refused = None;
            }
            Poll::Ready(Err(error)) if is_tls_error(error) => {
                if let Some(refused) = self.refused.take() {
                    refused(error.to_string());
                }
            }
            _ => {}
        }
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        let missing = dir.path().join("missing.pem");
        let err = TlsConfig::mutual(&missing, &empty, &empty, "n").unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let err = TlsConfig::mutual(&empty, &empty, &empty, "n").unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }
}
