//! `process-hub ctl`: the admin API of a running node from a shell.
//!
//! Every command is one or a few requests to one node's admin API (`--admin URL`), printed as
//! a human table by default or, with `--json`, as the API's own JSON for scripts. The exit code
//! says how it went ([`outcome`]): 0 done, 1 refused or failed by the node, 2 usage, 3 node
//! unreachable, 4 unauthorized.
//!
//! - [`client`]: the HTTP requests and what their answers mean;
//! - [`read`]: `status`, `members`, `children`, `declared`, `explain`;
//! - [`write`](mod@write): `start`, `stop`, `call`, `clear-declared`;
//! - [`batch`]: `start --file`, many children in batches with progress;
//! - [`watch`]: `watch`, the node's events as they happen;
//! - [`table`]: the human tables.

pub mod batch;
pub mod client;
pub mod outcome;
pub mod read;
pub mod table;
pub mod watch;
pub mod write;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use client::CtlClient;
use outcome::{CtlError, EXIT_OK};

/// `process-hub ctl`'s flags.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// The node's admin API, `http://HOST:PORT` (as its `--admin` flag, e.g.
    /// `http://127.0.0.1:9100`).
    #[arg(long, value_name = "URL")]
    pub admin: String,
    /// A file holding the admin API's bearer token (the node's `--admin-token-file`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Print the API's JSON instead of tables (one JSON value; one per line for `watch`).
    #[arg(long)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: CtlCommand,
}

/// The ctl commands.
#[derive(Subcommand, Debug)]
pub enum CtlCommand {
    /// The node's health, its members and the counts of its registry copy.
    Status,
    /// The members with their state (up, leaving, down) and children.
    Members,
    /// The children of the node's registry copy.
    Children {
        /// Only children running on this node (`name@host`).
        #[arg(long, value_name = "NODE")]
        node: Option<String>,
        /// Only children whose metadata `tag` is this.
        #[arg(long, value_name = "TAG")]
        tag: Option<String>,
    },
    /// Start one child (`start ID KIND`), or many from a file (`start --file SPECS.jsonl`).
    Start(write::StartArgs),
    /// Stop a child wherever it runs.
    Stop {
        /// The child's id.
        id: String,
    },
    /// Send a JSON command to a child wherever it runs and print its answer.
    Call {
        /// The child's id.
        id: String,
        /// The command, e.g. '{"kind":"counter","command":{"op":"get"}}'.
        command: String,
        /// How long to wait for the answer, in ms.
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
    },
    /// The node's copy of the declared list.
    Declared,
    /// Empty the declared list (the way out of a parked list; every durable child stops).
    ClearDeclared,
    /// Where a child runs, where it belongs, why, and its recent events.
    Explain {
        /// The child's id.
        id: String,
    },
    /// Print the node's events as they happen, until interrupted.
    Watch,
}

/// Runs a ctl command and returns the process's exit code.
pub fn run(args: CtlArgs) -> i32 {
    let json = args.json;
    match execute(args) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            if json {
                if let Some(body) = e.body() {
                    println!("{}", body.trim());
                }
            }
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn execute(args: CtlArgs) -> Result<(), CtlError> {
    let token = args
        .token_file
        .as_deref()
        .map(client::read_token)
        .transpose()?;
    let client = CtlClient::new(&args.admin, token)?;
    let json = args.json;
    match args.command {
        CtlCommand::Status => read::status(&client, json),
        CtlCommand::Members => read::members(&client, json),
        CtlCommand::Children { node, tag } => {
            read::children(&client, json, node.as_deref(), tag.as_deref())
        }
        CtlCommand::Start(start) => match start.file.clone() {
            Some(file) => batch::start_file(&client, json, &file, start.batch),
            None => write::start_one(&client, json, start),
        },
        CtlCommand::Stop { id } => write::stop(&client, json, &id),
        CtlCommand::Call {
            id,
            command,
            timeout_ms,
        } => write::call(&client, json, &id, &command, timeout_ms),
        CtlCommand::Declared => read::declared(&client, json),
        CtlCommand::ClearDeclared => write::clear_declared(&client, json),
        CtlCommand::Explain { id } => read::explain(&client, json, &id),
        CtlCommand::Watch => watch::watch(&client, json),
    }
}

/// Prints `value` as one line of JSON (what `--json` prints).
pub(crate) fn print_json(value: &serde_json::Value) {
    println!("{value}");
}
