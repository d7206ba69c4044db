//! The deterministic simulator from the library's side: a seed replays the same run in one
//! process (pids differ from run to run, the trace does not), and a few seeds keep every
//! invariant. The sweeps and the injected bugs run through `process-hub simulate`
//! (`actors/tests/simulate.rs`, `scripts/simulate.sh`).

use process_hub::sim::{run_seed, SimOptions};

#[test]
fn a_seed_replays_the_same_run_in_one_process() {
    let options = SimOptions {
        keep_trace: true,
        steps: 25,
        ..SimOptions::default()
    };
    let first = run_seed(21, &options);
    let second = run_seed(21, &options);
    assert!(first.failure.is_none(), "{:?}", first.failure);
    assert!(
        first.trace_lines > 100,
        "the run did things: {}",
        first.trace_lines
    );
    assert_eq!(first.trace, second.trace);
    assert_eq!(first.trace_hash, second.trace_hash);
    assert_eq!(first.virtual_ms, second.virtual_ms);
    assert_ne!(run_seed(22, &options).trace_hash, first.trace_hash);
}

#[test]
fn a_few_seeds_keep_every_invariant() {
    for seed in [101, 202, 303] {
        let report = run_seed(seed, &SimOptions::default());
        assert!(
            report.failure.is_none(),
            "seed {seed}: {:?} (replay: bash scripts/simulate.sh --seed {seed} --trace)",
            report.failure
        );
        assert!(report.requests > 10);
    }
}
