//! The S3 manifest (and S3-compatible stores: MinIO, R2, moto...), through `object_store`.
//!
//! A ship is an optimistic compare-and-swap: read the stored document and its e-tag; if the
//! offered copy does not beat it, stop; otherwise write with a precondition, create-if-absent
//! (`If-None-Match: *`) when there was no document, replace-if-unchanged (`If-Match: <e-tag>`)
//! when there was one. A precondition failure means another writer got in between: read again
//! and decide again, a few times, then report [`ManifestError::Contended`] and let the shipper
//! retry later. So two leaders (a partition) cannot clobber a newer version with an older one.
//!
//! Credentials and region come from the standard `AWS_*` environment variables
//! ([`S3Manifest::from_location`]) or from a builder the caller configures
//! ([`S3Manifest::with_builder`]).

use futures::future::BoxFuture;
use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::{
    beats_stored, decode, encode, ManifestError, RemoteManifest, ShipOutcome, MANIFEST_NAME,
};
use crate::config::ManifestLocation;
use crate::core::declared::list::DeclaredList;

/// How many conditional writes a ship attempts before reporting contention.
const MAX_ATTEMPTS: u32 = 5;

/// A manifest stored as `s3://<bucket>/<prefix>/declared-manifest.json`.
#[derive(Debug)]
pub struct S3Manifest {
    store: AmazonS3,
    path: Path,
    location: String,
}

impl S3Manifest {
    /// Opens an S3 location, with credentials from the environment (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, ...). A location with an `http://` endpoint is
    /// allowed plain HTTP (a local S3-compatible server).
    pub fn from_location(location: &ManifestLocation) -> Result<Self, ManifestError> {
        let ManifestLocation::S3 {
            bucket,
            prefix,
            endpoint,
            region,
        } = location
        else {
            return Err(ManifestError::Io {
                location: location.to_string(),
                message: "not an S3 location".into(),
            });
        };
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(region) = region {
            builder = builder.with_region(region);
        }
        if let Some(endpoint) = endpoint {
            builder = builder
                .with_allow_http(endpoint.starts_with("http://"))
                .with_endpoint(endpoint);
        }
        Self::with_builder(builder, bucket, prefix)
    }

    /// Opens a manifest through a builder the caller configured (credentials, endpoint,
    /// retries); conditional writes are switched to e-tag preconditions here.
    pub fn with_builder(
        builder: AmazonS3Builder,
        bucket: &str,
        prefix: &str,
    ) -> Result<Self, ManifestError> {
        let prefix = prefix.trim_matches('/');
        let location = if prefix.is_empty() {
            format!("s3://{bucket}/{MANIFEST_NAME}")
        } else {
            format!("s3://{bucket}/{prefix}/{MANIFEST_NAME}")
        };
        let store = builder
            .with_bucket_name(bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .build()
            .map_err(|e| ManifestError::Io {
                location: location.clone(),
                message: e.to_string(),
            })?;
        let path = if prefix.is_empty() {
            Path::from(MANIFEST_NAME)
        } else {
            Path::from(format!("{prefix}/{MANIFEST_NAME}"))
        };
        Ok(Self {
            store,
            path,
            location,
        })
    }

    fn io(&self, e: object_store::Error) -> ManifestError {
        ManifestError::Io {
            location: self.location.clone(),
            message: e.to_string(),
        }
    }

    /// The stored copy and the version tag a conditional replace must match.
    async fn read(&self) -> Result<Option<(DeclaredList, UpdateVersion)>, ManifestError> {
        let result = match self.store.get_opts(&self.path, GetOptions::default()).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let version = UpdateVersion {
            e_tag: result.meta.e_tag.clone(),
            version: result.meta.version.clone(),
        };
        if result.meta.size > super::MAX_MANIFEST_BYTES {
            return Err(ManifestError::TooLarge {
                location: self.location.clone(),
                bytes: result.meta.size,
                max: super::MAX_MANIFEST_BYTES,
            });
        }
        let bytes = result.bytes().await.map_err(|e| self.io(e))?;
        Ok(Some((decode(&self.location, &bytes)?, version)))
    }

    async fn ship_list(&self, list: &DeclaredList) -> Result<ShipOutcome, ManifestError> {
        for _ in 0..MAX_ATTEMPTS {
            let stored = self.read().await?;
            if !beats_stored(list, stored.as_ref().map(|(l, _)| l)) {
                return Ok(ShipOutcome::KeptNewer {
                    stored_version: stored.map_or(0, |(l, _)| l.version()),
                });
            }
            let mode = match stored {
                None => PutMode::Create,
                Some((_, version)) => PutMode::Update(version),
            };
            let payload = PutPayload::from(encode(list));
            match self
                .store
                .put_opts(&self.path, payload, PutOptions::from(mode))
                .await
            {
                Ok(_) => return Ok(ShipOutcome::Stored),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => {
                    tracing::debug!(location = %self.location, "manifest changed under us; re-reading");
                }
                Err(e) => return Err(self.io(e)),
            }
        }
        Err(ManifestError::Contended {
            location: self.location.clone(),
            attempts: MAX_ATTEMPTS,
        })
    }
}

impl RemoteManifest for S3Manifest {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn fetch(&self) -> BoxFuture<'_, Result<Option<DeclaredList>, ManifestError>> {
        Box::pin(async move { Ok(self.read().await?.map(|(list, _)| list)) })
    }

    fn ship<'a>(
        &'a self,
        list: &'a DeclaredList,
    ) -> BoxFuture<'a, Result<ShipOutcome, ManifestError>> {
        Box::pin(self.ship_list(list))
    }
}
