//! [`RemoteHub`]: a typed client of a hub's remote endpoint, from any node of the cluster.

use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorCell, ActorRef};

use super::{
    decode, encode, endpoint_group, endpoint_node, EndpointMsg, EndpointReply, EndpointRequest,
    RemoteFailure,
};
use crate::model::{ChildId, ChildSpec, NodeName};
use crate::types::errors::ChildRefError;
use crate::types::options::StartOptions;
use crate::types::results::{ChildInfo, StartResult, StopResult};

/// Why a remote request did not get its answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteHubError {
    /// No endpoint of the hub (on the node asked for) is visible from this node: the node is
    /// not connected, not up yet, or runs no such hub.
    #[error("no endpoint of hub {hub_id} on {}", node.as_deref().unwrap_or("any node"))]
    NoEndpoint {
        /// The hub.
        hub_id: String,
        /// The node asked for, if one was.
        node: Option<NodeName>,
    },
    /// The endpoint did not answer within the client's timeout (the request may still run).
    #[error("{node} did not answer within {timeout_ms} ms")]
    Timeout {
        /// The node asked.
        node: NodeName,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The connection to the node failed before it answered: the request may have reached the
    /// node and taken effect, or not (a client whose sessions to the nodes are still settling
    /// can lose an answer this way). A start asked again answers `already_started` for the
    /// children the lost one started.
    #[error("{node} is unreachable: {reason}")]
    Unreachable {
        /// The node asked.
        node: NodeName,
        /// What ractor reported.
        reason: String,
    },
    /// The answer did not decode, or was not the answer to this request.
    #[error("the answer of {node} did not decode: {reason}")]
    Decode {
        /// The node that answered.
        node: NodeName,
        /// Why.
        reason: String,
    },
    /// The hub refused or failed the request as a whole (see [`RemoteFailure`]'s codes).
    #[error("{node} refused: {failure}")]
    Refused {
        /// The node that answered.
        node: NodeName,
        /// Its answer.
        failure: RemoteFailure,
    },
    /// A typed message to the child failed ([`crate::RemoteChildRef`]): the hub's own typed
    /// error as the endpoint's node met it, or this node's refusal to send it
    /// (`not_remotable`, `too_large`).
    #[error(transparent)]
    Child(ChildRefError),
    /// This node could not start the actor that receives its remote monitors' downs.
    #[error("the down sink could not start: {reason}")]
    SinkUnavailable {
        /// What ractor reported.
        reason: String,
    },
}

/// A hub on other nodes, reached through its remote endpoint: the `GenServer.call({hub,
/// node}, ...)` of this crate. Cheap to build; it finds the endpoint at each request, so it
/// follows endpoints that restart.
///
/// Works on any node whose `ClusterNode` is connected to the hub's nodes, whether or not it
/// runs that hub:
///
/// ```no_run
/// # async fn demo() -> Result<(), process_hub::RemoteHubError> {
/// use process_hub::{ChildSpec, RemoteHub, StartOptions};
/// let orders = RemoteHub::any("orders");
/// orders.wait_ready(std::time::Duration::from_secs(10)).await?;
/// let started = orders
///     .start_children(vec![ChildSpec::new("order-1", "counter")], StartOptions::new())
///     .await?;
/// let on = RemoteHub::on("orders", "b@10.0.0.2");
/// let info = on.child_lookup("order-1").await?;
/// # Ok(()) }
/// ```
///
/// Children are messaged with their own types ([`RemoteHub::child_ref`]) and monitored
/// ([`RemoteHub::monitor`]) the same way, exactly one `ChildDown` per monitor:
///
/// ```no_run
/// # use process_hub::{MonitorOptions, RemoteHub, RemoteHubError};
/// # use process_hub_actors::counter::CounterMsg;
/// # async fn demo() -> Result<(), RemoteHubError> {
/// let orders = RemoteHub::any("orders");
/// let counter = orders.child_ref::<CounterMsg>("order-1");
/// counter.cast(CounterMsg::Increment(1)).await?;
/// let value = counter.call(CounterMsg::Get, std::time::Duration::from_secs(5)).await?;
/// let (_monitor, mut downs) = orders.monitor_channel("order-1", MonitorOptions::new()).await?;
/// let down = downs.recv().await; // stopped, exited, node_down (its host or the endpoint), ...
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RemoteHub {
    pub(super) hub_id: String,
    node: Option<NodeName>,
    pub(super) timeout: Duration,
}

