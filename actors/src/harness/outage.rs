//! Durable children through the admin API and a whole-cluster outage: declare children
//! (`"durable": true`, awaited), stop some of them (`DELETE`, which undeclares them), SIGKILL
//! every node, restart every node on its data directory, and wait until every declared child
//! runs again exactly once. Shared by `process-hub bench recovery`, `process-hub demo --durable`
//! and the multi-process tests, so all three measure and check the same thing.
//!
//! **Where `recovery_ms` starts.** The nodes are restarted one after another; the bench cannot
//! see inside a node when its hub started its grace clock, only when it spawned the process.
//! Every hub starts its clock after its process was spawned, so the instant
//! `first process spawned + reconcile_grace_ms` is no later than the end of any node's grace:
//! `recovery_ms` is measured from there until every node's registry copy lists every declared
//! (and not stopped) child on exactly one node, the same node in every copy. It therefore also
//! counts the nodes' own startup time, and the polling period (a few tens of ms).
//!
//! **Where it ends.** Each poll reads every node's registry counts (`GET
//! /v1/registry/summary`): at least as many children placed as declared, each bound on one
//! node. When they show that, every copy is read whole and checked child by child; if that
//! confirms, the recovery ended at the counts' reading, not after the full read (which takes
//! seconds at hundreds of thousands of children).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use process_hub::admin::{StartError, StartSpec};
use serde::Serialize;

use super::census::{runs_once_in, view_of, Census};
use super::local_cluster::{wait_for, HarnessError, LocalCluster};
use crate::admin_client::{AdminClient, AdminClientError};

/// How many children of each kind of finding a report names (the counts are always complete).
pub const NAMED_IN_REPORT: usize = 20;

/// Specs of `counter` children `ids`, durable or not.
pub fn counter_specs(ids: &[String], durable: bool) -> Vec<StartSpec> {
    ids.iter()
        .map(|id| StartSpec {
            durable,
            ..StartSpec::new(id.clone(), "counter")
        })
        .collect()
}

/// Starts `specs` through `client` in requests of `batch`, `concurrency` requests in flight
/// (one connection each, every request awaited), as a service with several callers drives a
/// node. Returns the elapsed time and the per-child errors the nodes reported.
pub fn start_in_batches(
    client: &AdminClient,
    specs: &[StartSpec],
    batch: usize,
    concurrency: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(Duration, Vec<StartError>), AdminClientError> {
    start_in_batches_over(
        std::slice::from_ref(client),
        specs,
        batch,
        concurrency,
        progress,
    )
}

/// [`start_in_batches`] through several nodes: request `i` goes to `clients[i % len]`, as
/// callers behind a load balancer spread their requests over every node's admin API.
pub fn start_in_batches_over(
    clients: &[AdminClient],
    specs: &[StartSpec],
    batch: usize,
    concurrency: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(Duration, Vec<StartError>), AdminClientError> {
    let Some(client) = clients.first() else {
        return Err(AdminClientError::Unreachable {
            addr: "(none)".into(),
            message: "no admin API to start children through".into(),
        });
    };
    let started_at = Instant::now();
    let batch = batch.max(1);
    let chunks: Vec<&[StartSpec]> = specs.chunks(batch).collect();
    let (next, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let workers = concurrency.clamp(1, chunks.len().max(1));
    let outcomes: Vec<Result<Vec<StartError>, AdminClientError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let (chunks, next, done) = (&chunks, &next, &done);
                scope.spawn(move || {
                    let mut errors = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(chunk) = chunks.get(i) else { break };
                        errors.extend(clients[i % clients.len()].start(chunk)?.errors);
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished % 5 == 0 {
                            progress(&format!(
                                "  {} started",
                                (finished * batch).min(specs.len())
                            ));
                        }
                    }
                    Ok(errors)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(AdminClientError::Unreachable {
                        addr: client.addr().to_owned(),
                        message: "a start worker panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut errors = Vec::new();
    for outcome in outcomes {
        errors.extend(outcome?);
    }
    Ok((started_at.elapsed(), errors))
}

/// A `DELETE` that did not answer `stopped`.
#[derive(Clone, Debug, Serialize)]
pub struct StopFailure {
    /// The child.
    pub id: String,
    /// The HTTP status, if the node answered (404: no child with that id).
    pub status: Option<u16>,
    /// Why, as the node or the transport said.
    pub reason: String,
}

/// Stops `ids` through `client` (`DELETE`, awaited) from `threads` concurrent callers. Returns
/// the stops that failed.
pub fn stop_concurrently(client: &AdminClient, ids: &[String], threads: usize) -> Vec<StopFailure> {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(id) = ids.get(i) else { break };
                let outcome = match client.stop(id) {
                    Ok(r) if r.errors.is_empty() => None,
                    Ok(r) => Some((Some(200), format!("{:?}", r.errors))),
                    Err(e) => Some((e.status(), e.to_string())),
                };
                if let Some((status, reason)) = outcome {
                    failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(StopFailure {
                            id: id.clone(),
                            status,
                            reason,
                        });
                }
            });
        }
    });
    failures.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Stops `ids` through `client` in batch stops (`POST /v1/children/stop`, awaited) of `batch`
/// ids, `concurrency` requests in flight (one connection each). Returns the children that
/// were not stopped: the per-child errors the nodes reported, and every child of a request
/// the node refused whole or that did not come back (a `pending` stop is decided, not a
/// failure).
pub fn stop_in_batches(
    client: &AdminClient,
    ids: &[String],
    batch: usize,
    concurrency: usize,
) -> Vec<StopFailure> {
    let chunks: Vec<&[String]> = ids.chunks(batch.max(1)).collect();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..concurrency.clamp(1, chunks.len().max(1)) {
            scope.spawn(|| {
                let client = client.clone();
                while let Some(chunk) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let failed: Vec<StopFailure> = match client.stop_many(chunk) {
                        Ok(answer) => answer
                            .errors
                            .into_iter()
                            .map(|e| StopFailure {
                                id: e.id,
                                status: Some(200),
                                reason: format!("{} ({})", e.reason, e.code),
                            })
                            .collect(),
                        Err(e) => chunk
                            .iter()
                            .map(|id| StopFailure {
                                id: id.clone(),
                                status: e.status(),
                                reason: e.to_string(),
                            })
                            .collect(),
                    };
                    failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(failed);
                }
            });
        }
    });
    failures.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// How the outage is waited for.
