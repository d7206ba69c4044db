//! `GET /v1/members`: the hub's members as this node sees them, each with its state.
//!
//! `GET /v1/health` lists the members; an operator also wants to know which node is leaving,
//! which is down with children still bound to it (waiting for its node-down grace), how many
//! children each runs, and who leads. All of it is this node's view: the members and the ring
//! the Coordinator published, and one pass over the registry copy (O(rows), no copy of the
//! rows), like `GET /v1/registry/summary`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::api::Hub;
use crate::events::HubEvent;
use crate::model::NodeName;

/// `GET /v1/members`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersResponse {
    /// The node answering.
    pub node: String,
    /// The hub id.
    pub hub: String,
    /// The member that leads (the declared list, the load table), as this node sees it.
    pub leader: Option<String>,
    /// The members, then the nodes that are down but still hold children here, sorted by name
    /// within each group.
    pub members: Vec<MemberView>,
}

/// One node of [`MembersResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// Its name (`name@host`).
    pub node: String,
    /// `up` (a member on the placement ring), `leaving` (a member that said goodbye: off the
    /// ring, its children being handed over) or `down` (not a member, but children are still
    /// bound to it here: it is within its node-down grace, or its children are about to be
    /// re-placed).
    pub state: String,
    /// It is the node answering.
    pub local: bool,
    /// Children this node's registry copy binds to it.
    pub children: usize,
    /// When this node last saw it come up or go down (ms since the Unix epoch), if that event
    /// is still among the recent ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
}

/// The members of `hub` as it sees them now.
pub(super) fn of_hub(hub: &Hub) -> MembersResponse {
    let shared = hub.shared();
    let members: BTreeSet<NodeName> = shared.members().into_iter().collect();
    let ring = shared.ring();
    let mut children: BTreeMap<NodeName, usize> = BTreeMap::new();
    hub.for_each_placement(|p| {
        for (node, _) in p.nodes {
            match children.get_mut(*node) {
                Some(count) => *count += 1,
                None => {
                    children.insert((*node).to_owned(), 1);
                }
            }
        }
    });
    let recent = hub.recent_events();
    let since = |node: &str| {
        recent.last_about_node(node).and_then(|e| match e.event {
            HubEvent::NodeUp { .. } | HubEvent::NodeDown { .. } => Some(e.at_ms),
            _ => None,
        })
    };
    let view = |node: &NodeName, state: &str| MemberView {
        node: node.clone(),
        state: state.to_owned(),
        local: *node == shared.node,
        children: children.get(node).copied().unwrap_or(0),
        since_ms: since(node),
    };
    let mut out: Vec<MemberView> = members
        .iter()
        .map(|node| {
            let on_ring = ring.is_empty() || ring.contains(node);
            view(node, if on_ring { "up" } else { "leaving" })
        })
        .collect();
    out.extend(
        children
            .keys()
            .filter(|node| !members.contains(*node))
            .map(|node| view(node, "down")),
    );
    MembersResponse {
        node: shared.node.clone(),
        hub: hub.hub_id().to_owned(),
        leader: shared.leader(),
        members: out,
    }
}
