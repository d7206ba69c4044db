//! After a mutation: carrying out the pure state's effects and the persists they call for.
//! A child module of the DeclaredLeader (`super`), apart from the mutations because every path
//! that changes the copy (a mutation, an adopted offer, an applied delta, the boot) ends here:
//! the effects are applied in order, one operation's changes share one commit, and only once
//! the commits are durable is the copy published, the caller answered, the broadcast released
//! and the manifest shipped (the `finish` task, which never blocks the actor).

use futures::future::{BoxFuture, FutureExt, Shared};
use ractor::ActorRef;

use super::broadcast::broadcast_message;
use super::DeclaredLeaderState;
use crate::core::boot::ParkReason;
use crate::core::declared::delta::ListStamp;
use crate::core::declared::list::DeclaredChange;
use crate::core::declared::state::DeclaredEffect;
use crate::hooks::{HookEvent, HookKey};
use crate::hub::protocol::DeclaredMsg;
use crate::hub::HubShared;
use crate::storage::{Commit, CommitMode, StorageError};
use crate::telemetry::refusals::Refusal;

/// What the effects of one or more mutations left to do after the persists.
#[derive(Default)]
pub(super) struct AfterPersist {
    pub(super) commits: Vec<Commit>,
    /// Changes not submitted yet: one operation's changes (a batch of durable starts) share one
    /// commit and one header write instead of one each.
    pub(super) changes: Vec<DeclaredChange>,
    /// Every change of the operation, in order (the broadcast delta's content).
    pub(super) sent: Vec<DeclaredChange>,
    /// The copy's stamp before the operation (a leader's mutation not made while parked): the
    /// broadcast is then a delta from it.
    pub(super) base: Option<ListStamp>,
    pub(super) broadcast: bool,
    pub(super) ship: bool,
}

/// Completes once the latest operation has finished: `true` when its persist (and every one
/// before it) succeeded.
pub(super) type LastPersist = Shared<BoxFuture<'static, bool>>;

fn fire_parked(hub: &HubShared, reason: &ParkReason) {
    tracing::error!(
        hub = %hub.config.hub_id,
        corrupt = reason.corrupt,
        seeded_marker = reason.evidence.seeded_marker,
        durable_rows = reason.evidence.durable_rows,
        manifest_error = ?reason.manifest_error,
        "the declared list is lost on this node: reconcile PARKED (no starts, no stops) until a \
         copy is restored or an operator clears it"
    );
    hub.hooks
        .fire(HookKey::DeclaredParked, || HookEvent::DeclaredParked {
            node: hub.node.clone(),
            corrupt: reason.corrupt,
            seeded_marker: reason.evidence.seeded_marker,
            durable_rows: reason.evidence.durable_rows,
            manifest_error: reason.manifest_error.clone(),
        });
}

impl DeclaredLeaderState {
    /// Carries out the effects that need no waiting and collects the persists.
    pub(super) fn apply(&mut self, effects: Vec<DeclaredEffect>, after: &mut AfterPersist) {
        for effect in effects {
            match effect {
                DeclaredEffect::PersistChange(change) => {
                    after.sent.push(change.clone());
                    after.changes.push(change);
                }
                DeclaredEffect::PersistWhole => {
                    self.submit_changes(after);
                    after.commits.push(self.store.save_whole(self.state.list()))
                }
                // The caller is answered by the task that awaits the persists.
                DeclaredEffect::Acknowledge => {}
                DeclaredEffect::Broadcast => after.broadcast = true,
                DeclaredEffect::Ship => after.ship = true,
                DeclaredEffect::FireTiebreak(t) => {
                    tracing::warn!(version = t.version, winner = ?t.winner, loser = ?t.loser,
                        "declared list tie resolved to the lowest mutating node");
                    let node = self.hub.node.clone();
                    self.hub.hooks.fire(HookKey::DeclaredTiebreak, || {
                        HookEvent::DeclaredTiebreak {
                            node,
                            version: t.version,
                            winner: t.winner.clone(),
                            loser: t.loser.clone(),
                        }
                    });
                }
                DeclaredEffect::FireParked(reason) => fire_parked(&self.hub, &reason),
                DeclaredEffect::Unparked => tracing::warn!(
                    hub = %self.hub.config.hub_id,
                    version = self.state.list().version(),
                    "the declared list is restored; reconcile unparked"
                ),
                DeclaredEffect::RefusedVersion(refused) => {
                    tracing::warn!(%refused, "declared list copy refused: implausible version");
                    self.hub.refusals.count(Refusal::ImplausibleVersion);
                }
            }
        }
    }

