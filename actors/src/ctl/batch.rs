//! `start --file SPECS.jsonl`: many children from a JSON-lines file, in batches.
//!
//! The whole file is read and every line checked before the first request, as strictly as the
//! admin API reads a spec (`process_hub::admin::start_spec_from_json`: no unknown field, `id`
//! and `kind` present, each field of its type), so a bad line is a usage error (exit 2, naming
//! the line and the field) that started nothing. The kinds are the node's to check: each
//! request naming a kind the node does not know is refused whole, listing its kinds. The specs then go out in
//! requests of `--batch` children (the admin API takes up to 10,000 per request; smaller
//! batches show progress and keep each answer small). Progress goes to stderr: a bar when
//! stderr is a terminal, a plain line per batch otherwise (logs and CI keep them readable).
//! Children that did not start are listed on stderr and make the exit code 1.

use std::io::IsTerminal;
use std::path::Path;

use process_hub::admin::{check_values, start_spec_from_json};
use serde_json::{json, Value};

use super::client::CtlClient;
use super::outcome::CtlError;
use super::print_json;
use super::table::cell;

/// The most failures listed one by one on stderr (the count covers the rest).
const LISTED_FAILURES: usize = 20;

/// The specs of a JSON-lines text: one child spec per line, read as the admin API reads one
/// (every field known, `id` and `kind` present, each of its type). An error names the line
/// (`source:4`) and the field.
pub fn parse_specs(text: &str, source: &str) -> Result<Vec<Value>, CtlError> {
    let mut specs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{source}:{}", i + 1);
        let spec: Value = serde_json::from_str(line)
            .map_err(|e| CtlError::Usage(format!("{at}: not a JSON object: {e}")))?;
        let checked = start_spec_from_json(&spec, &at).and_then(|checked| {
            check_values(std::slice::from_ref(&checked), true).map_err(|mut e| {
                // `check_values` names a lone spec `the child spec`: name the line.
                e.message = e.message.replace("the child spec", &at);
                e
            })
        });
        if let Err(e) = checked {
            return Err(CtlError::Usage(e.message));
        }
        specs.push(spec);
    }
    if specs.is_empty() {
        return Err(CtlError::Usage(format!("{source}: no specs in the file")));
    }
    Ok(specs)
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
pub fn start_file(client: &CtlClient, json: bool, path: &Path, batch: u64) -> Result<(), CtlError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CtlError::Usage(format!("--file {}: {e}", path.display())))?;
    let specs = parse_specs(&text, &path.display().to_string())?;
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
                return Err(e);
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
    for error in errors.iter().take(LISTED_FAILURES) {
        eprintln!(
            "not started: {} on {}: {} ({})",
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
        assert_eq!(specs[1]["args"]["start"], 2);
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
}