#[derive(Clone, Debug)]
pub struct OutageSettings {
    /// The `--reconcile-grace-ms` the nodes run with.
    pub reconcile_grace: Duration,
    /// How long to wait for the cluster to form and for every declared child to run.
    pub deadline: Duration,
    /// After every declared child runs and every node is `normal`: how long to keep watching
    /// before the final census (so that a stopped child a later round would restart shows up).
    pub settle: Duration,
}

/// What the outage showed.
#[derive(Clone, Debug, Serialize)]
pub struct OutageReport {
    /// From `first process spawned + reconcile_grace_ms` (see the module docs) until every
    /// declared child runs exactly once in every node's copy; `None` if that never happened
    /// before the deadline.
    pub recovery_ms: Option<u64>,
    /// From the first restarted process's spawn to the same end (grace included).
    pub restart_to_recovered_ms: Option<u64>,
    /// From the first restarted process's spawn until every node reports `recovery_state`
    /// `normal` (its first reconcile round completed); `None` if recovery never completed.
    pub restart_to_all_normal_ms: Option<u64>,
    /// The grace the nodes ran with.
    pub reconcile_grace_ms: u64,
    /// Declared, not stopped, and listed on no host by any node's copy (final census).
    pub lost: usize,
    /// Stopped before the outage, yet listed on a host by some node's copy (final census).
    pub resurrected: usize,
    /// Listed on more than one host over the union of the copies (final census).
    pub duplicates: usize,
    /// Up to [`NAMED_IN_REPORT`] lost ids, each with what every node's copy showed.
    pub lost_ids: Vec<String>,
    /// Up to [`NAMED_IN_REPORT`] resurrected ids, each with what every node's copy showed.
    pub resurrected_ids: Vec<String>,
    /// Up to [`NAMED_IN_REPORT`] duplicated ids, each with what every node's copy showed.
    pub duplicate_ids: Vec<String>,
    /// Each node's declared list after recovery: version.
    pub declared_versions: BTreeMap<String, u64>,
    /// Each node's declared list after recovery: number of children.
    pub declared_counts: BTreeMap<String, usize>,
    /// Every node's `GET /v1/declared` lists exactly the declared, not stopped, ids.
    pub declared_lists_agree: bool,
    /// Children per host after recovery, as the first node's copy says.
    pub running_per_node: BTreeMap<String, usize>,
}

impl OutageReport {
    /// No declared child lost, none stopped running again, none twice, and recovered in time.
    pub fn clean(&self) -> bool {
        self.recovery_ms.is_some()
            && self.lost == 0
            && self.resurrected == 0
            && self.duplicates == 0
            && self.declared_lists_agree
    }
}

fn named(ids: &[String], census: &Census) -> Vec<String> {
    ids.iter()
        .take(NAMED_IN_REPORT)
        .map(|id| format!("{id} ({})", census.describe(id)))
        .collect()
}

