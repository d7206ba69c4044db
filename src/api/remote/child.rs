//! [`RemoteChildRef`]: a typed reference to a child, from a node that runs no hub.
//!
//! The client encodes the message as its type's `Message::serialize` does (the variant's name
//! and its fields' bytes: serde fields for `#[derive(ChildMessage)]`, `BytesConvertable` ones
//! for `RactorClusterMessage`), sends it to one of the hub's endpoints,
//! and the endpoint's node hands it to the hub's typed path, which follows the child wherever
//! it runs (retrying while it is between nodes, within the call's timeout). A call's answer
//! comes back as bytes and completes the caller's `RpcReplyPort<T>` through the type's own
//! decoding, so the caller writes the same `call(|reply| M::Variant(.., reply), timeout)` as
//! with a local [`crate::ChildRef`].

use std::marker::PhantomData;
use std::time::Duration;

use ractor::message::SerializedMessage;
use ractor::{Message, RpcReplyPort};

use super::client::{unexpected, RemoteHub, RemoteHubError};
use super::{EndpointReply, EndpointRequest, MAX_VARIANT_LEN};
use crate::cluster::wire::budget::FRAME_BUDGET_BYTES;
use crate::model::ChildId;
use crate::types::errors::ChildRefError;

/// How much of a call's timeout is kept for the answer's way back from the endpoint, so that
/// the child's own timeout comes back as a typed answer rather than as a lost reply.
const ANSWER_MARGIN: Duration = Duration::from_millis(100);

/// A typed reference to child `id` of a hub, from any node of the cluster (see
/// [`RemoteHub::child_ref`]). Cheap to clone and send; it holds no state anywhere.
pub struct RemoteChildRef<M> {
    hub: RemoteHub,
    id: ChildId,
    _message: PhantomData<fn(M)>,
}

impl<M> Clone for RemoteChildRef<M> {
    fn clone(&self) -> Self {
        Self {
            hub: self.hub.clone(),
            id: self.id.clone(),
            _message: PhantomData,
        }
    }
}

impl<M> std::fmt::Debug for RemoteChildRef<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteChildRef")
            .field("hub", &self.hub)
            .field("id", &self.id)
            .field("message", &std::any::type_name::<M>())
            .finish()
    }
}

impl<M: Message> RemoteChildRef<M> {
    /// The child's id.
    pub fn id(&self) -> &ChildId {
        &self.id
    }

    /// Sends `msg` to the child wherever it runs; `Ok` once the endpoint's node handed it to
    /// the child (here) or to the child's host. Fails at once (`between_nodes`) while the child
    /// is between nodes: see [`RemoteChildRef::cast_within`]. Casts of one sender that each
    /// waited for the previous one's `Ok` arrive in order while the child stays on one node.
    pub async fn cast(&self, msg: M) -> Result<(), RemoteHubError> {
        self.cast_within(msg, Duration::ZERO).await
    }

    /// Like [`RemoteChildRef::cast`], but while the child is between nodes the endpoint retries
    /// until `within` ran out.
    pub async fn cast_within(&self, msg: M, within: Duration) -> Result<(), RemoteHubError> {
        let (variant, args) = match msg.serialize() {
            Ok(SerializedMessage::Cast { variant, args, .. }) => (variant, args),
            Ok(_) => return Err(self.not_remotable("an #[rpc] variant cannot be cast")),
            Err(_) => {
                return Err(self.not_remotable(
                    "the message did not encode (a local-only type, or a field serde refused)",
                ))
            }
        };
        self.check(&variant, args.len())?;
        let request = EndpointRequest::CastTyped {
            id: self.id.clone(),
            variant,
            args,
            within_ms: within.as_millis() as u64,
        };
        let hub = self
            .hub
            .clone()
            .timeout(self.hub.timeout.max(within + ANSWER_MARGIN));
        match hub.request(request).await? {
            (_, EndpointReply::Cast) => Ok(()),
            (node, other) => Err(unexpected(node, other)),
        }
    }

