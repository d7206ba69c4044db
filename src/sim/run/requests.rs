//! The run's requests to the hubs (starts, calls, stops), each sent as a task and answered
//! into the ledger while the run goes on.

use super::*;
use crate::sim::ledger::{DurableAnswer, Told};
use crate::types::{StartError, StartResult, StopError, StopOutcome, StopResult};

/// The stable snake_case code of a per-child error (its serde tag).
fn code_of(reason: &impl serde::Serialize) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl Run {
    /// Sends a start through `node` as a task: it is answered while the run goes on.
    pub(super) fn start(
        &mut self,
        node: &str,
        ids: Vec<ChildId>,
        durable: bool,
        guided: Option<(NodeName, bool)>,
    ) {
        let Some(hub) = self.cluster.hub(node).cloned() else {
            return;
        };
        let request = {
            let mut ledger = lock(&self.ledger);
            if durable {
                ledger.durable.extend(ids.iter().cloned());
            } else {
                ledger.plain.extend(ids.iter().cloned());
            }
            let request = ledger.issue(format!("start {ids:?}"), node, self.trace.now_ms());
            (request, ledger.decisions.len())
        };
        let (request, decisions_before) = request;
        let minority = self.minority_watch(node);
        if !durable {
            // Stops of plain children are drawn from those started, whatever the answer.
            self.live_plain.extend(ids.iter().cloned());
            for id in &ids {
                self.gone_in_outage.remove(id);
            }
        }
        let specs = ids
            .iter()
            .map(|id| ChildSpec::new(id.clone(), SIM_KIND))
            .collect();
        let mut opts = StartOptions::new().durable(durable);
        // A guided start names one node; with replicas a mapping must name as many nodes as
        // the factor, so replicated runs start on the ring.
        let guided = guided.filter(|_| self.cluster.replicas == 1);
        if let Some((on, fallback)) = &guided {
            for id in &ids {
                opts = opts.child_on(id.clone(), on.clone());
                self.guided.insert(id.clone(), (on.clone(), *fallback));
            }
            opts = opts.guided_fallback(*fallback);
        }
        let (ledger, trace, live) = (
            self.ledger.clone(),
            self.trace.clone(),
            self.live_durable.clone(),
        );
        tokio::spawn(async move {
            let minority = minority.still();
            let answer = hub.start_children(specs, opts).await;
            let mut ledger = lock(&ledger);
            ledger.answered(request);
            if minority && answer.as_ref().is_ok_and(|r| !r.started.is_empty()) {
                ledger.minority_acks.push(request);
            }
            let summary = match &answer {
                Ok(result) => {
                    let mut codes: Vec<String> =
                        result.errors.iter().map(|e| e.reason.to_string()).collect();
                    codes.sort();
                    let pending = if result.pending.is_empty() {
                        String::new()
                    } else {
                        format!(", {} pending", result.pending.len())
                    };
                    format!(
                        "ok, {} started{pending}, errors {codes:?}",
                        result.started.len()
                    )
                }
                Err(e) => format!("refused: {e}"),
            };
            trace.line(format!("answer r{request}: {summary}"));
            if !durable {
                return;
            }
            for id in &ids {
                let told = start_told(&answer, id);
                ledger.durable_answers.push(DurableAnswer {
                    request,
                    start: true,
                    id: id.clone(),
                    told,
                    decisions_before,
                });
            }
            // A start that failed may or may not have happened: no invariant rests on it but
            // `answers_truthful`. A child whose mapping was refused is not declared (refused
            // before the declaration, or undeclared again when the start was routed).
            if let Ok(result) = answer {
                let refused: BTreeSet<&ChildId> = result
                    .errors
                    .iter()
                    .filter(|e| {
                        matches!(
                            e.reason,
                            ChildStartError::ChildMappingMissing
                                | ChildStartError::ChildMappingInvalid { .. }
                                | ChildStartError::ChildMappingMismatch { .. }
                        )
                    })
                    .map(|e| &e.id)
                    .collect();
                let ids: Vec<ChildId> =
                    ids.into_iter().filter(|id| !refused.contains(id)).collect();
                ledger.acknowledged.push(Acknowledged {
                    request,
                    start: true,
                    ids: ids.clone(),
                });
                lock(&live).extend(ids);
            }
        });
    }

    /// Calls a child by id through `node`, as a task.
    pub(super) fn call(&mut self, node: &str, id: ChildId) {
        let Some(hub) = self.cluster.hub(node).cloned() else {
            return;
        };
        let request = lock(&self.ledger).issue(format!("call {id}"), node, self.trace.now_ms());
        let (ledger, trace) = (self.ledger.clone(), self.trace.clone());
        tokio::spawn(async move {
            let answer = hub
                .call_child(id.clone(), b"ping".to_vec(), Duration::from_secs(2))
                .await;
            lock(&ledger).answered(request);
            let summary = match answer {
                Ok(payload) if payload == b"ping" => "pong".to_owned(),
                Ok(other) => format!("wrong answer {other:?}"),
                Err(e) => format!("failed: {}", e.code),
            };
            trace.line(format!("answer r{request}: {summary}"));
        });
    }

    /// Sends a stop through `node` as a task.
    pub(super) fn stop(&mut self, node: &str, id: ChildId, durable: bool) {
        let Some(hub) = self.cluster.hub(node).cloned() else {
            return;
        };
        let (request, decisions_before) = {
            let mut ledger = lock(&self.ledger);
            let request = ledger.issue(format!("stop {id}"), node, self.trace.now_ms());
            (request, ledger.decisions.len())
        };
        let minority = self.minority_watch(node);
        if durable {
            lock(&self.live_durable).remove(&id);
        } else {
            self.live_plain.remove(&id);
        }
        let (ledger, trace) = (self.ledger.clone(), self.trace.clone());
        tokio::spawn(async move {
            let minority = minority.still();
            let answer = hub.stop_child(id.clone(), StopOptions::new()).await;
            let mut ledger = lock(&ledger);
            ledger.answered(request);
            if minority && answer.as_ref().is_ok_and(|r| !r.stopped.is_empty()) {
                ledger.minority_acks.push(request);
            }
            let summary = match &answer {
                Ok(result) => {
                    let mut codes: Vec<String> =
                        result.errors.iter().map(|e| e.reason.to_string()).collect();
                    codes.sort();
                    let pending = if result.pending.is_empty() {
                        String::new()
                    } else {
                        format!(", {} pending", result.pending.len())
                    };
                    format!(
                        "ok, {} stopped{pending}, errors {codes:?}",
                        result.stopped.len()
                    )
                }
                Err(e) => format!("refused: {e}"),
            };
            trace.line(format!("answer r{request}: {summary}"));
            if !durable {
                return;
            }
            ledger.durable_answers.push(DurableAnswer {
                request,
                start: false,
                id: id.clone(),
                told: stop_told(&answer, &id),
                decisions_before,
            });
            // A stop that failed may or may not have happened: no invariant rests on it.
            if answer.is_ok() {
                ledger.acknowledged.push(Acknowledged {
                    request,
                    start: false,
                    ids: vec![id],
                });
            }
        });
    }
}