/// SIGKILLs every node of `cluster`, restarts every node on its data directory, and waits until
/// each of `declared` runs exactly once (see the module docs for what is measured). `stopped`
/// are the children stopped before the outage: they must not run again.
pub fn whole_cluster_outage(
    cluster: &mut LocalCluster,
    declared: &BTreeSet<String>,
    stopped: &BTreeSet<String>,
    settings: &OutageSettings,
    progress: &dyn Fn(&str),
) -> Result<OutageReport, HarnessError> {
    if cluster.nodes.is_empty() {
        return Err(HarnessError::Setup(std::io::Error::other(
            "a cluster without nodes has no outage",
        )));
    }
    progress("SIGKILL every node");
    for node in &mut cluster.nodes {
        node.kill();
    }
    progress("restarting every node on its data directory");
    let first_spawn = Instant::now();
    for node in &mut cluster.nodes {
        node.restart()?;
    }
    cluster.wait_formed(settings.deadline)?;
    let grace_end = first_spawn + settings.reconcile_grace;
    let all = cluster.named_clients();
    progress("waiting until every declared child runs exactly once");
    let first = all[0].1.clone();
    let recovered = wait_for(
        "every declared child to run exactly once",
        settings.deadline,
        || {
            // Every copy's counts first: enough children placed, each on one node. Reading
            // every copy whole takes seconds at hundreds of thousands of children (and loads
            // the nodes measured), so it only confirms, by id, what the counts showed; the
            // recovery is timed at the counts.
            let counted = all.iter().all(|(_, c)| {
                c.registry_summary().is_ok_and(|s| {
                    s.placed >= declared.len() && s.per_node.values().sum::<usize>() == s.placed
                })
            });
            let counted_at = Instant::now();
            if !counted {
                std::thread::sleep(Duration::from_millis(30));
                return None;
            }
            let view = view_of(&first).ok()?;
            if !runs_once_in(&view, declared) {
                std::thread::sleep(Duration::from_millis(30));
                return None;
            }
            let census = Census::take(&all).ok()?;
            census.all_run_once(declared).then_some(counted_at)
        },
    );
    let recovered_at = match recovered {
        Ok(at) => Some(at),
        Err(HarnessError::Timeout { .. }) => {
            progress("  not every declared child runs before the deadline");
            None
        }
        Err(e) => return Err(e),
    };
    let mut all_normal_at = None;
    if recovered_at.is_some() {
        all_normal_at = Some(wait_for(
            "every node to be normal",
            settings.deadline,
            || {
                all.iter()
                    .all(|(_, c)| c.health().is_ok_and(|h| h.recovery_state == "normal"))
                    .then(Instant::now)
            },
        )?);
        std::thread::sleep(settings.settle);
    }
    let census = Census::take(&all).map_err(|e| HarnessError::Timeout {
        what: format!("the final census ({e})"),
        waited: settings.deadline,
    })?;
    let mut declared_versions = BTreeMap::new();
    let mut declared_counts = BTreeMap::new();
    let mut declared_lists_agree = true;
    for (node, client) in &all {
        match client.declared() {
            Ok(list) => {
                let ids: BTreeSet<String> = list.children.into_iter().map(|c| c.id).collect();
                declared_lists_agree &= ids == *declared;
                declared_versions.insert(node.clone(), list.version);
                declared_counts.insert(node.clone(), ids.len());
            }
            Err(e) => {
                progress(&format!("  {node}: GET /v1/declared failed: {e}"));
                declared_lists_agree = false;
            }
        }
    }
    let lost = census.lost(declared);
    let resurrected = census.resurrected(stopped);
    let duplicates: Vec<String> = census.duplicates().into_keys().collect();
    let since = |start: Instant| recovered_at.map(|at| at.saturating_duration_since(start));
    Ok(OutageReport {
        recovery_ms: since(grace_end).map(|d| d.as_millis() as u64),
        restart_to_recovered_ms: since(first_spawn).map(|d| d.as_millis() as u64),
        restart_to_all_normal_ms: all_normal_at
            .map(|at| at.saturating_duration_since(first_spawn).as_millis() as u64),
        reconcile_grace_ms: settings.reconcile_grace.as_millis() as u64,
        lost: lost.len(),
        resurrected: resurrected.len(),
        duplicates: duplicates.len(),
        lost_ids: named(&lost, &census),
        resurrected_ids: named(&resurrected, &census),
        duplicate_ids: named(&duplicates, &census),
        declared_versions,
        declared_counts,
        declared_lists_agree,
        running_per_node: census.per_host(&all[0].0),
    })
}
