//! Remote manifests: an off-cluster copy of the declared list (docs/recovery.md,
//! "The remote manifest").
//!
//! The copy protects the list against the loss of every cluster disk. The leader ships every
//! committed version asynchronously through a [`ManifestShipper`] (retried with backoff,
//! superseded versions coalesced), and boot fetches the remote copy before the first round: the
//! higher version wins, whichever side holds it.
//!
//! A [`RemoteManifest`] promises that a ship never lowers the stored version: it reads the
//! stored copy, and writes only when the offered copy beats it by
//! [`crate::core::declared::list::precedence`]. Adapters make that read-compare-write atomic
//! where their storage allows: `S3Manifest` (feature `s3`) with conditional writes (create-if-absent, or
//! replace-if-the-e-tag-still-matches), so two leaders (a partition) cannot clobber a newer
//! version; [`LocalPathManifest`] with a lock within the process and an atomic rename.
//!
//! The stored form is one JSON document (readable by an operator with `cat`), with its own
//! format marker: a document of a newer format is refused, never overwritten.

mod local_path;
#[cfg(feature = "s3")]
mod s3;
mod shipper;

use std::cmp::Ordering;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::config::ManifestLocation;
use crate::core::declared::list::{
    check_durable, precedence, DeclaredChild, DeclaredList, MAX_DECLARED_VERSION,
};
use crate::model::validate_stored_child;
use crate::model::NodeName;

pub use local_path::LocalPathManifest;
#[cfg(feature = "s3")]
pub use s3::S3Manifest;
pub use shipper::{ManifestShipper, OnShipFailure, ShipFailure, ShipperMsg};

/// The manifest's object (or file) name under its prefix (or directory).
pub const MANIFEST_NAME: &str = "declared-manifest.json";
/// The newest manifest document format this release reads and writes.
pub const MANIFEST_FORMAT_VERSION: u32 = 1;

/// Why a manifest operation failed. Cloneable so one failure can go to a hook and a log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The storage could not be reached or refused the operation.
    #[error("remote manifest {location}: {message}")]
    Io {
        /// Where the manifest lives.
        location: String,
        /// The underlying error.
        message: String,
    },
    /// The stored document does not decode.
    #[error("remote manifest {location} is unreadable: {message}")]
    Decode {
        /// Where the manifest lives.
        location: String,
        /// The decoder's error.
        message: String,
    },
    /// The stored document was written by a newer release; it is neither read nor overwritten.
    #[error(
        "remote manifest {location} has format {found}, newer than the {supported} this release \
         supports"
    )]
    NewerFormat {
        /// Where the manifest lives.
        location: String,
        /// The format found.
        found: u32,
        /// The newest format this release reads.
        supported: u32,
    },
    /// Concurrent writers kept changing the document between our read and our conditional
    /// write; the shipper retries later.
    #[error("remote manifest {location}: lost {attempts} conditional writes in a row")]
    Contended {
        /// Where the manifest lives.
        location: String,
        /// Conditional writes attempted.
        attempts: u32,
    },
    /// The manifest did not answer within the time the caller allows (a hung mount, an
    /// endpoint that accepts and never replies); the caller carries on without it.
    #[error("remote manifest {location} did not answer within {waited_ms} ms")]
    TimedOut {
        /// Where the manifest lives.
        location: String,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The stored document is larger than [`MAX_MANIFEST_BYTES`]: it is not read.
    #[error("remote manifest {location} is {bytes} bytes, more than the {max} accepted")]
    TooLarge {
        /// Where the manifest lives.
        location: String,
        /// The document's size (or a lower bound of it).
        bytes: u64,
        /// [`MAX_MANIFEST_BYTES`].
        max: u64,
    },
    /// The document decodes but is not a list any leader could have written (an invalid or
    /// non-permanent child, a duplicate id, an implausible version): it is not adopted.
    #[error("remote manifest {location} is invalid: {reason}")]
    Invalid {
        /// Where the manifest lives.
        location: String,
        /// The first problem found.
        reason: String,
    },
    /// The location needs a cargo feature this build does not have.
    #[error("remote manifest {location} needs the `{feature}` cargo feature")]
    FeatureMissing {
        /// The location.
        location: String,
        /// The feature.
        feature: &'static str,
    },
}

/// The largest manifest document read: 256 MiB (about a hundred thousand children with a
/// couple of kilobytes of arguments and metadata each). A larger document is refused unread,
/// so an off-cluster store cannot make a node allocate without bound.
pub const MAX_MANIFEST_BYTES: u64 = 256 * 1024 * 1024;

/// What a ship did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShipOutcome {
    /// The offered copy is now the stored one.
    Stored,
    /// The stored copy is the same or newer; nothing was written.
    KeptNewer {
        /// The stored version.
        stored_version: u64,
    },
}

