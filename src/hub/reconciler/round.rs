//! One reconcile round, run in a task so that the Reconciler keeps answering: it gathers the
//! inputs (the declared copy as persisted, the registry view, the ring, the leader's version),
//! plans with [`plan_local_round`], and carries the plan out.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::core::declared::list::DeclaredList;
use crate::core::guided::Guided;
use crate::core::reconcile::{OrphanStart, QuietRound, ReconcilePlan, RoundInputs, RoundStats};
use crate::core::reconcile_round::{
    bindings_per_node, duplicate_stops, hold_new_declarations, next_round, parks_before_scan,
    plan_local_round, reuse_quiet, OwnerWork, Readiness, RoundView, Unweighed,
};
use crate::core::recovery::StartPacer;
use crate::hooks::{HookEvent, HookKey};
use crate::hub::declared::recovery_shared::{DeclaredSnapshot, RecoveryShared};
use crate::hub::protocol::{
    DeclaredMsg, NodeStopReport, RegistryOp, RoundCarry, RoundReport, StopBatch,
};
use crate::hub::simulation::InjectedBug;
use crate::hub::HubShared;
use crate::manifest::fetch_within;
use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Row, RESERVED_METADATA_KEY};
use crate::telemetry::failure_tally::FailureTally;
use crate::types::StartOptions;

/// Runs one round and returns what the actor keeps: gathers the inputs step by step (each
/// step's gate is in [`crate::core::reconcile_round`]), plans, and carries the plan out.
pub(super) async fn run_round(
    hub: Arc<HubShared>,
    recovery: Arc<RecoveryShared>,
    first: bool,
    carried: RoundCarry,
    mut pacer: StartPacer,
    in_flight: Arc<InFlight>,
) -> RoundReport {
    let RoundCarry {
        pending,
        quiet,
        owner_first,
        declared: previous_declared,
        work: previous_work,
    } = carried;
    let began = Instant::now();
    let mut snapshot = declared_copy(&hub, &recovery, first).await;
    // Read before the rows: a commit after this count is counted again by the next round.
    let inputs = RoundInputs {
        declared_version: snapshot.list.version(),
        registry_generation: hub.registry_generation.load(Ordering::Acquire),
        peers: hub.peers(),
    };
    if let Some(quiet) = reuse_quiet(quiet, first, snapshot.parked, &inputs) {
        // Nothing the last (quiet) round read has changed: it would plan nothing again.
        let stats = RoundStats {
            elapsed_ms: began.elapsed().as_millis() as u64,
            ..quiet.stats
        };
        report_round(&hub, stats, false, true);
        let carry = stood_on(quiet, previous_declared, previous_work);
        return round_report(stats, first, false, carry, pacer, 0);
    }
    let scan_skipped = parks_before_scan(
        snapshot.parked,
        &recovery.unheard(&inputs.peers),
        &recovery.ahead_of(&snapshot.list, &inputs.peers),
    );
    let scan_began = Instant::now();
    let rows = scan_rows(&hub, scan_skipped);
    let mut work = scan_began.elapsed();
    // Asked after the rows were read: a child missing from them was stopped before the
    // question, so its removal is in the leader's answer.
    let leader_answered = confirm_with_leader(&hub, &recovery).await;
    // The copy planned with is read after the answer and is the one compared with it (an
    // older copy read before could still declare a child the answer shows stopped).
    if !snapshot.parked {
        snapshot = recovery.snapshot();
    }
    let readiness = Readiness {
        list_lost: snapshot.parked,
        scan_skipped,
        unweighed: weigh_copies(&hub, &recovery, &snapshot, leader_answered.err()),
        partitioned: hub.partition.partitioned(),
    };
    let previous = Previous {
        pending,
        owner_first,
        work: previous_work,
    };
    let plan_began = Instant::now();
    let (mut plan, work_seen) = plan_with(&hub, &snapshot, &rows, previous, readiness);
    work += plan_began.elapsed();
    drop(rows);
    let held = hold_new_declarations(&mut plan, previous_declared.as_deref());
    if held > 0 {
        tracing::debug!(
            held,
            "children declared since the last round are given a round"
        );
    }
    carry_out(&hub, &plan).await;
    let (mut stats, parked) = (plan.stats, plan.parked);
    let next = next_round(&mut plan, owner_first, inputs);
    let answer_wait = Duration::from_millis(recovery.config.reconcile_interval_ms);
    let starts = in_flight.not_in_flight(plan.starts);
    stats.started = submit_paced(&hub, starts, &mut pacer, answer_wait, &in_flight).await;
    stats.elapsed_ms = began.elapsed().as_millis() as u64;
    report_round(&hub, stats, parked, false);
    let carry = RoundCarry {
        pending: next.pending,
        quiet: next.quiet.map(|inputs| QuietRound { inputs, stats }),
        owner_first: next.owner_first,
        declared: Some(snapshot.list.clone()),
        work: work_seen,
    };
    let work_ms = work.as_millis() as u64;
    round_report(stats, first, parked, carry, pacer, work_ms)
}

