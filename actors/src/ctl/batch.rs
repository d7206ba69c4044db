//! `start --file SPECS.jsonl`: many children from a JSON-lines file, in batches; and
//! `stop ID ID...` / `stop --file IDS.txt`: many children stopped in batch stops.
//!
//! The whole file is read and every line checked before the first request, as strictly as the
//! admin API reads a spec (`process_hub::admin::spec_from_text`: no unknown field, no field
//! given twice, `id` and `kind` present, each field of its type), and each kind against the
//! node's (`GET /v1/kinds`), so a bad line is a usage error (exit 2, naming the line and the
//! field) that started nothing. A node that does not list its kinds (404: an older node)
//! checks them itself, refusing a request naming an unknown kind whole. The specs then go out
//! in requests of `--batch` children (the admin API takes up to 10,000 per request; smaller
//! batches show progress and keep each answer small). Progress goes to stderr: a bar when
//! stderr is a terminal, a plain line per batch otherwise (logs and CI keep them readable).
//! Children that did not start are listed on stderr and make the exit code 1.
//!
//! A batch stop checks every id first (a usage error naming the argument or the line, nothing
//! sent), keeps each once, and sends them in `POST /v1/children/stop` requests of `--batch`
//! ids (1,000 by default), with the same progress. The answers are summed: stdout says how
//! many stopped (`--json`: the API's lists and counts over the whole run), `pending` stops are
//! listed (decided, not confirmed: exit 0), and children not stopped (an unknown id among
//! them, `not_found`) are listed on stderr and make the exit code 1.

use std::io::IsTerminal;
use std::path::Path;

use process_hub::admin::{check_kind, check_values, spec_from_text, StartSpec};
use serde_json::{json, Value};

use super::outcome::CtlError;
use super::print_json;
use super::table::cell;
use crate::admin_client::AdminClient;

/// The most failures listed one by one on stderr (the count covers the rest).
const LISTED_FAILURES: usize = 20;

/// One spec of a file: where it is (`source:4`), as read (what is sent) and as checked.
#[derive(Debug, Clone)]
pub struct FileSpec {
    /// `source:line`.
    pub at: String,
    /// The line's JSON, sent as is.
    pub json: Value,
    /// The spec as the admin API reads it.
    pub spec: StartSpec,
}

/// The specs of a JSON-lines text: one child spec per line, read as the admin API reads one
/// (every field known and given once, `id` and `kind` present, each of its type). An error
/// names the line (`source:4`) and the field.
pub fn parse_specs(text: &str, source: &str) -> Result<Vec<FileSpec>, CtlError> {
    let mut specs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{source}:{}", i + 1);
        let checked = spec_from_text(line.as_bytes(), &at).and_then(|(json, spec)| {
            check_values(std::slice::from_ref(&spec), true).map_err(|mut e| {
                // `check_values` names a lone spec `the child spec`: name the line.
                e.message = e.message.replace("the child spec", &at);
                e
            })?;
            Ok((json, spec))
        });
        match checked {
            Ok((json, spec)) => specs.push(FileSpec { at, json, spec }),
            Err(e) => return Err(CtlError::Usage(e.message)),
        }
    }
    if specs.is_empty() {
        return Err(CtlError::Usage(format!("{source}: no specs in the file")));
    }
    Ok(specs)
}

/// Refuses the first spec whose kind is not in `known`, naming its line, id and kind and
/// listing the known kinds.
pub fn check_file_kinds(specs: &[FileSpec], known: &[String]) -> Result<(), CtlError> {
    specs
        .iter()
        .try_for_each(|s| check_kind(&s.spec, &s.at, known))
        .map_err(|e| CtlError::Usage(e.message))
}

