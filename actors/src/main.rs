//! The `process-hub` binary: run a node, the demo cluster, and the benchmarks.

mod bench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// process-hub: a distributed process hub on ractor.
#[derive(Parser, Debug)]
#[command(name = "process-hub", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a benchmark (results on stdout, progress on stderr).
    #[command(subcommand)]
    Bench(bench::Bench),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Bench(bench) => bench::run(bench),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
