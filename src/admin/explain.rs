//! `GET /v1/children/{id}/explain`: where a child runs, where it belongs now, and why it is
//! where it is, with the last events about it.
//!
//! The facts come from this node's state as it is now — its registry row, the members and the
//! ring the Coordinator published, the row's recorded placement, the declared list, the
//! partition and hot-move flags — and the reason from `core::explain`, which decides from them
//! alone. The events are the ones this node recorded about the child, from the hub's bounded
//! ring of recent events: an event older than the ring, or published on another node, is not
//! among them.

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::api::Hub;
use crate::core::explain::{explain, ChildFacts, Why};
use crate::core::guided::Guided;
use crate::model::{ChildId, NodeName};

use super::bodies::NodePid;
use super::events::EventView;
use super::routes::{parse_id, Routes};
use super::{AdminError, AdminOps};

/// How many of the child's recent events an explanation carries.
pub const EXPLAIN_EVENTS: usize = 20;

/// `GET /v1/children/{id}/explain`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildExplanation {
    /// The child's id.
    pub id: String,
    /// The node that answers (the facts are its view).
    pub node: String,
    /// The child's kind (`null` when neither its row nor the declared list is here).
    pub kind: Option<String>,
    /// It runs on at least one node that is a member.
    pub running: bool,
    /// Where its row binds it, each with its pid and role; a node here that is not a member
    /// is down.
    pub nodes: Vec<NodePid>,
    /// Its owners on the hash ring now (as many as the replication factor).
    pub owners: Vec<String>,
    /// Where it belongs now: its recorded placement if it has one (a guided start, or the
    /// load balancer's choice), else its ring owners.
    pub belongs_on: Vec<String>,
    /// How it is placed: `ring`, `guided` (its start named the node) or `load` (the load
    /// balancer chose the node).
    pub placement: String,
    /// Why it is where it is (`ring_owner`, `guided`, `replica`, `waiting_for_grace`,
    /// `migrating`, `declared_waiting_for_round`, `parked`, `partitioned`, `not_running`).
    pub why: Why,
    /// The reason in a sentence.
    pub detail: String,
    /// It is in this node's copy of the declared list.
    pub declared: bool,
    /// Its row is durable (declared when it was started).
    pub durable: bool,
    /// With `waiting_for_grace`: the hub's node-down grace, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodedown_grace_ms: Option<u64>,
    /// With `waiting_for_grace`: when its node was seen going down (ms since the Unix epoch),
    /// if that event is still among the recent ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_since_ms: Option<u64>,
    /// The last events this node recorded about the child, oldest first.
    pub recent_events: Vec<EventView>,
}

pub(super) async fn route<O: AdminOps>(
    State(r): State<Routes<O>>,
    Path(id): Path<String>,
) -> Result<Json<ChildExplanation>, AdminError> {
    let id = parse_id(id)?;
    match r.ops.explain_child(id.clone()).await? {
        Some(explanation) => Ok(Json(explanation)),
        None => Err(AdminError::NotFound(format!(
            "no child with id {id}: neither this node's registry nor its declared list holds it"
        ))),
    }
}

/// The explanation of child `id` on `hub`, or `None` when neither its registry nor its
/// declared list knows the id.
pub(super) fn of_hub(hub: &Hub, id: &ChildId) -> Option<ChildExplanation> {
    let shared = hub.shared();
    let row = shared.storage.get(id);
    let declared_snapshot = shared.recovery.as_ref().map(|r| r.snapshot());
    let declared_child = declared_snapshot
        .as_ref()
        .and_then(|s| s.list.get(id).cloned());
    if row.is_none() && declared_child.is_none() {
        return None;
    }
    let ring = shared.ring();
    let metadata = row
        .as_ref()
        .map(|r| &r.metadata)
        .or(declared_child.as_ref().map(|c| &c.metadata));
    let guided = metadata.and_then(Guided::of);
    let factor = shared.config.replication_factor.max(1);
    let owners: Vec<String> = if ring.is_empty() {
        vec![shared.node.clone()]
    } else {
        ring.owners(id, factor).into_iter().cloned().collect()
    };
    let belongs_on = shared.owners_of(&ring, id, metadata);
    let members: std::collections::BTreeSet<NodeName> = shared.members().into_iter().collect();
    let bound_on: Vec<NodeName> = row
        .as_ref()
        .map(|r| r.node_pids.keys().cloned().collect())
        .unwrap_or_default();
    let facts = ChildFacts {
        in_registry: row.is_some(),
        bound_on: bound_on.clone(),
        members: members.clone(),
        belongs_on: belongs_on.clone(),
        guided: guided.as_ref(),
        replication_factor: factor,
        declared: declared_child.is_some(),
        parked: declared_snapshot.as_ref().is_some_and(|s| s.parked),
        partitioned: shared.partition.partitioned(),
        moving: shared.handoffs.moving.contains_key(id),
    };
    let explanation = explain(&facts);
    let roles: std::collections::BTreeMap<NodeName, crate::core::replication::Role> = shared
        .replica_roles(&ring, id, metadata, bound_on.iter())
        .into_iter()
        .collect();
    let nodes = row
        .as_ref()
        .map(|r| {
            r.node_pids
                .iter()
                .map(|(node, pid)| NodePid {
                    node: node.clone(),
                    pid: *pid,
                    role: members
                        .contains(node)
                        .then(|| roles.get(node).copied())
                        .flatten(),
                })
                .collect()
        })
        .unwrap_or_default();
    let recent = hub.recent_events();
    let waiting = explanation.why == Why::WaitingForGrace;
    let down_since_ms = waiting
        .then(|| {
            bound_on
                .iter()
                .filter(|n| !members.contains(*n))
                .filter_map(|n| recent.last_about_node(n))
                .filter(|e| matches!(e.event, crate::events::HubEvent::NodeDown { .. }))
                .map(|e| e.at_ms)
                .max()
        })
        .flatten();
    let kind = row
        .as_ref()
        .map(|r| r.spec.kind.clone())
        .or(declared_child.as_ref().map(|c| c.spec.kind.clone()));
    Some(ChildExplanation {
        id: id.to_string(),
        node: shared.node.clone(),
        kind,
        running: bound_on.iter().any(|n| members.contains(n)),
        nodes,
        owners,
        belongs_on,
        placement: match &guided {
            Some(g) if g.by_load => "load",
            Some(_) => "guided",
            None => "ring",
        }
        .into(),
        why: explanation.why,
        detail: explanation.detail,
        declared: declared_child.is_some(),
        durable: row.as_ref().is_some_and(|r| r.hub.durable),
        nodedown_grace_ms: waiting.then_some(shared.config.nodedown_grace_ms),
        down_since_ms,
        recent_events: recent
            .last_of(id, EXPLAIN_EVENTS)
            .iter()
            .map(|e| EventView::of(e))
            .collect(),
    })
}