/// The declared copy a round begins with. The first round fires `pre_recovery_replay` (within
/// a round's interval) first; a parked node asks the remote manifest again.
async fn declared_copy(
    hub: &HubShared,
    recovery: &RecoveryShared,
    first: bool,
) -> DeclaredSnapshot {
    if first {
        let snapshot = recovery.snapshot();
        let budget = Duration::from_millis(recovery.config.reconcile_interval_ms);
        hub.hooks
            .fire_budgeted(HookKey::PreRecoveryReplay, budget, || {
                HookEvent::PreRecoveryReplay {
                    node: hub.node.clone(),
                    version: snapshot.list.version(),
                    declared: snapshot.list.len(),
                }
            })
            .await;
    }
    // Read after the hook: it may have waited for something that changed the registry.
    let snapshot = recovery.snapshot();
    if snapshot.parked {
        return refetch_manifest(hub, recovery).await.unwrap_or(snapshot);
    }
    snapshot
}

/// What a round that stood on the quiet one before it hands the next: the same quiet round,
/// and the same declared copy and owners' work (nothing changed since, or the round would not
/// be quiet).
fn stood_on(quiet: QuietRound, declared: Option<Arc<DeclaredList>>, work: OwnerWork) -> RoundCarry {
    RoundCarry {
        quiet: Some(quiet),
        declared,
        work,
        ..RoundCarry::default()
    }
}

/// What the previous rounds hand the plan.
struct Previous {
    pending: BTreeSet<ChildId>,
    owner_first: bool,
    work: OwnerWork,
}

/// Every row of the registry, unless the round skips its scan.
fn scan_rows(hub: &HubShared, skipped: bool) -> Vec<Row> {
    if skipped {
        Vec::new()
    } else {
        off_the_runtime(|| hub.storage.export_all())
    }
}

fn round_report(
    stats: RoundStats,
    first: bool,
    parked: bool,
    carry: RoundCarry,
    pacer: StartPacer,
    work_ms: u64,
) -> RoundReport {
    RoundReport {
        stats,
        first,
        parked,
        carry,
        pacer,
        work_ms,
    }
}

/// The peers whose declared copies this node has not weighed, or that are newer than its
/// copy (`leader_silent`: the leader did not tell its version in time). A node that has not
/// weighed every peer's copy may be behind a newer version: an outdated copy could restart a
/// child stopped since, so it plans parked, and the leader is asked to solicit the unheard
/// copies and to wait a moment for the deltas of the peers ahead (`Unweighed::to_await`).
fn weigh_copies(
    hub: &HubShared,
    recovery: &RecoveryShared,
    snapshot: &DeclaredSnapshot,
    leader_silent: Option<NodeName>,
) -> Unweighed {
    let peers = hub.peers();
    let unweighed = Unweighed::new(
        recovery.unheard(&peers),
        leader_silent,
        recovery.ahead_of(&snapshot.list, &peers),
    );
    if !unweighed.is_empty() {
        tracing::info!(
            unheard = ?unweighed.unheard,
            ahead = ?unweighed.ahead,
            version = snapshot.list.version(),
            "declared copies of these peers not weighed yet, or newer than this one; round parked"
        );
        if let Some(leader) = hub.declared_leader() {
            let nodes = unweighed.to_solicit();
            if !nodes.is_empty() {
                let _ = leader.cast(DeclaredMsg::Solicit { nodes });
            }
            for from in unweighed.to_await() {
                let _ = leader.cast(DeclaredMsg::Announced { from });
            }
        }
    }
    unweighed
}

