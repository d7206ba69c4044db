//! `HubMsg`: the hub's API as messages, for actor-style use.
//!
//! Every operation of [`crate::Hub`] is also a variant here, sent to the hub's root actor
//! (`hub.actor()`) with a reply port, e.g.
//! `hub_ref.call(|reply| HubMsg::StartChild { spec, opts, reply }, None).await`. Lookups
//! answered here read the same registry view the handle reads directly.

use std::collections::BTreeMap;
use std::time::Duration;

use ractor::{ActorCell, RpcReplyPort};

use crate::core::declared::list::DeclaredView;
use crate::core::recovery::RecoveryState;
use crate::events::{EventSink, SubscriptionId};
use crate::hooks::{HookError, HookHandler, HookKey};
use crate::model::{ChildId, ChildSpec, NodeName, Pid, Row};
use crate::types::errors::WaitForMembersTimeout;
use crate::types::errors::{
    AwaitNormalTimeout, ChildMessageError, RecoveryError, StartError, StopError,
};
use crate::types::monitor::{DownSink, MonitorId, MonitorOptions};
use crate::types::options::{StartOptions, StopOptions};
use crate::types::results::{ChildInfo, ProcessEntry, ProcessScope, StartResult, StopResult};

/// The messages a hub's root actor understands.
///
/// Starts and stops answer with the same types as [`crate::Hub`]'s methods, with the same
/// promise: success only when it took effect, an error only when nothing changed, `pending`
/// (`StartResult::pending`, `StopResult::pending`) when the declared list's change is committed
/// and the rest is not confirmed, `OutcomeUnknown` when this node cannot tell.
pub enum HubMsg {
    /// Start one child.
    StartChild {
        /// The child.
        spec: ChildSpec,
        /// Options.
        opts: StartOptions,
        /// The answer.
        reply: RpcReplyPort<Result<StartResult, StartError>>,
    },
    /// Start several children in one request (one batch per node: the fast path).
    StartChildren {
        /// The children.
        specs: Vec<ChildSpec>,
        /// Options.
        opts: StartOptions,
        /// The answer.
        reply: RpcReplyPort<Result<StartResult, StartError>>,
    },
    /// Stop one child.
    StopChild {
        /// The child.
        id: ChildId,
        /// Options.
        opts: StopOptions,
        /// The answer.
        reply: RpcReplyPort<Result<StopResult, StopError>>,
    },
    /// Stop several children.
    StopChildren {
        /// The children.
        ids: Vec<ChildId>,
        /// Options.
        opts: StopOptions,
        /// The answer.
        reply: RpcReplyPort<Result<StopResult, StopError>>,
    },
    /// Look a child up.
    ChildLookup {
        /// The child.
        id: ChildId,
        /// Include its metadata.
        with_metadata: bool,
        /// The answer.
        reply: RpcReplyPort<Option<ChildInfo>>,
    },
    /// Every node's pid of a child.
    GetPids {
        /// The child.
        id: ChildId,
        /// The answer.
        reply: RpcReplyPort<Vec<(NodeName, Pid)>>,
    },
    /// The children, globally or on this node.
    ProcessList {
        /// Which.
        scope: ProcessScope,
        /// The answer.
        reply: RpcReplyPort<Vec<ProcessEntry>>,
    },
    /// The whole registry copy.
    RegistryDump {
        /// The answer.
        reply: RpcReplyPort<BTreeMap<ChildId, Row>>,
    },
    /// Children whose metadata `tag` equals `tag`.
    TagQuery {
        /// The tag.
        tag: String,
        /// The answer.
        reply: RpcReplyPort<Vec<ProcessEntry>>,
    },
    /// The hub's members.
    Nodes {
        /// Include this node.
        include_local: bool,
        /// The answer.
        reply: RpcReplyPort<Vec<NodeName>>,
    },
    /// Subscribe to the hub's events.
    Subscribe {
        /// Where events go.
        sink: EventSink,
        /// The subscription id, if wanted.
        reply: Option<RpcReplyPort<SubscriptionId>>,
    },
    /// Cancel a subscription.
    Unsubscribe {
        /// The subscription.
        id: SubscriptionId,
    },
    /// Register a hook handler.
    RegisterHook {
        /// The hook.
        key: HookKey,
        /// The handler.
        handler: HookHandler,
        /// The answer.
        reply: RpcReplyPort<Result<(), HookError>>,
    },
    /// Cancel a hook handler.
    CancelHook {
        /// The hook.
        key: HookKey,
        /// The handler's id.
        handler_id: String,
        /// The answer.
        reply: RpcReplyPort<Result<(), HookError>>,
    },
    /// This node's copy of the declared list (`None` without `auto_recovery`).
    DeclaredChildren {
        /// The answer.
        reply: RpcReplyPort<Option<DeclaredView>>,
    },
    /// The operator's `clear` of the declared list: the empty list becomes the truth one
    /// version up, and a parked node unparks. Answers the new version.
    ClearDeclared {
        /// The answer.
        reply: RpcReplyPort<Result<u64, RecoveryError>>,
    },
    /// Send `payload` to child `id` wherever it runs, fire and forget (see
    /// [`crate::Hub::cast_child`]).
    CastChild {
        /// The child.
        id: ChildId,
        /// What the kind's command handler decodes.
        payload: Vec<u8>,
    },
    /// Send `payload` to child `id` wherever it runs and answer with the kind's reply (see
    /// [`crate::Hub::call_child`]).
    CallChild {
        /// The child.
        id: ChildId,
        /// What the kind's command handler decodes.
        payload: Vec<u8>,
        /// How long the child may take.
        timeout: Duration,
        /// The answer.
        reply: RpcReplyPort<Result<Vec<u8>, ChildMessageError>>,
    },
    /// Hand this node's children to their next owners (the ring without this node) and tell
    /// the peers this node is leaving; answered once the handover is done. The hub keeps
    /// running: send [`HubMsg::Shutdown`] next.
    Leave {
        /// Answered when every child was handed over (or failed to be).
        reply: RpcReplyPort<()>,
    },
    /// The cluster was made smaller on purpose: a majority quorum counts its majority of
    /// `size` members from now on (a static quorum keeps its configured size); answers whether
    /// this node is partitioned after it (`reset_cluster_size` in Elixir's ProcessHub).
    ResetClusterSize {
        /// The members the cluster has now, this node included.
        size: usize,
        /// Whether this node is partitioned afterwards.
        reply: RpcReplyPort<bool>,
    },
    /// Stop the hub gracefully: `coordinator_shutdown` hooks, then the Coordinator, the
    /// children (each with its shutdown grace) and last the Registry. The root actor stops once
    /// all of them did; wait for it with `ActorCell::wait` or the spawn's join handle.
    Shutdown,

