//! The S3 remote manifest against a real S3-compatible server (moto).
//!
//! `bash scripts/test.sh` installs moto, starts it on a free loopback port and exports its
//! endpoint as `PROCESS_HUB_TEST_S3_ENDPOINT`. Run directly (`cargo test -p process_hub --test object_store`),
//! the test starts `moto_server` itself if it can, and otherwise FAILS with instructions: it is
//! never skipped silently. The crate's tests always build the `s3` feature (see Cargo.toml).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};
use process_hub::core::declared::list::DeclaredList;
use process_hub::core::manifest_ship::ShipBackoff;
use process_hub::model::{ChildSpec, Metadata};
use process_hub::recovery::manifest::{
    open_manifest, ManifestShipper, RemoteManifest, S3Manifest, ShipOutcome, MANIFEST_NAME,
};
use process_hub::ManifestLocation;

const ENDPOINT_VAR: &str = "PROCESS_HUB_TEST_S3_ENDPOINT";

/// A moto server this test started; killed when dropped.
struct OwnServer(Child);

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nothing listens on (for the moto server this test starts itself).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("its address").port()
}

/// The endpoint to test against, and the server if this test had to start it.
fn server() -> (String, Option<OwnServer>) {
    if let Ok(endpoint) = std::env::var(ENDPOINT_VAR) {
        wait_until_up(&endpoint);
        return (endpoint, None);
    }
    let port = free_port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "the S3 manifest test needs an S3-compatible server: {ENDPOINT_VAR} is not set and \
                 `moto_server` could not be started ({e}). Run the whole suite with \
                 `bash scripts/test.sh`, which installs and starts moto, or start one yourself \
                 (`pip install 'moto[server]' && moto_server -p 5000`) and set \
                 {ENDPOINT_VAR}=http://127.0.0.1:5000"
            )
        });
    let server = OwnServer(child);
    let endpoint = format!("http://127.0.0.1:{port}");
    wait_until_up(&endpoint);
    (endpoint, Some(server))
}