/// Plans the round from what it gathered, off the runtime (a scan of every row). The owners'
/// work handed on is the previous one when the round did not scan the registry.
fn plan_with(
    hub: &HubShared,
    snapshot: &DeclaredSnapshot,
    rows: &[Row],
    previous: Previous,
    readiness: Readiness,
) -> (ReconcilePlan, OwnerWork) {
    let Previous {
        pending: previous_pending,
        owner_first,
        work: previous_work,
    } = previous;
    let ring = hub.ring();
    // With the two-round rule skipped, every unbound declared child counts as seen before.
    let previous_pending = if hub.has_bug(InjectedBug::SkipTwoRoundRule) {
        snapshot.list.children().keys().cloned().collect()
    } else {
        previous_pending
    };
    // From the store's counts when it keeps them (no second pass over the rows); a round that
    // did not scan hands on what the last scan saw.
    let work = if readiness.scan_skipped {
        previous_work
    } else {
        let bindings = match hub.storage.counts() {
            Some(counts) => counts
                .per_node
                .into_iter()
                .map(|(node, digest)| (node, digest.count as usize))
                .collect(),
            None => bindings_per_node(rows),
        };
        OwnerWork::after(&previous_work, bindings)
    };
    let view = RoundView {
        declared: &snapshot.list,
        local: &hub.node,
        previous_pending: &previous_pending,
        owner_first,
        work: &work,
        readiness,
    };
    let plan = off_the_runtime(|| {
        // The placement its registry row records (a rebalance or a fallback may have moved it
        // since it was declared), else the one it was declared with.
        plan_local_round(&view, rows, |id, row| match row {
            Some(row) => hub.owners_of(&ring, id, Some(&row.metadata)),
            None => hub.owners_of(&ring, id, snapshot.list.get(id).map(|c| &c.metadata)),
        })
    });
    (plan, work)
}

/// Stops this node's instances the plan names (firing `reconcile_duplicate` for each duplicate
/// stopped) and removes the stale rows; a failure is retried by the next round.
async fn carry_out(hub: &HubShared, plan: &ReconcilePlan) {
    if !plan.stops.is_empty() {
        let mut duplicates = FailureTally::new();
        for (stop, keep) in duplicate_stops(plan) {
            duplicates.add(&stop.id, format_args!("kept on {keep}"));
            hub.hooks.fire(HookKey::ReconcileDuplicate, || {
                HookEvent::ReconcileDuplicate {
                    id: stop.id.clone(),
                    node: hub.node.clone(),
                    pid: stop.pid,
                    keep: keep.clone(),
                }
            });
        }
        duplicates.warn("stopping this node's duplicate instances");
        let ids: Vec<ChildId> = plan.stops.iter().map(|s| s.id.clone()).collect();
        let report = stop_local(hub, ids).await;
        let mut failed = FailureTally::new();
        for (id, e) in report.errors {
            failed.add(&id, e);
        }
        failed.warn("reconcile stops failed; next round retries");
    }
    if !plan.remove_rows.is_empty() {
        remove_rows(hub, plan.remove_rows.clone()).await;
    }
}

