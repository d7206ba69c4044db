//! The storage benchmark: how many durable writes a second the `lmdb` backend takes from many
//! concurrent writers with group commit, against Elixir's ProcessHub's profile (one transaction and
//! fsync per write, same writers, same number of writes), and how long a point read takes in
//! the memory backend holding a million rows.
//!
//! Every write in both modes is acknowledged only once fsync'd; after each run the store is
//! reopened and every row counted, so the figures are for writes that really are on disk.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use process_hub::model::{ChildSpec, Metadata, Row};
use process_hub::storage::{
    CommitMode, DiskOptions, LmdbStorage, MemoryStorage, Mutation, Storage,
};
use rand::Rng;
use serde_json::json;

use super::latency::Latencies;

/// Flags of `process-hub bench storage`.
#[derive(Args, Debug)]
pub struct StorageArgs {
    /// Writes per mode (the same number for group commit and the per-write-fsync baseline).
    #[arg(long, default_value_t = 12_000)]
    ops: usize,
    /// Concurrent writers, each waiting for its own write to be durable before the next.
    #[arg(long, default_value_t = 64)]
    writers: usize,
    /// Rows in the memory backend for the point-read measurement.
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// Which ids the writers insert: `sequential` (ids in creation order, as a hub numbering
    /// its children produces; consecutive writes land in the same B-tree pages) or `spread`
    /// (each writer in its own key range, so a group of writes touches one page per writer).
    #[arg(long, value_enum, default_value_t = KeyPattern::Sequential)]
    keys: KeyPattern,
    /// Skip the baseline and the read measurement (for profiling the group commit path).
    #[arg(long, hide = true)]
    group_only: bool,
    /// Print one JSON object on stdout instead of a summary.
    #[arg(long)]
    json: bool,
    /// Directory for the stores (a fresh temporary directory is made inside it); default: the
    /// system temporary directory. It must be on the disk you want to measure (not tmpfs).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// The order of the ids written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyPattern {
    /// `child-0000000000`, `child-0000000001`, ... interleaved across writers.
    Sequential,
    /// `w<writer>-<n>`: one key range per writer.
    Spread,
}

