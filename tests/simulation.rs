//! The deterministic simulator, run from the tests.

use process_hub::sim::{run_seed, SimOptions};

#[test]
fn scratch_one_seed() {
    let seed: u64 = std::env::var("SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let options = SimOptions {
        keep_trace: std::env::var("SIM_TRACE").is_ok(),
        ..SimOptions::default()
    };
    let report = run_seed(seed, &options);
    for line in &report.trace {
        println!("{line}");
    }
    println!(
        "seed {} steps {} checks {} virtual {} ms wall {} ms hash {:x} lines {} failure {:?}",
        report.seed,
        report.steps,
        report.invariant_checks,
        report.virtual_ms,
        report.wall_ms,
        report.trace_hash,
        report.trace_lines,
        report.failure
    );
}
