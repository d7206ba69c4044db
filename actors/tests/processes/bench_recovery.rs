//! `process-hub bench recovery --json` keeps its contract on a small cluster: one JSON object
//! on stdout, nothing lost or resurrected, and the warm-up children gone before the measured
//! declare (they would otherwise show up running after the outage).

use crate::common;

#[test]
fn bench_recovery_warms_up_then_reports_a_clean_recovery() {
    let (report, stderr) = common::report_of([
        "bench",
        "recovery",
        "--json",
        "--nodes",
        "2",
        "--children",
        "40",
        "--batch",
        "10",
        "--warmup",
        "30",
        "--baseline-children",
        "10",
        "--reconcile-grace-ms",
        "500",
    ]);
    assert!(
        stderr.contains("warm-up: 30 plain children started and stopped"),
        "{stderr}"
    );
    assert_eq!(report["warmup_children"], 30, "{report}");
    assert_eq!(report["baseline_warmup_children"], 30, "{report}");
    assert_eq!(report["baseline_children"], 10, "{report}");
    for field in ["lost", "resurrected", "duplicates"] {
        assert_eq!(report[field], 0, "{field}: {report}");
    }
    assert_eq!(report["stopped"], 4, "{report}");
    // Only the 36 declared children run after the outage: no warm-up child came back.
    let running: u64 = report["running_per_node"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(running, 36, "{report}");
    for field in ["declare_per_s", "baseline_declare_per_s", "declare_ratio"] {
        assert!(report[field].as_f64().unwrap() > 0.0, "{field}: {report}");
    }
}
