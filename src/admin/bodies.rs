//! The JSON bodies of the admin API: what its requests carry and its answers hold. Field names
//! are a public contract: add, never rename.

use serde::{Deserialize, Serialize};

use crate::model::{ChildArgs, ChildId, ChildSpec, Metadata, Restart};

use super::AdminError;

/// `GET /v1/health` (and the body of a ready `GET /v1/ready`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// This node's name (`name@host`).
    pub node: String,
    /// The hub id.
    pub hub: String,
    /// The hub's members as this node sees them, sorted.
    pub members: Vec<String>,
    /// `"recovering"` until the first reconcile round completes, then `"normal"`.
    pub recovery_state: String,
    /// The declared list is lost on this node and its reconcile parked until an operator
    /// restores or clears it (always `false` without auto-recovery).
    #[serde(default)]
    pub parked: bool,
    /// `"ok"`; `"degraded"` while something keeps this node from writing what it must (a
    /// full or failing disk, a data directory removed under it), `problems` says what;
    /// `"isolated"` while it was given seeds and no peer has authenticated for longer than its
    /// threshold (`unreached_seeds` says why per seed); `"partitioned"` while its side of a
    /// split has no quorum; `"set_aside"` while the reachability resolution keeps it out of
    /// the ring (it reaches some members only through others). Only `"ok"` with
    /// `recovery_state` `"normal"` is ready (`GET /v1/ready`, [`Health::not_ready`]).
    #[serde(default)]
    pub status: String,
    /// Why the node is degraded, one sentence each; empty when `status` is `"ok"`.
    #[serde(default)]
    pub problems: Vec<String>,
    /// This node's side of a split has no quorum (`partition_tolerance`): it runs no child and
    /// answers starts and stops `partitioned`; `status` is then `"partitioned"`.
    #[serde(default)]
    pub partitioned: bool,
    /// The reachability resolution set this node aside: it reaches some members only through
    /// others, runs no child and answers starts and stops `partitioned` until it is fully
    /// connected again for the stable time; `status` is then `"set_aside"`.
    #[serde(default)]
    pub set_aside: bool,
    /// Members this node reaches only through others (indirectly connected): they stay
    /// members and keep their children.
    #[serde(default)]
    pub indirectly_connected: Vec<String>,
    /// What the Coordinator still owes the cluster (`Hub::pending_work`): 0 on a quiet node.
    #[serde(default)]
    pub pending_work: usize,
    /// Peer input this node refused since it started, by reason (`parts`, `invalid_child`,
    /// `implausible_version`, `overloaded`...): a count that grows points at a misbehaving or
    /// incompatible peer (see docs/security.md).
    #[serde(default)]
    pub refused_peer_input: std::collections::BTreeMap<String, u64>,
    /// This node was given seeds and has had no authenticated peer for longer than its
    /// threshold (`--isolated-after-ms`, default 10 s): it serves only itself. `status` is
    /// then `"isolated"` (or `"partitioned"`, which says more). A node without seeds is never
    /// isolated.
    #[serde(default)]
    pub isolated: bool,
    /// While `isolated`: every seed, with the last reason it was not reached.
    #[serde(default)]
    pub unreached_seeds: Vec<UnreachedSeedView>,
    /// Peers refused for their cookie since the node started: sessions that closed before
    /// authenticating, after the peer named itself, with no session to that peer
    /// authenticated since (the same count as `process_hub_peer_auth_failures_total`).
    #[serde(default)]
    pub peer_auth_failures: u64,
    /// The same, per peer name as the peer claimed it (unauthenticated; at most 256 peers).
    #[serde(default)]
    pub peer_auth_failures_by_peer: std::collections::BTreeMap<String, u64>,
}

impl Health {
    /// Why this node is not ready, or `None` when it is: ready means `status` is `"ok"` and
    /// the first reconcile round is done (`recovery_state` `"normal"`). A node still
    /// recovering has not yet restarted the durable children it owes the cluster, so a
    /// rolling restart must not move on to the next node; a load balancer, a readiness probe
    /// and the node's `READY=1` to systemd all use this one rule (`GET /v1/ready`).
    pub fn not_ready(&self) -> Option<String> {
        if self.status != "ok" {
            return Some(format!(
                "status {}: {}",
                self.status,
                self.problems.join("; ")
            ));
        }
        if self.recovery_state != "normal" {
            return Some(format!(
                "recovery_state {}: the first reconcile round has not completed",
                self.recovery_state
            ));
        }
        None
    }
}

