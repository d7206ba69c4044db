//! This node's part in load-based placement (`Distribution::LoadBalanced`, `core::load`): its
//! own load sample, the table of every member's load it places children by, and, on the
//! leader, each member's average over its reports.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::core::load::{place, spare_capacity, LoadAverage, LoadSample};
use crate::model::{ChildId, NodeName};

/// The loads this node knows.
#[derive(Default)]
pub(crate) struct Loads {
    /// The table the leader last sent (the leader's own, on the leader): what starts place by.
    table: RwLock<BTreeMap<NodeName, LoadSample>>,
    /// On the leader: each member's average over its reports.
    averages: Mutex<BTreeMap<NodeName, LoadAverage>>,
    /// On the leader: each member's latest report. A rebalance counts these children, not the
    /// averages, so one imbalance is not answered twice while the average catches up.
    latest: Mutex<BTreeMap<NodeName, LoadSample>>,
    /// The scheduler's busy time at the previous sample.
    busy_mark: Mutex<Option<(Instant, Duration)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Loads {
    /// This node's load now: its `children`, and with `host` the scheduler's busy share since
    /// the previous sample, its global queue and the process's resident memory
    /// (`HubShared::measures_host_load`).
    pub fn sample(&self, children: usize, host: bool) -> LoadSample {
        let mut sample = LoadSample {
            children: children as u64,
            ..LoadSample::default()
        };
        if !host {
            return sample;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let metrics = handle.metrics();
            let workers = metrics.num_workers();
            let busy: Duration = (0..workers)
                .map(|w| metrics.worker_total_busy_duration(w))
                .sum();
            let now = Instant::now();
            let mut mark = lock(&self.busy_mark);
            if let Some((then, busy_then)) = *mark {
                let wall = now.duration_since(then).as_secs_f64() * workers.max(1) as f64;
                if wall > 0.0 {
                    let share = busy.saturating_sub(busy_then).as_secs_f64() / wall;
                    sample.busy_permille = (share * 1000.0).round().clamp(0.0, 1000.0) as u64;
                }
            }
            *mark = Some((now, busy));
            sample.run_queue = metrics.global_queue_depth() as u64;
        }
        sample.memory_bytes = resident_bytes().unwrap_or(0);
        sample
    }

    /// The leader folds in a member's report.
    pub fn note_report(&self, node: &NodeName, sample: LoadSample, decay: f64) {
        let sample = sample.bounded();
        lock(&self.averages)
            .entry(node.clone())
            .and_modify(|avg| avg.update(sample, decay))
            .or_insert_with(|| LoadAverage::first(sample));
        lock(&self.latest).insert(node.clone(), sample);
    }

    /// The leader's table of the members' averages (nodes no longer members are forgotten),
    /// which it also places by.
    pub fn leader_table(&self, members: &[NodeName]) -> Vec<(NodeName, LoadSample)> {
        let is_member = |n: &NodeName| members.contains(n);
        lock(&self.averages).retain(|n, _| is_member(n));
        lock(&self.latest).retain(|n, _| is_member(n));
        let table: Vec<(NodeName, LoadSample)> = lock(&self.averages)
            .iter()
            .map(|(n, avg)| (n.clone(), avg.sample()))
            .collect();
        self.set_table(table.clone(), members);
        table
    }

    /// Each member's children in its latest report, for the rebalance (members that have not
    /// reported yet are left out: nothing moves on a guess).
    pub fn children_counts(&self, members: &[NodeName]) -> BTreeMap<NodeName, u64> {
        lock(&self.latest)
            .iter()
            .filter(|(n, _)| members.contains(n))
            .map(|(n, s)| (n.clone(), s.children))
            .collect()
    }

    /// Whether a member reported a move under way in its latest report.
    pub fn moves_under_way(&self, members: &[NodeName]) -> bool {
        lock(&self.latest)
            .iter()
            .any(|(n, s)| s.moving > 0 && members.contains(n))
    }

    /// Drops the reports gathered as leader (this node no longer leads).
    pub fn forget_reports(&self) {
        lock(&self.averages).clear();
        lock(&self.latest).clear();
    }

    /// Takes the leader's table; entries for nodes that are not members are dropped (so a
    /// peer's frame cannot grow it past the members).
    pub fn set_table(&self, table: Vec<(NodeName, LoadSample)>, members: &[NodeName]) {
        let table = table
            .into_iter()
            .filter(|(n, _)| members.contains(n))
            .map(|(n, s)| (n, s.bounded()))
            .collect();
        *self.table.write().unwrap_or_else(|e| e.into_inner()) = table;
    }

    /// The table this node places by.
    pub fn table(&self) -> BTreeMap<NodeName, LoadSample> {
        self.table.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Chooses `k` nodes among `members` for each of `ids` (`core::load::place`), from one
    /// reading of the table.
    pub fn choose<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a ChildId>,
        members: &[NodeName],
        k: usize,
    ) -> BTreeMap<ChildId, Vec<NodeName>> {
        let spare = spare_capacity(&self.table(), members);
        let mut seen = BTreeSet::new();
        ids.into_iter()
            .filter(|id| seen.insert(*id))
            .map(|id| (id.clone(), place(id, &spare, k)))
            .collect()
    }
}

/// The process's resident memory, from `VmRSS` in `/proc/self/status` (Linux; `None`
/// elsewhere), which the kernel gives in kB whatever the page size.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(children: u64) -> LoadSample {
        LoadSample {
            children,
            ..LoadSample::default()
        }
    }

    #[test]
    fn a_peers_table_cannot_grow_past_the_members_nor_weigh_past_the_bounds() {
        let loads = Loads::default();
        let members = vec!["a@h".to_owned(), "b@h".to_owned()];
        let mut table: Vec<(NodeName, LoadSample)> = (0..10_000)
            .map(|i| (format!("stranger-{i}@h"), sample(1)))
            .collect();
        table.push((
            "a@h".into(),
            LoadSample {
                children: u64::MAX,
                busy_permille: u64::MAX,
                run_queue: u64::MAX,
                memory_bytes: u64::MAX,
                moving: 0,
            },
        ));
        loads.set_table(table, &members);
        let kept = loads.table();
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["a@h"]);
        assert_eq!(kept["a@h"].busy_permille, 1000);
        // b has not reported: it counts as idle and takes nearly every child.
        let chosen = loads.choose(
            &(0..100)
                .map(|i| ChildId::from(format!("c{i}")))
                .collect::<Vec<_>>(),
            &members,
            1,
        );
        let on_b = chosen.values().filter(|n| n[0] == "b@h").count();
        assert!(on_b >= 90, "{on_b} of 100 on the idle node");
    }

    #[test]
    fn the_leader_forgets_members_that_left_and_counts_the_latest_reports() {
        let loads = Loads::default();
        loads.note_report(&"a@h".to_owned(), sample(10), 0.5);
        loads.note_report(&"a@h".to_owned(), sample(20), 0.5);
        loads.note_report(&"gone@h".to_owned(), sample(5), 0.5);
        let members = vec!["a@h".to_owned()];
        let table = loads.leader_table(&members);
        assert_eq!(table, vec![("a@h".to_owned(), sample(15))]);
        assert_eq!(
            loads.children_counts(&members),
            BTreeMap::from([("a@h".to_owned(), 20)])
        );
        assert_eq!(loads.table().len(), 1, "the leader places by its own table");
    }

    #[test]
    fn a_process_alone_measures_its_host() {
        let loads = Loads::default();
        let s = loads.sample(3, true);
        assert_eq!(s.children, 3);
        #[cfg(target_os = "linux")]
        assert!(s.memory_bytes > 0);
        assert_eq!(loads.sample(3, false), sample(3));
    }
}
