//! `GET /v1/cluster`: every member's figures, as one node gathers them over the cluster wire.
//!
//! The dashboard of any node shows the whole cluster without the browser reaching any other
//! node's admin port (which may not be exposed, and would need its own token): the node asks
//! each member for its summary (`WireMsg::SummaryQuery`), all at once, waiting at most
//! [`MEMBER_WAIT`] for each, and answers with what came back. A member that did not answer is
//! `unreachable`; a node this node considers down (gone from the members after it saw it go
//! down, or down with children still bound to it) is `down`, and is not asked.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::Hub;
use crate::core::activity::{self, NodeSummary, BUCKETS, BUCKET_MS};

/// How long the node waits for each member's answer.
pub const MEMBER_WAIT: Duration = Duration::from_millis(1_500);

/// `GET /v1/cluster`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterResponse {
    /// The node answering.
    pub node: String,
    /// The hub id.
    pub hub: String,
    /// The leader as the answering node sees it.
    pub leader: Option<String>,
    /// The width of a history bucket (ms).
    pub bucket_ms: u64,
    /// How many buckets a history holds (ten minutes).
    pub buckets: usize,
    /// The members, then the nodes considered down, sorted by name within each group.
    pub members: Vec<ClusterMemberView>,
}

/// One node of [`ClusterResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMemberView {
    /// Its name.
    pub node: String,
    /// It is the node answering.
    pub local: bool,
    /// As the answering node sees it: `up`, `leaving` or `down`.
    pub membership: String,
    /// What the dashboard shows: `down`, `unreachable`, or the member's own health status
    /// (`ok`, `degraded`, `isolated`, `partitioned`, `set_aside`), `recovering` for an `ok`
    /// member whose first reconcile round has not completed.
    pub health: String,
    /// When the answering node saw it go down (ms since the Unix epoch), for a `down` node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_since_ms: Option<u64>,
    /// Why its figures are missing, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its figures, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<NodeSummary>,
}

/// The cluster as `hub` gathers it now (waits at most [`MEMBER_WAIT`]).
pub(super) async fn of_hub(hub: &Hub) -> ClusterResponse {
    let view = super::members::of_hub(hub);
    let shared = hub.shared().clone();
    let departed: BTreeMap<String, u64> = shared.events.departed().into_iter().collect();
    let mut asks = tokio::task::JoinSet::new();
    for member in view
        .members
        .iter()
        .filter(|m| !m.local && m.state != "down")
    {
        let shared = shared.clone();
        let node = member.node.clone();
        asks.spawn(async move {
            let answer = crate::hub::summary::ask(&shared, &node, MEMBER_WAIT).await;
            (node, answer)
        });
    }
    let mut answers = BTreeMap::new();
    while let Some(joined) = asks.join_next().await {
        if let Ok((node, answer)) = joined {
            answers.insert(node, answer);
        }
    }
    let mut members: Vec<ClusterMemberView> = view
        .members
        .iter()
        .map(|m| {
            let down = m.state == "down";
            let (summary, error) = if m.local {
                (Some(crate::hub::summary::local(&shared)), None)
            } else if down {
                (None, None)
            } else {
                match answers.remove(&m.node) {
                    Some(Ok(s)) => (Some(s), None),
                    Some(Err(e)) => (None, Some(e.to_string())),
                    None => (None, Some("the query failed".into())),
                }
            };
            ClusterMemberView {
                node: m.node.clone(),
                local: m.local,
                membership: m.state.clone(),
                health: activity::shown_health(down, summary.as_ref()),
                down_since_ms: if down {
                    departed.get(&m.node).copied()
                } else {
                    None
                },
                error,
                summary,
            }
        })
        .collect();
    // Nodes seen going down that are no longer listed (no child bound to them here).
    for (node, at) in departed {
        if members.iter().any(|m| m.node == node) {
            continue;
        }
        members.push(ClusterMemberView {
            node,
            local: false,
            membership: "down".into(),
            health: "down".into(),
            down_since_ms: Some(at),
            error: None,
            summary: None,
        });
    }
    ClusterResponse {
        node: view.node,
        hub: view.hub,
        leader: view.leader,
        bucket_ms: BUCKET_MS,
        buckets: BUCKETS,
        members,
    }
}
