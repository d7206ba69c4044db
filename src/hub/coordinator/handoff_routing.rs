//! The node's side of hot moves (`core::handover`), over the tables of [`super::handoffs`]:
//! taking a moving child out of local routing, holding its casts and then forwarding them,
//! routing it here again when its move is abandoned, and the states received for children
//! about to start here.
//!
//! Taking a child out of local routing and holding its casts must not lose a cast that is being
//! delivered at that moment. Delivery hands a message to a child while it holds the child's
//! `local_children` entry (a read lock of its shard); [`HubShared::begin_handoff`] registers
//! the handoff *before* it removes that entry (the write lock waits for deliveries under way),
//! and only then is the export sent. So every cast either reached the mailbox before the
//! export, or finds the handoff and is held.

use ractor::ActorCell;

use crate::core::handover::{Handoff, HeldCast, HoldOutcome, ImportRefused};
use crate::hub::shared::HubShared;
use crate::hub::simulation::InjectedBug;
use crate::model::{ChildId, NodeName};

impl HubShared {
    /// Starts holding casts to local child `id` and takes it out of local routing; answers
    /// its actor (to export from), or `None` if it does not run here.
    pub(crate) fn begin_handoff(&self, id: &ChildId) -> Option<ActorCell> {
        self.handoffs.moving.insert(id.clone(), Handoff::holding());
        let taken = if self.has_bug(InjectedBug::AnswerCallsDuringMove) {
            self.local_children
                .get(id)
                .map(|e| (id.clone(), e.value().clone()))
        } else {
            self.local_children.remove(id)
        };
        match taken {
            Some((_, cell)) => {
                self.handoffs.cells.insert(id.clone(), cell.clone());
                Some(cell)
            }
            None => {
                self.handoffs.moving.remove(id);
                None
            }
        }
    }

    /// A cast to `id` that found no local child: held if `id` is moving away, else given
    /// back (route it as usual).
    pub(crate) fn hold_cast(&self, id: &ChildId, cast: HeldCast) -> Result<HoldOutcome, HeldCast> {
        let Some(mut entry) = self.handoffs.moving.get_mut(id) else {
            return Err(cast);
        };
        let outcome = entry.hold(cast);
        if outcome == HoldOutcome::Full {
            tracing::warn!(child = %id, "cast to a moving child refused: its held casts are full");
        }
        Ok(outcome)
    }

    /// The move of `id` completed (it runs on `to`): answers the casts held for it; later
    /// ones are forwarded to `to` for the retention period.
    pub(crate) fn complete_handoff(&self, id: &ChildId, to: NodeName) -> Vec<HeldCast> {
        let until = self
            .mono_ms()
            .saturating_add(self.config.hot_swap.retention_ms);
        self.handoffs.cells.remove(id);
        self.handoffs.sent.remove(id);
        match self.handoffs.moving.get_mut(id) {
            Some(mut entry) => entry.forward_to(to, until),
            None => Vec::new(),
        }
    }

    /// The move of `id` was abandoned: `cell` is routed here again; answers the casts held for
    /// it, to deliver to it.
    /// `None` when the old instance was stopped meanwhile ([`HubShared::forget_moving_cell`]):
    /// then nothing is routed here again and the handoff is forgotten.
    pub(crate) fn abandon_handoff(&self, id: &ChildId, cell: ActorCell) -> Option<Vec<HeldCast>> {
        self.handoffs.sent.remove(id);
        if self.handoffs.cells.remove(id).is_none() {
            self.handoffs.moving.remove(id);
            return None;
        }
        // Routed here again first, so a cast that misses the handoff finds the child.
        self.local_children.insert(id.clone(), cell);
        Some(
            self.handoffs
                .moving
                .remove(id)
                .map(|(_, h)| h.release())
                .unwrap_or_default(),
        )
    }

    /// The supervisor stopped local child `id` (a duplicate's stop, say) while it was moving
    /// away: a move abandoned later must not route the stopped instance here again (it would
    /// stay in local routing, unsupervised and unregistered).
    pub(crate) fn forget_moving_cell(&self, id: &ChildId) {
        self.handoffs.cells.remove(id);
        self.handoffs.sent.remove(id);
    }

