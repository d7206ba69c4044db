//! `process-hub ctl` against a cluster of real `process-hub node` processes, as an operator
//! uses it: status and members, start / children / explain / call / stop, `--json` for
//! scripts, a batch start from a file, batch stops of ids and of a file, `watch`, and the documented exit codes (1 refused,
//! 2 usage, 3 unreachable, 4 unauthorized).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use process_hub_actors::harness::{free_port, write_private, ClusterOptions, LocalCluster};
use serde_json::Value;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

/// How long anything awaited here may take (generous: CI machines are shared).
const DEADLINE: Duration = Duration::from_secs(60);

const TOKEN: &str = "ctl-test-token-0123456789abcdef";

/// One finished `ctl` run.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}):\n{}", self.stdout))
    }
}

/// `process-hub ctl --admin URL [--token-file F] ARGS...`
struct Ctl {
    admin: String,
    token_file: Option<PathBuf>,
}

impl Ctl {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary());
        command.arg("ctl").arg("--admin").arg(&self.admin);
        if let Some(file) = &self.token_file {
            command.arg("--token-file").arg(file);
        }
        command.args(args).stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> Run {
        let output = self.command(args).output().expect("ctl runs");
        Run {
            code: output.status.code().expect("ctl exits by itself"),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `args` and insists on exit code 0.
    fn ok(&self, args: &[&str]) -> Run {
        let run = self.run(args);
        assert_eq!(
            run.code, 0,
            "ctl {args:?} failed:\n{}\n{}",
            run.stdout, run.stderr
        );
        run
    }
}

/// A `ctl watch --json` in the background, its stdout lines on a channel.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    fn start(ctl: &Ctl) -> Self {
        let mut child = ctl
            .command(&["--json", "watch"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ctl watch runs");
        // `watching ...` comes once the node has subscribed the stream: from then on no event
        // is missed (a start made before it would be).
        let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
        let mut first = String::new();
        stderr
            .read_line(&mut first)
            .expect("ctl watch says it watches");
        assert!(first.starts_with("watching the events of"), "{first}");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// Waits for an event of `kind` about child `id`; returns every line read meanwhile on
    /// failure.
    fn wait_for(&self, kind: &str, id: &str) -> Result<Value, Vec<String>> {
        let deadline = std::time::Instant::now() + DEADLINE;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let event: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                    if event["kind"] == kind && event["event"]["id"] == id {
                        return Ok(event);
                    }
                    seen.push(line);
                }
                Err(_) => break,
            }
        }
        Err(seen)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_operator_runs_a_cluster_with_ctl() {
    let options = ClusterOptions {
        admin_token: Some(TOKEN.into()),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 3, &options, None).expect("nodes spawn");
    cluster
        .wait_formed(DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(30)));
    let token_file = cluster.workdir().join("ctl.token");
    write_private(&token_file, TOKEN).expect("token file");
    let ctls: Vec<Ctl> = cluster
        .nodes
        .iter()
        .map(|n| Ctl {
            admin: format!("http://{}", n.admin),
            token_file: Some(token_file.clone()),
        })
        .collect();
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.node_name.clone()).collect();
    let ctl = &ctls[0];

    // Status and members name every node.
    let status = ctl.ok(&["status"]);
    for name in &names {
        assert!(status.stdout.contains(name.as_str()), "{}", status.stdout);
    }
    let status = ctl.ok(&["--json", "status"]).json();
    assert_eq!(status["health"]["members"].as_array().unwrap().len(), 3);
    assert_eq!(status["registry_summary"]["rows"], 0);
    let members = ctl.ok(&["--json", "members"]).json();
    let states: Vec<(&str, &str)> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["node"].as_str().unwrap(), m["state"].as_str().unwrap()))
        .collect();
    let expected: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "up")).collect();
    assert_eq!(states, expected);
    let table = ctl.ok(&["members"]).stdout;
    assert!(table.starts_with("NODE"), "{table}");

    // A watcher on every node: the child's own node reports its start.
    let watches: Vec<Watch> = ctls.iter().map(Watch::start).collect();

    // Start, list, explain, call, stop.
    let started = ctl.ok(&["start", "c1", "counter", "--args", r#"{"start": 5}"#]);
    assert!(
        started.stdout.starts_with("started c1 on "),
        "{}",
        started.stdout
    );
    let listed = ctl.ok(&["children"]).stdout;
    assert!(listed.lines().any(|l| l.starts_with("c1 ")), "{listed}");
    let children = ctl.ok(&["--json", "children"]).json();
    let host = children[0]["nodes"][0]["node"].as_str().unwrap().to_owned();
    assert_eq!(children[0]["id"], "c1");
    let on_host = ctl.ok(&["--json", "children", "--node", &host]).json();
    assert_eq!(on_host.as_array().unwrap().len(), 1);
    let elsewhere = names.iter().find(|n| **n != host).unwrap();
    let none = ctl.ok(&["--json", "children", "--node", elsewhere]).json();
    assert_eq!(none, Value::Array(vec![]));

    let explained = ctl.ok(&["--json", "explain", "c1"]).json();
    assert_eq!(explained["nodes"][0]["node"], host.as_str());
    assert_eq!(explained["why"], "ring_owner", "{explained}");
    assert_eq!(explained["owners"], serde_json::json!([host.as_str()]));
    let human = ctl.ok(&["explain", "c1"]).stdout;
    assert!(
        human.contains("ring_owner") && human.contains(&host),
        "{human}"
    );

    let host_index = names.iter().position(|n| *n == host).unwrap();
    let event = watches[host_index]
        .wait_for("child_started", "c1")
        .unwrap_or_else(|seen| panic!("no child_started of c1 on {host}; saw {seen:?}"));
    assert_eq!(event["event"]["node"], host.as_str());
    drop(watches);

    let answer = ctl.ok(&["call", "c1", r#"{"kind":"counter","command":{"op":"get"}}"#]);
    assert_eq!(answer.stdout.trim(), "5");
    let stopped = ctl.ok(&["stop", "c1"]);
    assert!(
        stopped.stdout.starts_with("stopped c1 on "),
        "{}",
        stopped.stdout
    );

    // Refused: exit 1, and with --json the API's error body on stdout.
    let gone = ctl.run(&["--json", "explain", "c1"]);
    assert_eq!(gone.code, 1, "{}", gone.stderr);
    assert_eq!(gone.json()["error"], "not_found");
    assert_eq!(ctl.run(&["stop", "c1"]).code, 1);
    let unknown_kind = ctl.run(&["start", "k1", "no_such_kind"]);
    assert_eq!(unknown_kind.code, 1, "{}", unknown_kind.stderr);

    // Usage: exit 2, nothing started.
    let bad_args = ctl.run(&["start", "c2", "counter", "--args", "{oops"]);
    assert_eq!(bad_args.code, 2, "{}", bad_args.stderr);
    assert!(bad_args.stderr.contains("--args"), "{}", bad_args.stderr);
    assert_eq!(ctl.run(&["start", "c2"]).code, 2, "KIND is missing");
    assert_eq!(ctl.run(&["call", "c1", "not json"]).code, 2);
    let missing = ctl.run(&["start", "--file", "/nonexistent/specs.jsonl"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    let no_token_file = Ctl {
        admin: ctl.admin.clone(),
        token_file: Some("/nonexistent/token".into()),
    };
    assert_eq!(no_token_file.run(&["status"]).code, 2);

    // Unauthorized: exit 4.
    let wrong_file = cluster.workdir().join("wrong.token");
    write_private(&wrong_file, "not-the-token-0123456789").expect("token file");
    let wrong = Ctl {
        admin: ctl.admin.clone(),
        token_file: Some(wrong_file),
    };
    let refused = wrong.run(&["status"]);
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("unauthorized"),
        "{}",
        refused.stderr
    );
    let anonymous = Ctl {
        admin: ctl.admin.clone(),
        token_file: None,
    };
    assert_eq!(anonymous.run(&["children"]).code, 4);
    assert_eq!(
        anonymous.run(&["watch"]).code,
        4,
        "the event stream is guarded too"
    );

    // Unreachable: exit 3.
    let nobody = Ctl {
        admin: format!("http://127.0.0.1:{}", free_port().expect("a port")),
        token_file: Some(token_file.clone()),
    };
    let unreachable = nobody.run(&["status"]);
    assert_eq!(unreachable.code, 3, "{}", unreachable.stderr);

    // A file with one misspelled field is refused before anything is sent: exit 2, naming the
    // line and the field; nothing started.
    let count = |ctl: &Ctl| {
        ctl.ok(&["--json", "children"])
            .json()
            .as_array()
            .unwrap()
            .len()
    };
    let before = count(ctl);
    let typo = cluster.workdir().join("typo.jsonl");
    let lines: Vec<String> = (0..10)
        .map(|i| format!("{{\"id\":\"t{i}\",\"kind\":\"counter\"}}"))
        .collect();
    let mut with_typo = lines.clone();
    with_typo[6] = r#"{"id":"t6","kind":"counter","durabel":true}"#.into();
    std::fs::write(&typo, with_typo.join("\n")).expect("specs file");
    let refused = ctl.run(&["start", "--file", typo.to_str().unwrap(), "--batch", "2"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let at = format!(
        "unknown field \"durabel\" in {}:7 (id \"t6\")",
        typo.display()
    );
    assert!(refused.stderr.contains(&at), "{}", refused.stderr);
    assert!(
        !refused.stderr.contains("progress"),
        "nothing was sent: {}",
        refused.stderr
    );
    let mut missing_kind = lines.clone();
    missing_kind[2] = r#"{"id":"t2"}"#.into();
    std::fs::write(&typo, missing_kind.join("\n")).expect("specs file");
    let refused = ctl.run(&["start", "--file", typo.to_str().unwrap()]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("missing field \"kind\" in") && refused.stderr.contains(":3"),
        "{}",
        refused.stderr
    );
    // A kind the node does not know, on a line past the first batch, is refused before
    // anything is sent (the kinds come from `GET /v1/kinds`): exit 2 naming the line, the
    // id, the kind and the known kinds; the first batches did not start.
    let mut unknown_kind = lines.clone();
    unknown_kind[8] = r#"{"id":"t8","kind":"cuonter"}"#.into();
    std::fs::write(&typo, unknown_kind.join("\n")).expect("specs file");
    let refused = ctl.run(&["start", "--file", typo.to_str().unwrap(), "--batch", "2"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let at = format!(
        "unknown kind \"cuonter\" in {}:9 (id \"t8\"); known kinds: counter",
        typo.display()
    );
    assert!(refused.stderr.contains(&at), "{}", refused.stderr);
    assert!(
        !refused.stderr.contains("progress"),
        "nothing was sent: {}",
        refused.stderr
    );
    // A field given twice is refused the same way, not read as its last value.
    let mut twice = lines.clone();
    twice[5] = r#"{"id":"t5","kind":"counter","durable":true,"durable":false}"#.into();
    std::fs::write(&typo, twice.join("\n")).expect("specs file");
    let refused = ctl.run(&["start", "--file", typo.to_str().unwrap(), "--batch", "2"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let at = format!(
        "duplicate field \"durable\" in {}:6 (id \"t5\")",
        typo.display()
    );
    assert!(refused.stderr.contains(&at), "{}", refused.stderr);
    assert_eq!(count(ctl), before, "a refused file starts nothing");

    // A few hundred children from a file, in batches, with progress lines (not a terminal).
    let specs: String = (0..300)
        .map(|i| format!("{{\"id\":\"f{i}\",\"kind\":\"counter\",\"args\":{{\"start\":{i}}}}}\n"))
        .collect();
    let file = cluster.workdir().join("specs.jsonl");
    std::fs::write(&file, format!("# three hundred counters\n{specs}")).expect("specs file");
    let batch = ctls[1].ok(&["start", "--file", file.to_str().unwrap(), "--batch", "128"]);
    assert_eq!(batch.stdout.trim(), "started 300 of 300 children");
    assert_eq!(
        batch.stderr.matches("progress: ").count(),
        3,
        "one line per batch of 128: {}",
        batch.stderr
    );
    let children = ctl.ok(&["--json", "children"]).json();
    assert_eq!(children.as_array().unwrap().len(), 300);
    let again = ctls[2].run(&["--json", "start", "--file", file.to_str().unwrap()]);
    assert_eq!(again.code, 1, "every child already runs");
    assert_eq!(again.json()["errors"].as_array().unwrap().len(), 300);

    // Several ids are one batch stop: an id given twice is stopped once, an unknown one is
    // not stopped (exit 1), the others are.
    let few = ctl.run(&["stop", "f0", "f1", "nope", "f1", "f2"]);
    assert_eq!(few.code, 1, "{}\n{}", few.stdout, few.stderr);
    assert_eq!(few.stdout.trim(), "stopped 3 of 4 children");
    assert!(
        few.stderr.contains("not stopped: nope") && few.stderr.contains("(not_found)"),
        "{}",
        few.stderr
    );
    // A bad id is a usage error: nothing sent, f3 still runs.
    assert_eq!(ctl.run(&["stop", "f3", ""]).code, 2);
    // The rest from a file, in batch stops of 100, through another node.
    let ids: String = (3..300).map(|i| format!("f{i}\n")).collect();
    let ids_file = cluster.workdir().join("ids.txt");
    std::fs::write(&ids_file, format!("# the rest\n{ids}")).expect("ids file");
    let rest = ctls[2].ok(&[
        "--json",
        "stop",
        "--file",
        ids_file.to_str().unwrap(),
        "--batch",
        "100",
    ]);
    let answer = rest.json();
    assert_eq!(
        answer["counts"],
        serde_json::json!({"requested": 297, "distinct": 297, "stopped": 297, "pending": 0, "errors": 0, "not_found": 0}),
        "{answer}"
    );
    assert_eq!(
        rest.stderr.matches("progress: ").count(),
        3,
        "one line per batch of 100: {}",
        rest.stderr
    );
    // Every copy of the registry converges on none (the stops went through node 3).
    let deadline = std::time::Instant::now() + DEADLINE;
    while count(ctl) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "children still listed after every stop: {}",
            count(ctl)
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    cluster.shutdown(Duration::from_secs(30));
}
