//! `ChildRef<M>`: a typed reference to a child by id, valid on every node, that follows the
//! child wherever it runs, the way an Erlang pid is used (but surviving moves and restarts).
//!
//! It is the id and the hub, nothing more: no actor, proxy or subscription exists for it, on
//! this node or any other, so holding a million of them costs a million small values. Each
//! send resolves where the child runs from this node's registry copy:
//! - **here**: the message goes straight into the child's mailbox, unencoded (ractor checks
//!   the message type: a wrong `M` is [`ChildRefError::Decode`]);
//! - **on a peer**: the message is encoded by its type's `Message::serialize`
//!   ([`macro@crate::ChildMessage`]: serde fields, the child not advertised; or ractor_cluster's
//!   `#[derive(RactorClusterMessage)]`) and sent to that node's hub, which decodes it with the child's
//!   kind and hands it to the child;
//! - **between nodes** (its host is down within the grace, or it is being moved): a call
//!   retries after a short pause, re-resolving, until its timeout; a cast fails
//!   `between_nodes` at once so the caller decides.
//!
//! Casts of one sender keep their order while the child stays on one node.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use ractor::message::SerializedMessage;
use ractor::{Message, MessagingErr, RpcReplyPort};
use tokio::time::Instant;

use crate::cluster::wire::budget::FRAME_BUDGET_BYTES;
use crate::cluster::wire::WireMsg;
use crate::core::child_route::{retry_pause_ms, Asking, ChildRoute};
use crate::core::handover::{HeldCast, HoldOutcome};
use crate::hub::typed::RETRY_CAP_MS;
use crate::hub::HubShared;
use crate::model::{ChildId, NodeName};
use crate::types::errors::ChildRefError;

/// A typed reference to child `id` of a hub, from this node. Cheap to clone and send.
pub struct ChildRef<M> {
    id: ChildId,
    hub: Arc<HubShared>,
    _message: PhantomData<fn(M)>,
}

impl<M> Clone for ChildRef<M> {
    fn clone(&self) -> Self {
        Self {
            id: self.id.clone(),
            hub: self.hub.clone(),
            _message: PhantomData,
        }
    }
}

impl<M> std::fmt::Debug for ChildRef<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildRef")
            .field("id", &self.id)
            .field("message", &std::any::type_name::<M>())
            .finish()
    }
}

/// A message on its way: as the caller built it, or already in ractor's serialized form (a
/// call that was sent once and is retried).
enum Pending<M> {
    Typed(M),
    Call {
        variant: String,
        args: Vec<u8>,
        reply: RpcReplyPort<Vec<u8>>,
    },
}

impl<M: Message> ChildRef<M> {
    pub(crate) fn new(hub: Arc<HubShared>, id: ChildId) -> Self {
        Self {
            id,
            hub,
            _message: PhantomData,
        }
    }

    /// The child's id.
    pub fn id(&self) -> &ChildId {
        &self.id
    }

    fn err_unavailable(&self) -> ChildRefError {
        ChildRefError::HubUnavailable {
            id: self.id.clone(),
        }
    }

    /// Sends `msg` to the child wherever it runs, without waiting for it to be handled.
    ///
    /// `Ok` means handed to the child's mailbox (here) or to the network (a peer): a peer
    /// that turns out not to run it forwards it where its registry says, or drops it (logged).
    /// Fails at once with `between_nodes` (see [`ChildRef::cast_within`] to wait it out),
    /// `not_found`, `not_remotable`, `decode` (a local child of another message type) or
    /// `too_large`.
    pub fn cast(&self, msg: M) -> Result<(), ChildRefError> {
        let result = self.try_cast(msg).map_err(|(e, _)| e);
        self.hub
            .messages
            .casted(result, |e: &ChildRefError| e.code())
    }

    /// Sends the message `build` makes to every running replica of the child (with a
    /// replication factor above 1; otherwise to its one instance), not only the active one:
    /// for a change every replica must see, such as a configuration update
    /// (`child.cast_replicas(|| RoomMsg::SetTopic(topic.clone()))`). A builder rather than a
    /// value because message types with reply ports are not `Clone`. Returns how many
    /// replicas it was handed to; `not_found` when the registry names no running instance.
    ///
    /// Replicas this node cannot reach are skipped (logged); `decode`, `not_remotable` and
    /// `too_large` fail before anything is sent.
    pub fn cast_replicas(&self, build: impl Fn() -> M) -> Result<usize, ChildRefError> {
        let result = self.cast_each_replica(build);
        self.hub
            .messages
            .casted(result, |e: &ChildRefError| e.code())
    }