/// What a durable start's answer said about child `id`.
fn start_told(answer: &Result<StartResult, StartError>, id: &ChildId) -> Told {
    match answer {
        Err(StartError::OutcomeUnknown { .. }) => Told::Unknown,
        Err(e) => Told::Refused(format!("{e}")),
        Ok(result) => {
            if result.started.iter().any(|s| &s.id == id) {
                Told::TookEffect
            } else if result.pending.iter().any(|p| &p.id == id) {
                Told::Pending
            } else if let Some(e) = result.errors.iter().find(|e| &e.id == id) {
                if e.reason.may_have_started() {
                    Told::Unknown
                } else {
                    Told::Refused(code_of(&e.reason))
                }
            } else {
                Told::Unknown
            }
        }
    }
}

/// What a durable stop's answer said about child `id`.
fn stop_told(answer: &Result<StopResult, StopError>, id: &ChildId) -> Told {
    match answer {
        Err(StopError::OutcomeUnknown { .. }) => Told::Unknown,
        Err(e) => Told::Refused(format!("{e}")),
        Ok(result) => match result.outcome(id) {
            Some(StopOutcome::Stopped { .. }) => Told::TookEffect,
            Some(StopOutcome::Pending { .. }) => Told::Pending,
            Some(StopOutcome::Failed(e)) if e.is_outcome_unknown() => Told::Unknown,
            Some(StopOutcome::Failed(e)) => Told::Refused(code_of(e)),
            None => Told::Unknown,
        },
    }
}
