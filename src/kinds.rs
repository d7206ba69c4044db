//! Child kinds: the actor types a hub can start, registered under a name.
//!
//! A [`ChildSpec`] names its kind and carries its arguments as JSON text, so a spec is plain data
//! that can cross the wire and sit on disk. The kind table turns it back into a typed start:
//! it decodes the arguments as the actor's `Arguments` type and spawns the actor linked under the
//! node's child supervisor. A spec naming an unknown kind, or whose arguments do not decode, is a
//! typed error for that child; it never crashes the hub.

use crate::model::FastHashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ractor::message::SerializedMessage;
use ractor::{Actor, ActorCell, Message, MessagingErr, RpcReplyPort, SpawnErr};
use serde::{Deserialize, Serialize};

use crate::model::{ChildArgs, ChildSpec};
use crate::types::errors::known_kinds_suffix;

/// Why a kind could not start a child.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum KindError {
    /// No kind with this name is registered on the node.
    #[error("unknown child kind {kind:?}{}", known_kinds_suffix(.known))]
    UnknownKind {
        /// The kind the spec named.
        kind: String,
        /// The kinds the node knows, sorted (empty from a node that did not say).
        #[serde(default)]
        known: Vec<String>,
    },
    /// The arguments do not decode as the kind's argument type.
    #[error("arguments of kind {kind:?} do not decode: {message}")]
    InvalidArgs {
        /// The kind.
        kind: String,
        /// The decoder's message.
        message: String,
    },
    /// The actor's `pre_start` returned an error or panicked.
    #[error("child failed to start: {message}")]
    StartupFailed {
        /// The error or panic message.
        message: String,
    },
}

type StartFn =
    dyn Fn(ChildArgs, ActorCell) -> BoxFuture<'static, Result<ActorCell, KindError>> + Send + Sync;

/// A kind's message handler for messages by child id: gets the local child's actor and the
/// encoded payload, answers encoded bytes (or a text error).
pub type CommandFn =
    dyn Fn(ActorCell, Vec<u8>) -> BoxFuture<'static, Result<Vec<u8>, String>> + Send + Sync;

/// Why a typed message from a peer did not reach a child of this node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DeliverError {
    /// The bytes are not a message of the kind's type (another type, another version, or
    /// garbage), or the type has no serialized form.
    #[error("the message does not decode as the kind's message type")]
    Undecodable,
    /// The child stopped before the message was handed to it.
    #[error("the child stopped")]
    Gone,
}

/// Decodes a message serialized by ractor (a remotable message type's `serialize`) into the
/// kind's message type and sends it to the local child: captured when the kind is registered,
/// so a kind needs no second registration to be messaged from other nodes.
pub(crate) type DeliverFn =
    dyn Fn(&ActorCell, SerializedMessage) -> Result<(), DeliverError> + Send + Sync;

/// Why a child's state could not be handed over (the move then falls back to a cold swap).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum HandoverError {
    /// The child did not answer the export within `handover_data_wait_ms`.
    #[error("the child did not export its state within {waited_ms} ms")]
    Timeout {
        /// How long the node waited.
        waited_ms: u64,
    },
    /// The child dropped the export's reply port, or stopped.
    #[error("the child stopped or dropped the export without answering")]
    NoAnswer,
    /// The exported state is larger than `core::handover::MAX_HANDOVER_BYTES`.
    #[error("the exported state is {bytes} bytes, above the limit of {limit}")]
    TooLarge {
        /// The state's size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The kind's handover messages are not of the child's message type.
    #[error("kind {kind:?}: the handover messages are not of the child's message type")]
    WrongMessageType {
        /// The kind.
        kind: String,
    },
    /// The state could not be sent to the new node.
    #[error("the state could not be sent to {node}: {reason}")]
    NotSent {
        /// The new node.
        node: String,
        /// The transport's error.
        reason: String,
    },
    /// The new node already ran the child (a duplicate, after a partition): its own instance
    /// stays, with its own state, and the moving instance's state is not taken.
    #[error("{node} already ran the child: its instance keeps its own state")]
    AlreadyRunning {
        /// The node that ran it.
        node: String,
    },
}