    /// The state of `id` went to its new node, its start follows: from now on a move cut
    /// short cannot tell whether the new node runs it.
    pub(crate) fn handoff_state_sent(&self, id: &ChildId) {
        if self.handoffs.cells.contains_key(id) {
            self.handoffs.sent.insert(id.clone());
        }
    }

    /// Forgets a handoff whose old instance is gone (stopped by a cold fallback, or with the
    /// hub).
    pub(crate) fn drop_handoff(&self, id: &ChildId) {
        self.handoffs.cells.remove(id);
        self.handoffs.sent.remove(id);
        self.handoffs.moving.remove(id);
    }

    /// A Coordinator (re)starts: moves it did not finish are abandoned, their children routed
    /// here again if they still run, with their held typed casts. A child whose state already
    /// went to its new node is not: the new node may run it with that state and may have
    /// answered for it, so served here again the two instances would diverge. It stops here
    /// (released, as a move whose start went unanswered does), and runs here or there again
    /// by the next pass if it runs nowhere.
    pub(crate) fn abandon_all_handoffs(&self) {
        let cells: Vec<(ChildId, ActorCell)> = self
            .handoffs
            .cells
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        let mut unknown = Vec::new();
        for (id, cell) in cells {
            if cell.get_status() != ractor::ActorStatus::Running {
                self.drop_handoff(&id);
                continue;
            }
            if self.handoffs.sent.contains(&id) {
                tracing::warn!(child = %id, "a hot move was cut short after its state went: its outcome is unknown, the child stops here");
                self.drop_handoff(&id);
                unknown.push(id);
                continue;
            }
            tracing::warn!(child = %id, "a hot move was cut short: the child stays here");
            let kind = self.storage.get(&id).map(|r| r.spec.kind);
            let deliver = kind.as_deref().and_then(|k| self.kinds.deliver(k));
            for cast in self.abandon_handoff(&id, cell.clone()).unwrap_or_default() {
                if let (HeldCast::Typed { variant, args }, Some(deliver)) = (cast, &deliver) {
                    let message = ractor::message::SerializedMessage::Cast {
                        variant,
                        args,
                        metadata: None,
                    };
                    let _ = deliver(&cell, message);
                }
            }
        }
        if !unknown.is_empty() {
            self.deliver_stop(
                &self.node,
                crate::hub::protocol::StopBatch {
                    ids: unknown,
                    release: true,
                    reply: Box::new(|_| {}),
                },
            );
        }
    }

    /// Forgets the handoffs whose retention period is over.
    pub(crate) fn expire_handoffs(&self) {
        let now = self.mono_ms();
        self.handoffs.moving.retain(|_, h| !h.expired(now));
    }

    /// Keeps a state received from a moving child's old node until the child starts here.
    pub(crate) fn accept_import(&self, id: ChildId, state: Vec<u8>) -> Result<(), ImportRefused> {
        let now = self.mono_ms();
        let until = now.saturating_add(self.config.hot_swap.handover_data_wait_ms);
        match self.handoffs.imports.lock() {
            Ok(mut imports) => imports.accept(id, state, now, until),
            Err(poisoned) => poisoned.into_inner().accept(id, state, now, until),
        }
    }

    /// Whether a hot move's state for child `id` arrived lately (its wait not over): asked
    /// when a move's start finds `id` already running here (see
    /// [`crate::core::handover::PendingImports::met_running`]).
    pub(crate) fn move_met_running(&self, id: &ChildId) -> bool {
        let now = self.mono_ms();
        match self.handoffs.imports.lock() {
            Ok(mut imports) => imports.met_running(id, now),
            Err(poisoned) => poisoned.into_inner().met_running(id, now),
        }
    }

    /// The state waiting for child `id` that `digest` names, if any (taken: a restart starts
    /// afresh); see [`crate::core::handover::PendingImports::take`].
    pub(crate) fn take_import(&self, id: &ChildId, digest: &str) -> Option<Vec<u8>> {
        let now = self.mono_ms();
        match self.handoffs.imports.lock() {
            Ok(mut imports) => imports.take(id, now, digest),
            Err(poisoned) => poisoned.into_inner().take(id, now, digest),
        }
    }
}
