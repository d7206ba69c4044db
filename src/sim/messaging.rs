//! Messages and monitors in a run: typed calls and casts through [`crate::ChildRef`]s made on any
//! node, monitors set from any node and what they deliver, nodes leaving together, and the
//! probe of the quiet cluster that holds messaging to its promises.
//!
//! While faults strike, a call may fail (its child moved, its host died) and a monitor may fire
//! for any reason; what must hold even then is that an answer is the child's own, a monitor
//! delivers at most once and never once cancelled, and two nodes leaving together hand nothing
//! to each other. Once the cluster is whole and quiet, [`probe`] asks more: every node reaches
//! every child, one sender's casts arrive in order, and a monitor on a child that is stopped
//! fires exactly once.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::mpsc;

use super::child::SimChildMsg;
use super::cluster::SimCluster;
use super::invariants::{Invariant, Violation};
use super::trace::{short, Trace};
use crate::api::Hub;
use crate::model::{ChildId, DownReason, NodeName};
use crate::types::{MonitorOptions, StopOptions};

/// How long a typed call of the run waits.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a call of the probe waits: far above any latency of a healed cluster.
const PROBE_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Casts each node sends each probed child.
const PROBE_CASTS: u64 = 10;

/// Children the cast probe reaches (the first, by id).
const PROBE_CAST_CHILDREN: usize = 8;

/// Children the monitor probe stops (the first plain ones, by id).
const PROBE_MONITORED: usize = 3;

/// What the run's messages and monitors showed so far.
#[derive(Default)]
pub struct MessageLog {
    monitors: Vec<MonitorEntry>,
    /// The first broken promise, if any.
    broken: Option<Violation>,
}

struct MonitorEntry {
    label: String,
    cancelled: bool,
    deliveries: u32,
}

/// A log shared by the run and its tasks.
pub type SharedMessageLog = Arc<Mutex<MessageLog>>;