/// A seed an isolated node could not reach (`Health::unreached_seeds`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreachedSeedView {
    /// The seed as given (`host:port`).
    pub seed: String,
    /// Why: `cookie_refused` (the peer closed the session before authenticating: the cookies
    /// differ), `no_route` (no TCP connection: nothing listens there, or the network drops
    /// it), `tls` (the TLS handshake failed) or `unanswered` (not tried yet, or a connection
    /// opened and no session authenticated on it).
    pub reason: String,
    /// The last failure in words (an OS error, the peer that refused).
    pub detail: String,
}

/// `GET /v1/kinds`: the kinds this node can start, sorted. A client checks a file of specs
/// against it before sending any, so a typo in a kind on its last line starts nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindsResponse {
    /// The kind names, sorted.
    pub kinds: Vec<String>,
}

/// One declared child of `GET /v1/declared`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredChildView {
    /// The child's id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// Its restart type (always `permanent` for a declared child).
    pub restart: Restart,
    /// The caller's metadata.
    pub metadata: Metadata,
}

/// `GET /v1/declared`: this node's adopted copy of the declared list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredResponse {
    /// The list's version (0 = never mutated).
    pub version: u64,
    /// The declared children.
    pub children: Vec<DeclaredChildView>,
    /// The list is lost here and the reconcile parked.
    #[serde(default)]
    pub parked: bool,
}

/// `POST /v1/declared/clear`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClearResponse {
    /// The version of the now empty list.
    pub version: u64,
}

/// Where one instance of a child runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePid {
    /// The node hosting it.
    pub node: String,
    /// Its node-local actor id.
    pub pid: u64,
    /// Its role as the answering node sees it (`active` answers messages by id; `passive`
    /// stands by), in child listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<crate::core::replication::Role>,
}

/// One child as this node's registry copy knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildView {
    /// The child's id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// Where it runs.
    pub nodes: Vec<NodePid>,
    /// The caller's metadata (its `tag`, if any, is the dashboard's tag column).
    pub metadata: Metadata,
    /// The child is in the declared list (it survives a whole-cluster outage); absent when
    /// this node's copy has no row for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable: Option<bool>,
}

/// One child to start, as posted to `POST /v1/children` (read strictly: an unknown field is
/// refused, see `parse_start_body`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartSpec {
    /// The child's id.
    pub id: String,
    /// A kind registered on every node.
    pub kind: String,
    /// Arguments for the kind (any JSON).
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// `permanent` (default), `transient` or `temporary`.
    #[serde(default)]
    pub restart: Option<Restart>,
    /// String metadata; `tag` drives tag queries.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Add the child to the declared list (needs auto-recovery and a permanent child).
    #[serde(default)]
    pub durable: bool,
    /// Guided placement: the node(s) the child runs on (one; `StartOptions::child_mapping`).
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// With `nodes`: the ring may place the child while its nodes are gone.
    #[serde(default)]
    pub guided_fallback: bool,
}

impl StartSpec {
    /// A spec of `id` and `kind` alone: no arguments, the kind's restart, no metadata, not
    /// durable, placed by the ring. The fields are public, so a caller sets the rest on it.
    pub fn new(id: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: kind.into(),
            args: None,
            restart: None,
            metadata: None,
            durable: false,
            nodes: None,
            guided_fallback: false,
        }
    }

    /// Validates the posted spec into the hub's types.
    pub fn into_spec(self) -> Result<(ChildSpec, Metadata, bool), AdminError> {
        let id = ChildId::parse(self.id).map_err(|e| AdminError::InvalidInput(e.to_string()))?;
        if self.kind.trim().is_empty() {
            return Err(AdminError::InvalidInput(format!(
                "child {id}: `kind` must not be empty"
            )));
        }
        let mut spec = ChildSpec::new(id, self.kind);
        if let Some(args) = &self.args {
            spec.args = ChildArgs::from_json(args);
        }
        if let Some(restart) = self.restart {
            spec.restart = restart;
        }
        Ok((spec, self.metadata.unwrap_or_default(), self.durable))
    }
}

/// A child that started, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedChild {
    /// The child's id.
    pub id: String,
    /// Where it runs.
    pub nodes: Vec<NodePid>,
}

/// A child that did not start on a node, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartError {
    /// The child's id.
    pub id: String,
    /// The node that reported the error (or the local node for validation errors).
    pub node: String,
    /// Why, as text.
    pub reason: String,
    /// The error as a stable snake_case code (`already_started`, `unknown_kind`, ...).
    #[serde(default)]
    pub code: String,
}

