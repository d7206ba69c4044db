//! A node's answer to a start batch: for each child its supervisor is asked to start, whether it
//! is answered at once (it runs here already, waits for a restart, the node lost quorum, a hot
//! move's state did not arrive) or started, and what the batch answers once the starts are
//! recorded.
//!
//! The child supervisor starts a batch's children one by one (a child's `pre_start` holds it), and
//! what it observes can change between two children: partition mode may begin, an id the batch
//! names twice runs by the time of its second mention. So the decisions are taken per child, from
//! what the supervisor observes at that child's turn, and [`BatchStart`] collects the answers.
//! A child admitted for a start is an [`Admitted`], which only [`BatchStart`]'s methods consume,
//! and each of them either records the child's outcome or hands it back for the next step: every
//! child named by a batch gets exactly one outcome, in the order of the batch.
//!
//! Pure: the supervisor observes, takes the handover state, runs the hooks and starts the actors;
//! this module decides.

use crate::model::{ChildId, ChildSpec, Metadata, Pid, Row, RESERVED_METADATA_KEY};
use crate::types::ChildStartError;

/// What a batch asks, the same for each of its children.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchTerms {
    /// A child already running here counts as started (the cluster's own starts: moves,
    /// re-placements; a caller's `check_existing: false`).
    pub existing_ok: bool,
    /// Hot moves confirm their handover (`hot_swap.confirm_handover`): the old node keeps its
    /// instance until the move's start answers, so a state waiting here may be stale.
    pub confirm_handover: bool,
}

/// What the node holds of one child's id when its turn in the batch comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Presence {
    /// The instance this node runs, if any.
    pub running: Option<Pid>,
    /// Its restart failed and waits for a retry.
    pub awaiting_retry: bool,
    /// The node is in partition mode (no quorum).
    pub partitioned: bool,
}

/// A child admitted for a start. Only [`BatchStart`] consumes it, recording the child's outcome
/// or handing it back for the next step, so a child admitted is answered once.
#[must_use = "an admitted child must be answered through its BatchStart"]
#[derive(Debug, PartialEq, Eq)]
pub struct Admitted {
    id: ChildId,
    state_sent: bool,
    digest: Option<String>,
}

impl Admitted {
    /// The child.
    pub fn id(&self) -> &ChildId {
        &self.id
    }

    /// The handover state the start takes: the one a hot move's digest names, `""` for
    /// whichever waits, or none (the start begins afresh).
    ///
    /// Only a hot move's start takes a state, and only the one its digest names. Any other start
    /// (a re-placement, a recovery round) begins afresh: a state left by a move whose old node
    /// gave up and resumed its instance is stale. Without confirmation the old node stops its
    /// instance before the move's start goes out, so no instance resumes there and a waiting
    /// state cannot be stale: a start that overtook the move's (a re-placement of the child,
    /// unbound meanwhile) takes it, rather than begin empty while the state is here.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }
}

/// The answers of one start batch, collected child by child in the order of the batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchStart {
    terms: BatchTerms,
    /// The children started (or found running, when that counts), with their instances.
    pub started: Vec<(ChildId, Pid)>,
    /// The children not started, with the reason.
    pub errors: Vec<(ChildId, ChildStartError)>,
}

/// The error of a hot move whose state is not here when its start is.
pub fn state_missing() -> ChildStartError {
    ChildStartError::StartupFailed {
        message: "the hot move's state did not arrive ahead of its start (or another move's did)"
            .into(),
    }
}

impl BatchStart {
    /// An empty answer for a batch with these terms.
    pub fn new(terms: BatchTerms) -> Self {
        Self {
            terms,
            ..Self::default()
        }
    }

    /// A batch refused whole, each child with `error` (a node without quorum: whoever asked
    /// learns it, and the majority's copy of the child is the one that runs).
    pub fn refuse_all(ids: impl IntoIterator<Item = ChildId>, error: ChildStartError) -> Self {
        Self {
            errors: ids.into_iter().map(|id| (id, error.clone())).collect(),
            ..Self::default()
        }
    }

