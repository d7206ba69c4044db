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
//! A trim walks the whole heap, so on a heap of gigabytes (a node of a million children) it
//! costs a good share of a core, and a long start burst with pauses in it (a client between
//! two batches) would trim at every pause while the heap is still growing: each trim gives
//! back little and the next batch takes it again. So the watcher backs off while the heap keeps
//! rising across releases (each release at a higher level than the last doubles the readings
//! it skips before the next, up to [`MAX_BACKOFF_PERIODS`]), and never spends more than a
//! [`MAX_TIME_SHARE`]th of its time trimming (after a trim of `t`, it waits `MAX_TIME_SHARE × t`).
//! A heap quiet for [`QUIET_STREAK`] readings in a row is a burst that stopped, not a pause:
//! it is released then, whatever the backoff.
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

/// The most readings skipped after a release while the heap keeps rising across releases
/// (32 s at the default period): a burst's memory is returned at most that long after it ends.
pub const MAX_BACKOFF_PERIODS: u32 = 64;

/// The watcher waits this many times as long as its last trim took before the next one: it
/// spends at most about 1/`MAX_TIME_SHARE` of a core trimming.
pub const MAX_TIME_SHARE: u32 = 10;

/// Quiet readings in a row (1.5 s at the default period) that end the backoff: the burst
/// stopped, its memory goes back now rather than after the backoff.
pub const QUIET_STREAK: u32 = 3;

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
    /// Readings still to skip before a release may happen again while the heap rises (the
    /// backoff's); a quiet streak of [`QUIET_STREAK`] readings ends it.
    cooldown: u32,
    /// Readings still to skip whatever the heap does (the cap on the time spent trimming).
    cost_wait: u32,
    /// Quiet readings in a row.
    quiet_streak: u32,
    /// Readings skipped after a release because the heap kept rising across releases
    /// (0 once a release finds it no higher than at the one before).
    backoff: u32,
    /// The resident memory just before the last release.
    last_before: Option<u64>,
}

impl Watch {
    pub(crate) fn new(growth: u64, first: u64) -> Self {
        Self {
            growth,
            settled: first,
            previous: first,
            cooldown: 0,
            cost_wait: 0,
            quiet_streak: 0,
            backoff: 0,
            last_before: None,
        }
    }

    /// One reading: release when the memory grew by `growth` since it last settled and stopped
    /// growing since the previous reading (within an eighth of `growth`: a node that serves a
    /// dashboard or a health check between two readings is still quiet).
    pub(crate) fn observe(&mut self, resident: u64) -> Step {
        let quiet = resident <= self.previous.saturating_add(self.growth / 8);
        self.previous = resident;
        self.settled = self.settled.min(resident);
        self.quiet_streak = if quiet { self.quiet_streak + 1 } else { 0 };
        if self.cost_wait > 0 {
            self.cost_wait -= 1;
            return Step::Wait;
        }
        // A burst that stopped (quiet for a streak, not a pause between two batches) is
        // released without waiting for the backoff.
        if self.cooldown > 0 && self.quiet_streak < QUIET_STREAK {
            self.cooldown -= 1;
            return Step::Wait;
        }
        self.cooldown = 0;
        if quiet && resident >= self.settled.saturating_add(self.growth) {
            Step::Release
        } else {
            Step::Wait
        }
    }