    /// [`ChildRef::cast_replicas`], uncounted.
    fn cast_each_replica(&self, build: impl Fn() -> M) -> Result<usize, ChildRefError> {
        let nodes: Vec<NodeName> = self
            .hub
            .storage
            .get(&self.id)
            .map(|row| row.node_pids.into_keys().collect())
            .unwrap_or_default();
        if nodes.is_empty() {
            return Err(ChildRefError::NotFound {
                id: self.id.clone(),
            });
        }
        let remote = nodes.iter().any(|n| *n != self.hub.node);
        let encoded = if remote {
            match build().serialize() {
                Ok(SerializedMessage::Cast { variant, args, .. }) => {
                    self.check_size(args.len())?;
                    Some((variant, args))
                }
                Ok(_) => return Err(self.not_remotable("an #[rpc] variant cannot be cast")),
                Err(_) => return Err(self.not_encoded()),
            }
        } else {
            None
        };
        let mut sent = 0;
        for node in nodes {
            if node == self.hub.node {
                match self.send_here(build()) {
                    Here::Sent => sent += 1,
                    Here::WrongType => return Err(self.wrong_type()),
                    Here::Retry(_) | Here::Gone => {
                        tracing::debug!(child = %self.id, "local replica not running; cast skipped")
                    }
                }
            } else if let Some((variant, args)) = &encoded {
                match self.send_cast(node.clone(), variant.clone(), args.clone()) {
                    Ok(()) => sent += 1,
                    Err(_) => {
                        tracing::debug!(child = %self.id, %node, "replica unreachable; cast skipped")
                    }
                }
            }
        }
        Ok(sent)
    }

    /// Like [`ChildRef::cast`], but while the child is between nodes it retries (re-resolving
    /// where it runs) until `timeout`.
    pub async fn cast_within(&self, msg: M, timeout: Duration) -> Result<(), ChildRefError> {
        let result = self.cast_retrying(msg, timeout).await;
        self.hub
            .messages
            .casted(result, |e: &ChildRefError| e.code())
    }