/// Asks a child for its state as bytes (its kind's export message), waiting at most the
/// given time.
type ExportFn = dyn Fn(&ActorCell, Duration) -> BoxFuture<'static, Result<Vec<u8>, HandoverError>>
    + Send
    + Sync;

/// Gives a freshly started child its state (its kind's import message).
type ImportFn = dyn Fn(&ActorCell, Vec<u8>) -> Result<(), HandoverError> + Send + Sync;

/// How a kind hands its state over ([`ChildKinds::handover`]).
#[derive(Clone)]
pub(crate) struct Handover {
    export: Arc<ExportFn>,
    import: Arc<ImportFn>,
}

/// Tells a child its replica role (its kind's role message); `false` if it could not be sent.
type RoleFn = dyn Fn(&ActorCell, crate::types::Role) -> bool + Send + Sync;

/// The table of kinds a hub can start. Cheap to clone (shared entries).
#[derive(Clone, Default)]
pub struct ChildKinds {
    kinds: FastHashMap<String, Arc<StartFn>>,
    commands: FastHashMap<String, Arc<CommandFn>>,
    delivers: FastHashMap<String, Arc<DeliverFn>>,
    handovers: FastHashMap<String, Handover>,
    roles: FastHashMap<String, Arc<RoleFn>>,
}

/// The decoder's message, preceded, when no arguments were given, by what the kind needs to
/// hear: the spec omitted them and the kind has no default.
fn invalid_args_message(omitted: bool, error: &serde_json::Error) -> String {
    if omitted {
        format!("no arguments given (omitted args are JSON null) and the kind needs some: {error}")
    } else {
        error.to_string()
    }
}

impl fmt::Debug for ChildKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

impl ChildKinds {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers actor type `A` under `name`; each start uses a clone of `actor` as the handler
    /// and decodes the spec's args as `A::Arguments`. Registering a name again replaces it.
    pub fn register<A>(&mut self, name: impl Into<String>, actor: A) -> &mut Self
    where
        A: Actor + Clone,
        A::Arguments: serde::de::DeserializeOwned,
    {
        self.register_with(name, move || actor.clone())
    }

    /// Like [`ChildKinds::register`] with a factory building the handler for each start.
    pub fn register_with<A, F>(&mut self, name: impl Into<String>, factory: F) -> &mut Self
    where
        A: Actor,
        A::Arguments: serde::de::DeserializeOwned,
        F: Fn() -> A + Send + Sync + 'static,
    {
        let name = name.into();
        // Shared, not copied per start: only a refused start names it.
        let kind: Arc<str> = name.as_str().into();
        let start: Arc<StartFn> = Arc::new(move |args: ChildArgs, supervisor: ActorCell| {
            let decoded = args.decode::<A::Arguments>();
            let omitted = args.is_omitted();
            let handler = factory();
            let kind = kind.clone();
            Box::pin(async move {
                let args = decoded.map_err(|e| KindError::InvalidArgs {
                    kind: kind.to_string(),
                    message: invalid_args_message(omitted, &e),
                })?;
                // No name: ractor's name registry is process-global and many hubs share a
                // process; children are addressed through the hub by child id instead.
                match A::spawn_linked(None, handler, args, supervisor).await {
                    Ok((actor, _join)) => Ok(actor.get_cell()),
                    Err(SpawnErr::StartupFailed(e)) => Err(KindError::StartupFailed {
                        message: e.to_string(),
                    }),
                    Err(e) => Err(KindError::StartupFailed {
                        message: e.to_string(),
                    }),
                }
            })
        });
        self.kinds.insert(name.clone(), start);
        self.delivers.insert(name, Arc::new(deliver::<A::Msg>));
        self
    }

