//! The `process-hub` binary: run a node, the demo cluster, and the benchmarks.

use clap::{Parser, Subcommand};
use process_hub_actors::baseline;

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
    /// One process of the plain-ractor baseline of `bench cluster` (internal).
    #[command(hide = true)]
    BaselineNode(baseline::BaselineArgs),
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    }
}

fn main() {
    init_tracing();
    let cli = Cli::parse();
    let outcome: Result<(), String> = match cli.command {
        Command::Bench(cmd) => process_hub_actors::bench::run(cmd),
        Command::BaselineNode(args) => runtime()
            .block_on(baseline::run(args))
            .map_err(|e| e.to_string()),
    };
    if let Err(message) = outcome {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}
