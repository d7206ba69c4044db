//! How long each child ran on two nodes at once, seen from outside.
//!
//! A [`Watch`] polls every node's registry copy (`GET /v1/children`) on a period and records
//! what each node says it runs itself: a child counts as running on node X when X's own copy
//! lists X among the child's hosts. That is what X's supervisor runs, not what its peers
//! believe of it, so a peer's stale copy does not make a child look twice and a copy that
//! lost sight of a host does not hide one. The [`Timeline`] of those self-reports then says,
//! per child, each stretch during which two or more nodes ran it ([`Timeline::double_runs`])
//! and how often it changed host ([`Timeline::moves`]).
//!
//! The measure is as fine as the polling: a stretch may be seen up to one period (plus a
//! request's time) shorter or longer than it was.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::admin_client::AdminClient;
use super::census::view_of;

/// One node's self-report: the children its own copy said it ran, from `at` on.
#[derive(Clone, Debug)]
struct SelfReport {
    at: Instant,
    running: BTreeSet<String>,
}

/// Every node's self-reports, in time order. Only changes are kept: a report equal to the
/// node's previous one adds nothing (it is still counted in [`Timeline::last_report`]).
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    reports: BTreeMap<String, Vec<SelfReport>>,
    last_report: BTreeMap<String, Instant>,
}

/// One stretch during which a child ran on two or more nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubleRun {
    /// The child.
    pub child: String,
    /// Every node that ran it during the stretch.
    pub nodes: BTreeSet<String>,
    /// The report that showed it on a second node.
    pub began: Instant,
    /// From `began` to the report that showed it on one node or none again (or to the end of
    /// the window, when `ongoing`).
    pub lasted: Duration,
    /// It still ran on two nodes at the end of the window.
    pub ongoing: bool,
}

impl Timeline {
    /// Records that `node`'s own copy listed `running` as its children at `at`. Reports of
    /// one node must come in time order.
    pub fn record(&mut self, node: &str, at: Instant, running: BTreeSet<String>) {
        self.last_report.insert(node.to_owned(), at);
        let reports = self.reports.entry(node.to_owned()).or_default();
        if reports.last().is_some_and(|last| last.running == running) {
            return;
        }
        reports.push(SelfReport { at, running });
    }

    /// When `node` last answered.
    pub fn last_report(&self, node: &str) -> Option<Instant> {
        self.last_report.get(node).copied()
    }

    /// Each child's nodes as the latest self-reports say: child -> the nodes running it.
    pub fn running_now(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut running: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (node, reports) in &self.reports {
            for child in reports.last().iter().flat_map(|r| &r.running) {
                running
                    .entry(child.clone())
                    .or_default()
                    .insert(node.clone());
            }
        }
        running
    }

    /// Every report up to `to`, in time order (ties by node name), as `(at, node, running)`.
    fn merged(&self, to: Instant) -> Vec<(Instant, &str, &BTreeSet<String>)> {
        let mut all: Vec<_> = self
            .reports
            .iter()
            .flat_map(|(node, reports)| {
                reports
                    .iter()
                    .filter(|r| r.at <= to)
                    .map(move |r| (r.at, node.as_str(), &r.running))
            })
            .collect();
        all.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        all
    }

    /// Replays the reports up to `to`; `on_change(at, child, nodes)` is told each child's set
    /// of nodes each time it changes.
    fn replay(&self, to: Instant, mut on_change: impl FnMut(Instant, &str, &BTreeSet<String>)) {
        let empty = BTreeSet::new();
        let mut current: BTreeMap<&str, &BTreeSet<String>> = BTreeMap::new();
        let mut hosts: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for (at, node, running) in self.merged(to) {
            let before = current.insert(node, running).unwrap_or(&empty);
            for child in before.symmetric_difference(running) {
                let nodes = hosts.entry(child.as_str()).or_default();
                if running.contains(child) {
                    nodes.insert(node.to_owned());
                } else {
                    nodes.remove(node);
                }
                on_change(at, child, nodes);
            }
        }
    }

    /// Every stretch during which a child ran on two or more nodes and that was not over by
    /// `from`, as the reports up to `to` show; a stretch still running at `to` ends there,
    /// marked `ongoing`. In the order they began.
    pub fn double_runs(&self, from: Instant, to: Instant) -> Vec<DoubleRun> {
        let mut open: BTreeMap<String, (Instant, BTreeSet<String>)> = BTreeMap::new();
        let mut done = Vec::new();
        self.replay(to, |at, child, nodes| {
            if nodes.len() >= 2 {
                let entry = open
                    .entry(child.to_owned())
                    .or_insert_with(|| (at, BTreeSet::new()));
                entry.1.extend(nodes.iter().cloned());
            } else if let Some((began, seen)) = open.remove(child) {
                if at >= from {
                    done.push(DoubleRun {
                        child: child.to_owned(),
                        nodes: seen,
                        began,
                        lasted: at - began,
                        ongoing: false,
                    });
                }
            }
        });
        done.extend(open.into_iter().map(|(child, (began, nodes))| DoubleRun {
            child,
            nodes,
            began,
            lasted: to.saturating_duration_since(began),
            ongoing: true,
        }));
        done.sort_by_key(|d| d.began);
        done
    }

