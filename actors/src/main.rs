//! The `process-hub` binary: run a node, the demo cluster, the benchmarks, the admin CLI (`ctl`)
//! and, in a build with the `sim` feature, the deterministic simulator (`simulate`).

use clap::{Parser, Subcommand};
use process_hub_actors::baseline;
use process_hub_actors::cli::node_settings::LogFormat;

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
    /// One process of the bare-actor baseline of `bench cluster` and `bench scale` (internal).
    #[command(hide = true)]
    BareBaselineNode(baseline::BareArgs),
    /// The host process of `bench call` (internal).
    #[command(hide = true)]
    BenchCallHost(process_hub_actors::bench::call::CallHostArgs),
    /// Run one node of a hub (cluster listener, hub, admin HTTP API) until SIGTERM/SIGINT.
    Node(Box<process_hub_actors::cli::node_settings::NodeFlags>),
    /// Start a 3-node cluster on loopback, start children, SIGKILL a node, print the figures.
    Demo(process_hub_actors::demo::DemoArgs),
    /// Run the deterministic simulator over many seeds (or one, with its trace).
    #[cfg(feature = "sim")]
    Simulate(process_hub_actors::simulate::SimulateArgs),
    /// The deterministic simulator: not in this build (`bash scripts/simulate.sh` makes one
    /// with it).
    #[cfg(not(feature = "sim"))]
    #[command(disable_help_flag = true)]
    Simulate(NoSimulatorArgs),
    /// Operate a running node through its admin API (status, children, start, explain, watch,
    /// ...). Exit codes: 0 ok, 1 refused or failed, 2 usage, 3 unreachable, 4 unauthorized.
    Ctl(process_hub_actors::ctl::CtlArgs),
}

/// Exit status for a configuration the command refuses (as clap uses for bad flags).
const EXIT_USAGE: i32 = 2;

/// `process-hub simulate` in a build without the simulator: whatever flags it is given (`--help`
/// included), it says how to get a build that has one.
#[cfg(not(feature = "sim"))]
#[derive(clap::Args, Debug)]
struct NoSimulatorArgs {
    /// The flags a build with the simulator would take.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _flags: Vec<String>,
}

/// What `process-hub simulate` answers in a build without the `sim` feature. The simulator's
/// bug injection and tokio's test clock are test-only code, which the shipped binary leaves out.
#[cfg(not(feature = "sim"))]
const NO_SIMULATOR: &str =
    "error: this build of process-hub has no simulator (it is built without \
the `sim` feature, which keeps test-only code out of the shipped binary).
To simulate, run `bash scripts/simulate.sh` with the same flags from the repository (it builds \
process-hub with the simulator, then runs `process-hub simulate`), or build such a binary with \
`cargo build --release -p process_hub_actors --bin process-hub --features sim`.";

fn run_node(flags: process_hub_actors::cli::node_settings::NodeFlags) -> Result<(), String> {
    let settings = match flags.resolve() {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(EXIT_USAGE);
        }
    };
    // After the settings: the log format may come from the node's file.
    init_tracing_with("warn", settings.log_format);
    let runtime = runtime();
    let outcome = runtime
        .block_on(process_hub_actors::node::run(settings))
        .map_err(|e| e.to_string());
    // The hub has shut down. A blocking read the node cannot cancel (a remote manifest on a
    // hung mount) must not keep the process from exiting.
    runtime.shutdown_timeout(EXIT_GRACE);
    outcome
}

/// How long a node, once its hub has shut down, waits for blocking work still running.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

fn run_demo(args: process_hub_actors::demo::DemoArgs) -> Result<(), String> {
    let report = process_hub_actors::demo::run(&args).map_err(|e| e.to_string())?;
    if args.json {
        let json = serde_json::to_string(&report).map_err(|e| e.to_string())?;
        println!("{json}");
    } else {
        print!("{}", process_hub_actors::demo::render_table(&report));
    }
    Ok(())
}

/// Directives added to the operator's filter unless it names ractor:
/// - ractor instruments every actor's start and whole life with an INFO span
///   (`ractor::actor`); at `RUST_LOG=info` the subscriber then formats and keeps one span per
///   live child (~1.2 KB each, plus its CPU at every start);
/// - ractor_cluster warns of every session that ends (`Node session ... exited`), of a
///   connection reset by a restarting peer, of the loser of a simultaneous dial: ordinary
///   events, which the node's membership actor reports at the level they deserve (a peer
///   refused for its cookie, a node isolated). Its listener's warnings (a TLS handshake that
///   failed, a socket that could not be accepted) stay.
const RACTOR_QUIET: [&str; 3] = [
    "ractor::actor=warn",
    "ractor_cluster=error",
    "ractor_cluster::net::listener=warn",
];

fn init_tracing_with(default: &str, format: LogFormat) {
    use std::io::IsTerminal;
    let from_env = std::env::var("RUST_LOG").ok();
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    if !from_env.is_some_and(|f| f.contains("ractor")) {
        for directive in RACTOR_QUIET {
            if let Ok(directive) = directive.parse() {
                filter = filter.add_directive(directive);
            }
        }
    }
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => {
            process_hub_actors::node::status_lines_as_json(true);
            if let Ok(directive) =
                format!("{}=info", process_hub_actors::node::STATUS_TARGET).parse()
            {
                filter = filter.add_directive(directive);
            }
            builder.with_env_filter(filter).json().try_init()
        }
        // Colour codes only for a person at a terminal: a file or a pipe gets plain text.
        LogFormat::Text => builder
            .with_env_filter(filter)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
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
    let cli = Cli::parse();
    match cli.command {
        // A run's hubs log every fault they weather (at every level: a simulated disk that
        // fails is an error to them); the run reports what matters. RUST_LOG turns them on.
        Command::Simulate(_) => init_tracing_with("off", LogFormat::Text),
        // Once its settings are read (`run_node`).
        Command::Node(_) => {}
        _ => init_tracing_with("warn", LogFormat::Text),
    }
    let outcome: Result<(), String> = match cli.command {
        Command::Bench(cmd) => process_hub_actors::bench::run(cmd),
        Command::BaselineNode(args) => runtime()
            .block_on(baseline::run(args))
            .map_err(|e| e.to_string()),
        Command::BareBaselineNode(args) => runtime()
            .block_on(baseline::run_bare(args))
            .map_err(|e| e.to_string()),
        Command::BenchCallHost(args) => {
            runtime().block_on(process_hub_actors::bench::call::run_host(args))
        }
        Command::Node(flags) => run_node(*flags),
        Command::Demo(args) => run_demo(args),
        Command::Ctl(args) => std::process::exit(process_hub_actors::ctl::run(args)),
        #[cfg(feature = "sim")]
        Command::Simulate(args) => match process_hub_actors::simulate::run(&args) {
            Ok(true) => Ok(()),
            Ok(false) => std::process::exit(1),
            Err(e) => Err(e),
        },
        #[cfg(not(feature = "sim"))]
        Command::Simulate(_) => {
            process_hub_actors::node::say_error(NO_SIMULATOR);
            std::process::exit(EXIT_USAGE);
        }
    };
    if let Err(message) = outcome {
        process_hub_actors::node::say_error(&format!("error: {message}"));
        std::process::exit(1);
    }
}