    /// Decides child `id`'s turn: answered at once (`None`, the outcome recorded), or admitted
    /// for a start. `state_sent` is the digest a hot move's start carries; `met_running` asks
    /// whether a hot move of the child found it running here, and is asked only when the child
    /// runs here and the batch takes a running instance.
    ///
    /// - running here: with `existing_ok`, the running instance answers, unless a move's state
    ///   waits for it (a duplicate after a partition: the state waits, this instance keeps its
    ///   own, and the mover must not report the state as taken); otherwise `already_started`;
    /// - waiting for a restart: `already_started`;
    /// - partition mode (it may begin while a batch starts its children): `partitioned`.
    pub fn admit(
        &mut self,
        id: ChildId,
        presence: Presence,
        state_sent: Option<String>,
        met_running: impl FnOnce() -> bool,
    ) -> Option<Admitted> {
        let existing_ok = self.terms.existing_ok;
        if let Some(pid) = presence.running {
            let moved_state = existing_ok && (met_running() || state_sent.is_some());
            if existing_ok && !moved_state {
                self.started.push((id, pid));
            } else {
                self.errors.push((id, ChildStartError::AlreadyStarted));
            }
            return None;
        }
        if presence.awaiting_retry {
            self.errors.push((id, ChildStartError::AlreadyStarted));
            return None;
        }
        if presence.partitioned {
            self.errors.push((id, ChildStartError::Partitioned));
            return None;
        }
        let digest = match state_sent.as_deref() {
            Some(digest) if existing_ok => Some(digest.to_owned()),
            // Empty: whichever state waits.
            None if !self.terms.confirm_handover => Some(String::new()),
            _ => None,
        };
        Some(Admitted {
            id,
            state_sent: state_sent.is_some(),
            digest,
        })
    }

    /// The state named by [`Admitted::digest`] was taken (`arrived`) or not. A hot move whose
    /// state is not here (lost, overtaken by this start, or another move's waiting instead) is
    /// refused, so the child stays with its state on the old node, which moves it again.
    pub fn state_taken(&mut self, child: Admitted, arrived: bool) -> Option<Admitted> {
        if child.state_sent && !arrived {
            self.errors.push((child.id, state_missing()));
            return None;
        }
        Some(child)
    }

    /// Authors the row the start records (bound nowhere yet). The hub's own record in the
    /// metadata (a guided child's placement) is not the caller's: it is kept aside while the
    /// row is authored, then put back. A row that cannot be authored answers the child.
    pub fn author(
        &mut self,
        child: Admitted,
        spec: &ChildSpec,
        mut metadata: Metadata,
        node: &str,
        now_ms: u64,
        durable: bool,
    ) -> Option<(Admitted, Row)> {
        let placement = metadata.remove(RESERVED_METADATA_KEY);
        match Row::authored(spec.clone(), metadata, node, now_ms, durable) {
            Ok(mut row) => {
                if let Some(placement) = placement {
                    row.metadata
                        .insert(RESERVED_METADATA_KEY.to_owned(), placement);
                }
                Some((child, row))
            }
            Err(e) => {
                self.errors.push((
                    child.id,
                    ChildStartError::StartupFailed {
                        message: e.to_string(),
                    },
                ));
                None
            }
        }
    }

    /// The child's actor runs as `pid`.
    pub fn started(&mut self, child: Admitted, pid: Pid) {
        self.started.push((child.id, pid));
    }

    /// The child's actor did not start.
    pub fn failed(&mut self, child: Admitted, error: ChildStartError) {
        self.errors.push((child.id, error));
    }

    /// The batch's registry write failed with `error`: a started child is not recorded, so
    /// nobody can find it and it must not keep running. Each started child becomes an error;
    /// returns their ids, to discard.
    pub fn not_recorded(&mut self, error: &ChildStartError) -> Vec<ChildId> {
        let ids: Vec<ChildId> = self.started.iter().map(|(id, _)| id.clone()).collect();
        for (id, _) in self.started.drain(..) {
            self.errors.push((id, error.clone()));
        }
        ids
    }
}

#[cfg(test)]
#[path = "batch_start_tests.rs"]
mod tests;