impl KeyPattern {
    fn id(self, writer: usize, writers: usize, n: usize) -> String {
        match self {
            KeyPattern::Sequential => format!("child-{:010}", n * writers + writer),
            KeyPattern::Spread => format!("w{writer}-{n}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            KeyPattern::Sequential => "sequential",
            KeyPattern::Spread => "spread",
        }
    }
}

/// The outcome of one write run.
struct WriteRun {
    ops_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    elapsed_s: f64,
    commits: u64,
    verified_rows: usize,
}

/// Runs the benchmark and prints the result.
pub fn run(args: &StorageArgs) -> Result<(), String> {
    if args.ops == 0 || args.writers == 0 || args.rows == 0 {
        return Err("--ops, --writers and --rows must be at least 1".into());
    }
    let base = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            tempfile::tempdir_in(dir)
        }
        None => tempfile::tempdir(),
    }
    .map_err(|e| format!("cannot create a temporary directory: {e}"))?;

    eprintln!(
        "storage bench: {} writes by {} writers per mode, in {}",
        args.ops,
        args.writers,
        base.path().display()
    );
    // Writers are async tasks, as the hub's writers are actors on a tokio runtime.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let bench = WriteBench {
        base: base.path(),
        runtime: &runtime,
        args,
    };
    if args.group_only {
        let group = WriteRun::from(vec![bench.segment(CommitMode::Group, "group", args.ops)?]);
        println!("{}", json!({ "group_commit": run_json(&group) }));
        return Ok(());
    }
    // A-B-B-A: each mode writes half its operations before the other mode and half after, so
    // a drift in machine load (the machine is shared) hits both modes alike.
    let (first, second) = (args.ops / 2, args.ops - args.ops / 2);
    let mut per_op = Vec::new();
    let mut group = Vec::new();
    eprintln!("per-write fsync (baseline), first half...");
    per_op.push(bench.segment(CommitMode::PerOperation, "per_op_sync-1", first)?);
    eprintln!("group commit, first half...");
    group.push(bench.segment(CommitMode::Group, "group_commit-1", first)?);
    eprintln!("group commit, second half...");
    group.push(bench.segment(CommitMode::Group, "group_commit-2", second)?);
    eprintln!("per-write fsync (baseline), second half...");
    per_op.push(bench.segment(CommitMode::PerOperation, "per_op_sync-2", second)?);
    let (per_op, group) = (WriteRun::from(per_op), WriteRun::from(group));
    for (name, run) in [("per-write fsync", &per_op), ("group commit", &group)] {
        eprintln!(
            "  {name}: {:.0} writes/s, p50 {:.0} us, p99 {:.0} us, {} commits",
            run.ops_per_s, run.p50_us, run.p99_us, run.commits
        );
    }
    eprintln!("point reads at {} rows in memory...", args.rows);
    let lookups = lookups(args.rows);
    let lookup_ns_p50 = lookups.get_ns_p50;
    eprintln!(
        "  get p50 {lookup_ns_p50:.0} ns, contains p50 {:.0} ns",
        lookups.contains_ns_p50
    );

    let ratio = group.ops_per_s / per_op.ops_per_s;
    let report = json!({
        "bench": "storage",
        "backend": "lmdb",
        "writers": args.writers,
        "ops": args.ops,
        "keys": args.keys.name(),
        "group_commit": run_json(&group),
        "per_op_sync": run_json(&per_op),
        "ratio": round2(ratio),
        "lookup_ns_p50": lookup_ns_p50.round(),
        "contains_ns_p50": lookups.contains_ns_p50.round(),
        "lookup_rows": args.rows,
        "dir": base.path().display().to_string(),
    });
    if args.json {
        println!("{report}");
    } else {
        println!(
            "group commit {:.0} writes/s (p50 {:.0} us, p99 {:.0} us), per-write fsync {:.0} writes/s: \
             ratio {:.1}; point read p50 {:.0} ns at {} rows",
            group.ops_per_s,
            group.p50_us,
            group.p99_us,
            per_op.ops_per_s,
            ratio,
            lookup_ns_p50,
            args.rows
        );
    }
    Ok(())
}

fn run_json(run: &WriteRun) -> serde_json::Value {
    json!({
        "ops_per_s": run.ops_per_s.round(),
        "p50_us": round2(run.p50_us),
        "p99_us": round2(run.p99_us),
        "elapsed_s": round2(run.elapsed_s),
        "fsync_commits": run.commits,
        "writes_per_commit": round2(run.writes_per_commit()),
        "verified_rows": run.verified_rows,
    })
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn row(id: String) -> Row {
    let mut metadata = Metadata::new();
    metadata.insert("tag".into(), "bench".into());
    let spec = ChildSpec::new(id, "counter");
    Row::authored(spec, metadata, "bench@localhost", 0, true)
        .unwrap_or_else(|_| unreachable!("the bench's metadata has no reserved key"))
}

/// One measured stretch of writes into a fresh store.
struct Segment {
    latencies: Vec<Duration>,
    elapsed: Duration,
    commits: u64,
    verified_rows: usize,
}

impl From<Vec<Segment>> for WriteRun {
    fn from(segments: Vec<Segment>) -> Self {
        let mut latencies = Latencies::new();
        let (mut elapsed, mut commits, mut verified_rows) = (Duration::ZERO, 0, 0);
        for segment in segments {
            latencies.extend(segment.latencies);
            elapsed += segment.elapsed;
            commits += segment.commits;
            verified_rows += segment.verified_rows;
        }
        WriteRun {
            ops_per_s: latencies.count() as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_us: latencies.median().as_secs_f64() * 1e6,
            p99_us: latencies.quantile(0.99).as_secs_f64() * 1e6,
            elapsed_s: elapsed.as_secs_f64(),
            commits,
            verified_rows,
        }
    }
}

impl WriteRun {
    /// How many writes shared a commit and its fsync, on average.
    fn writes_per_commit(&self) -> f64 {
        self.verified_rows as f64 / self.commits.max(1) as f64
    }
}

struct WriteBench<'a> {
    base: &'a Path,
    runtime: &'a tokio::runtime::Runtime,
    args: &'a StorageArgs,
}

