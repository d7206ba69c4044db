//! The commands that change the hub: `start ID KIND`, `stop`, `call`, `clear-declared`.
//!
//! Every JSON the operator types (`--args`, a command) is parsed before anything is sent, so a
//! typo is a usage error (exit 2) that started nothing.

use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Value};

use super::outcome::CtlError;
use super::print_json;
use super::table::cell;
use crate::admin_client::{encode_segment, AdminClient};

/// `ctl start`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct StartArgs {
    /// The child's id (with KIND; not with --file).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub id: Option<String>,
    /// A kind registered on every node (`counter`, `kv_shard`, `ticker`, ...).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub kind: Option<String>,
    /// The kind's arguments as JSON, e.g. '{"start": 5}'.
    #[arg(long, value_name = "JSON", conflicts_with = "file")]
    pub args: Option<String>,
    /// Add the child to the declared list (needs auto-recovery on the nodes).
    #[arg(long, conflicts_with = "file")]
    pub durable: bool,
    /// The metadata `tag` of the child.
    #[arg(long, value_name = "TAG", conflicts_with = "file")]
    pub tag: Option<String>,
    /// Start the children of a JSON-lines file instead: one spec per line, as
    /// `POST /v1/children` takes it (`{"id", "kind", "args"?, "restart"?, "metadata"?,
    /// "durable"?}`); blank lines and lines starting with `#` are skipped.
    #[arg(long, value_name = "SPECS.jsonl")]
    pub file: Option<PathBuf>,
    /// With --file: children per request.
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub batch: u64,
}

/// `ctl stop`'s arguments: one id is one `DELETE` (an unknown id is exit 1); several ids, or
/// a file of them, go in batch stops (`POST /v1/children/stop`).
#[derive(Args, Debug, Clone)]
pub struct StopArgs {
    /// The children's ids: one is stopped with `DELETE /v1/children/{id}`, several in batch
    /// stops of --batch (each id once).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub ids: Vec<String>,
    /// Stop the children of a file instead: one id per line (surrounding whitespace dropped;
    /// blank lines and lines starting with `#` are skipped), in batch stops.
    #[arg(long, value_name = "IDS.txt")]
    pub file: Option<PathBuf>,
    /// Ids per batch stop request (the node takes up to 10,000).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub batch: u64,
}

/// Parses JSON the operator typed, naming the flag when it does not parse.
pub fn parse_json(what: &str, text: &str) -> Result<Value, CtlError> {
    serde_json::from_str(text).map_err(|e| CtlError::Usage(format!("{what} is not JSON: {e}")))
}

/// `start ID KIND`: one spec (not an array), so a child that does not start is the
/// request's error (exit 1).
pub fn start_one(client: &AdminClient, json: bool, args: StartArgs) -> Result<(), CtlError> {
    let (Some(id), Some(kind)) = (args.id, args.kind) else {
        return Err(CtlError::Usage("start needs ID and KIND, or --file".into()));
    };
    let mut spec = json!({ "id": id, "kind": kind, "durable": args.durable });
    if let Some(text) = &args.args {
        spec["args"] = parse_json("--args", text)?;
    }
    if let Some(tag) = &args.tag {
        spec["metadata"] = json!({ "tag": tag });
    }
    let answer = client.post("/v1/children", &spec)?;
    if json {
        print_json(&answer);
        return Ok(());
    }
    for started in answer["started"].as_array().into_iter().flatten() {
        let nodes: Vec<String> = started["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| format!("{} (pid {})", cell(&n["node"]), cell(&n["pid"])))
            .collect();
        println!("started {} on {}", cell(&started["id"]), nodes.join(", "));
    }
    print_pending(&answer, "start");
    Ok(())
}

/// The `pending` children of an answer (202): decided, not confirmed on the nodes named.
fn print_pending(answer: &Value, what: &str) {
    print_pending_list(
        answer["pending"].as_array().map_or(&[], Vec::as_slice),
        what,
    );
}

/// Each of `pending` (the `pending` entries of answers): decided, not confirmed on the nodes
/// named.
pub(super) fn print_pending_list(pending: &[Value], what: &str) {
    for pending in pending {
        let nodes: Vec<String> = pending["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(cell)
            .collect();
        println!(
            "{what} of {} pending on {}: {} ({})",
            cell(&pending["id"]),
            nodes.join(", "),
            cell(&pending["reason"]),
            cell(&pending["code"])
        );
    }
}

/// `stop ID`: `DELETE /v1/children/{id}` (404 for an unknown id: exit 1).
pub fn stop(client: &AdminClient, json: bool, id: &str) -> Result<(), CtlError> {
    let answer = client.delete(&format!("/v1/children/{}", encode_segment(id)))?;
    if json {
        print_json(&answer);
        return Ok(());
    }
    for stopped in answer["stopped"].as_array().into_iter().flatten() {
        let nodes: Vec<String> = stopped["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(cell)
            .collect();
        println!("stopped {} on {}", cell(&stopped["id"]), nodes.join(", "));
    }
    print_pending(&answer, "stop");
    let errors = answer["errors"].as_array().cloned().unwrap_or_default();
    for error in &errors {
        eprintln!(
            "not stopped on {}: {} ({})",
            cell(&error["node"]),
            cell(&error["reason"]),
            cell(&error["code"])
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(CtlError::PartlyFailed {
            failed: errors.len(),
            total: errors.len() + answer["stopped"].as_array().map_or(0, Vec::len),
        })
    }
}

/// `call ID JSON`: `POST /v1/children/{id}/call`, printing the child's answer.
pub fn call(
    client: &AdminClient,
    json: bool,
    id: &str,
    command: &str,
    timeout_ms: Option<u64>,
) -> Result<(), CtlError> {
    let command = parse_json("the command", command)?;
    let mut path = format!("/v1/children/{}/call", encode_segment(id));
    if let Some(ms) = timeout_ms {
        path.push_str(&format!("?timeout_ms={ms}"));
    }
    let answer = client.post(&path, &command)?;
    if json {
        print_json(&answer);
    } else {
        println!("{}", answer["answer"]);
    }
    Ok(())
}

/// `clear-declared`: `POST /v1/declared/clear`.
pub fn clear_declared(client: &AdminClient, json: bool) -> Result<(), CtlError> {
    let answer = client.post_empty("/v1/declared/clear")?;
    if json {
        print_json(&answer);
    } else {
        println!(
            "declared list cleared (version {}): the next round stops every durable child",
            cell(&answer["version"])
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_that_does_not_parse_is_a_usage_error() {
        let e = parse_json("--args", "{start: 5}").unwrap_err();
        assert_eq!(e.exit_code(), super::super::outcome::EXIT_USAGE);
        assert!(e.to_string().starts_with("--args is not JSON"), "{e}");
        assert_eq!(parse_json("--args", r#"{"start": 5}"#).unwrap()["start"], 5);
    }
}
