//! Where the DeclaredLeader hands requests on once the declared list allows them: the
//! Coordinator's normal start and stop paths (add before start, remove before terminate),
//! and what it makes of their answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ractor::ActorRef;

use crate::api::errors::{ChildStartError, ChildStopError, StartError, StopError};
use crate::api::options::{StartOptions, StopOptions};
use crate::api::results::{ChildFailure, StartedChild, StopResult, StoppedChild};
use crate::hub::protocol::{DeclaredMsg, StartReplyPort, StopReplyPort};
use crate::hub::HubShared;
use crate::model::{ChildId, ChildSpec, NodeName};

/// After the declaration is durable: start through the Coordinator, merge the refusals, and
/// undeclare children whose start can never succeed or was refused for want of disk (the
/// caller is told it failed, so a reconcile round must not start it later). A `fresh` child (neither declared nor
/// running before this start) found already started was started by a reconcile round that saw
/// the declaration first: it is reported started where it runs.
pub(crate) async fn start_declared(
    hub: Arc<HubShared>,
    me: ActorRef<DeclaredMsg>,
    accepted: Vec<ChildSpec>,
    fresh: BTreeSet<ChildId>,
    opts: StartOptions,
    refused: Vec<ChildFailure>,
    reply: StartReplyPort,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    hub.start_through_coordinator(accepted, opts, tx.into());
    let answer = rx
        .await
        .unwrap_or_else(|_| Err(StartError::HubUnavailable("the coordinator stopped".into())));
    let answer = answer.map(|mut result| {
        let (never, refused_by_disk): (Vec<&ChildFailure>, Vec<&ChildFailure>) = result
            .errors
            .iter()
            .filter(|e| {
                matches!(
                    e.reason,
                    ChildStartError::UnknownKind { .. }
                        | ChildStartError::InvalidArgs { .. }
                        | ChildStartError::Storage { .. }
                        | ChildStartError::InsufficientStorage { .. }
                )
            })
            .partition(|e| {
                matches!(
                    e.reason,
                    ChildStartError::UnknownKind { .. } | ChildStartError::InvalidArgs { .. }
                )
            });
        let ids = |failures: Vec<&ChildFailure>| -> Vec<ChildId> {
            failures.into_iter().map(|e| e.id.clone()).collect()
        };
        if !never.is_empty() {
            let _ = me.cast(DeclaredMsg::Forget {
                ids: ids(never),
                why: "their start can never succeed (unknown kind or bad arguments)",
            });
        }
        // The caller is told the start failed: a reconcile round must not start them later.
        if !refused_by_disk.is_empty() {
            let _ = me.cast(DeclaredMsg::Forget {
                ids: ids(refused_by_disk),
                why: "their start was refused: the registry could not record them",
            });
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

/// Forwards the terminate of a stop whose children were just undeclared. Between the removal
/// (published to every node first) and the terminate, the reconcile round of a node running
/// one of them may see it undeclared and running, take it for a stop that crashed halfway, and
/// stop it first; the terminate then finds nothing (`not_found`, which the admin API answered
/// 404 although the child was declared and running). The stop did what it was asked, so such
/// a child is reported stopped, on the nodes that said it was gone.
pub(crate) fn forward_undeclared_stop(
    hub: &HubShared,
    ids: Vec<ChildId>,
    opts: StopOptions,
    reply: StopReplyPort,
    undeclared: Undeclared,
) {
    if undeclared.is_empty() || !opts.awaitable {
        return hub.stop_through_coordinator(ids, opts, reply);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    hub.stop_through_coordinator(ids, opts, tx.into());
    tokio::spawn(async move {
        let answer = rx
            .await
            .unwrap_or_else(|_| Err(StopError::HubUnavailable("the coordinator stopped".into())));
        let _ = reply.send(answer.map(|result| stopped_meanwhile(result, &undeclared)));
    });
}

/// Turns the `not_found` of an undeclared child that no node reported stopped into a stop (see
/// [`forward_undeclared_stop`]).
fn stopped_meanwhile(mut result: StopResult, undeclared: &Undeclared) -> StopResult {
    let mut gone: BTreeMap<ChildId, Vec<NodeName>> = BTreeMap::new();
    result.errors.retain(|e| {
        let meanwhile = e.reason == ChildStopError::NotFound
            && undeclared.contains_key(&e.id)
            && !result.stopped.iter().any(|s| s.id == e.id);
        if meanwhile {
            let nodes = gone.entry(e.id.clone()).or_default();
            match &e.node {
                Some(node) => nodes.push(node.clone()),
                None => nodes.extend(undeclared[&e.id].iter().cloned()),
            }
        }
        !meanwhile
    });
    for (id, nodes) in gone {
        tracing::debug!(child = %id, ?nodes, "stopped meanwhile by a reconcile round; reported stopped");
        result.stopped.push(StoppedChild { id, nodes });
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::results::StopFailure;

    fn failure(id: &str, node: Option<&str>, reason: ChildStopError) -> StopFailure {
        StopFailure {
            id: ChildId::from(id),
            node: node.map(str::to_owned),
            reason,
        }
    }

    #[test]
    fn only_an_undeclared_childs_not_found_counts_as_stopped() {
        let undeclared: Undeclared = [
            (ChildId::from("gone-here"), vec!["a".to_owned()]),
            (ChildId::from("gone-there"), vec!["b".to_owned()]),
            (ChildId::from("half"), vec!["a".to_owned(), "b".to_owned()]),
            (ChildId::from("slow"), vec!["c".to_owned()]),
        ]
        .into();
        let result = StopResult {
            awaited: true,
            stopped: vec![StoppedChild {
                id: ChildId::from("half"),
                nodes: vec!["a".to_owned()],
            }],
            errors: vec![
                failure("gone-here", None, ChildStopError::NotFound),
                failure("gone-there", Some("c"), ChildStopError::NotFound),
                failure("half", Some("b"), ChildStopError::NotFound),
                failure("slow", Some("c"), ChildStopError::NodeReceiveTimeout),
                failure("unknown", None, ChildStopError::NotFound),
            ],
        };
        let result = stopped_meanwhile(result, &undeclared);
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
        let errors: Vec<&str> = result.errors.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(errors, vec!["half", "slow", "unknown"]);
    }
}