impl WriteBench<'_> {
    /// `writers` concurrent tasks write `ops` distinct rows in total into a fresh store, each
    /// waiting for its own write to be durable before its next; then the store is reopened and
    /// the rows counted.
    fn segment(&self, mode: CommitMode, name: &str, ops: usize) -> Result<Segment, String> {
        let (dir, writers) = (self.base.join(name), self.args.writers);
        let options = DiskOptions {
            commit_mode: mode,
            ..DiskOptions::default()
        };
        let store = Arc::new(LmdbStorage::open(&dir, &options).map_err(|e| e.to_string())?);
        let per_writer: Vec<Vec<Row>> = (0..writers)
            .map(|w| {
                let count = ops / writers + usize::from(w < ops % writers);
                (0..count)
                    .map(|i| row(self.args.keys.id(w, writers, i)))
                    .collect()
            })
            .collect();
        let began = Instant::now();
        let latencies = self.runtime.block_on(async {
            let tasks: Vec<_> = per_writer
                .into_iter()
                .map(|rows| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        let mut latencies = Vec::with_capacity(rows.len());
                        for row in rows {
                            let t = Instant::now();
                            store
                                .submit(vec![Mutation::put(row)])
                                .wait_async()
                                .await
                                .map_err(|e| e.to_string())?;
                            latencies.push(t.elapsed());
                        }
                        Ok::<_, String>(latencies)
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(ops);
            for task in tasks {
                all.extend(task.await.map_err(|e| format!("a writer failed: {e}"))??);
            }
            Ok::<_, String>(all)
        })?;
        let elapsed = began.elapsed();
        let stats = store.commit_stats();
        drop(store);

        let verified_rows = LmdbStorage::open(&dir, &options)
            .map_err(|e| e.to_string())?
            .len();
        if verified_rows != ops {
            return Err(format!(
                "{verified_rows} rows on disk after {ops} acknowledged writes"
            ));
        }
        Ok(Segment {
            latencies,
            elapsed,
            commits: stats.commits,
            verified_rows,
        })
    }
}

/// Median point-read costs on a memory store holding `rows` rows.
struct Lookups {
    /// `get`: find the row and return an owned copy (what `child_lookup` pays).
    get_ns_p50: f64,
    /// `contains`: find the row only (the index cost without the copy).
    contains_ns_p50: f64,
}

/// Point reads of random ids on a memory store holding `rows` rows, timed in runs of 16 so that
/// the clock's own cost does not dominate a sub-microsecond operation.
fn lookups(rows: usize) -> Lookups {
    let store = MemoryStorage::new();
    let ids: Vec<process_hub::model::ChildId> =
        (0..rows).map(|i| format!("child-{i}").into()).collect();
    for chunk in ids.chunks(10_000) {
        store.apply_in_memory(
            &chunk
                .iter()
                .map(|id| Mutation::put(row(id.to_string())))
                .collect::<Vec<_>>(),
        );
    }
    Lookups {
        get_ns_p50: p50_ns(&ids, |id| {
            black_box(store.get(id));
        }),
        contains_ns_p50: p50_ns(&ids, |id| {
            black_box(store.contains(id));
        }),
    }
}

fn p50_ns(ids: &[process_hub::model::ChildId], read: impl Fn(&process_hub::model::ChildId)) -> f64 {
    const PER_SAMPLE: usize = 16;
    const SAMPLES: usize = 20_000;
    let mut rng = rand::thread_rng();
    let mut samples = Latencies::new();
    for _ in 0..SAMPLES {
        // Copies of the ids, made just before: a caller looks up an id it holds, so the id
        // itself is in cache; what is measured is finding the row.
        let picks: [process_hub::model::ChildId; PER_SAMPLE] =
            std::array::from_fn(|_| ids[rng.gen_range(0..ids.len())].clone());
        let t = Instant::now();
        for id in &picks {
            read(id);
        }
        samples.record(t.elapsed());
    }
    samples.median().as_nanos() as f64 / PER_SAMPLE as f64
}
