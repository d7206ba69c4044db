//! Where the DeclaredLeader hands requests on once the declared list allows them: the
//! Coordinator's normal start and stop paths (add before start, remove before terminate),
//! and what it makes of their answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ractor::ActorRef;

use crate::hub::protocol::{DeclaredMsg, StartReplyPort, StopReplyPort};
use crate::hub::HubShared;
use crate::model::{ChildId, ChildSpec, NodeName};
use crate::types::{
    ChildFailure, PendingStart, PendingStop, StartedChild, StopFailure, StopResult, StoppedChild,
};
use crate::types::{ChildStartError, ChildStopError, StartError, StopError};
use crate::types::{StartOptions, StopOptions};

/// A durable start whose declaration is committed, on its way to the Coordinator.
pub(crate) struct DeclaredStart {
    /// Every child of the request the list allowed (the invalid ones too: the Coordinator
    /// refuses them).
    pub accepted: Vec<ChildSpec>,
    /// The children the declaration named.
    pub declared: BTreeSet<ChildId>,
    /// Children neither declared nor running before this start.
    pub fresh: BTreeSet<ChildId>,
    /// Refusals made before the declaration.
    pub refused: Vec<ChildFailure>,
}

/// After the declaration is durable: start through the Coordinator and tell the caller what
/// happened to each child. The declaration is the decisive half: a declared child whose start
/// is not confirmed (its owner unreachable, slow, or without quorum, or the node its mapping
/// names no longer a member) is `pending`, since the reconcile starts it. A child whose start
/// can never succeed, was refused for want of disk, or failed in its own `pre_start`, is
/// undeclared again (the caller is told it failed, so a reconcile round must not start it later), as are the children of a rolled-back request. A
/// `fresh` child (neither declared nor running before this start) found already started was
/// started by a reconcile round that saw the declaration first: it is reported started where it
/// runs.
pub(crate) async fn start_declared(
    hub: Arc<HubShared>,
    me: ActorRef<DeclaredMsg>,
    start: DeclaredStart,
    opts: StartOptions,
    reply: StartReplyPort,
) {
    let DeclaredStart {
        accepted,
        declared,
        fresh,
        refused,
    } = start;
    let awaitable = opts.awaitable;
    let ids: Vec<ChildId> = accepted.iter().map(|s| s.id.clone()).collect();
    let (tx, rx) = tokio::sync::oneshot::channel();
    hub.start_through_coordinator(accepted, opts, tx.into());
    let answer = rx
        .await
        .unwrap_or_else(|_| Err(StartError::HubUnavailable("the coordinator stopped".into())));
    let answer = match answer {
        Ok(result) => Ok(result),
        // The declaration stands whatever the Coordinator says now: the declared children
        // are pending (the reconcile starts them); the others were not started.
        Err(e) if !declared.is_empty() => {
            let node = hub.node.clone();
            let reason = match e {
                StartError::Partitioned => ChildStartError::Partitioned,
                e => ChildStartError::NodeUnavailable {
                    reason: e.to_string(),
                },
            };
            let mut result = crate::StartResult {
                awaited: awaitable,
                ..Default::default()
            };
            for id in ids {
                let (node, reason) = (node.clone(), reason.clone());
                if declared.contains(&id) {
                    result.pending.push(PendingStart { id, node, reason });
                } else {
                    result.errors.push(ChildFailure { id, node, reason });
                }
            }
            Ok(result)
        }
        Err(e) => Err(e),
    };
    let answer = answer.map(|mut result| {
        let mut forget: BTreeMap<&'static str, Vec<ChildId>> = BTreeMap::new();
        if result.rollback {
            // All or nothing: what was declared for this request is undeclared again, the
            // children a round started for it too (their rows are durable and undeclared, so
            // the round stops them).
            let kept: BTreeSet<&ChildId> = result
                .errors
                .iter()
                .filter(|e| e.reason == ChildStartError::AlreadyStarted && !fresh.contains(&e.id))
                .map(|e| &e.id)
                .collect();
            let ids = declared
                .iter()
                .filter(|id| !kept.contains(id))
                .cloned()
                .collect();
            forget.insert("their start was rolled back", ids);
        } else {
            let mut errors = Vec::new();
            for e in std::mem::take(&mut result.errors) {
                let why = match e.reason {
                    ChildStartError::UnknownKind { .. } | ChildStartError::InvalidArgs { .. } => {
                        Some("their start can never succeed (unknown kind or bad arguments)")
                    }
                    ChildStartError::StartupFailed { .. } => {
                        Some("their start failed: the caller was told so")
                    }
                    ChildStartError::Storage { .. }
                    | ChildStartError::InsufficientStorage { .. } => {
                        Some("their start was refused: the registry could not record them")
                    }
                    // Checked again when the start is routed. A missing or mismatched mapping
                    // cannot pass the declaration and fail here; a node named that left the
                    // members since (`ChildMappingInvalid`) leaves the child declared and
                    // pending: it runs when the node is a member again.
                    ChildStartError::ChildMappingMissing
                    | ChildStartError::ChildMappingMismatch { .. } => {
                        Some("their mapping was refused when the start was routed")
                    }
                    _ => None,
                };
                if let (Some(why), true) = (why, declared.contains(&e.id)) {
                    forget.entry(why).or_default().push(e.id.clone());
                }
                let unconfirmed = matches!(
                    e.reason,
                    ChildStartError::NodeUnavailable { .. }
                        | ChildStartError::NodeReceiveTimeout
                        | ChildStartError::Partitioned
                        | ChildStartError::ChildMappingInvalid { .. }
                );
                if unconfirmed && declared.contains(&e.id) {
                    result.pending.push(PendingStart {
                        id: e.id,
                        node: e.node,
                        reason: e.reason,
                    });
                } else {
                    errors.push(e);
                }
            }
            result.errors = errors;
        }
        for (why, ids) in forget {
            if !ids.is_empty() {
                let _ = me.cast(DeclaredMsg::Forget { ids, why });
            }
        }
        result.errors.retain(|e| {
            let by_a_round = e.reason == ChildStartError::AlreadyStarted && fresh.contains(&e.id);
            let running = by_a_round
                .then(|| hub.storage.get(&e.id))
                .flatten()
                .filter(|row| !row.node_pids.is_empty());
            match running {
                Some(row) => {
                    result.started.push(StartedChild {
                        id: e.id.clone(),
                        nodes: row.node_pids.into_iter().collect(),
                    });
                    false
                }
                None => true,
            }
        });
        result.errors.extend(refused);
        result
    });
    let _ = reply.send(answer);
}

