//! The local-path adapter and the shipper, against real files and scripted manifests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Semaphore;

use super::*;
use crate::core::manifest_ship::{Offer, ShipBackoff};
use crate::model::{ChildSpec, Metadata};

fn version(n: u64, by: &str) -> DeclaredList {
    let mut l = DeclaredList::new();
    for i in 0..n {
        l.add(
            ChildSpec::new(format!("c{i}").as_str(), "counter"),
            Metadata::new(),
            by,
        )
        .unwrap();
    }
    l
}

/// Waits for a condition with a generous deadline (no timing thresholds).
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn local_path_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let m = LocalPathManifest::new(dir.path().join("off-cluster"));
    assert_eq!(m.fetch().await.unwrap(), None);
    let v3 = version(3, "n1");
    assert_eq!(m.ship(&v3).await.unwrap(), ShipOutcome::Stored);
    assert_eq!(m.fetch().await.unwrap(), Some(v3.clone()));
    // A ship never lowers the stored version.
    assert_eq!(
        m.ship(&version(2, "n1")).await.unwrap(),
        ShipOutcome::KeptNewer { stored_version: 3 }
    );
    assert_eq!(
        m.ship(&v3).await.unwrap(),
        ShipOutcome::KeptNewer { stored_version: 3 }
    );
    let v5 = version(5, "n2");
    assert_eq!(m.ship(&v5).await.unwrap(), ShipOutcome::Stored);
    assert_eq!(m.fetch().await.unwrap(), Some(v5));
    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path().join("off-cluster"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![MANIFEST_NAME.to_owned()]);
}

#[tokio::test]
async fn a_tie_ships_only_the_winner() {
    let dir = tempfile::tempdir().unwrap();
    let m = LocalPathManifest::new(dir.path());
    let base = version(2, "n1");
    let mut from_n3 = base.clone();
    from_n3
        .add(ChildSpec::new("x", "k"), Metadata::new(), "n3")
        .unwrap();
    let mut from_n1 = base;
    from_n1
        .add(ChildSpec::new("y", "k"), Metadata::new(), "n1")
        .unwrap();
    m.ship(&from_n3).await.unwrap();
    assert_eq!(m.ship(&from_n1).await.unwrap(), ShipOutcome::Stored);
    assert_eq!(
        m.ship(&from_n3).await.unwrap(),
        ShipOutcome::KeptNewer { stored_version: 3 }
    );
    assert_eq!(m.fetch().await.unwrap(), Some(from_n1));
}

#[tokio::test]
async fn a_newer_or_garbled_document_is_refused_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let m = LocalPathManifest::new(dir.path());
    let newer = r#"{"format": 2, "version": 1, "children": [], "whatever": true}"#;
    std::fs::write(m.file(), newer).unwrap();
    let err = m.fetch().await.unwrap_err();
    assert!(
        matches!(
            err,
            ManifestError::NewerFormat {
                found: 2,
                supported: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(m.ship(&version(9, "n1")).await.is_err());
    assert_eq!(std::fs::read_to_string(m.file()).unwrap(), newer);

    std::fs::write(m.file(), "{not json").unwrap();
    assert!(matches!(m.fetch().await, Err(ManifestError::Decode { .. })));
}

#[test]
fn the_document_is_readable_json() {
    let mut list = version(1, "n1");
    let mut meta = Metadata::new();
    meta.insert("tag".into(), "blue".into());
    list.add(ChildSpec::new("tagged", "kv"), meta, "n1")
        .unwrap();
    let bytes = encode(&list);
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["format"], 1);
    assert_eq!(value["version"], 2);
    assert_eq!(value["children"][1]["spec"]["id"], "tagged");
    assert_eq!(value["children"][1]["metadata"]["tag"], "blue");
    assert_eq!(decode("t", &bytes).unwrap(), list);
}

#[tokio::test]
async fn an_s3_location_without_the_feature_or_with_it_opens() {
    let loc: ManifestLocation = "s3://bucket/prefix".parse().unwrap();
    let opened = open_manifest(&loc);
    #[cfg(feature = "s3")]
    assert_eq!(
        opened.unwrap().location(),
        "s3://bucket/prefix/declared-manifest.json"
    );
    #[cfg(not(feature = "s3"))]
    assert!(matches!(opened, Err(ManifestError::FeatureMissing { .. })));
    let dir = tempfile::tempdir().unwrap();
    let local = ManifestLocation::LocalPath {
        path: dir.path().to_owned(),
    };
    assert!(open_manifest(&local)
        .unwrap()
        .location()
        .ends_with(MANIFEST_NAME));
}

/// A manifest whose ships wait for a permit and can be told to fail.
struct Scripted {
    shipped: Mutex<Vec<u64>>,
    attempts: Mutex<Vec<u64>>,
    failures_left: Mutex<VecDeque<()>>,
    gate: Semaphore,
}

impl Scripted {
    fn new(fail_first: usize, open: bool) -> Arc<Self> {
        Arc::new(Self {
            shipped: Mutex::new(Vec::new()),
            attempts: Mutex::new(Vec::new()),
            failures_left: Mutex::new((0..fail_first).map(|_| ()).collect()),
            gate: Semaphore::new(if open { Semaphore::MAX_PERMITS } else { 0 }),
        })
    }
    fn shipped(&self) -> Vec<u64> {
        self.shipped.lock().unwrap().clone()
    }
    fn attempts(&self) -> Vec<u64> {
        self.attempts.lock().unwrap().clone()
    }
}

impl RemoteManifest for Scripted {
    fn location(&self) -> String {
        "scripted".into()
    }
    fn fetch(&self) -> BoxFuture<'_, Result<Option<DeclaredList>, ManifestError>> {
        Box::pin(async { Ok(None) })
    }
    fn ship<'a>(
        &'a self,
        list: &'a DeclaredList,
    ) -> BoxFuture<'a, Result<ShipOutcome, ManifestError>> {
        Box::pin(async move {
            self.attempts.lock().unwrap().push(list.version());
            let permit = self.gate.acquire().await.expect("gate open");
            permit.forget();
            if self.failures_left.lock().unwrap().pop_front().is_some() {
                return Err(ManifestError::Io {
                    location: "scripted".into(),
                    message: "injected".into(),
                });
            }
            self.shipped.lock().unwrap().push(list.version());
            Ok(ShipOutcome::Stored)
        })
    }
}

