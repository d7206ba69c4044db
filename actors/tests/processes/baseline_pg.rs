//! The plain-ractor baseline of `bench cluster` really converges: three processes, each
//! spawning its share, all see every actor through ractor_cluster process groups.

use process_hub_actors::baseline;

#[test]
fn three_baseline_processes_see_every_actor_through_pg() {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_process-hub"));
    // `measure` returns only after every process printed CONVERGED, i.e. saw all 300 actors.
    let report = baseline::measure(binary, 3, 300).expect("every baseline process converges");
    eprintln!("{report:?}");
}
