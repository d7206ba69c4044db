//! What the multi-process tests share: running the `process-hub` binary as a user does, for the
//! tests of its JSON reports, and running a test alone in a process of its own ([`alone`], the
//! library tests' helper).

#![allow(dead_code)]

#[path = "../../../../tests/in_process/common/alone.rs"]
pub mod alone;
pub mod remote_start;

use std::ffi::OsStr;
use std::process::Command;

/// Runs `process-hub` with `args`, insists that it succeeded, and returns the one JSON object it
/// printed on stdout, with its stderr (progress output).
pub fn report_of<I, S>(args: I) -> (serde_json::Value, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let output = Command::new(env!("CARGO_BIN_EXE_process-hub"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let report = serde_json::from_str(stdout.trim()).expect("one JSON object on stdout");
    (report, stderr)
}
