//! The run's requests to the hubs (starts, calls, stops), each sent as a task and answered
//! into the ledger while the run goes on.

use super::*;

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
            ledger.issue(format!("start {ids:?}"), node, self.trace.now_ms())
        };
        let minority = self.minority_watch(node);
        if !durable {
            // Stops of plain children are drawn from those started, whatever the answer.
            self.live_plain.extend(ids.iter().cloned());
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
                    format!("ok, {} started, errors {codes:?}", result.started.len())
                }
                Err(e) => format!("refused: {e}"),
            };
            trace.line(format!("answer r{request}: {summary}"));
            if !durable {
                return;
            }
            // A start that failed may or may not have happened: no invariant rests on it. A
            // child whose mapping was refused was never declared.
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
        let request = lock(&self.ledger).issue(format!("stop {id}"), node, self.trace.now_ms());
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
                    format!("ok, {} stopped, errors {codes:?}", result.stopped.len())
                }
                Err(e) => format!("refused: {e}"),
            };
            trace.line(format!("answer r{request}: {summary}"));
            if !durable {
                return;
            }
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