#[tokio::test]
async fn offers_during_a_slow_ship_coalesce_and_never_block() {
    let manifest = Scripted::new(0, false);
    let shipper = ManifestShipper::spawn(manifest.clone(), ShipBackoff::default(), |_| {})
        .await
        .unwrap();
    assert_eq!(shipper.offer(&version(1, "n1")), Offer::Queued);
    eventually("the first ship starts", || manifest.attempts() == vec![1]).await;
    // The manifest is stuck; every offer still returns at once.
    assert_eq!(shipper.offer(&version(2, "n1")), Offer::Queued);
    for v in 3..=10 {
        assert_eq!(
            shipper.offer(&version(v, "n1")),
            Offer::Coalesced { superseded: v - 1 }
        );
    }
    assert_eq!(shipper.offer(&version(4, "n1")), Offer::Stale);
    manifest.gate.add_permits(2);
    tokio::time::timeout(Duration::from_secs(30), shipper.wait_shipped(10))
        .await
        .expect("version 10 ships");
    assert_eq!(manifest.shipped(), vec![1, 10]);
    assert_eq!(shipper.last_shipped(), Some(10));
}

#[tokio::test]
async fn a_failing_manifest_is_retried_with_backoff_and_reported() {
    let manifest = Scripted::new(3, true);
    let reported: Arc<Mutex<Vec<ShipFailure>>> = Arc::default();
    let sink = reported.clone();
    let backoff = ShipBackoff {
        initial_ms: 1,
        max_ms: 4,
    };
    let shipper = ManifestShipper::spawn(manifest.clone(), backoff, move |f| {
        sink.lock().unwrap().push(f)
    })
    .await
    .unwrap();
    shipper.offer(&version(1, "n1"));
    tokio::time::timeout(Duration::from_secs(30), shipper.wait_shipped(1))
        .await
        .expect("ships after the failures");
    let reported = reported.lock().unwrap().clone();
    let failures: Vec<u32> = reported.iter().map(|f| f.failures).collect();
    assert_eq!(failures, vec![1, 2, 3]);
    let delays: Vec<u64> = reported.iter().map(|f| f.retry_in_ms).collect();
    assert_eq!(delays, vec![1, 2, 4], "exponential, capped");
    assert!(reported
        .iter()
        .all(|f| f.version == 1 && f.location == "scripted"));
    assert_eq!(manifest.attempts(), vec![1, 1, 1, 1]);
    assert_eq!(manifest.shipped(), vec![1]);
}

#[tokio::test]
async fn the_shipper_ships_to_a_local_path() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = Arc::new(LocalPathManifest::new(dir.path()));
    let shipper = ManifestShipper::spawn(manifest.clone(), ShipBackoff::default(), |_| {})
        .await
        .unwrap();
    for v in 1..=20 {
        shipper.offer(&version(v, "n1"));
    }
    tokio::time::timeout(Duration::from_secs(30), shipper.wait_shipped(20))
        .await
        .expect("ships");
    assert_eq!(manifest.fetch().await.unwrap(), Some(version(20, "n1")));
}