    /// Registers how children of kind `name` are messaged by id (`Hub::cast_child`,
    /// `Hub::call_child`, from any node): `handler` decodes the payload into the kind's typed
    /// message, sends it to the local child, and encodes the answer. The payload format is the
    /// kind's choice (JSON commands, bincode...); the hub only carries bytes.
    pub fn register_command(
        &mut self,
        name: impl Into<String>,
        handler: impl Fn(ActorCell, Vec<u8>) -> BoxFuture<'static, Result<Vec<u8>, String>>
            + Send
            + Sync
            + 'static,
    ) -> &mut Self {
        self.commands.insert(name.into(), Arc::new(handler));
        self
    }

    /// Lets children of kind `name` keep their state when they move with `migration = "hot"`:
    /// `export` builds the kind's message asking a child for its state as bytes (in the
    /// kind's own encoding), `import` the message giving a new instance that state. The hub
    /// sends the import as the new instance's first message, before any other can reach it.
    ///
    /// ```
    /// # use process_hub::ChildKinds;
    /// # use ractor::RpcReplyPort;
    /// enum CounterMsg { Increment(i64), Export(RpcReplyPort<Vec<u8>>), Import(Vec<u8>) }
    /// impl ractor::Message for CounterMsg {}
    /// let mut kinds = ChildKinds::new();
    /// // kinds.register("counter", Counter);
    /// kinds.handover("counter", CounterMsg::Export, CounterMsg::Import);
    /// ```
    ///
    /// A state above `core::handover::MAX_HANDOVER_BYTES`, an export that is not answered in
    /// `handover_data_wait_ms`, or messages of another type than the child's make the move a
    /// cold swap, reported as such ([`crate::HubEvent::ChildHandover`]).
    pub fn handover<M, E, I>(&mut self, name: impl Into<String>, export: E, import: I) -> &mut Self
    where
        M: Message,
        E: Fn(RpcReplyPort<Vec<u8>>) -> M + Send + Sync + 'static,
        I: Fn(Vec<u8>) -> M + Send + Sync + 'static,
    {
        let name = name.into();
        let export_kind = name.clone();
        let export = Arc::new(export);
        let export: Arc<ExportFn> = Arc::new(move |cell: &ActorCell, wait: Duration| {
            let (tx, rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
            let message = export(RpcReplyPort::from((tx, wait)));
            let sent = cell.send_message::<M>(message);
            let kind = export_kind.clone();
            Box::pin(async move {
                match sent {
                    Ok(()) => {}
                    Err(MessagingErr::InvalidActorType) => {
                        return Err(HandoverError::WrongMessageType { kind })
                    }
                    Err(_) => return Err(HandoverError::NoAnswer),
                }
                let state = match tokio::time::timeout(wait, rx).await {
                    Ok(Ok(state)) => state,
                    Ok(Err(_)) => return Err(HandoverError::NoAnswer),
                    Err(_) => {
                        return Err(HandoverError::Timeout {
                            waited_ms: wait.as_millis() as u64,
                        })
                    }
                };
                let limit = crate::core::handover::MAX_HANDOVER_BYTES;
                if state.len() > limit {
                    return Err(HandoverError::TooLarge {
                        bytes: state.len() as u64,
                        limit: limit as u64,
                    });
                }
                Ok(state)
            }) as BoxFuture<'static, _>
        });
        let import_kind = name.clone();
        let import: Arc<ImportFn> = Arc::new(move |cell: &ActorCell, state: Vec<u8>| {
            match cell.send_message::<M>(import(state)) {
                Ok(()) => Ok(()),
                Err(MessagingErr::InvalidActorType) => Err(HandoverError::WrongMessageType {
                    kind: import_kind.clone(),
                }),
                Err(_) => Err(HandoverError::NoAnswer),
            }
        });
        self.handovers.insert(name, Handover { export, import });
        self
    }

    /// Children of kind `name` learn their replica role (`active` or `passive`) as a message
    /// of their own type, built by `to_message`: at start and whenever it changes, for the
    /// roles the hub's `redundancy_signal` names. A passive replica can then stay idle (no
    /// timers, no writes) until it is told it is active, as Elixir's ProcessHub's
    /// `handle_info({:process_hub, :redundancy_signal, mode})`.
    ///
    /// ```
    /// use process_hub::{ChildKinds, Role};
    /// # use ractor::{Actor, ActorProcessingErr, ActorRef};
    /// enum ScheduleMsg { Role(Role) }
    /// # impl ractor::Message for ScheduleMsg {}
    /// # #[derive(Clone)]
    /// # struct Scheduler;
    /// # impl Actor for Scheduler {
    /// #     type Msg = ScheduleMsg; type State = (); type Arguments = ();
    /// #     async fn pre_start(&self, _: ActorRef<ScheduleMsg>, _: ()) -> Result<(), ActorProcessingErr> { Ok(()) }
    /// # }
    /// let mut kinds = ChildKinds::new();
    /// kinds.register("scheduler", Scheduler);
    /// kinds.redundancy("scheduler", ScheduleMsg::Role);
    /// ```
    pub fn redundancy<M, F>(&mut self, name: impl Into<String>, to_message: F) -> &mut Self
    where
        M: Message,
        F: Fn(crate::types::Role) -> M + Send + Sync + 'static,
    {
        let tell: Arc<RoleFn> = Arc::new(move |cell: &ActorCell, role| {
            cell.send_message::<M>(to_message(role)).is_ok()
        });
        self.roles.insert(name.into(), tell);
        self
    }

    /// Tells `cell`, a child of kind `name`, its role; `None` if the kind does not listen.
    pub(crate) fn tell_role(
        &self,
        name: &str,
        cell: &ActorCell,
        role: crate::types::Role,
    ) -> Option<bool> {
        self.roles.get(name).map(|tell| tell(cell, role))
    }

    /// Whether children of kind `name` hand their state over when they move hot.
    pub fn hands_over(&self, name: &str) -> bool {
        self.handovers.contains_key(name)
    }

    /// Asks `cell`, a child of kind `name`, for its state; `None` if the kind does not hand over.
    pub(crate) fn export(
        &self,
        name: &str,
        cell: &ActorCell,
        wait: Duration,
    ) -> Option<BoxFuture<'static, Result<Vec<u8>, HandoverError>>> {
        self.handovers.get(name).map(|h| (h.export)(cell, wait))
    }

