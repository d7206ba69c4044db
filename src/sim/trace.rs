//! A run's trace: every step, answer, frame and check, with its virtual time, folded into one
//! hash. Two runs of one seed print the same `trace_hash` when they did the same things in the
//! same order; the lines themselves are kept only when asked for (`--trace`).
//!
//! The trace records no pid: ractor numbers actors with a process-wide counter, so the same run
//! gets other pids in another process (or after another run in the same one).

use std::hash::Hasher;
use std::sync::Mutex;

use siphasher::sip::SipHasher13;

use crate::cluster::in_process::{FrameEvent, FrameFate};

/// The trace of one run.
pub struct Trace {
    origin: tokio::time::Instant,
    state: Mutex<TraceState>,
}

struct TraceState {
    hasher: SipHasher13,
    lines: Option<Vec<String>>,
    count: u64,
}

impl Trace {
    /// An empty trace starting now (virtual time 0); `keep` keeps the lines.
    pub fn new(keep: bool) -> Self {
        Self {
            origin: tokio::time::Instant::now(),
            state: Mutex::new(TraceState {
                hasher: SipHasher13::new_with_keys(0x7369_6d75_6c61_7465, 0x7472_6163_6568_6173),
                lines: keep.then(Vec::new),
                count: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TraceState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Virtual milliseconds since the run began.
    pub fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Appends a line (prefixed with the virtual time).
    pub fn line(&self, text: impl AsRef<str>) {
        let line = format!("{:>8} {}", self.now_ms(), text.as_ref());
        let mut state = self.state();
        state.hasher.write(line.as_bytes());
        state.hasher.write_u8(b'\n');
        state.count += 1;
        if let Some(lines) = &mut state.lines {
            lines.push(line);
        }
    }

    /// A frame's fate, as the router tells it.
    pub fn frame(&self, frame: &FrameEvent<'_>) {
        let fate = match frame.fate {
            FrameFate::Delivered => "->",
            FrameFate::Dropped => "-x",
            FrameFate::LostInFlight => "-?",
        };
        self.line(format!(
            "frame {} {fate} {} {}",
            short(frame.from),
            short(frame.to),
            frame.kind
        ));
    }

    /// The hash of every line so far.
    pub fn hash(&self) -> u64 {
        self.state().hasher.clone().finish()
    }

    /// How many lines so far.
    pub fn len(&self) -> u64 {
        self.state().count
    }

    /// Whether nothing happened yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The lines, when kept.
    pub fn lines(&self) -> Vec<String> {
        self.state().lines.clone().unwrap_or_default()
    }
}

/// `n1@sim` -> `n1`.
pub fn short(node: &str) -> &str {
    node.split('@').next().unwrap_or(node)
}