fn host_port(endpoint: &str) -> String {
    endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

fn wait_until_up(endpoint: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(host_port(endpoint)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the S3 server at {endpoint} never answered; run `bash scripts/test.sh`"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Creates a bucket with a plain HTTP request (object_store has no bucket API; moto accepts an
/// unsigned CreateBucket).
fn create_bucket(endpoint: &str, bucket: &str) {
    let host = host_port(endpoint);
    let mut stream = TcpStream::connect(&host).expect("connect to the S3 server");
    let request = format!(
        "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(
        response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200"),
        "CreateBucket {bucket}: {}",
        response.lines().next().unwrap_or("")
    );
}

fn builder(endpoint: &str) -> AmazonS3Builder {
    AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_manifest_against_a_real_server() {
    let (endpoint, _server) = server();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let bucket = format!("ph-test-{}-{stamp}", std::process::id());
    create_bucket(&endpoint, &bucket);

    // Round trip; a ship never lowers the stored version.
    let a = S3Manifest::with_builder(builder(&endpoint), &bucket, "cluster-a/").unwrap();
    assert_eq!(
        a.location(),
        format!("s3://{bucket}/cluster-a/{MANIFEST_NAME}")
    );
    assert_eq!(a.fetch().await.unwrap(), None);
    assert_eq!(
        a.ship(&version(3, "n1")).await.unwrap(),
        ShipOutcome::Stored
    );
    assert_eq!(a.fetch().await.unwrap(), Some(version(3, "n1")));
    assert_eq!(
        a.ship(&version(2, "n1")).await.unwrap(),
        ShipOutcome::KeptNewer { stored_version: 3 }
    );
    assert_eq!(
        a.ship(&version(4, "n1")).await.unwrap(),
        ShipOutcome::Stored
    );
    assert_eq!(a.fetch().await.unwrap(), Some(version(4, "n1")));

    // The server honours the conditional writes the adapter relies on: create-if-absent fails
    // on an existing object, replace-if-e-tag-matches fails with a stale e-tag.
    let raw = builder(&endpoint)
        .with_bucket_name(&bucket)
        .build()
        .unwrap();
    let path = Path::from(format!("cluster-a/{MANIFEST_NAME}"));
    let created = raw
        .put_opts(
            &path,
            PutPayload::from(b"{}".to_vec()),
            PutOptions::from(PutMode::Create),
        )
        .await;
    assert!(
        matches!(created, Err(object_store::Error::AlreadyExists { .. })),
        "If-None-Match: * must fail on an existing object: {created:?}"
    );
    let stale = UpdateVersion {
        e_tag: Some("\"0123456789abcdef0123456789abcdef\"".into()),
        version: None,
    };
    let updated = raw
        .put_opts(
            &path,
            PutPayload::from(b"{}".to_vec()),
            PutOptions::from(PutMode::Update(stale)),
        )
        .await;
    assert!(
        matches!(updated, Err(object_store::Error::Precondition { .. })),
        "If-Match with a stale e-tag must fail: {updated:?}"
    );
    assert_eq!(
        a.fetch().await.unwrap(),
        Some(version(4, "n1")),
        "untouched"
    );

    // Two leaders (a partition) shipping concurrently: the newer version always survives.
    let left = Arc::new(S3Manifest::with_builder(builder(&endpoint), &bucket, "race").unwrap());
    let right = Arc::new(S3Manifest::with_builder(builder(&endpoint), &bucket, "race").unwrap());
    let mut tasks = Vec::new();
    for v in 1..=12u64 {
        let (m, by) = if v % 2 == 0 {
            (left.clone(), "n1")
        } else {
            (right.clone(), "n2")
        };
        tasks.push(tokio::spawn(
            async move { (v, m.ship(&version(v, by)).await) },
        ));
    }
    let mut newest_result = None;
    for t in tasks {
        let (v, result) = t.await.unwrap();
        if v == 12 {
            newest_result = Some(result);
        }
    }
    let newest = version(12, "n1");
    match newest_result.expect("version 12 was shipped") {
        // Stored, and no older ship overwrote it afterwards: conditional writes held.
        Ok(outcome) => {
            assert_eq!(outcome, ShipOutcome::Stored);
            assert_eq!(left.fetch().await.unwrap(), Some(newest.clone()));
        }
        // Lost every conditional write to concurrent older ships: the shipper would retry.
        Err(e) => {
            assert!(
                matches!(
                    e,
                    process_hub::recovery::manifest::ManifestError::Contended { .. }
                ),
                "{e}"
            );
            assert_eq!(left.ship(&newest).await.unwrap(), ShipOutcome::Stored);
        }
    }
    assert_eq!(
        right.ship(&version(11, "n2")).await.unwrap(),
        ShipOutcome::KeptNewer { stored_version: 12 }
    );

    // The shipper through a location parsed like the `--remote-manifest` flag.
    let location = ManifestLocation::S3 {
        bucket: bucket.clone(),
        prefix: "shipped".into(),
        endpoint: Some(endpoint.clone()),
        region: Some("us-east-1".into()),
    };
    // `from_location` reads credentials from the environment; give it explicit ones here.
    let manifest: Arc<dyn RemoteManifest> = match open_manifest(&location) {
        Ok(m) if std::env::var("AWS_ACCESS_KEY_ID").is_ok() => m,
        _ => Arc::new(S3Manifest::with_builder(builder(&endpoint), &bucket, "shipped").unwrap()),
    };
    let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = failures.clone();
    let shipper = ManifestShipper::spawn(manifest.clone(), ShipBackoff::default(), move |f| {
        sink.lock().unwrap().push(f)
    })
    .await
    .unwrap();
    for v in 1..=15 {
        shipper.offer(&version(v, "n1"));
    }
    tokio::time::timeout(Duration::from_secs(60), shipper.wait_shipped(15))
        .await
        .expect("version 15 ships");
    assert_eq!(manifest.fetch().await.unwrap(), Some(version(15, "n1")));
    assert!(
        failures.lock().unwrap().is_empty(),
        "{:?}",
        failures.lock().unwrap()
    );
}