    /// Gives `cell`, a fresh child of kind `name`, its state.
    pub(crate) fn import(
        &self,
        name: &str,
        cell: &ActorCell,
        state: Vec<u8>,
    ) -> Option<Result<(), HandoverError>> {
        self.handovers.get(name).map(|h| (h.import)(cell, state))
    }

    /// How typed messages from peers reach a child of kind `name`, if registered.
    pub(crate) fn deliver(&self, name: &str) -> Option<Arc<DeliverFn>> {
        self.delivers.get(name).cloned()
    }

    /// The message handler of kind `name`, if registered.
    pub fn command(&self, name: &str) -> Option<Arc<CommandFn>> {
        self.commands.get(name).cloned()
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.kinds.contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.kinds.keys().cloned().collect();
        names.sort();
        names
    }

    /// Starts `spec` linked under `supervisor`; resolves once the actor's `pre_start` is done.
    pub async fn start(
        &self,
        spec: &ChildSpec,
        supervisor: ActorCell,
    ) -> Result<ActorCell, KindError> {
        let start = self
            .kinds
            .get(&spec.kind)
            .ok_or_else(|| KindError::UnknownKind {
                kind: spec.kind.clone(),
                known: self.names(),
            })?;
        start(spec.args.clone(), supervisor).await
    }
}

/// A kind's [`DeliverFn`]: ractor's own deserialization of `M` (what
/// `#[derive(RactorClusterMessage)]` generates; a local-only type refuses every message).
fn deliver<M: Message>(cell: &ActorCell, message: SerializedMessage) -> Result<(), DeliverError> {
    let message = M::deserialize(message).map_err(|_| DeliverError::Undecodable)?;
    match cell.send_message::<M>(message) {
        Ok(()) => Ok(()),
        Err(MessagingErr::InvalidActorType) => Err(DeliverError::Undecodable),
        Err(_) => Err(DeliverError::Gone),
    }
}