/// The kinds the node can start (`GET /v1/kinds`), or `None` when it does not say (404: a
/// node older than that path).
fn node_kinds(client: &AdminClient) -> Result<Option<Vec<String>>, CtlError> {
    let answer = match client.get("/v1/kinds").map_err(CtlError::from) {
        Ok(answer) => answer,
        Err(CtlError::Refused { status: 404, .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let kinds = answer["kinds"]
        .as_array()
        .and_then(|kinds| {
            kinds
                .iter()
                .map(|k| k.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| CtlError::Unreachable {
            url: client.base().to_owned(),
            message: format!("GET /v1/kinds answered {answer}, not {{\"kinds\": [names]}}"),
        })?;
    Ok(Some(kinds))
}

/// How a batch run reports its progress.
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines { total: usize },
}

impl Progress {
    fn new(total: usize) -> Self {
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} children ({per_sec}) {msg}",
            ) {
                bar.set_style(style);
            }
            Progress::Bar(bar)
        } else {
            Progress::Lines { total }
        }
    }

    fn advance(&self, done: usize, by: usize, failed: usize) {
        match self {
            Progress::Bar(bar) => {
                bar.inc(by as u64);
                if failed > 0 {
                    bar.set_message(format!("{failed} failed"));
                }
            }
            Progress::Lines { total } => {
                eprintln!("progress: {done}/{total} children sent, {failed} failed")
            }
        }
    }

    fn finish(self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// `start --file`: every spec of `path`, `batch` per request.
pub fn start_file(
    client: &AdminClient,
    json: bool,
    path: &Path,
    batch: u64,
) -> Result<(), CtlError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CtlError::Usage(format!("--file {}: {e}", path.display())))?;
    let specs = parse_specs(&text, &path.display().to_string())?;
    if let Some(known) = node_kinds(client)? {
        check_file_kinds(&specs, &known)?;
    }
    let specs: Vec<Value> = specs.into_iter().map(|s| s.json).collect();
    let total = specs.len();
    let progress = Progress::new(total);
    let mut started: Vec<Value> = Vec::new();
    let mut errors: Vec<Value> = Vec::new();
    let mut done = 0;
    for chunk in specs.chunks(batch.max(1) as usize) {
        let answer = match client.post("/v1/children", &Value::Array(chunk.to_vec())) {
            Ok(answer) => answer,
            Err(e) => {
                progress.finish();
                if done > 0 {
                    eprintln!("{done} of {total} children were sent before the failure");
                }
                return Err(e.into());
            }
        };
        started.extend(answer["started"].as_array().cloned().unwrap_or_default());
        errors.extend(answer["errors"].as_array().cloned().unwrap_or_default());
        done += chunk.len();
        progress.advance(done, chunk.len(), errors.len());
    }
    progress.finish();
    if json {
        print_json(&json!({ "started": started, "errors": errors }));
    } else {
        println!("started {} of {total} children", started.len());
    }
    failures("not started", &errors, total)
}

/// The ids of a stop, each checked as a child id (a usage error naming where it is: `at(i)`
/// for the `i`-th), each kept once in order of first appearance; answers the ids given more
/// than once too.
fn checked_ids(
    given: impl IntoIterator<Item = (String, String)>,
) -> Result<(Vec<String>, Vec<String>), CtlError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut ids = Vec::new();
    let mut duplicates = Vec::new();
    for (at, id) in given {
        if let Err(e) = process_hub::model::ChildId::parse(id.clone()) {
            return Err(CtlError::Usage(format!("{at}: {e}")));
        }
        if seen.insert(id.clone()) {
            ids.push(id);
        } else if !duplicates.contains(&id) {
            duplicates.push(id);
        }
    }
    if ids.is_empty() {
        return Err(CtlError::Usage("no ids to stop".into()));
    }
    Ok((ids, duplicates))
}

/// The ids of an ids file's text: one per line, surrounding whitespace dropped, blank lines
/// and `#` comments skipped, each checked (an error names `source:line`) and kept once.
pub fn parse_ids(text: &str, source: &str) -> Result<(Vec<String>, Vec<String>), CtlError> {
    let given = text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.trim();
        (!line.is_empty() && !line.starts_with('#'))
            .then(|| (format!("{source}:{}", i + 1), line.to_owned()))
    });
    checked_ids(given).map_err(|e| match e {
        CtlError::Usage(m) if m == "no ids to stop" => {
            CtlError::Usage(format!("{source}: no ids in the file"))
        }
        other => other,
    })
}

/// `stop ID ID...`: the ids in batch stops of `batch`.
pub fn stop_ids(
    client: &AdminClient,
    json: bool,
    ids: &[String],
    batch: u64,
) -> Result<(), CtlError> {
    let (ids, duplicates) = checked_ids(
        ids.iter()
            .enumerate()
            .map(|(i, id)| (format!("ID {} ({id:?})", i + 1), id.clone())),
    )?;
    stop_in_batches(client, json, &ids, duplicates, batch)
}

/// `stop --file IDS.txt`: every id of the file in batch stops of `batch`.
pub fn stop_file(
    client: &AdminClient,
    json: bool,
    path: &Path,
    batch: u64,
) -> Result<(), CtlError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CtlError::Usage(format!("--file {}: {e}", path.display())))?;
    let (ids, duplicates) = parse_ids(&text, &path.display().to_string())?;
    stop_in_batches(client, json, &ids, duplicates, batch)
}

