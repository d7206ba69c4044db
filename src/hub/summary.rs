//! A member's figures for the cluster dashboard (`GET /v1/cluster`): this node's own
//! ([`local`]), a peer's asked over the wire ([`ask`], `WireMsg::SummaryQuery`), and the
//! answers to a peer's queries ([`on_query`]).
//!
//! Like the typed calls (`typed::calls`), no actor sits on this path: the asker's task
//! registers the query, sends the frame and awaits the answer, which the inbox completes; a
//! peer that goes down fails its queries at once. The answer is read from the shared state in
//! one pass over the registry copy, from a task (never on the transport's thread), and at most
//! [`MAX_ANSWERING`] at a time: a peer that asks faster is refused (`overloaded`) rather than
//! queued.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::HubShared;
use crate::cluster::wire::{RequestId, WireMsg};
use crate::core::activity::NodeSummary;
use crate::core::recovery::RecoveryState;
use crate::model::NodeName;
use crate::telemetry::refusals::Refusal;

/// How many peers' summary queries this node answers at once.
pub(crate) const MAX_ANSWERING: usize = 4;

/// The health status `GET /v1/health` reports, from the same facts: `set_aside`,
/// `partitioned`, `isolated`, `degraded` (a storage problem) or `ok`.
pub(crate) fn status(shared: &HubShared) -> &'static str {
    let isolated = shared
        .network
        .as_ref()
        .and_then(|n| n.connection())
        .is_some_and(|c| c.connectivity.is_isolated());
    crate::core::health::status(
        shared.partition.set_aside(),
        shared.partition.quorum_lost(),
        isolated,
        !super::reads::storage_problems(shared).is_empty(),
    )
}

/// This node's figures now.
pub(crate) fn local(shared: &HubShared) -> NodeSummary {
    let (rows, unbound, children) = registry_counts(shared);
    let (history, totals) = shared.events.activity();
    let snapshot = shared.recovery.as_ref().map(|r| r.snapshot());
    NodeSummary {
        node: shared.node.clone(),
        at_ms: shared.clock.now_ms(),
        status: status(shared).to_owned(),
        recovery_state: match shared.recovery_state() {
            RecoveryState::Recovering => "recovering".into(),
            RecoveryState::Normal => "normal".into(),
        },
        parked: snapshot.as_ref().is_some_and(|s| s.parked),
        members: shared.members().len() as u64,
        children,
        registry_rows: rows,
        unbound_rows: unbound,
        declared: snapshot.as_ref().map(|s| s.list.len() as u64),
        pending_work: shared.partition.pending_work() as u64,
        refused_peer_input: shared.refusals.snapshot().values().sum(),
        totals,
        history,
    }
}

/// This node's rows, rows nobody runs, and children it runs: from the counts its store keeps
/// on write when it keeps them, else by a pass over the rows.
fn registry_counts(shared: &HubShared) -> (u64, u64, u64) {
    if let Some(counts) = shared.storage.counts() {
        let own = counts.bindings_on(&shared.node).count;
        return (counts.rows, counts.unbound, own);
    }
    let (mut rows, mut unbound, mut children) = (0u64, 0u64, 0u64);
    shared.storage.for_each_placement(&mut |p| {
        rows += 1;
        if p.nodes.is_empty() {
            unbound += 1;
        } else if p.nodes.iter().any(|(n, _)| *n == shared.node) {
            children += 1;
        }
    });
    (rows, unbound, children)
}

/// Why a peer's figures are missing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unanswered {
    /// The query could not be sent (no transport, or no link to the peer).
    #[error("the query could not be sent: {0}")]
    NotSent(String),
    /// The peer went down while this node waited.
    #[error("the node went down before it answered")]
    Down,
    /// No answer within the wait.
    #[error("no answer within {0} ms")]
    Timeout(u64),
}

struct Waiting {
    peer: NodeName,
    done: oneshot::Sender<NodeSummary>,
}

/// The summary queries this node waits on, and the count of its own answers in progress.
#[derive(Default)]
pub(crate) struct SummaryQueries {
    next: AtomicU64,
    waiting: Mutex<BTreeMap<u64, Waiting>>,
    answering: Arc<AtomicUsize>,
}

impl SummaryQueries {
    fn register(&self, peer: NodeName) -> (u64, oneshot::Receiver<NodeSummary>) {
        let request_id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (done, rx) = oneshot::channel();
        self.lock().insert(request_id, Waiting { peer, done });
        (request_id, rx)
    }