    /// Calls the child and waits at most `timeout` for its answer, like ractor's `call`:
    /// `child.call(|reply| CounterMsg::Get(reply), timeout)`. Retries (at the endpoint's node)
    /// while the child is between nodes; never sends one call twice to a node that may have
    /// handled it.
    pub async fn call<T, F>(&self, build: F, timeout: Duration) -> Result<T, RemoteHubError>
    where
        T: Send + 'static,
        F: FnOnce(RpcReplyPort<T>) -> M,
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<T>();
        let msg = build(RpcReplyPort::from((tx, timeout)));
        let (variant, args, reply) = match msg.serialize() {
            Ok(SerializedMessage::Call {
                variant,
                args,
                reply,
                ..
            }) => (variant, args, reply),
            Ok(_) => return Err(self.not_remotable("only #[rpc] variants are called")),
            Err(_) => {
                return Err(self.not_remotable(
                    "the message did not encode (a local-only type, or a field serde refused)",
                ))
            }
        };
        self.check(&variant, args.len())?;
        let request = EndpointRequest::CallTyped {
            id: self.id.clone(),
            variant,
            args,
            timeout_ms: timeout.saturating_sub(ANSWER_MARGIN).as_millis().max(1) as u64,
        };
        let (node, bytes) = match self.hub.clone().timeout(timeout).request(request).await? {
            (node, EndpointReply::Called(bytes)) => (node, bytes),
            (node, other) => return Err(unexpected(node, other)),
        };
        // The message type's bridge decodes the bytes into `T` and answers `rx`; bytes that
        // are not a `T` close it instead.
        if reply.send(bytes).is_err() {
            return Err(self.decode(node, "the caller stopped waiting"));
        }
        rx.await
            .map_err(|_| self.decode(node, "the answer is not of the reply's type"))
    }

    fn check(&self, variant: &str, bytes: usize) -> Result<(), RemoteHubError> {
        if bytes as u64 > FRAME_BUDGET_BYTES {
            return Err(RemoteHubError::Child(ChildRefError::TooLarge {
                id: self.id.clone(),
                bytes: bytes as u64,
                max: FRAME_BUDGET_BYTES,
            }));
        }
        if variant.len() > MAX_VARIANT_LEN {
            return Err(self.not_remotable("the variant's name is too long"));
        }
        Ok(())
    }

    fn not_remotable(&self, detail: &str) -> RemoteHubError {
        RemoteHubError::Child(ChildRefError::NotRemotable {
            id: self.id.clone(),
            detail: detail.to_owned(),
        })
    }

    fn decode(&self, node: String, detail: &str) -> RemoteHubError {
        RemoteHubError::Child(ChildRefError::Decode {
            id: self.id.clone(),
            node,
            detail: detail.to_owned(),
        })
    }
}

impl RemoteHub {
    /// A typed reference to child `id` of this hub, usable from this node (a client node
    /// included) whatever node runs the child: the `RemoteHub` counterpart of
    /// [`crate::Hub::child_ref`]. `M` must be remotable (`#[derive(ChildMessage)]` or
    /// `RactorClusterMessage`); a local-only type fails `not_remotable`. Creates nothing
    /// anywhere: the child need not exist yet.
    pub fn child_ref<M: Message>(&self, id: impl Into<ChildId>) -> RemoteChildRef<M> {
        RemoteChildRef {
            hub: self.clone(),
            id: id.into(),
            _message: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use ractor_cluster::RactorClusterMessage;

    use super::*;

    struct LocalOnly;
    impl Message for LocalOnly {}

    #[derive(RactorClusterMessage)]
    enum Remotable {
        Blob(Vec<u8>),
        #[rpc]
        Echo(Vec<u8>, RpcReplyPort<Vec<u8>>),
    }

    fn child_code(result: Result<impl std::fmt::Debug, RemoteHubError>) -> &'static str {
        match result {
            Err(RemoteHubError::Child(e)) => e.code(),
            other => panic!("expected a child error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn what_cannot_cross_is_refused_before_anything_is_sent() {
        // No endpoint exists in this process: each refusal comes before looking for one.
        let hub = RemoteHub::any("nowhere");
        let local = hub.child_ref::<LocalOnly>("c");
        assert_eq!(child_code(local.cast(LocalOnly).await), "not_remotable");
        let remote = hub.child_ref::<Remotable>("c");
        let wait = Duration::from_secs(1);
        let cast_rpc = remote.cast(Remotable::Echo(
            vec![],
            RpcReplyPort::from(tokio::sync::oneshot::channel().0),
        ));
        assert_eq!(child_code(cast_rpc.await), "not_remotable");
        let call_cast = remote.call(|_reply: RpcReplyPort<()>| Remotable::Blob(vec![]), wait);
        assert_eq!(child_code(call_cast.await), "not_remotable");
        let big = vec![0u8; FRAME_BUDGET_BYTES as usize + 1];
        assert_eq!(
            child_code(remote.cast(Remotable::Blob(big.clone())).await),
            "too_large"
        );
        let call_big = remote.call(|reply| Remotable::Echo(big, reply), wait);
        assert_eq!(child_code(call_big.await), "too_large");
        // A message that may cross, with no endpoint to take it.
        assert!(matches!(
            remote.cast(Remotable::Blob(vec![1])).await,
            Err(RemoteHubError::NoEndpoint { .. })
        ));
    }
}