/// Stops `ids` (distinct, checked) with `POST /v1/children/stop`, `batch` per request, and
/// reports like the API: stopped, pending, errors (exit 1 when any), with the counts summed.
fn stop_in_batches(
    client: &AdminClient,
    json: bool,
    ids: &[String],
    duplicates: Vec<String>,
    batch: u64,
) -> Result<(), CtlError> {
    let total = ids.len();
    let progress = Progress::new(total);
    let (mut stopped, mut errors, mut pending) = (Vec::new(), Vec::new(), Vec::new());
    let mut done = 0;
    for chunk in ids.chunks(batch.max(1) as usize) {
        let answer = match client.post("/v1/children/stop", &json!({ "ids": chunk })) {
            Ok(answer) => answer,
            Err(e) => {
                progress.finish();
                if done > 0 {
                    eprintln!("{done} of {total} ids were sent before the failure");
                }
                return Err(e.into());
            }
        };
        let list = |name: &str| answer[name].as_array().cloned().unwrap_or_default();
        stopped.extend(list("stopped"));
        errors.extend(list("errors"));
        pending.extend(list("pending"));
        done += chunk.len();
        progress.advance(done, chunk.len(), errors.len());
    }
    progress.finish();
    let not_found = errors.iter().filter(|e| e["code"] == "not_found").count();
    if json {
        print_json(&json!({
            "stopped": stopped,
            "errors": errors,
            "pending": pending,
            "duplicates": duplicates,
            "counts": {
                "requested": total + duplicates.len(),
                "distinct": total,
                "stopped": stopped.len(),
                "pending": pending.len(),
                "errors": errors.len(),
                "not_found": not_found,
            },
        }));
    } else {
        println!("stopped {} of {total} children", stopped.len());
        super::write::print_pending_list(&pending, "stop");
        if !duplicates.is_empty() {
            eprintln!(
                "given more than once, stopped once: {}",
                duplicates.join(", ")
            );
        }
    }
    failures("not stopped", &errors, total)
}