    /// Submits the changes collected so far as one commit (against the list as it is now, so a
    /// child added then removed within one operation is just removed).
    /// With one fsync per mutation (the benchmark baseline's `DeclaredCommit::PerMutation`)
    /// each change keeps its own commit.
    pub(super) fn submit_changes(&self, after: &mut AfterPersist) {
        if after.changes.is_empty() {
            return;
        }
        let changes = std::mem::take(&mut after.changes);
        let list = self.state.list();
        if self.recovery.disk_options().commit_mode == CommitMode::PerOperation {
            for change in &changes {
                after.commits.push(self.store.save_change(list, change));
            }
        } else {
            after.commits.push(self.store.save_changes(list, &changes));
        }
    }

    /// Awaits the persists, publishes the list, then runs `then` with the outcome and (on
    /// success) broadcasts and ships. Never blocks the actor.
    ///
    /// The published list is the persisted one, and operations finish in the order they were
    /// made: each waits for the operation before it. So an operation that wrote nothing (an
    /// offer that changed nothing, a stop of a child this copy does not declare) does not
    /// publish the copy in memory while an earlier operation is still persisting it, and none
    /// publishes, acknowledges or broadcasts a copy once an earlier operation's write failed:
    /// the copy in memory then holds what never reached the disk, and the actor rebuilds it.
    pub(super) fn finish(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        mut after: AfterPersist,
        then: impl FnOnce(Result<(), StorageError>) + Send + 'static,
    ) {
        self.submit_changes(&mut after);
        // O(1): the children are a persistent map shared with the actor's copy.
        let list = self.state.list().clone();
        let broadcast = after.broadcast.then(|| {
            let msgs = broadcast_message(&mut after, &list);
            (self.outbox.ticket(), msgs)
        });
        let parked = self.parked();
        let recovery = self.recovery.clone();
        let hub = self.hub.clone();
        let shipper = self.shipper.clone();
        let myself = myself.clone();
        let incarnation = self.incarnation;
        let earlier = self.last_persist.take();
        let settled = self.settled.clone();
        let (persisted, done) = tokio::sync::oneshot::channel::<bool>();
        self.last_persist = Some(async move { done.await.unwrap_or(false) }.boxed().shared());
        tokio::spawn(async move {
            let earlier_ok = match earlier {
                Some(earlier) => earlier.await,
                None => true,
            };
            let mut outcome = Ok(());
            let wrote = !after.commits.is_empty();
            for commit in after.commits {
                if let Err(e) = commit.wait_async().await {
                    outcome = Err(e);
                }
            }
            if let Err(e) = &outcome {
                let _ = myself.cast(DeclaredMsg::PersistFailed { error: e.clone() });
            } else if !earlier_ok {
                outcome = Err(StorageError::Backend(
                    "an earlier write of the declared list failed; the copy is being rebuilt"
                        .into(),
                ));
            }
            if outcome.is_err() {
                // Dropping the broadcast's ticket unsent lets the later ones leave.
                drop(broadcast);
                let _ = persisted.send(false);
                then(outcome);
                return;
            }
            if wrote {
                recovery.note_write(Ok(()));
                settled.settle(&hub.node, &list);
            }
            recovery
                .publish(incarnation, &list, parked)
                .report(&hub.node, &hub.events);
            let _ = persisted.send(true);
            then(Ok(()));
            if let Some((ticket, msgs)) = broadcast {
                ticket.send_all(msgs);
            }
            if after.ship {
                if let Some(shipper) = shipper {
                    shipper.offer(&list);
                }
            }
        });
    }
}