    /// Completes query `request_id` with `from`'s answer; an answer from another node than
    /// the one asked, or to a query nobody waits on, is dropped.
    pub(crate) fn complete(&self, from: &NodeName, request_id: u64, mut summary: NodeSummary) {
        let mut waiting = self.lock();
        if waiting.get(&request_id).is_some_and(|w| &w.peer == from) {
            if let Some(w) = waiting.remove(&request_id) {
                // The sender's name is the authenticated one, whatever the summary says.
                summary.node = from.clone();
                let _ = w.done.send(summary);
            }
        }
    }

    fn forget(&self, request_id: u64) {
        self.lock().remove(&request_id);
    }

    /// Fails every query waiting on `peer`, which went down.
    pub(crate) fn peer_down(&self, peer: &NodeName) {
        // Dropping the sender wakes the asker with an error.
        self.lock().retain(|_, w| &w.peer != peer);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Asks `peer` for its figures and waits at most `wait`.
pub(crate) async fn ask(
    shared: &HubShared,
    peer: &NodeName,
    wait: Duration,
) -> Result<NodeSummary, Unanswered> {
    let transport = shared
        .transport()
        .ok_or_else(|| Unanswered::NotSent("this node has no transport".into()))?;
    let (request_id, done) = shared.summaries.register(peer.clone());
    let frame = WireMsg::SummaryQuery {
        request_id: RequestId(request_id),
    };
    if let Err(e) = transport.send(peer, &frame) {
        shared.summaries.forget(request_id);
        return Err(Unanswered::NotSent(e.to_string()));
    }
    let outcome = tokio::time::timeout(wait, done).await;
    shared.summaries.forget(request_id);
    match outcome {
        Ok(Ok(summary)) => Ok(summary),
        Ok(Err(_)) => Err(Unanswered::Down),
        Err(_) => Err(Unanswered::Timeout(wait.as_millis() as u64)),
    }
}

/// A peer's query: answered from a task with this node's figures, or refused when
/// [`MAX_ANSWERING`] answers are in progress.
pub(crate) fn on_query(hub: &Arc<HubShared>, from: NodeName, request_id: RequestId) {
    let answering = hub.summaries.answering.clone();
    if answering.fetch_add(1, Ordering::AcqRel) >= MAX_ANSWERING {
        answering.fetch_sub(1, Ordering::AcqRel);
        tracing::warn!(peer = %from, "summary query refused: too many in progress");
        hub.refusals.count(Refusal::Overloaded);
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        answering.fetch_sub(1, Ordering::AcqRel);
        return;
    };
    let hub = hub.clone();
    runtime.spawn(async move {
        let summary = local(&hub);
        answering.fetch_sub(1, Ordering::AcqRel);
        let Some(t) = hub.transport() else { return };
        if let Err(e) = t.send(
            &from,
            &WireMsg::SummaryReply {
                request_id,
                summary: Box::new(summary),
            },
        ) {
            tracing::debug!(peer = %from, error = %e, "summary reply not sent");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(node: &str) -> NodeSummary {
        NodeSummary {
            node: node.into(),
            status: "ok".into(),
            ..NodeSummary::default()
        }
    }

    #[tokio::test]
    async fn an_answer_completes_only_the_query_to_its_sender() {
        let queries = SummaryQueries::default();
        let (id, mut rx) = queries.register("b@h".into());
        queries.complete(&"c@h".to_owned(), id, answer("c@h"));
        assert!(rx.try_recv().is_err(), "another node's answer is dropped");
        queries.complete(&"b@h".to_owned(), id, answer("forged@h"));
        let got = rx.await.expect("answered");
        assert_eq!(got.node, "b@h", "named after the authenticated sender");
        assert!(queries.lock().is_empty());
    }

    #[tokio::test]
    async fn a_peer_going_down_fails_its_queries_at_once() {
        let queries = SummaryQueries::default();
        let (_, to_b) = queries.register("b@h".into());
        let (_, to_c) = queries.register("c@h".into());
        queries.peer_down(&"b@h".to_owned());
        assert!(to_b.await.is_err(), "b's query fails");
        assert_eq!(queries.lock().len(), 1, "c's still waits");
        drop(to_c);
    }
}
