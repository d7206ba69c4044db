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
enum Command {}

fn main() {
    let cli = Cli::parse();
    match cli.command {}
}
