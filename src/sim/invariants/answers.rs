//! `answers_truthful`: every answer the workload got to a durable start or stop matches what
//! the declared list's leaders decided (see docs/api.md, "What an answer promises").
//!
//! A child's fate is the declared list: a durable stop's decisive half is its removal, a
//! durable start's its declaration. So an answer is judged against the leaders' decisions made
//! after its request was issued ([`crate::sim::ledger::Decision`]):
//! - a stop answered with an error (nothing changed) must not have been followed by a decision
//!   that undeclared the child (the workload stops a child once, and only its own stop
//!   undeclares it, but for a start that failed: such a child is judged by its start);
//! - a start answered with an error (`already_started` aside) must leave the child undeclared:
//!   any decision that declared it after the request is undone by a later one;
//! - a success or a pending answer is an acknowledgement: `declared_run_once` and
//!   `stopped_stays_stopped` hold the final list and what runs to it, so a pending answer
//!   settles consistently or one of those fails;
//! - an unknown outcome is exempt.

use std::collections::BTreeSet;

use super::{Invariant, Violation};
use crate::model::ChildId;
use crate::sim::ledger::{Ledger, Told};

/// The check, at quiescence (every decision the requests could cause is made).
pub fn answers_truthful(ledger: &Ledger) -> Result<(), Violation> {
    // Children whose durable start failed: its undoing (the start's own undeclare) may come
    // after a later stop was issued, so a stop's error is not judged for them.
    let failed_starts: BTreeSet<&ChildId> = ledger
        .durable_answers
        .iter()
        .filter(|a| a.start && matches!(a.told, Told::Refused(_)))
        .map(|a| &a.id)
        .collect();
    for answer in &ledger.durable_answers {
        let Told::Refused(code) = &answer.told else {
            continue;
        };
        let after = ledger
            .decisions
            .get(answer.decisions_before..)
            .unwrap_or_default();
        if !answer.start {
            if failed_starts.contains(&answer.id) {
                continue;
            }
            if let Some(d) = after.iter().find(|d| d.undeclared.contains(&answer.id)) {
                return Err(Violation::new(
                    Invariant::AnswersTruthful,
                    format!(
                        "request {}: the durable stop of {} answered an error ({code}), but leader {} undeclared it (v{} -> v{})",
                        answer.request, answer.id, d.author, d.base.version, d.result.version
                    ),
                ));
            }
            continue;
        }
        if code == "already_started" {
            continue;
        }
        // The last decision after the request that names the child says where it stands.
        let last = after.iter().rev().find(|d| {
            d.cleared || d.declared.contains(&answer.id) || d.undeclared.contains(&answer.id)
        });
        if let Some(d) = last.filter(|d| d.declared.contains(&answer.id)) {
            return Err(Violation::new(
                Invariant::AnswersTruthful,
                format!(
                    "request {}: the durable start of {} answered an error ({code}), but leader {} declared it (v{}) and no decision undid it",
                    answer.request, answer.id, d.author, d.result.version
                ),
            ));
        }
    }
    Ok(())
}
