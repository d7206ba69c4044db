//! The `process-hub` binary: run a node, the demo cluster, and the benchmarks.

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
    /// Benchmarks (JSON on stdout, progress on stderr).
    #[command(subcommand)]
    Bench(process_hub_actors::bench::BenchCommand),
}

fn main() {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Bench(cmd) => process_hub_actors::bench::run(cmd),
    };
    if let Err(e) = outcome {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