/// Lists the first failures of a batch on stderr (`what`: "not started", "not stopped") and
/// answers the batch's outcome: `PartlyFailed` when any child failed.
fn failures(what: &str, errors: &[Value], total: usize) -> Result<(), CtlError> {
    for error in errors.iter().take(LISTED_FAILURES) {
        eprintln!(
            "{what}: {} on {}: {} ({})",
            cell(&error["id"]),
            cell(&error["node"]),
            cell(&error["reason"]),
            cell(&error["code"])
        );
    }
    if errors.len() > LISTED_FAILURES {
        eprintln!("... and {} more", errors.len() - LISTED_FAILURES);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(CtlError::PartlyFailed {
            failed: errors.len(),
            total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_read_line_by_line_skipping_blanks_and_comments() {
        let text = "# two counters\n{\"id\":\"a\",\"kind\":\"counter\"}\n\n{\"id\":\"b\",\"kind\":\"counter\",\"args\":{\"start\":2}}\n";
        let specs = parse_specs(text, "f").unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[1].json["args"]["start"], 2);
        assert_eq!(
            (specs[1].at.as_str(), specs[1].spec.id.as_str()),
            ("f:4", "b")
        );
    }

    #[test]
    fn a_bad_line_is_a_usage_error_naming_it() {
        let e = parse_specs("{\"id\":\"a\",\"kind\":\"counter\"}\n{oops\n", "f.jsonl").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("f.jsonl:2:"), "{e}");
        let e = parse_specs("{\"id\":\"a\"}\n", "f").unwrap_err();
        assert_eq!(e.to_string(), r#"missing field "kind" in f:1 (id "a")"#);
        let e = parse_specs(
            "{\"id\":\"a\",\"kind\":\"counter\"}\n\n{\"id\":\"x\",\"kind\":\"counter\",\"durabel\":true}\n",
            "f.jsonl",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with(r#"unknown field "durabel" in f.jsonl:3 (id "x")"#),
            "{e}"
        );
        let e = parse_specs("{\"id\":\"\",\"kind\":\"counter\"}\n", "f").unwrap_err();
        assert!(e.to_string().starts_with(r#"field "id" in f:1"#), "{e}");
        assert!(parse_specs("\n# nothing\n", "f").is_err());
    }

    #[test]
    fn a_field_given_twice_is_a_usage_error_naming_it() {
        let e = parse_specs(
            "{\"id\":\"a\",\"kind\":\"counter\"}\n{\"id\":\"b\",\"kind\":\"counter\",\"durable\":true,\"durable\":false}\n",
            "f.jsonl",
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .starts_with(r#"duplicate field "durable" in f.jsonl:2 (id "b")"#),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_kind_names_its_line_id_and_the_known_kinds() {
        let specs = parse_specs(
            "{\"id\":\"a\",\"kind\":\"counter\"}\n{\"id\":\"b\",\"kind\":\"cuonter\"}\n",
            "f.jsonl",
        )
        .unwrap();
        let known = vec!["counter".to_owned(), "ticker".to_owned()];
        let e = check_file_kinds(&specs, &known).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            r#"unknown kind "cuonter" in f.jsonl:2 (id "b"); known kinds: counter, ticker"#
        );
        assert!(check_file_kinds(&specs[..1], &known).is_ok());
    }

    /// An admin API stand-in on a local port: answers each request, in order, with the next
    /// of `answers` (status, JSON body) and reports `METHOD path` of each on the channel.
    fn canned_node(
        answers: Vec<(u16, &'static str)>,
    ) -> (String, std::sync::mpsc::Receiver<String>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for (status, body) in answers {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let mut reader = BufReader::new(stream);
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let mut length = 0;
                loop {
                    let mut header = String::new();
                    let _ = reader.read_line(&mut header);
                    let header = header.trim();
                    if header.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':') {
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut request_body = vec![0; length];
                let _ = reader.read_exact(&mut request_body);
                let words: Vec<&str> = request_line.split_whitespace().take(2).collect();
                let _ = tx.send(words.join(" "));
                let mut stream = reader.into_inner();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (url, rx)
    }

    #[test]
    fn a_node_that_does_not_list_its_kinds_gets_the_file_as_before() {
        // An older node: `GET /v1/kinds` is an unknown path, the start goes ahead.
        let (url, requests) = canned_node(vec![
            (
                404,
                r#"{"error":"not_found","message":"no route /v1/kinds"}"#,
            ),
            (
                200,
                r#"{"started":[{"id":"a","nodes":["n@h"]}],"errors":[]}"#,
            ),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("specs.jsonl");
        std::fs::write(&file, "{\"id\":\"a\",\"kind\":\"anything\"}\n").unwrap();
        let client = crate::ctl::connect(&url, None).unwrap();
        start_file(&client, false, &file, 500).unwrap();
        let seen: Vec<String> = requests.try_iter().collect();
        assert_eq!(seen, ["GET /v1/kinds", "POST /v1/children"]);
    }

    #[test]
    fn ids_are_read_line_by_line_checked_and_kept_once() {
        let (ids, duplicates) = parse_ids("# to stop\n a \n\nb\na\nc\n", "f").unwrap();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(duplicates, ["a"]);
        let long = "x".repeat(process_hub::model::ChildId::MAX_LEN + 1);
        let e = parse_ids(&format!("a\n{long}\n"), "ids.txt").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("ids.txt:2: "), "{e}");
        let e = parse_ids("# nothing\n\n", "ids.txt").unwrap_err();
        assert_eq!(e.to_string(), "ids.txt: no ids in the file");
    }

    #[test]
    fn many_ids_go_in_batch_stops_and_an_unknown_one_is_exit_1() {
        let (url, requests) = canned_node(vec![
            (
                200,
                r#"{"stopped":[{"id":"a","nodes":["n@h"]},{"id":"b","nodes":["n@h"]}],"errors":[],"pending":[],"duplicates":[],"counts":{}}"#,
            ),
            (
                200,
                r#"{"stopped":[],"errors":[{"id":"c","node":"n@h","reason":"no such child","code":"not_found"}],"pending":[],"duplicates":[],"counts":{}}"#,
            ),
        ]);
        let client = crate::ctl::connect(&url, None).unwrap();
        let ids: Vec<String> = ["a", "b", "a", "c"].map(String::from).to_vec();
        let e = stop_ids(&client, false, &ids, 2).unwrap_err();
        assert_eq!(e.exit_code(), 1, "{e}");
        assert_eq!(e.to_string(), "1 of 3 children failed");
        let seen: Vec<String> = requests.try_iter().collect();
        assert_eq!(seen, ["POST /v1/children/stop", "POST /v1/children/stop"]);
        // A bad id is a usage error before anything is sent.
        let e = stop_ids(&client, false, &["a".into(), String::new()], 2).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().starts_with("ID 2"), "{e}");
    }

    #[test]
    fn the_node_kinds_refuse_a_file_before_anything_is_sent() {
        let (url, requests) = canned_node(vec![(200, r#"{"kinds":["counter"]}"#)]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("specs.jsonl");
        std::fs::write(
            &file,
            "{\"id\":\"a\",\"kind\":\"counter\"}\n{\"id\":\"b\",\"kind\":\"cuonter\"}\n",
        )
        .unwrap();
        let client = crate::ctl::connect(&url, None).unwrap();
        let e = start_file(&client, false, &file, 1).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains(":2 (id \"b\")"), "{e}");
        let seen: Vec<String> = requests.try_iter().collect();
        assert_eq!(seen, ["GET /v1/kinds"]);
    }
}