/// The durable children a stop undeclares, as this node knew them before the undeclare: each
/// with the nodes its row here says run it (possibly none).
pub(crate) type Undeclared = BTreeMap<ChildId, Vec<NodeName>>;

/// The durable children among `ids` this node knows before a stop undeclares them: declared in
/// its copy, or with a row marked durable (see [`forward_undeclared_stop`]).
pub(crate) fn undeclared_by_stop(
    hub: &HubShared,
    declared: &[ChildId],
    ids: &[ChildId],
) -> Undeclared {
    ids.iter()
        .filter_map(|id| {
            let row = hub.storage.get(id);
            let durable = row.as_ref().is_some_and(|r| r.hub.durable);
            (durable || declared.contains(id)).then(|| {
                let nodes = row.map(|r| r.node_pids.into_keys().collect());
                (id.clone(), nodes.unwrap_or_default())
            })
        })
        .collect()
}

/// What a stop knows once its removal from the declared list is committed: the children it
/// undeclared (or that the list no longer declares but may still run), and those whose fate
/// this node cannot tell.
pub(crate) struct StopAfterUndeclare {
    /// Durable children known here, with the nodes this node's row says run them.
    pub undeclared: Undeclared,
    /// Children this node knew nothing of, which the leader may have undeclared (its copy
    /// moved past this node's): an error for one of them is `outcome_unknown`.
    pub unsure: BTreeSet<ChildId>,
}

impl StopAfterUndeclare {
    pub(crate) fn new(undeclared: Undeclared) -> Self {
        Self {
            undeclared,
            unsure: BTreeSet::new(),
        }
    }
}

