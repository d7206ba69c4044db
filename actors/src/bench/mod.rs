//! `process-hub bench ...`: benchmarks that print one JSON object on stdout (with `--json`),
//! progress on stderr, each measured against a baseline in the same run.

mod storage;

use clap::Subcommand;

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Registry storage: group commit against one fsync per write, and memory point reads.
    Storage(storage::StorageArgs),
}

/// Runs a benchmark; the error is for the user.
pub fn run(bench: Bench) -> Result<(), String> {
    match bench {
        Bench::Storage(args) => storage::run(&args),
    }
}
