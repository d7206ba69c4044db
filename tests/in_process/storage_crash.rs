//! Acknowledged writes survive a SIGKILL of the writing process.
//!
//! The test re-runs its own binary as a child in "writer" mode (selected by an environment
//! variable): many threads insert rows concurrently and print `ack <id>` (flushed) after each
//! insert returned `Ok`. The parent SIGKILLs the child mid-stream, reopens the store and checks
//! that every acknowledged row is there, for both disk backends.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use process_hub::model::{ChildSpec, Metadata, Row};
use process_hub::storage::{DiskOptions, DurableStorage, LmdbStorage, Storage};

const DIR_VAR: &str = "PROCESS_HUB_CRASH_WRITER_DIR";
const BACKEND_VAR: &str = "PROCESS_HUB_CRASH_WRITER_BACKEND";
/// The test's name as the harness knows it (the child runs only it).
const TEST_NAME: &str = "storage_crash::acknowledged_writes_survive_sigkill";
const WRITERS: usize = 16;
/// Acknowledgements the parent waits for before it kills the child.
const KILL_AFTER: usize = 600;

fn row(id: &str) -> Row {
    let mut metadata = Metadata::new();
    metadata.insert("tag".into(), "crash".into());
    Row::authored(ChildSpec::new(id, "counter"), metadata, "a@h", 1, true).unwrap()
}

fn open(dir: &Path, backend: &str) -> Arc<dyn Storage> {
    match backend {
        "lmdb" => Arc::new(LmdbStorage::open(dir, &DiskOptions::default()).unwrap()),
        _ => Arc::new(DurableStorage::open(dir, &DiskOptions::default()).unwrap()),
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    if let Ok(dir) = std::env::var(DIR_VAR) {
        let backend = std::env::var(BACKEND_VAR).unwrap_or_default();
        write_until_killed(Path::new(&dir), &backend);
        return;
    }
    for backend in ["lmdb", "durable"] {
        crash_and_check(backend);
    }
}

/// Child mode: write forever (bounded, in case the parent is gone), acknowledging each row.
fn write_until_killed(dir: &Path, backend: &str) {
    let store = open(dir, backend);
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..100_000 {
                    let id = format!("w{w}-{i}");
                    store.insert(row(&id)).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {id}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

fn crash_and_check(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads", "1"])
        .env(DIR_VAR, dir.path())
        .env(BACKEND_VAR, backend)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // A child that hangs without writing would block the read below forever: a generous
    // watchdog kills it, and the assertions then report what happened.
    let finished = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (finished, pid) = (finished.clone(), child.id());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(300);
            while !finished.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if !finished.load(Ordering::SeqCst) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        })
    };
    let mut acked = Vec::new();
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(id) = line.strip_prefix("ack ") {
            acked.push(id.to_owned());
        }
        if !killed && acked.len() >= KILL_AFTER {
            child.kill().unwrap(); // SIGKILL on Unix
            killed = true;
        }
        // Keep reading: lines already in the pipe were acknowledged before the kill.
    }
    let status = child.wait().unwrap();
    finished.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "{backend}: child was not killed: {status}"
        );
    }
    assert!(
        killed,
        "{backend}: child ended before {KILL_AFTER} acks: {status}"
    );

    let store = open(dir.path(), backend);
    let missing: Vec<&String> = acked
        .iter()
        .filter(|id| !store.contains(&id.as_str().into()))
        .collect();
    assert!(
        missing.is_empty(),
        "{backend}: {} of {} acknowledged rows lost, e.g. {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(store.len() >= acked.len());
    eprintln!(
        "{backend}: {} rows acknowledged before the kill, {} on disk after it",
        acked.len(),
        store.len()
    );
    let rotated = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".corrupt-")
        })
        .count();
    assert_eq!(
        rotated, 0,
        "{backend}: a killed writer must not corrupt the store"
    );
}