/// An off-cluster store for the declared list.
///
/// Object-safe (boxed futures), so a hub holds an `Arc<dyn RemoteManifest>` chosen at runtime
/// from its configuration.
pub trait RemoteManifest: Send + Sync + 'static {
    /// Where the manifest lives, for logs and hooks.
    fn location(&self) -> String;

    /// Reads the stored copy; `Ok(None)` when nothing was ever shipped.
    fn fetch(&self) -> BoxFuture<'_, Result<Option<DeclaredList>, ManifestError>>;

    /// Stores `list` unless the stored copy is the same or newer (a ship never lowers the
    /// stored version). Durable when `Ok(Stored)`.
    fn ship<'a>(
        &'a self,
        list: &'a DeclaredList,
    ) -> BoxFuture<'a, Result<ShipOutcome, ManifestError>>;
}

/// Reads the stored copy, giving up after `timeout`. The hub's boot and its parked rounds read
/// the manifest this way: an off-cluster store that never answers must not keep a node from
/// starting or from reconciling.
pub async fn fetch_within(
    manifest: &dyn RemoteManifest,
    timeout: std::time::Duration,
) -> Result<Option<DeclaredList>, ManifestError> {
    match tokio::time::timeout(timeout, manifest.fetch()).await {
        Ok(fetched) => fetched,
        Err(_) => Err(ManifestError::TimedOut {
            location: manifest.location(),
            waited_ms: timeout.as_millis() as u64,
        }),
    }
}

/// Opens the adapter for a configured location.
pub fn open_manifest(
    location: &ManifestLocation,
) -> Result<Arc<dyn RemoteManifest>, ManifestError> {
    match location {
        ManifestLocation::LocalPath { path } => Ok(Arc::new(LocalPathManifest::new(path.clone()))),
        #[cfg(feature = "s3")]
        ManifestLocation::S3 { .. } => Ok(Arc::new(S3Manifest::from_location(location)?)),
        #[cfg(not(feature = "s3"))]
        ManifestLocation::S3 { .. } => Err(ManifestError::FeatureMissing {
            location: location.to_string(),
            feature: "s3",
        }),
    }
}

/// Whether a ship of `offered` should replace `stored`.
pub(crate) fn beats_stored(offered: &DeclaredList, stored: Option<&DeclaredList>) -> bool {
    stored.is_none_or(|s| precedence(offered, s) == Ordering::Greater)
}

/// The stored document.
#[derive(Serialize, Deserialize)]
struct Document {
    format: u32,
    version: u64,
    #[serde(default)]
    last_mutated_by: Option<NodeName>,
    children: Vec<DeclaredChild>,
}

/// Just enough of a document to read its format before trusting the rest.
#[derive(Deserialize)]
struct FormatProbe {
    format: u32,
}

/// Encodes a list as the manifest document.
pub(crate) fn encode(list: &DeclaredList) -> Vec<u8> {
    let doc = Document {
        format: MANIFEST_FORMAT_VERSION,
        version: list.version(),
        last_mutated_by: list.last_mutated_by().map(str::to_owned),
        children: list.children().values().cloned().collect(),
    };
    // Specs, strings and maps of strings always encode as JSON.
    serde_json::to_vec_pretty(&doc).unwrap_or_default()
}

/// Decodes a manifest document, refusing newer formats and, like a peer's input, anything a
/// leader could not have written: a document above [`MAX_MANIFEST_BYTES`], a child the API
/// would refuse ([`validate_child`]) or that cannot be durable, an id listed twice, a version
/// above [`MAX_DECLARED_VERSION`].
pub(crate) fn decode(location: &str, bytes: &[u8]) -> Result<DeclaredList, ManifestError> {
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            location: location.to_owned(),
            bytes: bytes.len() as u64,
            max: MAX_MANIFEST_BYTES,
        });
    }
    let decode_error = |e: serde_json::Error| ManifestError::Decode {
        location: location.to_owned(),
        message: e.to_string(),
    };
    let probe: FormatProbe = serde_json::from_slice(bytes).map_err(decode_error)?;
    if probe.format > MANIFEST_FORMAT_VERSION {
        return Err(ManifestError::NewerFormat {
            location: location.to_owned(),
            found: probe.format,
            supported: MANIFEST_FORMAT_VERSION,
        });
    }
    let doc: Document = serde_json::from_slice(bytes).map_err(decode_error)?;
    let invalid = |reason: String| ManifestError::Invalid {
        location: location.to_owned(),
        reason,
    };
    if doc.version > MAX_DECLARED_VERSION {
        return Err(invalid(format!(
            "version {} is above the {MAX_DECLARED_VERSION} a list may reach",
            doc.version
        )));
    }
    let mut children = crate::core::declared::list::DeclaredChildren::new();
    for child in doc.children {
        validate_stored_child(&child.spec, &child.metadata).map_err(|e| invalid(e.to_string()))?;
        check_durable(&child.spec, &child.metadata).map_err(|e| invalid(e.to_string()))?;
        let id = child.spec.id.clone();
        if children.insert(id.clone(), child).is_some() {
            return Err(invalid(format!("child {id} is listed twice")));
        }
    }
    Ok(DeclaredList::from_parts(
        doc.version,
        children,
        doc.last_mutated_by,
    ))
}

#[cfg(test)]
mod tests;
