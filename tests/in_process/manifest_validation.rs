//! A remote manifest is validated like a peer's input (`docs/recovery.md`, "The remote
//! manifest"): a node whose own list is lost parks rather than adopt a manifest edited to a
//! version that leaves no room to increment, a child no API accepts (a 700-byte id, which LMDB
//! cannot key), or a document above the size limit. Real files, one node.

use crate::common;

use std::path::Path;

use common::recovery_hub::*;
use common::{durable, wait_until};
use process_hub::recovery::declared_store::DECLARED_FILE;
use process_hub::{HookEvent, ManifestLocation};

/// Runs a node with durable children `m1`, `m2` and a local-path manifest, stops it, loses its
/// list file (the seeded marker survives), lets `edit` rewrite the manifest document, boots it
/// again and returns whether it parked, with the park's manifest error.
async fn boot_on_edited_manifest(
    hub_id: &str,
    edit: impl FnOnce(&Path, serde_json::Value),
) -> (bool, Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let manifest_dir = dir.path().join("off-cluster");
    let location = ManifestLocation::LocalPath {
        path: manifest_dir.clone(),
    };
    let cfg = with_manifest(hub_id, dir.path(), location);
    let (hub, join) = spawn(cfg.clone(), &Recorded::default()).await;
    hub.start_children(specs(&["m1", "m2"]), durable())
        .await
        .unwrap();
    let file = manifest_dir.join("declared-manifest.json");
    let read = || {
        std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    };
    wait_until("the manifest holds version 2", || {
        read().is_some_and(|v| v["version"] == 2)
    })
    .await;
    stop(hub, join).await;
    std::fs::remove_file(hub_dir(dir.path(), hub_id).join(DECLARED_FILE)).unwrap();
    edit(&file, read().unwrap());

    let recorded = Recorded::default();
    let (hub, join) = spawn(cfg, &recorded).await;
    let view = hub.declared_children().unwrap();
    let parked = view.parked;
    assert!(
        view.version < u64::MAX && view.children.iter().all(|c| c.spec.id.as_str().len() < 480),
        "the edited manifest was adopted: version {}",
        view.version
    );
    let error = recorded.0.lock().unwrap().iter().find_map(|e| match e {
        HookEvent::DeclaredParked { manifest_error, .. } => manifest_error.clone(),
        _ => None,
    });
    stop(hub, join).await;
    (parked, error)
}

fn write_json(file: &Path, doc: &serde_json::Value) {
    std::fs::write(file, serde_json::to_vec(doc).unwrap()).unwrap();
}

#[tokio::test]
async fn a_manifest_edited_to_the_largest_version_is_not_adopted() {
    let (parked, error) = boot_on_edited_manifest("mv-version", |file, mut doc| {
        doc["version"] = serde_json::json!(u64::MAX);
        write_json(file, &doc);
    })
    .await;
    assert!(parked, "a node without its list parks");
    let error = error.expect("the park names the manifest's failure");
    assert!(
        error.contains("invalid") && error.contains("version"),
        "{error}"
    );
}

#[tokio::test]
async fn a_manifest_with_a_child_no_api_accepts_is_not_adopted() {
    let (parked, error) = boot_on_edited_manifest("mv-child", |file, mut doc| {
        doc["children"][0]["spec"]["id"] = serde_json::json!("x".repeat(700));
        write_json(file, &doc);
    })
    .await;
    assert!(parked);
    let error = error.expect("the park names the manifest's failure");
    assert!(error.contains("invalid child id"), "{error}");
}

#[tokio::test]
async fn a_manifest_above_the_size_limit_is_refused_unread() {
    let (parked, error) = boot_on_edited_manifest("mv-size", |file, _| {
        let f = std::fs::File::create(file).unwrap();
        f.set_len(process_hub::manifest::MAX_MANIFEST_BYTES + 1)
            .unwrap();
    })
    .await;
    assert!(parked);
    let error = error.expect("the park names the manifest's failure");
    assert!(error.contains("more than"), "{error}");
}
