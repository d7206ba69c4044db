//! The process's own figures (memory, CPU, file descriptors, threads, start time) and the
//! hub's build, as metrics with the hub's `hub` and `node` labels: an operator alerts on a node
//! that grows or leaks descriptors without a second exporter beside it.
//!
//! Read from `/proc/self` when a scrape asks (Linux; elsewhere the process metrics are
//! absent). The text is parsed by pure functions, tested on samples.

use metrics::{describe_gauge, gauge};

use super::metrics::{
    HubLabels, BUILD_INFO, PROCESS_CPU_SECONDS, PROCESS_MAX_FDS, PROCESS_OPEN_FDS,
    PROCESS_RESIDENT_MEMORY, PROCESS_START_TIME, PROCESS_THREADS, PROCESS_VIRTUAL_MEMORY,
};

/// The hub's version, as its crate was built.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the process metrics show, read at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ProcessFigures {
    pub(crate) resident_bytes: u64,
    pub(crate) virtual_bytes: u64,
    pub(crate) cpu_seconds: f64,
    pub(crate) threads: u64,
    /// Seconds since the Unix epoch.
    pub(crate) start_time_seconds: f64,
    pub(crate) open_fds: Option<u64>,
    pub(crate) max_fds: Option<u64>,
}

/// The fields of `/proc/self/stat` the metrics need, after the command name (which may hold
/// spaces and parentheses, so the fields are counted from its closing parenthesis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    /// User and system time, in clock ticks.
    pub(crate) utime: u64,
    pub(crate) stime: u64,
    pub(crate) threads: u64,
    /// Since boot, in clock ticks.
    pub(crate) start_ticks: u64,
    pub(crate) vsize_bytes: u64,
    pub(crate) rss_pages: u64,
}

/// Parses `/proc/self/stat` (proc(5): fields 14, 15, 20, 22, 23 and 24).
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        threads: field(20)?,
        start_ticks: field(22)?,
        vsize_bytes: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The boot time (`btime`, seconds since the epoch) from `/proc/stat`.
pub(crate) fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of open files from `/proc/self/limits` (`None` when unlimited).
pub(crate) fn parse_max_fds(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The figures from the three texts and the system's tick rate and page size.
pub(crate) fn figures(
    stat: &str,
    proc_stat: &str,
    limits: &str,
    ticks_per_second: u64,
    page_size: u64,
    open_fds: Option<u64>,
) -> Option<ProcessFigures> {
    let s = parse_stat(stat)?;
    let ticks = ticks_per_second.max(1) as f64;
    let boot = parse_boot_time(proc_stat)? as f64;
    Some(ProcessFigures {
        resident_bytes: s.rss_pages.saturating_mul(page_size),
        virtual_bytes: s.vsize_bytes,
        cpu_seconds: (s.utime + s.stime) as f64 / ticks,
        threads: s.threads,
        start_time_seconds: boot + s.start_ticks as f64 / ticks,
        open_fds,
        max_fds: parse_max_fds(limits),
    })
}

/// This process's figures now (`None` where `/proc` cannot be read).
#[cfg(target_os = "linux")]
pub(crate) fn read() -> Option<ProcessFigures> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let proc_stat = std::fs::read_to_string("/proc/stat").ok()?;
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        // The directory's own descriptor, open while it is read, is one of them.
        .map(|dir| (dir.count() as u64).saturating_sub(1));
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100);
    let page = u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096);
    figures(&stat, &proc_stat, &limits, ticks, page, open_fds)
}

/// This process's figures now: not known off Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) fn read() -> Option<ProcessFigures> {
    None
}

/// Sets the process gauges and the build info, with `labels`, to what they are now.
pub(crate) fn set(labels: &HubLabels) {
    let base = labels.base();
    gauge!(BUILD_INFO, &labels.with("version", VERSION)).set(1.0);
    let Some(f) = read() else {
        return;
    };
    gauge!(PROCESS_RESIDENT_MEMORY, &base).set(f.resident_bytes as f64);
    gauge!(PROCESS_VIRTUAL_MEMORY, &base).set(f.virtual_bytes as f64);
    gauge!(PROCESS_CPU_SECONDS, &base).set(f.cpu_seconds);
    gauge!(PROCESS_THREADS, &base).set(f.threads as f64);
    gauge!(PROCESS_START_TIME, &base).set(f.start_time_seconds);
    if let Some(n) = f.open_fds {
        gauge!(PROCESS_OPEN_FDS, &base).set(n as f64);
    }
    if let Some(n) = f.max_fds {
        gauge!(PROCESS_MAX_FDS, &base).set(n as f64);
    }
}

/// The process metrics' help texts.
pub(crate) fn describe() {
    describe_gauge!(
        PROCESS_RESIDENT_MEMORY,
        metrics::Unit::Bytes,
        "Resident memory of the process."
    );
    describe_gauge!(
        PROCESS_VIRTUAL_MEMORY,
        metrics::Unit::Bytes,
        "Virtual memory of the process."
    );
    describe_gauge!(
        PROCESS_CPU_SECONDS,
        metrics::Unit::Seconds,
        "CPU time of the process, user and system."
    );
    describe_gauge!(PROCESS_THREADS, "Threads of the process.");
    describe_gauge!(
        PROCESS_START_TIME,
        metrics::Unit::Seconds,
        "Start of the process, since the Unix epoch."
    );
    describe_gauge!(PROCESS_OPEN_FDS, "Open file descriptors.");
    describe_gauge!(PROCESS_MAX_FDS, "Limit of open file descriptors.");
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (process hub (x)) S 1 4242 4242 0 -1 4194560 1500 0 3 0 \
                        250 50 0 0 20 0 9 0 123400 987654321 2048 18446744073709551615";

    #[test]
    fn stat_fields_are_counted_after_the_name() {
        let s = parse_stat(STAT).expect("parses");
        assert_eq!(s.utime, 250);
        assert_eq!(s.stime, 50);
        assert_eq!(s.threads, 9);
        assert_eq!(s.start_ticks, 123_400);
        assert_eq!(s.vsize_bytes, 987_654_321);
        assert_eq!(s.rss_pages, 2048);
        assert_eq!(parse_stat("4242 (truncated"), None);
        assert_eq!(parse_stat("4242 (x) S 1 2"), None);
    }

    #[test]
    fn figures_combine_ticks_pages_and_boot_time() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        let f = figures(
            STAT,
            "cpu 1 2 3\nbtime 1700000000\n",
            limits,
            100,
            4096,
            Some(12),
        )
        .expect("figures");
        assert_eq!(f.resident_bytes, 2048 * 4096);
        assert!((f.cpu_seconds - 3.0).abs() < 1e-9);
        assert!((f.start_time_seconds - 1_700_001_234.0).abs() < 1e-6);
        assert_eq!(f.max_fds, Some(1024));
        assert_eq!(f.open_fds, Some(12));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_fds(unlimited), None);
        assert_eq!(figures(STAT, "no boot time\n", "", 100, 4096, None), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_itself() {
        let f = read().expect("/proc/self reads on Linux");
        assert!(f.resident_bytes > 0);
        assert!(f.threads >= 1);
        assert!(f.open_fds.is_some_and(|n| n >= 1));
    }
}