/// A child whose request is acknowledged but not confirmed everywhere: a durable start whose
/// declaration is committed and whose start is not confirmed yet, or a durable stop whose
/// removal from the declared list is committed and whose instances are not confirmed stopped.
/// The outcome is decided; the hub carries it out once the nodes named can be reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingChild {
    /// The child's id.
    pub id: String,
    /// The nodes where it is not confirmed (started there, or stopped there); empty when no
    /// node is known to run it.
    pub nodes: Vec<String>,
    /// Why it is not confirmed, as text.
    pub reason: String,
    /// Why, as a stable snake_case code (`node_unavailable`, `node_receive_timeout`,
    /// `partitioned`, ...).
    pub code: String,
}

/// `POST /v1/children`: `200` when every child is settled (`started` or `errors`), `202` when
/// some are `pending`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartResponse {
    /// The children that run now.
    pub started: Vec<StartedChild>,
    /// The children that did not start.
    pub errors: Vec<StartError>,
    /// Durable children declared for good whose start is not confirmed yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingChild>,
}

/// A child that stopped, and where it ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedChild {
    /// The child's id.
    pub id: String,
    /// The nodes it was stopped on.
    pub nodes: Vec<String>,
}

/// `DELETE /v1/children/{id}`: `200` when the child stopped, `202` when its stop is
/// `pending`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopResponse {
    /// The children that stopped.
    pub stopped: Vec<StoppedChild>,
    /// The children that could not be stopped.
    pub errors: Vec<StartError>,
    /// Durable children removed from the declared list for good whose instances are not
    /// confirmed stopped yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingChild>,
}

/// `POST /v1/children/stop`'s answer: every distinct id of the request in exactly one of
/// `stopped`, `pending` and `errors`, in the vocabulary of `DELETE /v1/children/{id}` (an
/// unknown id is an error `not_found`: nothing changed for it), plus the counts. `200` when
/// every child is settled, `202` when some are `pending`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopManyResponse {
    /// The children that stopped, and where they ran.
    pub stopped: Vec<StoppedChild>,
    /// The children that were not stopped, and why: nothing changed for them, but for the
    /// codes whose outcome is unknown (`node_receive_timeout`, `outcome_unknown`: retrying
    /// is safe and settles them).
    pub errors: Vec<StartError>,
    /// Durable children removed from the declared list for good whose instances are not
    /// confirmed stopped yet.
    #[serde(default)]
    pub pending: Vec<PendingChild>,
    /// Ids the request named more than once, each once (each was stopped once).
    #[serde(default)]
    pub duplicates: Vec<String>,
    /// How many of each.
    pub counts: StopCounts,
}

/// The counts of a [`StopManyResponse`]: `stopped + pending + errors == distinct`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopCounts {
    /// Ids in the request, duplicates included.
    pub requested: usize,
    /// Distinct ids: the children the request is about.
    pub distinct: usize,
    /// Children stopped.
    pub stopped: usize,
    /// Children undeclared for good, not confirmed stopped.
    pub pending: usize,
    /// Children not stopped (`not_found` included).
    pub errors: usize,
    /// Of `errors`, the ids no node knew (`not_found`).
    pub not_found: usize,
}

/// `POST /v1/children/{id}/call`: the child's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildAnswer {
    /// The child's id.
    pub id: String,
    /// The node this node's registry names as the child's host once it answered (`null` if
    /// the registry has lost it meanwhile).
    pub node: Option<String>,
    /// The kind's answer, as its command handler encoded it (`null` for commands that answer
    /// nothing).
    pub answer: serde_json::Value,
}

/// `POST /v1/children/{id}/cast` (202): the command was handed to the hub, which delivers it
/// to the child wherever it runs; nothing says whether the child acted on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CastAccepted {
    /// The child's id.
    pub id: String,
    /// The node this node's registry names as the child's host when the cast was sent.
    pub node: Option<String>,
}

/// `GET /v1/loads`: the members' loads this node places new children by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadsResponse {
    /// The node answering.
    pub node: String,
    /// The hub's distribution (`consistent_hash`, `guided`, `load_balanced`).
    pub distribution: String,
    /// The leader that gathers the loads and sends the table.
    pub leader: Option<String>,
    /// Each member's load as the leader's last table says (an average over its reports);
    /// empty with another distribution or before the first table.
    pub nodes: Vec<NodeLoad>,
}

/// One member's row of [`LoadsResponse`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLoad {
    /// The member.
    pub node: String,
    /// Children it runs.
    pub children: u64,
    /// Its scheduler's busy share, in thousandths.
    pub busy_permille: u64,
    /// Tasks in its scheduler's global queue.
    pub run_queue: u64,
    /// Its process's resident memory, in bytes.
    pub memory_bytes: u64,
}
