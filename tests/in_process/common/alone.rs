//! Tests that must be alone in their process, in a binary that runs many tests at once.
//!
//! Some tests need a process to themselves: a real `ractor_cluster` node (ractor's registries
//! and pg groups are process-global, so two nodes in one process would collide), a global
//! tracing subscriber or metrics recorder, a counting allocator or the resident size. Such a
//! test starts with
//!
//! ```ignore
//! if alone::ran_in_own_process(module_path!(), "the_test_fn") {
//!     return;
//! }
//! ```
//!
//! Run by the harness, the call re-executes this test binary to run that one test alone (with
//! [`ALONE`] naming it), passes its output on, fails the test if the child failed or did not
//! run it, and returns `true`: the test has run. In the child it returns `false`, and the body
//! runs there.

#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

/// The environment variable naming the one test a re-executed binary runs alone.
pub const ALONE: &str = "PROCESS_HUB_TEST_ALONE";

/// Whether the test `name` of module `module` (the caller's `module_path!()`) has just run in a
/// process of its own: `true` in the harness's process (the test passed there), `false` in
/// that process, where the caller runs the test's body. Panics when the child fails, or runs no
/// test by that name (a misspelt `name`).
pub fn ran_in_own_process(module: &str, name: &str) -> bool {
    // The harness names a test by its path without the crate: `traces::a_start_request_...`.
    let path = match module.split_once("::") {
        Some((_crate, rest)) => format!("{rest}::{name}"),
        None => name.to_owned(),
    };
    if std::env::var(ALONE).as_deref() == Ok(path.as_str()) {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([path.as_str(), "--exact", "--test-threads=1"])
        .env(ALONE, &path)
        .stdin(Stdio::null())
        .output()
        .expect("the test binary runs again");
    // Through `print!`, so that the harness shows it with the test's own output.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    let _ = std::io::stdout().flush();
    assert!(
        output.status.success(),
        "{path} failed in its own process ({})",
        output.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{path} did not run in its own process: is it the test's name?"
    );
    true
}