    // The rest of the handle's operations, so an actor needs nothing but `ActorRef<HubMsg>`.
    /// [`HubMsg::Shutdown`] as a call: answered once every hub actor stopped. A shutdown that
    /// overruns `shutdown_timeout` and gets killed drops the port instead (the call fails).
    ShutdownAndWait {
        /// Answered when the hub has stopped.
        reply: RpcReplyPort<()>,
    },
    /// Waits until the recovery state is `Normal` (see [`crate::Hub::await_normal`]); the hub
    /// keeps serving meanwhile.
    AwaitNormal {
        /// How long to wait at most.
        timeout: Duration,
        /// The answer.
        reply: RpcReplyPort<Result<(), AwaitNormalTimeout>>,
    },
    /// `Recovering` until this node's first reconcile round completes, then `Normal`.
    RecoveryState {
        /// The answer.
        reply: RpcReplyPort<RecoveryState>,
    },
    /// Whether every member delivered its registry to this node (see
    /// [`crate::Hub::cluster_settled`]).
    ClusterSettled {
        /// The answer.
        reply: RpcReplyPort<bool>,
    },
    /// Waits until the cluster is settled, at most `timeout`; answers whether it is (see
    /// [`crate::Hub::wait_cluster_settled`]: a node alone is settled, so this does not wait
    /// for peers to join).
    WaitClusterSettled {
        /// How long to wait at most.
        timeout: Duration,
        /// The answer.
        reply: RpcReplyPort<bool>,
    },
    /// Waits until the hub's membership (this node included) has at least `n` members, at
    /// most `timeout` (see [`crate::Hub::wait_for_members`]); answers the count it saw. The
    /// hub keeps serving meanwhile.
    WaitForMembers {
        /// The member count to wait for, this node included.
        n: usize,
        /// How long to wait at most.
        timeout: Duration,
        /// The count reached, or how many members there were when the wait gave up.
        reply: RpcReplyPort<Result<usize, WaitForMembersTimeout>>,
    },
    /// What keeps this node from writing what it must, one sentence each.
    StorageProblems {
        /// The answer.
        reply: RpcReplyPort<Vec<String>>,
    },
    /// Peer input this node refused, counted by reason.
    RefusedPeerInput {
        /// The answer.
        reply: RpcReplyPort<BTreeMap<&'static str, u64>>,
    },
    /// The actor of a child running on this node (`None` if it runs elsewhere or not at all).
    LocalChild {
        /// The child.
        id: ChildId,
        /// The answer.
        reply: RpcReplyPort<Option<ActorCell>>,
    },
    /// The ids of the handlers of a hook key, in the order they run.
    HookHandlers {
        /// The hook.
        key: HookKey,
        /// The answer.
        reply: RpcReplyPort<Vec<String>>,
    },
    /// The hub id, this node's name and whether it spans nodes.
    Info {
        /// The answer.
        reply: RpcReplyPort<HubInfo>,
    },
    /// Monitors child `id` ([`crate::Hub::monitor`]): `target` gets exactly one `ChildDown`.
    Monitor {
        /// The child.
        id: ChildId,
        /// Where the `ChildDown` goes.
        target: DownSink,
        /// Whether the monitor survives the child's restarts.
        options: MonitorOptions,
        /// The monitor, for [`HubMsg::Demonitor`].
        reply: RpcReplyPort<MonitorId>,
    },
    /// Cancels a monitor set on this node ([`crate::Hub::demonitor`]); `false` if it already
    /// fired or was cancelled.
    Demonitor {
        /// The monitor.
        monitor: MonitorId,
        /// The answer.
        reply: RpcReplyPort<bool>,
    },
}

/// Who a hub is, as [`HubMsg::Info`] answers it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HubInfo {
    /// The hub id.
    pub hub_id: String,
    /// This node's name.
    pub node: NodeName,
    /// Whether the hub runs on a network (else it is one node).
    pub clustered: bool,
}

impl ractor::Message for HubMsg {}
