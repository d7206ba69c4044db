//! Giving the memory a burst freed back to the operating system.
//!
//! A node that starts, moves or stops thousands of children at once allocates far more while it
//! works (request bodies, the specs it forwards, frames, replies) than it keeps afterwards. glibc's
//! `malloc` keeps what was freed in its arenas for reuse instead of returning it, so a node's
//! resident memory stays at the burst's level: about 250-500 bytes per child in a 3-node cluster
//! of 10,000 children (`docs/performance.md`), more than a registry row costs.
//!
//! [`start`] runs a watcher thread that asks glibc to return its free pages (`malloc_trim`) once
//! a burst is over: when the process's resident memory grew by at least
//! [`MemoryRelease::growth`] since the last release and did not grow during the last period. A
//! process that does not grow is never trimmed, and a burst in progress is not slowed by it.
//!
//! It is the application's choice, as the allocator is: the `process-hub node` binary starts it
//! (unless `--no-memory-release`); a library user calls [`start`] once, or not at all when the
//! program uses another allocator (jemalloc and mimalloc return memory by themselves). On a
//! platform without glibc it does nothing and says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// When the watcher releases memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRelease {
    /// How often the resident memory is read (one read of `/proc/self/statm`).
    pub period: Duration,
    /// How much the resident memory must have grown since the last release before another one:
    /// small growth is not worth a walk of the allocator's free lists.
    pub growth: u64,
}

impl Default for MemoryRelease {
    fn default() -> Self {
        Self {
            period: Duration::from_millis(500),
            growth: 2 * 1024 * 1024,
        }
    }
}

static STARTED: AtomicBool = AtomicBool::new(false);

/// Starts the process's watcher thread (once per process: a later call changes nothing).
///
/// Returns `true` if this call started it; `false` if it was already running or if the platform
/// has no glibc to ask.
pub fn start(config: MemoryRelease) -> bool {
    if !supported() || STARTED.swap(true, Ordering::SeqCst) {
        return false;
    }
    let spawned = std::thread::Builder::new()
        .name("process-hub-memory-release".to_owned())
        .spawn(move || watch(config));
    match spawned {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "could not start the memory release thread");
            STARTED.store(false, Ordering::SeqCst);
            false
        }
    }
}

/// Whether this platform's allocator can be asked to return freed memory (glibc on Linux).
pub fn supported() -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu"))
}

/// Asks the allocator, now, to return every free page it holds. Returns whether it returned any.
///
/// It walks the allocator's free lists: a few milliseconds for a heap of tens of megabytes.
pub fn release_now() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` only takes glibc's arena locks and returns free pages with
        // `madvise`; it has no preconditions and touches no memory that is in use.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The process's resident memory in bytes, if the platform says.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

fn page_size() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: `sysconf` reads a constant of the system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 {
            return size as u64;
        }
    }
    4096
}

/// What the watcher does at one reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing to do.
    Wait,
    /// The burst is over: release.
    Release,
}

/// The watcher's decision, apart from the clock and the allocator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    growth: u64,
    /// Resident memory after the last release (or the first reading, or its lowest since).
    settled: u64,
    /// The previous reading.
    previous: u64,
}

impl Watch {
    pub(crate) fn new(growth: u64, first: u64) -> Self {
        Self {
            growth,
            settled: first,
            previous: first,
        }
    }

    /// One reading: release when the memory grew by `growth` since it last settled and stopped
    /// growing since the previous reading (within an eighth of `growth`: a node that serves a
    /// dashboard or a health check between two readings is still quiet).
    pub(crate) fn observe(&mut self, resident: u64) -> Step {
        let quiet = resident <= self.previous.saturating_add(self.growth / 8);
        self.previous = resident;
        self.settled = self.settled.min(resident);
        if quiet && resident >= self.settled.saturating_add(self.growth) {
            Step::Release
        } else {
            Step::Wait
        }
    }

    /// After a release: the reading it left is the new settled level.
    pub(crate) fn released(&mut self, resident: u64) {
        self.settled = resident;
        self.previous = resident;
    }
}

fn watch(config: MemoryRelease) {
    let Some(first) = resident_bytes() else {
        tracing::warn!("no /proc/self/statm: the memory release thread stops");
        return;
    };
    let mut watch = Watch::new(config.growth, first);
    loop {
        std::thread::sleep(config.period);
        let Some(resident) = resident_bytes() else {
            continue;
        };
        if watch.observe(resident) == Step::Release {
            release_now();
            let after = resident_bytes().unwrap_or(resident);
            tracing::debug!(
                before = resident,
                after,
                "returned freed memory to the operating system"
            );
            watch.released(after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_burst_is_released_once_it_stops_growing() {
        let mut w = Watch::new(2 * MIB, 100 * MIB);
        assert_eq!(w.observe(104 * MIB), Step::Wait, "still growing");
        assert_eq!(w.observe(110 * MIB), Step::Wait, "still growing");
        assert_eq!(
            w.observe(110 * MIB + 64 * 1024),
            Step::Release,
            "the burst is over"
        );
        w.released(105 * MIB);
        assert_eq!(
            w.observe(105 * MIB),
            Step::Wait,
            "nothing new since the release"
        );
        assert_eq!(w.observe(106 * MIB), Step::Wait);
        assert_eq!(
            w.observe(106 * MIB),
            Step::Wait,
            "grew by less than the threshold"
        );
    }

    #[test]
    fn small_growth_or_shrinking_memory_is_left_alone() {
        let mut w = Watch::new(2 * MIB, 100 * MIB);
        assert_eq!(w.observe(101 * MIB), Step::Wait);
        assert_eq!(w.observe(101 * MIB), Step::Wait);
        assert_eq!(
            w.observe(90 * MIB),
            Step::Wait,
            "memory went back by itself"
        );
        assert_eq!(w.observe(91 * MIB), Step::Wait);
        assert_eq!(w.observe(91 * MIB), Step::Wait, "1 MiB above its lowest");
        assert_eq!(
            w.observe(93 * MIB),
            Step::Wait,
            "growing by more than an eighth"
        );
        assert_eq!(
            w.observe(92 * MIB),
            Step::Release,
            "3 MiB above its lowest, quiet"
        );
    }
}