impl RemoteHub {
    /// Hub `hub_id` through any of its endpoints (this node's own first, if it runs the hub).
    pub fn any(hub_id: impl Into<String>) -> Self {
        Self {
            hub_id: hub_id.into(),
            node: None,
            timeout: Duration::from_secs(10),
        }
    }

    /// Hub `hub_id` through its endpoint on `node` (`name@host`).
    pub fn on(hub_id: impl Into<String>, node: impl Into<NodeName>) -> Self {
        Self {
            node: Some(node.into()),
            ..Self::any(hub_id)
        }
    }

    /// How long a request waits for its answer (default 10 s). A call to a child waits at
    /// most this long whatever the child's own timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The nodes whose endpoint of this hub this node sees, sorted.
    pub fn endpoints(&self) -> Vec<NodeName> {
        let mut nodes: Vec<NodeName> = self.visible().into_iter().map(|(node, _)| node).collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// Waits until an endpoint this client would use is visible, at most `within`.
    pub async fn wait_ready(&self, within: Duration) -> Result<(), RemoteHubError> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.endpoint().is_ok() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(self.no_endpoint());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts children (see [`crate::Hub::start_children`]).
    pub async fn start_children(
        &self,
        specs: Vec<ChildSpec>,
        opts: StartOptions,
    ) -> Result<StartResult, RemoteHubError> {
        match self
            .request(EndpointRequest::StartChildren { specs, opts })
            .await?
        {
            (_, EndpointReply::Started(result)) => Ok(result.0),
            (node, other) => Err(unexpected(node, other)),
        }
    }

    /// Stops children (see [`crate::Hub::stop_children`]).
    pub async fn stop_children(&self, ids: Vec<ChildId>) -> Result<StopResult, RemoteHubError> {
        match self.request(EndpointRequest::StopChildren { ids }).await? {
            (_, EndpointReply::Stopped(result)) => Ok(result.0),
            (node, other) => Err(unexpected(node, other)),
        }
    }

    /// The child's spec, metadata and where it runs, or `None`.
    pub async fn child_lookup(
        &self,
        id: impl Into<ChildId>,
    ) -> Result<Option<ChildInfo>, RemoteHubError> {
        let id = id.into();
        match self.request(EndpointRequest::ChildLookup { id }).await? {
            (_, EndpointReply::Child(info)) => Ok(info),
            (node, other) => Err(unexpected(node, other)),
        }
    }

    /// Sends `payload` to the child wherever it runs and returns its kind's answer (see
    /// [`crate::Hub::call_child`]); a failure of the child's side is `Refused` with the
    /// [`crate::ChildMessageError`] code.
    pub async fn call_child(
        &self,
        id: impl Into<ChildId>,
        payload: Vec<u8>,
    ) -> Result<Vec<u8>, RemoteHubError> {
        // The child's deadline is a little inside the client's, so its timeout comes back as
        // a typed answer rather than as a lost reply.
        let timeout_ms = self
            .timeout
            .saturating_sub(Duration::from_millis(100))
            .as_millis() as u64;
        let request = EndpointRequest::CallChild {
            id: id.into(),
            payload,
            timeout_ms: timeout_ms.max(1),
        };
        match self.request(request).await? {
            (_, EndpointReply::Called(answer)) => Ok(answer),
            (node, other) => Err(unexpected(node, other)),
        }
    }

    /// Sends `payload` to the child wherever it runs; answered once the hub routed it.
    pub async fn cast_child(
        &self,
        id: impl Into<ChildId>,
        payload: Vec<u8>,
    ) -> Result<(), RemoteHubError> {
        let request = EndpointRequest::CastChild {
            id: id.into(),
            payload,
        };
        match self.request(request).await? {
            (_, EndpointReply::Cast) => Ok(()),
            (node, other) => Err(unexpected(node, other)),
        }
    }

    /// The hub's members as the endpoint's node sees them.
    pub async fn nodes(&self) -> Result<Vec<NodeName>, RemoteHubError> {
        match self.request(EndpointRequest::Nodes).await? {
            (_, EndpointReply::Nodes(nodes)) => Ok(nodes),
            (node, other) => Err(unexpected(node, other)),
        }
    }

    /// The visible endpoints of this hub, with the node each serves.
    pub(super) fn visible(&self) -> Vec<(NodeName, ActorCell)> {
        ractor::pg::get_members(&endpoint_group(&self.hub_id))
            .into_iter()
            .filter_map(|cell| {
                let name = cell.get_name()?;
                let node = endpoint_node(&self.hub_id, &name)?.to_owned();
                Some((node, cell))
            })
            .collect()
    }

    fn no_endpoint(&self) -> RemoteHubError {
        RemoteHubError::NoEndpoint {
            hub_id: self.hub_id.clone(),
            node: self.node.clone(),
        }
    }

    /// The endpoint to ask: on the node asked for, else this node's own, else the lowest.
    pub(super) fn endpoint(&self) -> Result<(NodeName, ActorRef<EndpointMsg>), RemoteHubError> {
        let mut visible = self.visible();
        visible.sort_by(|a, b| {
            (!a.1.get_id().is_local(), &a.0).cmp(&(!b.1.get_id().is_local(), &b.0))
        });
        visible
            .into_iter()
            .find(|(node, _)| match &self.node {
                Some(wanted) => wanted == node,
                None => true,
            })
            // The name says it is an endpoint, whose message type is `EndpointMsg`.
            .map(|(node, cell)| (node, ActorRef::from(cell)))
            .ok_or_else(|| self.no_endpoint())
    }

    pub(super) async fn request(
        &self,
        request: EndpointRequest,
    ) -> Result<(NodeName, EndpointReply), RemoteHubError> {
        let (node, endpoint) = self.endpoint()?;
        send(node, &endpoint, request, self.timeout).await
    }
}

/// Sends `request` to `endpoint` (on `node`) and waits at most `timeout` for its answer.
pub(super) async fn send(
    node: NodeName,
    endpoint: &ActorRef<EndpointMsg>,
    request: EndpointRequest,
    timeout: Duration,
) -> Result<(NodeName, EndpointReply), RemoteHubError> {
    let bytes = encode(&request);
    let started = tokio::time::Instant::now();
    let answer = endpoint
        .call(|reply| EndpointMsg::Request(bytes, reply), Some(timeout))
        .await;
    let timeout_ms = timeout.as_millis() as u64;
    let bytes = match answer {
        Ok(CallResult::Success(bytes)) => bytes,
        Ok(CallResult::Timeout) => return Err(RemoteHubError::Timeout { node, timeout_ms }),
        // A remote call's timeout surfaces as a closed channel, not as a timeout.
        _ if started.elapsed() >= timeout => {
            return Err(RemoteHubError::Timeout { node, timeout_ms })
        }
        Ok(CallResult::SenderError) => {
            return Err(RemoteHubError::Unreachable {
                node,
                reason: "the endpoint dropped the request".into(),
            })
        }
        Err(e) => {
            return Err(RemoteHubError::Unreachable {
                node,
                reason: e.to_string(),
            })
        }
    };
    match decode::<EndpointReply>(&bytes.0) {
        Ok(EndpointReply::Failed(failure)) => Err(RemoteHubError::Refused { node, failure }),
        Ok(EndpointReply::ChildFailed(error)) => Err(RemoteHubError::Child(error.0)),
        Ok(reply) => Ok((node, reply)),
        Err(failure) => Err(RemoteHubError::Decode {
            node,
            reason: failure.message,
        }),
    }
}

pub(super) fn unexpected(node: NodeName, reply: EndpointReply) -> RemoteHubError {
    RemoteHubError::Decode {
        node,
        reason: format!("an answer to another request: {reply:?}"),
    }
}
