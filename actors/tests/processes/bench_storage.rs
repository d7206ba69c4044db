//! `process-hub bench storage --json` keeps its contract: one JSON object on stdout with the
//! documented fields, and every acknowledged write verified on disk in both modes.

use crate::common;

#[test]
fn bench_storage_prints_one_json_object_with_verified_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = common::report_of([
        "bench",
        "storage",
        "--json",
        "--ops",
        "96",
        "--writers",
        "8",
        "--rows",
        "1000",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    for mode in ["group_commit", "per_op_sync"] {
        assert_eq!(report[mode]["verified_rows"], 96, "{mode}: {report}");
        assert!(
            report[mode]["ops_per_s"].as_f64().unwrap() > 0.0,
            "{report}"
        );
    }
    for field in ["p50_us", "p99_us"] {
        assert!(report["group_commit"][field].is_number(), "{report}");
    }
    assert_eq!(
        report["per_op_sync"]["fsync_commits"], 96,
        "one commit per write"
    );
    assert_eq!(report["per_op_sync"]["writes_per_commit"], 1.0, "{report}");
    let shared = report["group_commit"]["writes_per_commit"]
        .as_f64()
        .unwrap();
    let commits = report["group_commit"]["fsync_commits"].as_f64().unwrap();
    assert!(
        shared >= 1.0 && (shared - 96.0 / commits).abs() < 0.01,
        "{report}"
    );
    assert!(report["ratio"].as_f64().unwrap() > 0.0);
    assert!(report["lookup_ns_p50"].as_f64().unwrap() > 0.0);
    assert_eq!(report["writers"], 8);
    // The stores were made in a temporary directory inside --dir and cleaned up.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