impl From<KindError> for crate::types::ChildStartError {
    fn from(e: KindError) -> Self {
        match e {
            KindError::UnknownKind { kind, known } => {
                crate::types::ChildStartError::UnknownKind { kind, known }
            }
            KindError::InvalidArgs { kind, message } => {
                crate::types::ChildStartError::InvalidArgs { kind, message }
            }
            KindError::StartupFailed { message } => {
                crate::types::ChildStartError::StartupFailed { message }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ractor::{ActorProcessingErr, ActorRef};

    /// Answers what it was started with, so a test can see the decoded arguments.
    struct Echo<T>(std::marker::PhantomData<fn() -> T>);

    impl<T> Clone for Echo<T> {
        fn clone(&self) -> Self {
            Echo(std::marker::PhantomData)
        }
    }

    struct Get(ractor::RpcReplyPort<String>);
    impl ractor::Message for Get {}

    impl<T> Actor for Echo<T>
    where
        T: std::fmt::Debug + Send + Sync + 'static + serde::de::DeserializeOwned,
    {
        type Msg = Get;
        type State = String;
        type Arguments = T;
        async fn pre_start(
            &self,
            _myself: ActorRef<Get>,
            args: T,
        ) -> Result<String, ActorProcessingErr> {
            Ok(format!("{args:?}"))
        }
        async fn handle(
            &self,
            _myself: ActorRef<Get>,
            Get(reply): Get,
            state: &mut String,
        ) -> Result<(), ActorProcessingErr> {
            let _ = reply.send(state.clone());
            Ok(())
        }
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)] // read through Debug only
    struct Needed {
        size: u32,
    }

    #[derive(Clone)]
    struct Parent;
    impl Actor for Parent {
        type Msg = ();
        type State = ();
        type Arguments = ();
        async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
        async fn handle_supervisor_evt(
            &self,
            _: ActorRef<()>,
            _: ractor::SupervisionEvent,
            _: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }

    async fn started_with(kinds: &ChildKinds, spec: &ChildSpec) -> Result<String, KindError> {
        let (parent, _) = Actor::spawn(None, Parent, ()).await.expect("parent");
        let cell = kinds.start(spec, parent.get_cell()).await?;
        let child: ActorRef<Get> = cell.into();
        let seen = ractor::call_t!(child, Get, 5_000).expect("child answers");
        parent.stop(None);
        Ok(seen)
    }

    #[tokio::test]
    async fn omitted_args_are_null_which_an_option_kind_takes_as_none_and_a_struct_kind_refuses_by_name(
    ) {
        let mut kinds = ChildKinds::new();
        kinds.register("optional", Echo::<Option<Needed>>(Default::default()));
        kinds.register("needs", Echo::<Needed>(Default::default()));
        kinds.register("unit", Echo::<()>(Default::default()));

        let omitted = ChildSpec::new("a", "optional");
        assert!(omitted.args.is_omitted());
        assert_eq!(started_with(&kinds, &omitted).await.unwrap(), "None");
        let given = ChildSpec::new("b", "optional")
            .with_args(&serde_json::json!({"size": 3}))
            .unwrap();
        assert!(!given.args.is_omitted());
        assert_eq!(
            started_with(&kinds, &given).await.unwrap(),
            "Some(Needed { size: 3 })"
        );
        assert_eq!(
            started_with(&kinds, &ChildSpec::new("c", "unit"))
                .await
                .unwrap(),
            "()"
        );

        match started_with(&kinds, &ChildSpec::new("d", "needs")).await {
            Err(KindError::InvalidArgs { kind, message }) => {
                assert_eq!(kind, "needs");
                assert!(message.contains("no arguments given"), "{message}");
            }
            other => panic!("expected invalid_args, got {other:?}"),
        }
        let wrong = ChildSpec::new("e", "needs")
            .with_args(&serde_json::json!({"size": "big"}))
            .unwrap();
        match started_with(&kinds, &wrong).await {
            Err(KindError::InvalidArgs { message, .. }) => {
                assert!(!message.contains("no arguments given"), "{message}");
            }
            other => panic!("expected invalid_args, got {other:?}"),
        }
    }
}