/// Logs a finished round and fires its hook and event. `unchanged`: the round stood on the
/// previous quiet one instead of scanning the registry.
fn report_round(hub: &HubShared, stats: RoundStats, parked: bool, unchanged: bool) {
    tracing::info!(
        hub = %hub.config.hub_id,
        parked,
        unchanged,
        candidates = stats.candidates,
        orphans = stats.orphans,
        started = stats.started,
        skipped_pending = stats.skipped_pending,
        deferred_to_owner = stats.deferred_to_owner,
        duplicates = stats.duplicates,
        stopped_undeclared = stats.stopped_undeclared,
        removed_stale = stats.removed_stale,
        elapsed_ms = stats.elapsed_ms,
        "reconcile round"
    );
    hub.hooks
        .fire(HookKey::ReconcileRound, || HookEvent::ReconcileRound {
            node: hub.node.clone(),
            stats,
            parked,
        });
    hub.events
        .publish(|| crate::events::HubEvent::ReconcileRoundCompleted {
            node: hub.node.clone(),
            stats,
            parked,
        });
}

/// Runs `f`, a scan of the whole registry, without holding up the runtime's other tasks on
/// this worker: on a multi-threaded runtime they move to another worker meanwhile, so
/// heartbeats and replication are not late by a scan of hundreds of thousands of rows. On a
/// current-thread runtime (the simulator's, kept deterministic) it runs in place.
fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Asks the leader for its declared version and waits for the answer (a node that leads,
/// or has no leader, has nothing to ask). The answer lands in the announcements that
/// [`RecoveryShared::ahead_of_me`] reads, so a copy behind the leader's plans parked: a
/// stop's broadcast may still be in flight while the child is already gone. `Err(leader)`
/// when it did not answer in time (the round is parked; the next one asks again).
async fn confirm_with_leader(hub: &HubShared, recovery: &RecoveryShared) -> Result<(), NodeName> {
    let Some(leader) = hub.leader() else {
        return Ok(());
    };
    if leader == hub.node {
        return Ok(());
    }
    let Some(transport) = hub.transport() else {
        return Ok(());
    };
    let seen = recovery.heard_from(&leader);
    if let Err(e) = transport.send(
        &leader,
        &crate::cluster::wire::WireMsg::DeclaredVersionQuery,
    ) {
        tracing::debug!(%leader, error = %e, "declared version query not sent");
        return Err(leader);
    }
    let wait = Duration::from_millis((recovery.config.reconcile_interval_ms / 2).min(1_000));
    if recovery.wait_heard(&leader, seen, wait).await {
        Ok(())
    } else {
        tracing::info!(%leader, "the leader did not tell its declared version in time; round parked");
        Err(leader)
    }
}

/// A parked node asks the remote manifest again each round (its boot fetch may have failed):
/// a real copy is offered to the DeclaredLeader, which unparks, and the round plans from it.
async fn refetch_manifest(hub: &HubShared, recovery: &RecoveryShared) -> Option<DeclaredSnapshot> {
    let manifest = recovery.manifest.as_ref()?;
    let list = match fetch_within(manifest.as_ref(), hub.config.default_timeout()).await {
        Ok(Some(list)) if list.version() > 0 => list,
        Ok(_) => return None,
        Err(e) => {
            tracing::warn!(error = %e, "parked: the remote manifest is still unavailable");
            return None;
        }
    };
    tracing::warn!(
        version = list.version(),
        "parked: restoring the declared list from the remote manifest"
    );
    let leader = hub.declared_leader()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    leader
        .cast(DeclaredMsg::Offer {
            list,
            done: Some(tx),
        })
        .ok()?;
    rx.await.ok()?;
    Some(recovery.snapshot())
}

/// Stops instances on this node only, and waits for the supervisor's answer.
async fn stop_local(hub: &HubShared, ids: Vec<ChildId>) -> NodeStopReport {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let batch = StopBatch {
        ids,
        // Deliberate: this node's instance goes (its binding is removed, not kept as a stub).
        release: false,
        reply: Box::new(move |report| {
            let _ = tx.send(report);
        }),
    };
    hub.deliver_stop(&hub.node, batch);
    let wait = hub.config.default_timeout() + hub.config.shutdown_timeout();
    match tokio::time::timeout(wait, rx).await {
        Ok(Ok(report)) => report,
        _ => NodeStopReport::default(),
    }
}

/// Removes stale rows (bound nowhere) through the single writer.
async fn remove_rows(hub: &HubShared, ids: Vec<ChildId>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let ops = ids
        .into_iter()
        .map(|id| RegistryOp::RemoveUnbound { id })
        .collect();
    let done = Box::new(move |outcome| {
        let _ = tx.send(outcome);
    });
    hub.write_registry(ops, Some(done));
    if let Ok(Err(e)) = rx.await {
        tracing::warn!(error = %e, "stale durable rows not removed; next round retries");
    }
}

/// Submits orphans at the pacer's rate; returns how many were submitted. Waits for the starts'
/// answers so that a completed round means "started or failed", not "sent" — but at most
/// `answer_wait` after the last submission (see below).
async fn submit_paced(
    hub: &Arc<HubShared>,
    starts: Vec<OrphanStart>,
    pacer: &mut StartPacer,
    answer_wait: Duration,
    in_flight: &Arc<InFlight>,
) -> usize {
    pacer.begin_round();
    let mut queue = starts.into_iter();
    let mut left = queue.len();
    let mut submitted = 0;
    let mut answers = Vec::new();
    while left > 0 {
        let grant = pacer.grant(left, hub.mono_ms());
        let batch: Vec<OrphanStart> = queue.by_ref().take(grant.now).collect();
        left -= batch.len();
        submitted += batch.len();
        answers.extend(submit(hub, batch, in_flight));
        if left == 0 {
            break;
        }
        match grant.retry_at_ms {
            Some(at) => {
                let wait = at.saturating_sub(hub.mono_ms()).max(1);
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            // The round's quota is spent: the rest are orphans for the next round.
            None => break,
        }
    }
    await_answers(answers, answer_wait).await;
    submitted
}

/// Waits for the starts' answers and logs the failures, at most `answer_wait` in all.
///
/// Bounded by `answer_wait` (the reconcile interval): an answer may otherwise take the whole
/// start timeout (`default_timeout`), e.g. when the owner, or the node a start is forwarded to,
/// cannot reach this node yet while a restarted cluster forms, and the first round's completion
/// is what moves the hub to `normal`. A start still unanswered stays in flight: the next round
/// sees whether it runs, and an orphan again is resubmitted once its start is answered
/// ([`InFlight`]).
async fn await_answers(answers: Vec<StartAnswer>, answer_wait: Duration) {
    let total = answers.len();
    let mut failed = FailureTally::new();
    let deadline = tokio::time::Instant::now() + answer_wait;
    for (answered, answer) in answers.into_iter().enumerate() {
        let Ok(answer) = tokio::time::timeout_at(deadline, answer).await else {
            tracing::info!(
                unanswered_requests = total - answered,
                wait_ms = answer_wait.as_millis() as u64,
                "recovery starts not answered yet; the round ends, the next one checks them"
            );
            break;
        };
        match answer {
            Ok(Ok(result)) => {
                for e in result.errors {
                    if !matches!(e.reason, crate::ChildStartError::AlreadyStarted) {
                        failed.add(&e.id, format_args!("{}: {}", e.node, e.reason));
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "recovery start refused"),
            Err(_) => tracing::warn!("recovery start unanswered"),
        }
    }
    failed.warn("recovery starts failed; next round retries");
}

type StartAnswer =
    tokio::sync::oneshot::Receiver<Result<crate::StartResult, crate::types::StartError>>;

/// One start request per distinct metadata (options carry one metadata map per request).
///
/// An orphan without a row goes with `check_existing`, so concurrent submissions of it are
/// refused but one. An orphan whose row is registered but bound nowhere (a previous run's row,
/// or one unbound for two rounds) would be refused by `check_existing`, which looks for the row:
/// it goes without it, which starts it on its owner unless the owner already runs it (then
/// the running instance counts), so there is still one instance per owner.
///
/// A guided child's placement record goes back into the start's `child_mapping`, so it starts on
/// its node (or, allowed to fall back, on its ring owner while its node is gone).
fn submit(hub: &HubShared, batch: Vec<OrphanStart>, in_flight: &Arc<InFlight>) -> Vec<StartAnswer> {
    // (metadata, check_existing, fallback): one start request each.
    type Group = (Metadata, bool, bool);
    let mut groups: BTreeMap<Group, Vec<(ChildSpec, Option<Guided>)>> = BTreeMap::new();
    for orphan in batch {
        let has_row = hub.storage.contains(&orphan.child.spec.id);
        let mut metadata = orphan.child.metadata;
        // The placement its row records (a rebalance may have moved it since it was
        // declared), else the declared one.
        let guided = hub
            .storage
            .get(&orphan.child.spec.id)
            .and_then(|row| Guided::of(&row.metadata))
            .or_else(|| Guided::of(&metadata));
        metadata.remove(RESERVED_METADATA_KEY);
        let fallback = guided.as_ref().is_some_and(|g| g.fallback);
        groups
            .entry((metadata, !has_row, fallback))
            .or_default()
            .push((orphan.child.spec, guided));
    }
    let mut answers = Vec::new();
    for ((metadata, check_existing, fallback), children) in groups {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut opts = StartOptions::new()
            .check_existing(check_existing)
            .durable(true)
            .guided_fallback(fallback);
        opts.metadata = metadata;
        let mut specs = Vec::with_capacity(children.len());
        let ids: Vec<ChildId> = children.iter().map(|(spec, _)| spec.id.clone()).collect();
        for (spec, guided) in children {
            if let Some(guided) = guided {
                if guided.by_load {
                    opts.placed_by_load.insert(spec.id.clone());
                }
                opts.child_mapping.insert(spec.id.clone(), guided.nodes);
            }
            specs.push(spec);
        }
        hub.start_through_coordinator(specs, opts, tx.into());
        answers.push(in_flight.track(ids, rx));
    }
    answers
}

/// The recovery starts submitted and not answered yet. A round ends a reconcile interval after
/// its last submission, answered or not, and at hundreds of thousands of children the starts
/// take longer than that: the next round sees those children still running nowhere, and
/// submitting them again would add another start of each, every round. A child is submitted
/// again only once its start has been answered (a failed start is retried by the next round).
#[derive(Default)]
pub(super) struct InFlight(Mutex<HashSet<ChildId>>);

impl InFlight {
    /// `starts` without the children whose start is still in flight.
    fn not_in_flight(&self, mut starts: Vec<OrphanStart>) -> Vec<OrphanStart> {
        let in_flight = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if in_flight.is_empty() {
            return starts;
        }
        let before = starts.len();
        starts.retain(|s| !in_flight.contains(&s.child.spec.id));
        if starts.len() < before {
            tracing::info!(
                in_flight = before - starts.len(),
                "recovery starts still in flight are not submitted again"
            );
        }
        starts
    }

    /// Marks `ids` in flight until `answer` comes (or its sender is dropped), and returns the
    /// answer to wait for.
    fn track(self: &Arc<Self>, ids: Vec<ChildId>, answer: StartAnswer) -> StartAnswer {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(ids.iter().cloned());
        let (forward, forwarded) = tokio::sync::oneshot::channel();
        let this = self.clone();
        tokio::spawn(async move {
            let answer = answer.await;
            {
                let mut in_flight = this.0.lock().unwrap_or_else(|e| e.into_inner());
                for id in &ids {
                    in_flight.remove(id);
                }
            }
            // No sender answer: `forward` is dropped, and the waiter sees it unanswered.
            if let Ok(answer) = answer {
                let _ = forward.send(answer);
            }
        });
        forwarded
    }
}
