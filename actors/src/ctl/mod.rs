//! `process-hub ctl`: the admin API of a running node from a shell.
//!
//! Every command is one or a few requests to one node's admin API (`--admin URL`), printed as
//! a human table by default or, with `--json`, as the API's own JSON for scripts. The exit code
//! says how it went ([`outcome`]): 0 done, 1 refused or failed by the node, 2 usage, 3 node
//! unreachable, 4 unauthorized.
//!
//! - [`crate::admin_client`]: the HTTP requests (the one admin API client, shared with the
//!   harness); [`connect`] gives ctl's limits, [`outcome`] what the answers mean;
//! - [`read`]: `status`, `members`, `children`, `declared`, `explain`;
//! - [`write`](mod@write): `start`, `stop`, `call`, `clear-declared`;
//! - [`batch`]: `start --file` and `stop ID...` / `stop --file`, many children in batches
//!   with progress;
//! - [`watch`]: `watch`, the node's events as they happen;
//! - [`table`]: the human tables.

pub mod batch;
pub mod outcome;
pub mod read;
pub mod table;
pub mod watch;
pub mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::admin_client::{AdminClient, ClientLimits};
use outcome::{CtlError, EXIT_OK};

/// ctl's bounds on a request: a start of a large batch waits for every child (150 s); a node
/// that does not accept the connection within 5 s is unreachable; a listing page of 10,000
/// children is a few MB (256 MiB read at most).
const LIMITS: ClientLimits = ClientLimits {
    request_timeout: Duration::from_secs(150),
    connect_timeout: Some(Duration::from_secs(5)),
    max_body: 256 * 1024 * 1024,
};

/// The client of the admin API at `url` (`http://HOST:PORT`, or a bare `HOST:PORT`) with
/// ctl's limits, presenting `token`; a URL it cannot use is a usage error.
pub fn connect(url: &str, token: Option<String>) -> Result<AdminClient, CtlError> {
    let client = AdminClient::from_url(url, LIMITS).map_err(|e| CtlError::Usage(e.0))?;
    Ok(match token {
        Some(token) => client.with_token(token),
        None => client,
    })
}

/// Reads the bearer token from `path` (surrounding whitespace dropped).
pub fn read_token(path: &Path) -> Result<String, CtlError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CtlError::Usage(format!("--token-file {}: {e}", path.display())))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(CtlError::Usage(format!(
            "--token-file {}: the file is empty",
            path.display()
        )));
    }
    Ok(token.to_owned())
}

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
    /// Stop a child wherever it runs (`stop ID`), or many in batch stops (`stop ID ID...`,
    /// `stop --file IDS.txt`).
    Stop(write::StopArgs),
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
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    let client = connect(&args.admin, token)?;
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
        CtlCommand::Stop(stop) => match (stop.file.as_deref(), stop.ids.as_slice()) {
            (None, [id]) => write::stop(&client, json, id),
            (Some(file), _) => batch::stop_file(&client, json, file, stop.batch),
            (None, ids) => batch::stop_ids(&client, json, ids, stop.batch),
        },
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