    /// [`ChildRef::cast_within`], uncounted.
    async fn cast_retrying(&self, msg: M, timeout: Duration) -> Result<(), ChildRefError> {
        let deadline = Instant::now() + timeout;
        let mut msg = msg;
        let mut attempt = 0u32;
        loop {
            match self.try_cast(msg) {
                Ok(()) => return Ok(()),
                Err((e, Some(back))) if e.is_retryable() => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(e);
                    }
                    let pause = retry_pause_ms(attempt, RETRY_CAP_MS, left.as_millis() as u64);
                    attempt = attempt.saturating_add(1);
                    tokio::time::sleep(Duration::from_millis(pause.max(1))).await;
                    msg = back;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One cast attempt; a retryable failure gives the message back.
    fn try_cast(&self, msg: M) -> Result<(), (ChildRefError, Option<M>)> {
        match self.hub.route_child(&self.id, Asking::OriginNoAnswer) {
            ChildRoute::Here => match self.send_here(msg) {
                Here::Sent => Ok(()),
                Here::Retry(msg) => self.hold_or(msg, None),
                Here::Gone => Err((self.between(None), None)),
                Here::WrongType => Err((self.wrong_type(), None)),
            },
            ChildRoute::Peer(node) => {
                let (variant, args) = match msg.serialize() {
                    Ok(SerializedMessage::Cast { variant, args, .. }) => (variant, args),
                    Ok(_) => {
                        return Err((self.not_remotable("an #[rpc] variant cannot be cast"), None));
                    }
                    Err(_) => return Err((self.not_encoded(), None)),
                };
                self.check_size(args.len()).map_err(|e| (e, None))?;
                self.send_cast(node, variant, args)
            }
            ChildRoute::BetweenNodes { host } => self.hold_or(msg, host),
            ChildRoute::NotFound => Err((
                ChildRefError::NotFound {
                    id: self.id.clone(),
                },
                None,
            )),
        }
    }

    /// A cast to a child that does not run here: held if it is moving away from this node
    /// (hot swap; delivered to its new instance after the import), else `between_nodes`.
    fn hold_or(&self, msg: M, host: Option<String>) -> Result<(), (ChildRefError, Option<M>)> {
        if !self.hub.handoffs.moving.contains_key(&self.id) {
            return Err((self.between(host), Some(msg)));
        }
        let (variant, args) = match msg.serialize() {
            Ok(SerializedMessage::Cast { variant, args, .. }) => (variant, args),
            _ => return Err((self.between(host), None)),
        };
        match self
            .hub
            .hold_cast(&self.id, HeldCast::Typed { variant, args })
        {
            Ok(HoldOutcome::Held) => Ok(()),
            Ok(HoldOutcome::Forward {
                to,
                cast: HeldCast::Typed { variant, args },
            }) => self.send_cast(to, variant, args),
            _ => Err((self.between(host), None)),
        }
    }

    /// Sends an encoded cast to the hub on `node` (`unreachable` if it cannot be sent).
    fn send_cast(
        &self,
        node: NodeName,
        variant: String,
        args: Vec<u8>,
    ) -> Result<(), (ChildRefError, Option<M>)> {
        let transport = self
            .hub
            .transport()
            .ok_or_else(|| (self.err_unavailable(), None))?;
        let frame = WireMsg::TypedCast {
            id: self.id.clone(),
            variant,
            args,
            hops: 1,
        };
        transport.send(&node, &frame).map_err(|_| {
            let e = ChildRefError::Unreachable {
                id: self.id.clone(),
                node,
            };
            (e, None)
        })
    }

    /// Calls the child and waits for its answer, like ractor's `call`:
    /// `child.call(|reply| RoomMsg::History(reply), timeout)`.
    ///
    /// Retries within `timeout` while the child is between nodes (its host is down within the
    /// grace, or it is being moved) or a peer answers that it moved on. Never sends one call
    /// twice to a node that may have handled it: a host that went down while the call waited
    /// is `unreachable`.
    pub async fn call<T, F>(&self, build: F, timeout: Duration) -> Result<T, ChildRefError>
    where
        T: Send + 'static,
        F: FnOnce(RpcReplyPort<T>) -> M,
    {
        let began = std::time::Instant::now();
        let result = self.call_following(build, timeout).await;
        self.hub
            .messages
            .called(result, |e: &ChildRefError| e.code(), began)
    }

    /// [`ChildRef::call`], uncounted.
    async fn call_following<T, F>(&self, build: F, timeout: Duration) -> Result<T, ChildRefError>
    where
        T: Send + 'static,
        F: FnOnce(RpcReplyPort<T>) -> M,
    {
        let deadline = Instant::now() + timeout;
        let (tx, mut rx) = tokio::sync::oneshot::channel::<T>();
        let port = RpcReplyPort::from((tx, timeout));
        let mut pending = Pending::Typed(build(port));
        let mut attempt = 0u32;
        loop {
            let last = match self.hub.route_child(&self.id, Asking::Origin) {
                ChildRoute::Here => {
                    let msg = match pending {
                        Pending::Typed(m) => m,
                        Pending::Call {
                            variant,
                            args,
                            reply,
                        } => M::deserialize(SerializedMessage::Call {
                            variant,
                            args,
                            reply,
                            metadata: None,
                        })
                        .map_err(|_| ChildRefError::Decode {
                            id: self.id.clone(),
                            node: self.hub.node.clone(),
                            detail: "the message does not decode as its own type".into(),
                        })?,
                    };
                    match self.send_here(msg) {
                        Here::Sent => return self.await_local(&mut rx, deadline, timeout).await,
                        Here::Retry(msg) => {
                            pending = Pending::Typed(msg);
                            self.between(None)
                        }
                        Here::Gone => {
                            return Err(ChildRefError::NoReply {
                                id: self.id.clone(),
                                node: self.hub.node.clone(),
                            })
                        }
                        Here::WrongType => return Err(self.wrong_type()),
                    }
                }
                ChildRoute::Peer(node) => {
                    let (variant, args, reply) = match pending {
                        Pending::Typed(m) => match m.serialize() {
                            Ok(SerializedMessage::Call {
                                variant,
                                args,
                                reply,
                                ..
                            }) => (variant, args, reply),
                            Ok(_) => {
                                return Err(self.not_remotable("only #[rpc] variants are called"))
                            }
                            Err(_) => return Err(self.not_encoded()),
                        },
                        Pending::Call {
                            variant,
                            args,
                            reply,
                        } => (variant, args, reply),
                    };
                    self.check_size(args.len())?;
                    let left = deadline.saturating_duration_since(Instant::now());
                    match self.call_peer(&node, &variant, args.clone(), left).await {
                        Ok(bytes) => {
                            // The message type's bridge decodes the bytes into `T` and answers
                            // `rx`; bytes that are not a `T` close it without a value.
                            if reply.send(bytes).is_err() {
                                return Err(self.timeout(timeout));
                            }
                            return match self.await_local(&mut rx, deadline, timeout).await {
                                Err(ChildRefError::NoReply { .. }) => Err(ChildRefError::Decode {
                                    id: self.id.clone(),
                                    node,
                                    detail: format!(
                                        "the answer is not a {}",
                                        std::any::type_name::<T>()
                                    ),
                                }),
                                other => other,
                            };
                        }
                        Err(e) if e.is_retryable() => {
                            pending = Pending::Call {
                                variant,
                                args,
                                reply,
                            };
                            e
                        }
                        Err(e) => return Err(e),
                    }
                }
                ChildRoute::BetweenNodes { host } => self.between(host),
                ChildRoute::NotFound => {
                    return Err(ChildRefError::NotFound {
                        id: self.id.clone(),
                    })
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(last);
            }
            let pause = retry_pause_ms(attempt, RETRY_CAP_MS, left.as_millis() as u64);
            attempt = attempt.saturating_add(1);
            tokio::time::sleep(Duration::from_millis(pause.max(1))).await;
            if Instant::now() >= deadline {
                return Err(last);
            }
        }
    }

    /// One attempt of a call on `node`: the reply's bytes, or the host's failure.
    async fn call_peer(
        &self,
        node: &str,
        variant: &str,
        args: Vec<u8>,
        left: Duration,
    ) -> Result<Vec<u8>, ChildRefError> {
        crate::hub::typed::call_peer(&self.hub, &self.id, node, variant, args, left).await
    }

    /// Hands `msg` to the local child.
    fn send_here(&self, msg: M) -> Here<M> {
        // Sent under the entry's lock: a hot move takes the child out of local routing only
        // after this message is in its mailbox (ahead of the export), or holds it.
        let Some(cell) = self.hub.local_children.get(&self.id) else {
            return Here::Retry(msg);
        };
        let sent = cell.value().send_message::<M>(msg);
        drop(cell);
        match sent {
            Ok(()) => Here::Sent,
            Err(MessagingErr::SendErr(msg)) => Here::Retry(msg),
            Err(MessagingErr::InvalidActorType) => Here::WrongType,
            Err(MessagingErr::ChannelClosed) => Here::Gone,
        }
    }

    async fn await_local<T>(
        &self,
        rx: &mut tokio::sync::oneshot::Receiver<T>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<T, ChildRefError> {
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(ChildRefError::NoReply {
                id: self.id.clone(),
                node: self.hub.node.clone(),
            }),
            Err(_) => Err(self.timeout(timeout)),
        }
    }

    fn check_size(&self, bytes: usize) -> Result<(), ChildRefError> {
        if bytes as u64 > FRAME_BUDGET_BYTES {
            return Err(ChildRefError::TooLarge {
                id: self.id.clone(),
                bytes: bytes as u64,
                max: FRAME_BUDGET_BYTES,
            });
        }
        Ok(())
    }

    fn between(&self, host: Option<String>) -> ChildRefError {
        ChildRefError::BetweenNodes {
            id: self.id.clone(),
            host,
        }
    }

    fn timeout(&self, timeout: Duration) -> ChildRefError {
        ChildRefError::Timeout {
            id: self.id.clone(),
            waited_ms: timeout.as_millis() as u64,
        }
    }

    fn wrong_type(&self) -> ChildRefError {
        ChildRefError::Decode {
            id: self.id.clone(),
            node: self.hub.node.clone(),
            detail: format!(
                "the child's message type is not {}",
                std::any::type_name::<M>()
            ),
        }
    }

    /// The message did not encode: a local-only type, or a field serde refused (logged).
    fn not_encoded(&self) -> ChildRefError {
        self.not_remotable(
            "the message did not encode (a local-only type, or a field serde refused)",
        )
    }

    fn not_remotable(&self, detail: &str) -> ChildRefError {
        ChildRefError::NotRemotable {
            id: self.id.clone(),
            detail: detail.to_owned(),
        }
    }
}

/// What handing a message to a local child did.
enum Here<M> {
    Sent,
    /// The child is not (or no longer) here: the message comes back for another attempt.
    Retry(M),
    /// The child stopped while the message was handed over: the message is lost.
    Gone,
    /// The child's message type is not `M`.
    WrongType,
}

impl crate::api::handle::Hub {
    /// A typed reference to child `id`, usable from this node whatever node runs the child,
    /// now or later (see [`ChildRef`]). Creates nothing anywhere: the child need not exist yet.
    pub fn child_ref<M: Message>(&self, id: impl Into<ChildId>) -> ChildRef<M> {
        ChildRef::new(self.shared().clone(), id.into())
    }
}