    /// After a release that found `before` and left `after`, and took `took` of a watcher
    /// reading every `period`: `after` is the new settled level, and the next release waits
    /// for the backoff (doubled if the heap rose since the release before) and for
    /// [`MAX_TIME_SHARE`] times the time this one took.
    pub(crate) fn released(&mut self, before: u64, after: u64, took: Duration, period: Duration) {
        self.settled = after;
        self.previous = after;
        let rising = self.last_before.is_some_and(|last| before > last);
        self.backoff = if rising {
            (self.backoff.saturating_mul(2)).clamp(1, MAX_BACKOFF_PERIODS)
        } else {
            0
        };
        self.last_before = Some(before);
        let period_ns = period.as_nanos().max(1);
        let cost = (took.as_nanos() * u128::from(MAX_TIME_SHARE)).div_ceil(period_ns);
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        self.cost_wait = cost;
        self.cooldown = self.backoff.saturating_sub(cost);
        self.quiet_streak = 0;
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
            let began = std::time::Instant::now();
            release_now();
            let took = began.elapsed();
            let after = resident_bytes().unwrap_or(resident);
            tracing::debug!(
                before = resident,
                after,
                took_ms = took.as_millis() as u64,
                "returned freed memory to the operating system"
            );
            watch.released(resident, after, took, config.period);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;
    const PERIOD: Duration = Duration::from_millis(500);

    /// Feeds `readings` one by one, releasing (to 1 MiB under the reading, in no time) when
    /// told to; returns the indexes of the readings that released.
    fn run(w: &mut Watch, readings: impl IntoIterator<Item = u64>) -> Vec<usize> {
        let mut released = Vec::new();
        for (i, r) in readings.into_iter().enumerate() {
            if w.observe(r) == Step::Release {
                w.released(r, r - MIB, Duration::ZERO, PERIOD);
                released.push(i);
            }
        }
        released
    }

    /// A start burst of minutes with pauses (grow 8 MiB, pause a reading, again): while
    /// the heap keeps rising across releases, the releases thin out (each waits twice as many
    /// readings as the last, up to the bound), and once the heap stops growing (quiet for
    /// [`QUIET_STREAK`] readings) the last release comes at once, whatever the backoff.
    #[test]
    fn a_heap_still_growing_across_releases_is_trimmed_less_and_less_often() {
        let mut w = Watch::new(2 * MIB, 100 * MIB);
        let mut readings = Vec::new();
        let mut level = 100 * MIB;
        for _ in 0..200 {
            level += 8 * MIB;
            readings.push(level);
            readings.push(level); // a pause: quiet
        }
        let released = run(&mut w, readings.clone());
        // Without the backoff: one release per pause, 200 of them.
        assert!(released.len() <= 14, "{released:?}");
        let gaps: Vec<usize> = released.windows(2).map(|p| p[1] - p[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "{gaps:?}");
        assert!(
            gaps.iter()
                .all(|g| *g <= 2 * MAX_BACKOFF_PERIODS as usize + 2),
            "{gaps:?}"
        );
        assert!(w.backoff >= 16, "backing off: {}", w.backoff);
        // The burst is over: the heap is released once quiet for the streak, and the backoff
        // resets.
        let plateau = run(&mut w, vec![level; MAX_BACKOFF_PERIODS as usize + 2]);
        // (The burst's last reading was a pause: one quiet reading of the streak already.)
        assert_eq!(plateau.len(), 1, "{plateau:?}");
        assert!(plateau[0] < QUIET_STREAK as usize, "{plateau:?}");
        let after = level - MIB;
        w.released(after, after - MIB, Duration::ZERO, PERIOD);
        assert_eq!(
            w.backoff, 0,
            "no higher than the release before: no backoff"
        );
    }

    /// A trim that took 2 s with readings every 500 ms: the next one waits 40 readings.
    #[test]
    fn the_time_spent_trimming_is_capped() {
        let mut w = Watch::new(2 * MIB, 100 * MIB);
        assert_eq!(w.observe(110 * MIB), Step::Wait);
        assert_eq!(w.observe(110 * MIB), Step::Release);
        w.released(110 * MIB, 100 * MIB, Duration::from_secs(2), PERIOD);
        let quiet_growth = (0..40).map(|i| 110 * MIB + i * 1024);
        assert!(run(&mut w, quiet_growth).is_empty(), "40 readings skipped");
        assert_eq!(w.observe(110 * MIB + 40 * 1024), Step::Release);
    }

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
        w.released(110 * MIB, 105 * MIB, Duration::ZERO, PERIOD);
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