    /// Per child, how many times between `from` and `to` it came to run on one node other
    /// than the last node it ran on alone (through a stretch on two nodes or on none). Only
    /// children that moved are listed.
    pub fn moves(&self, from: Instant, to: Instant) -> BTreeMap<String, usize> {
        let mut alone_on: BTreeMap<String, String> = BTreeMap::new();
        let mut moves: BTreeMap<String, usize> = BTreeMap::new();
        self.replay(to, |at, child, nodes| {
            let (Some(node), 1) = (nodes.first(), nodes.len()) else {
                return;
            };
            let previous = alone_on.insert(child.to_owned(), node.clone());
            if at >= from && previous.is_some_and(|p| p != *node) {
                *moves.entry(child.to_owned()).or_default() += 1;
            }
        });
        moves
    }
}

/// Polls every node's registry copy on a period, in a thread per node, into a [`Timeline`];
/// stops when dropped.
pub struct Watch {
    timeline: Arc<Mutex<Timeline>>,
    stop: Arc<AtomicBool>,
    failures: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Watch {
    /// Starts polling each `(node name, client)` every `period`.
    pub fn start(clients: &[(String, AdminClient)], period: Duration) -> std::io::Result<Self> {
        let mut watch = Self {
            timeline: Arc::default(),
            stop: Arc::default(),
            failures: Arc::default(),
            threads: Vec::new(),
        };
        for (node, client) in clients {
            let (node, client) = (node.clone(), client.clone());
            let timeline = Arc::clone(&watch.timeline);
            let (stop, failures) = (Arc::clone(&watch.stop), Arc::clone(&watch.failures));
            let thread = std::thread::Builder::new()
                .name(format!("watch {node}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let asked = Instant::now();
                        match view_of(&client) {
                            Ok(view) => {
                                let at = Instant::now();
                                let running = view
                                    .into_iter()
                                    .filter(|(_, hosts)| hosts.contains(&node))
                                    .map(|(id, _)| id)
                                    .collect();
                                lock(&timeline).record(&node, at, running);
                            }
                            Err(error) => {
                                failures.fetch_add(1, Ordering::Relaxed);
                                tracing::debug!(%node, %error, "watch: no answer");
                            }
                        }
                        std::thread::sleep(period.saturating_sub(asked.elapsed()));
                    }
                })?;
            watch.threads.push(thread);
        }
        Ok(watch)
    }

    /// The reports so far.
    pub fn timeline(&self) -> Timeline {
        lock(&self.timeline).clone()
    }

    /// Polls that got no answer so far (the node was down or its answer did not decode).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn lock(timeline: &Mutex<Timeline>) -> MutexGuard<'_, Timeline> {
    timeline.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_stretch_on_two_nodes_lasts_from_the_second_host_to_the_first_that_stops() {
        let t0 = Instant::now();
        let mut t = Timeline::default();
        t.record("a", t0, set(&["x", "y"]));
        t.record("e", t0, set(&["z"]));
        // e takes x as well at 1 s; a stops it at 3.5 s.
        t.record("e", t0 + ms(1000), set(&["x", "z"]));
        t.record("a", t0 + ms(1200), set(&["x", "y"]));
        t.record("a", t0 + ms(3500), set(&["y"]));
        // y doubles at 4 s and still is at the end of the window.
        t.record("e", t0 + ms(4000), set(&["x", "y", "z"]));
        let runs = t.double_runs(t0, t0 + ms(5000));
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert_eq!(runs[0].child, "x");
        assert_eq!(runs[0].lasted, ms(2500));
        assert_eq!(runs[0].nodes, set(&["a", "e"]));
        assert!(!runs[0].ongoing);
        assert_eq!((runs[1].child.as_str(), runs[1].lasted), ("y", ms(1000)));
        assert!(runs[1].ongoing);
        // A window that starts after x's stretch ended sees only y's.
        assert_eq!(t.double_runs(t0 + ms(3600), t0 + ms(5000)).len(), 1);
        // x moved from a to e once (through two nodes); y has not moved (it runs twice).
        assert_eq!(
            t.moves(t0, t0 + ms(5000)),
            BTreeMap::from([("x".into(), 1)])
        );
        assert_eq!(t.running_now()["y"], set(&["a", "e"]));
        assert_eq!(t.last_report("a"), Some(t0 + ms(3500)));
    }

    #[test]
    fn a_child_that_moves_back_and_forth_counts_every_move_and_no_double_run() {
        let t0 = Instant::now();
        let mut t = Timeline::default();
        t.record("a", t0, set(&["x"]));
        t.record("b", t0, set(&[]));
        for i in 1..=4u64 {
            let (from, to) = if i % 2 == 1 { ("a", "b") } else { ("b", "a") };
            t.record(from, t0 + ms(i * 1000), set(&[]));
            t.record(to, t0 + ms(i * 1000 + 100), set(&["x"]));
        }
        assert!(t.double_runs(t0, t0 + ms(10_000)).is_empty());
        assert_eq!(t.moves(t0, t0 + ms(10_000))["x"], 4);
        assert_eq!(t.moves(t0 + ms(2500), t0 + ms(10_000))["x"], 2);
    }
}