impl MessageLog {
    /// The first broken promise, if any.
    pub fn check(&self) -> Result<(), Violation> {
        match &self.broken {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }

    /// Monitors set so far, and how many fired.
    pub fn monitor_counts(&self) -> (usize, usize) {
        let fired = self.monitors.iter().filter(|m| m.deliveries > 0).count();
        (self.monitors.len(), fired)
    }

    fn break_promise(&mut self, invariant: Invariant, detail: String) {
        if self.broken.is_none() {
            self.broken = Some(Violation::new(invariant, detail));
        }
    }

    fn delivered(&mut self, entry: usize) {
        let Some(m) = self.monitors.get_mut(entry) else {
            return;
        };
        m.deliveries += 1;
        let detail = if m.cancelled {
            Some(format!("{}: fired after it was demonitored", m.label))
        } else if m.deliveries > 1 {
            Some(format!("{}: fired {} times", m.label, m.deliveries))
        } else {
            None
        };
        if let Some(detail) = detail {
            self.break_promise(Invariant::MonitorsFireOnce, detail);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Calls child `id` through a typed reference made on `hub` with `n`, as a task; an answer
/// must be `n`. `done` is told when the call returns.
pub fn typed_call(
    hub: &Hub,
    id: ChildId,
    n: u64,
    log: &SharedMessageLog,
    trace: &Arc<Trace>,
    done: impl FnOnce() + Send + 'static,
) {
    let child = hub.child_ref::<SimChildMsg>(id.clone());
    let (log, trace, node) = (log.clone(), trace.clone(), hub.node().to_owned());
    tokio::spawn(async move {
        let answer = child
            .call(|reply| SimChildMsg::Ping(n, reply), CALL_TIMEOUT)
            .await;
        done();
        let summary = match answer {
            Ok(m) if m == n => "answered".to_owned(),
            Ok(m) => {
                lock(&log).break_promise(
                    Invariant::CallsAnswered,
                    format!("typed call {n} to {id} via {node} answered {m}"),
                );
                format!("answered {m}, not {n}")
            }
            Err(e) => format!("failed: {}", e.code()),
        };
        trace.line(format!(
            "typed call {n} to {id} via {}: {summary}",
            short(&node)
        ));
    });
}

/// Casts note `seq` of sender `tag` to child `id` through a typed reference made on `hub`.
pub fn typed_cast(hub: &Hub, id: ChildId, tag: u64, seq: u64, trace: &Trace) {
    let sent = hub
        .child_ref::<SimChildMsg>(id.clone())
        .cast(SimChildMsg::Note(tag, seq));
    if let Err(e) = sent {
        trace.line(format!("typed cast to {id}: {}", e.code()));
    }
}

/// Monitors child `id` from `hub` (demonitoring it at once with `cancel`); a task counts what
/// the monitor delivers.
pub fn monitor(hub: &Hub, id: ChildId, cancel: bool, log: &SharedMessageLog, trace: &Arc<Trace>) {
    let node = hub.node().to_owned();
    let (monitor, mut downs) = hub.monitor_channel(id.clone(), MonitorOptions::default());
    let label = format!("monitor {} of {id} on {}", monitor.0, short(&node));
    let entry = {
        let mut log = lock(log);
        log.monitors.push(MonitorEntry {
            label: label.clone(),
            cancelled: false,
            deliveries: 0,
        });
        log.monitors.len() - 1
    };
    if cancel && hub.demonitor(monitor) {
        lock(log).monitors[entry].cancelled = true;
        trace.line(format!("{label} demonitored"));
    }
    let (log, trace) = (log.clone(), trace.clone());
    tokio::spawn(async move {
        while let Some(down) = downs.recv().await {
            trace.line(format!("{label}: down, {}", reason_name(&down.reason)));
            lock(&log).delivered(entry);
        }
    });
}

/// A reason's name in the trace (its code, and the node it names).
fn reason_name(reason: &DownReason) -> String {
    match reason {
        DownReason::Normal { node } => format!("normal on {}", short(node)),
        DownReason::Abnormal { node, .. } => format!("abnormal on {}", short(node)),
        DownReason::Stopped { node } => format!("stopped on {}", short(node)),
        DownReason::Moved { node } => format!("moved from {}", short(node)),
        DownReason::NodeDown { node } => format!("node_down {}", short(node)),
        DownReason::NoChild => "no_child".into(),
        DownReason::HubStopped => "hub_stopped".into(),
        other => format!("{other:?}"),
    }
}

/// Whether the links between every two of `nodes`, both ways, deliver as sent now and go on
/// doing so (a flapping link may be cut the next instant).
pub fn links_clean(cluster: &SimCluster, nodes: &[NodeName]) -> BTreeSet<(NodeName, NodeName)> {
    let mut clean = BTreeSet::new();
    for a in nodes {
        for b in nodes {
            if a != b
                && cluster.router.link_is_clean(a, b)
                && cluster.router.link_is_clean(b, a)
                && !cluster.flaps(a, b)
            {
                clean.insert((a.clone(), b.clone()));
            }
        }
    }
    clean
}

/// Judges the handovers of nodes that left together: none may name another of them when the
/// link between the two delivered.
pub fn judge_handovers(
    leaving: &[NodeName],
    clean: &BTreeSet<(NodeName, NodeName)>,
    handovers: &[(NodeName, Vec<NodeName>)],
) -> Result<(), Violation> {
    for (from, to) in handovers {
        for target in to {
            if leaving.contains(target) && clean.contains(&(from.clone(), target.clone())) {
                return Err(Violation::new(
                    Invariant::NoHandoverToLeaving,
                    format!("{from} handed children to {target}, which was leaving with it"),
                ));
            }
        }
    }
    Ok(())
}

/// What the probe did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeCounts {
    /// Typed calls answered.
    pub calls: usize,
    /// Typed casts counted in order.
    pub casts: u64,
    /// Monitors that fired once, `stopped`.
    pub monitors: usize,
}

/// Probes the whole, quiet cluster: every node calls every child through a typed reference;
/// every node casts numbered notes to the first children and asks each what it saw; monitors
/// from every node on the first plain children, which are then stopped, fire once.
pub async fn probe(
    cluster: &SimCluster,
    plain: &BTreeSet<ChildId>,
    trace: &Trace,
) -> Result<ProbeCounts, Violation> {
    let mut counts = ProbeCounts::default();
    let running: Vec<ChildId> = cluster.running().into_keys().collect();
    let hubs: Vec<Hub> = cluster
        .up()
        .iter()
        .filter_map(|n| cluster.hub(n).cloned())
        .collect();
    for hub in &hubs {
        let calls = running.iter().enumerate().map(|(i, id)| {
            let child = hub.child_ref::<SimChildMsg>(id.clone());
            async move {
                let n = i as u64 + 1;
                let answer = child
                    .call(|reply| SimChildMsg::Ping(n, reply), PROBE_CALL_TIMEOUT)
                    .await;
                match answer {
                    Ok(m) if m == n => Ok(()),
                    Ok(m) => Err(format!("{id} answered {m}, not {n}")),
                    Err(e) => Err(format!("{id}: {e}")),
                }
            }
        });
        for result in join_all(calls).await {
            result.map_err(|e| {
                Violation::new(
                    Invariant::CallsAnswered,
                    format!("a call from {} to a child that stays put: {e}", hub.node()),
                )
            })?;
            counts.calls += 1;
        }
    }
    let cast_to: Vec<&ChildId> = running.iter().take(PROBE_CAST_CHILDREN).collect();
    for (tag, hub) in hubs.iter().enumerate() {
        let tag = 1_000 + tag as u64;
        for id in &cast_to {
            for seq in 1..=PROBE_CASTS {
                typed_cast(hub, (*id).clone(), tag, seq, trace);
            }
        }
        for id in &cast_to {
            let seen = hub
                .child_ref::<SimChildMsg>((*id).clone())
                .call(|reply| SimChildMsg::Seen(tag, reply), PROBE_CALL_TIMEOUT)
                .await;
            match seen.as_deref() {
                Ok([count, 1]) if *count == PROBE_CASTS => counts.casts += count,
                other => {
                    return Err(Violation::new(
                        Invariant::CastsInOrder,
                        format!(
                            "{PROBE_CASTS} casts from {} to {id}: [count, in order] {other:?}",
                            hub.node()
                        ),
                    ))
                }
            }
        }
    }
    let monitored: Vec<&ChildId> = running
        .iter()
        .filter(|id| plain.contains(*id))
        .take(PROBE_MONITORED)
        .collect();
    let Some(stopper) = hubs.first() else {
        return Ok(counts);
    };
    let mut channels: Vec<(String, mpsc::UnboundedReceiver<crate::types::ChildDown>)> = Vec::new();
    for id in &monitored {
        for hub in &hubs {
            let (_, rx) = hub.monitor_channel((*id).clone(), MonitorOptions::default());
            channels.push((format!("{id} from {}", hub.node()), rx));
        }
    }
    // The watches are set on the hosts before the stops reach them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ids: Vec<ChildId> = monitored.iter().map(|id| (*id).clone()).collect();
    if let Err(e) = stopper.stop_children(ids, StopOptions::new()).await {
        trace.line(format!("probe: stop refused: {e}"));
    }
    for (label, rx) in &mut channels {
        let first = tokio::time::timeout(PROBE_CALL_TIMEOUT, rx.recv()).await;
        match first {
            Ok(Some(down)) if matches!(down.reason, DownReason::Stopped { .. }) => {}
            other => {
                return Err(Violation::new(
                    Invariant::MonitorsFireOnce,
                    format!("monitor of {label}, then a stop: {other:?}"),
                ))
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (label, rx) in &mut channels {
        if let Ok(down) = rx.try_recv() {
            return Err(Violation::new(
                Invariant::MonitorsFireOnce,
                format!("monitor of {label} fired twice: {down:?}"),
            ));
        }
        counts.monitors += 1;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: &str, b: &str) -> (NodeName, NodeName) {
        (a.to_owned(), b.to_owned())
    }

    #[test]
    fn a_handover_to_a_node_leaving_too_breaks_the_promise_only_over_a_clean_link() {
        let leaving = vec!["a".to_owned(), "b".to_owned()];
        let handovers = vec![("a".to_owned(), vec!["b".to_owned(), "c".to_owned()])];
        let clean: BTreeSet<_> = [pair("a", "b"), pair("b", "a")].into();
        let broken = judge_handovers(&leaving, &clean, &handovers).unwrap_err();
        assert_eq!(broken.invariant, Invariant::NoHandoverToLeaving);
        // The link dropped frames: `a` never heard `b` was leaving, and took it as staying.
        let lossy: BTreeSet<_> = [pair("b", "a")].into();
        assert!(judge_handovers(&leaving, &lossy, &handovers).is_ok());
        let to_stayers = vec![("a".to_owned(), vec!["c".to_owned()])];
        assert!(judge_handovers(&leaving, &clean, &to_stayers).is_ok());
    }

    #[test]
    fn a_monitor_may_fire_once_and_never_once_cancelled() {
        let mut log = MessageLog::default();
        for cancelled in [false, true] {
            log.monitors.push(MonitorEntry {
                label: format!("m{cancelled}"),
                cancelled,
                deliveries: 0,
            });
        }
        log.delivered(0);
        assert!(log.check().is_ok());
        assert_eq!(log.monitor_counts(), (2, 1));
        log.delivered(0);
        let broken = log.check().unwrap_err();
        assert_eq!(broken.invariant, Invariant::MonitorsFireOnce);
        assert!(broken.detail.contains("2 times"), "{broken}");

        let mut log = MessageLog::default();
        log.monitors.push(MonitorEntry {
            label: "m".into(),
            cancelled: true,
            deliveries: 0,
        });
        log.delivered(0);
        assert!(log.check().unwrap_err().detail.contains("demonitored"));
    }
}