/// Forwards the terminate of a stop whose children were just undeclared, and tells the caller
/// what happened: the removal is the decisive half, so an undeclared child is never answered
/// with an error.
///
/// - Between the removal (published to every node first) and the terminate, the reconcile round
///   of a node running one of them may see it undeclared and running, take it for a stop that
///   crashed halfway, and stop it first; the terminate then finds nothing (`not_found`). The
///   stop did what it was asked, so such a child is reported stopped, on the nodes that said it
///   was gone.
/// - An undeclared child whose host cannot be reached or does not answer is `pending`: no node
///   restarts it, and its host stops it once it sees the list (or it is gone with its host).
/// - A child this node knew nothing of and the leader may have undeclared is `outcome_unknown`
///   rather than `not_found` or `node_unavailable`.
pub(crate) fn forward_undeclared_stop(
    hub: &HubShared,
    ids: Vec<ChildId>,
    opts: StopOptions,
    reply: StopReplyPort,
    after: StopAfterUndeclare,
) {
    if (after.undeclared.is_empty() && after.unsure.is_empty()) || !opts.awaitable {
        return hub.stop_through_coordinator(ids, opts, reply);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    hub.stop_through_coordinator(ids.clone(), opts, tx.into());
    tokio::spawn(async move {
        let answer = rx
            .await
            .unwrap_or_else(|_| Err(StopError::HubUnavailable("the coordinator stopped".into())));
        let answer = match answer {
            Ok(result) => Ok(result),
            // The removal stands whatever the Coordinator says now.
            Err(e) => Ok(StopResult {
                awaited: true,
                errors: ids
                    .into_iter()
                    .map(|id| StopFailure {
                        id,
                        node: None,
                        reason: ChildStopError::NodeUnavailable {
                            reason: e.to_string(),
                        },
                    })
                    .collect(),
                ..StopResult::default()
            }),
        };
        let _ = reply.send(answer.map(|result| settle_after_undeclare(result, &after)));
    });
}

/// Rewrites the Coordinator's answer to a stop whose removal from the list is committed (see
/// [`forward_undeclared_stop`]).
fn settle_after_undeclare(mut result: StopResult, after: &StopAfterUndeclare) -> StopResult {
    let undeclared = &after.undeclared;
    let mut gone: BTreeMap<ChildId, Vec<NodeName>> = BTreeMap::new();
    let mut pending: BTreeMap<ChildId, (Vec<NodeName>, ChildStopError)> = BTreeMap::new();
    let mut errors = Vec::new();
    for e in std::mem::take(&mut result.errors) {
        if undeclared.contains_key(&e.id) {
            let meanwhile = e.reason == ChildStopError::NotFound
                && !result.stopped.iter().any(|s| s.id == e.id);
            if meanwhile {
                let nodes = gone.entry(e.id.clone()).or_default();
                match &e.node {
                    Some(node) => nodes.push(node.clone()),
                    None => nodes.extend(undeclared[&e.id].iter().cloned()),
                }
            } else if e.reason != ChildStopError::NotFound {
                let entry = pending
                    .entry(e.id.clone())
                    .or_insert_with(|| (Vec::new(), e.reason.clone()));
                match &e.node {
                    Some(node) => entry.0.push(node.clone()),
                    None => entry.0.extend(undeclared[&e.id].iter().cloned()),
                }
            }
            // A `not_found` of one replica of a child another node stopped: stopped.
            continue;
        }
        if after.unsure.contains(&e.id) && !result.stopped.iter().any(|s| s.id == e.id) {
            errors.push(StopFailure {
                reason: ChildStopError::OutcomeUnknown {
                    reason: format!(
                        "the declared list's leader took the stop, this node did not know the child, and {}",
                        e.reason
                    ),
                },
                ..e
            });
            continue;
        }
        errors.push(e);
    }
    result.errors = errors;
    for (id, nodes) in gone {
        if pending.contains_key(&id) {
            continue;
        }
        tracing::debug!(child = %id, ?nodes, "stopped meanwhile by a reconcile round; reported stopped");
        result.stopped.push(StoppedChild { id, nodes });
    }
    // A child stopped on one node and not confirmed on another is pending, once.
    result.stopped.retain(|s| !pending.contains_key(&s.id));
    for (id, (nodes, reason)) in pending {
        tracing::debug!(child = %id, ?nodes, %reason, "undeclared; its stop is pending");
        result.pending.push(PendingStop { id, nodes, reason });
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(id: &str, node: Option<&str>, reason: ChildStopError) -> StopFailure {
        StopFailure {
            id: ChildId::from(id),
            node: node.map(str::to_owned),
            reason,
        }
    }

    fn ids<'a>(items: impl IntoIterator<Item = &'a ChildId>) -> Vec<&'a str> {
        items.into_iter().map(ChildId::as_str).collect()
    }

    #[test]
    fn an_undeclared_child_is_stopped_or_pending_never_an_error() {
        let undeclared: Undeclared = [
            (ChildId::from("gone-here"), vec!["a".to_owned()]),
            (ChildId::from("gone-there"), vec!["b".to_owned()]),
            (ChildId::from("half"), vec!["a".to_owned(), "b".to_owned()]),
            (ChildId::from("slow"), vec!["c".to_owned()]),
            (ChildId::from("cut-off"), vec!["d".to_owned()]),
            (ChildId::from("split"), vec!["a".to_owned(), "d".to_owned()]),
        ]
        .into();
        let unavailable = ChildStopError::NodeUnavailable {
            reason: "node unavailable".into(),
        };
        let result = StopResult {
            awaited: true,
            stopped: vec![
                StoppedChild {
                    id: ChildId::from("half"),
                    nodes: vec!["a".to_owned()],
                },
                StoppedChild {
                    id: ChildId::from("split"),
                    nodes: vec!["a".to_owned()],
                },
            ],
            errors: vec![
                failure("gone-here", None, ChildStopError::NotFound),
                failure("gone-there", Some("c"), ChildStopError::NotFound),
                failure("half", Some("b"), ChildStopError::NotFound),
                failure("slow", Some("c"), ChildStopError::NodeReceiveTimeout),
                failure("cut-off", Some("d"), unavailable.clone()),
                failure("split", Some("d"), unavailable.clone()),
                failure("unknown", None, ChildStopError::NotFound),
                failure("plain", Some("d"), unavailable.clone()),
            ],
            pending: Vec::new(),
        };
        let result = settle_after_undeclare(result, &StopAfterUndeclare::new(undeclared));
        let stopped: Vec<(&str, Vec<NodeName>)> = result
            .stopped
            .iter()
            .map(|s| (s.id.as_str(), s.nodes.clone()))
            .collect();
        assert_eq!(
            stopped,
            vec![
                ("half", vec!["a".to_owned()]),
                ("gone-here", vec!["a".to_owned()]),
                ("gone-there", vec!["c".to_owned()]),
            ]
        );
        let pending: Vec<(&str, Vec<NodeName>, &ChildStopError)> = result
            .pending
            .iter()
            .map(|p| (p.id.as_str(), p.nodes.clone(), &p.reason))
            .collect();
        assert_eq!(
            pending,
            vec![
                ("cut-off", vec!["d".to_owned()], &unavailable),
                (
                    "slow",
                    vec!["c".to_owned()],
                    &ChildStopError::NodeReceiveTimeout
                ),
                ("split", vec!["d".to_owned()], &unavailable),
            ]
        );
        // Children the stop did not undeclare keep their errors: nothing changed for them.
        assert_eq!(
            ids(result.errors.iter().map(|e| &e.id)),
            vec!["unknown", "plain"]
        );
        assert_eq!(result.errors[0].reason, ChildStopError::NotFound);
        let outcome = result.outcome(&ChildId::from("split"));
        assert!(
            matches!(outcome, Some(crate::StopOutcome::Pending { nodes, .. }) if nodes == ["d".to_owned()]),
            "{outcome:?}"
        );
    }

    #[test]
    fn a_child_the_leader_may_have_undeclared_is_outcome_unknown_not_an_error() {
        let result = StopResult {
            awaited: true,
            errors: vec![
                failure("z11", Some("b"), ChildStopError::NotFound),
                failure(
                    "z0",
                    Some("d"),
                    ChildStopError::NodeUnavailable { reason: "r".into() },
                ),
                failure("other", None, ChildStopError::NotFound),
            ],
            ..StopResult::default()
        };
        let after = StopAfterUndeclare {
            undeclared: Undeclared::new(),
            unsure: [ChildId::from("z11"), ChildId::from("z0")].into(),
        };
        let result = settle_after_undeclare(result, &after);
        let codes: Vec<(&str, bool)> = result
            .errors
            .iter()
            .map(|e| (e.id.as_str(), e.reason.is_outcome_unknown()))
            .collect();
        assert_eq!(codes, vec![("z11", true), ("z0", true), ("other", false)]);
        assert!(result.stopped.is_empty() && result.pending.is_empty());
    }
}
