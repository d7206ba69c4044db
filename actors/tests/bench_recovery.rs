//! `process-hub bench recovery --json` keeps its contract on a small cluster: one JSON object
//! on stdout, nothing lost or resurrected, and the warm-up children gone before the measured
//! declare (they would otherwise show up running after the outage).

use std::process::Command;

#[test]
fn bench_recovery_warms_up_then_reports_a_clean_recovery() {
    let output = Command::new(env!("CARGO_BIN_EXE_process-hub"))
        .args(["bench", "recovery", "--json", "--nodes", "2"])
        .args(["--children", "40", "--batch", "10", "--warmup", "30"])
        .args(["--baseline-children", "10", "--reconcile-grace-ms", "500"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warm-up: 30 plain children started and stopped"),
        "{stderr}"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
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
