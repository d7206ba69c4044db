//! # process_hub
//!
//! A distributed process hub for [ractor]: a cluster-wide registry plus a distributed
//! supervisor. Hand it child specs; it places each child on the node that owns it, restarts it
//! there, moves it when nodes come and go, and keeps a copy of the registry on every node.
//!
//! The crate is laid out by architecture: [`model`] is the pure row model and its merge rules,
//! [`storage`] holds the registry backends, [`core`] the pure decisions of the hub, `hub` its
//! actors, and the API ([`Hub`], [`HubMsg`], options, results, errors) sits on top, with
//! [`config`], [`kinds`], [`hooks`] and [`events`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use process_hub::{ChildKinds, ChildSpec, Hub, ProcessHub, StartOptions};
//! let kinds = ChildKinds::new(); // register your actor types here
//! let (hub, _join) = Hub::spawn(ProcessHub::new("orders"), kinds).await?;
//! let result = hub.start_child(ChildSpec::new("order-1", "counter"), StartOptions::new()).await?;
//! println!("started: {:?}, errors: {:?}", result.started, result.errors);
//! hub.shutdown().await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

#[cfg(feature = "admin")]
pub mod admin;
pub mod clock;
pub mod cluster;
pub mod core;
pub mod manifest;
pub mod memory_release;
pub mod model;
pub mod recovery;
#[cfg(feature = "sim")]
pub mod sim;
pub mod storage;
pub mod telemetry;

pub mod config;
pub mod events;
pub use events::recent as recent_events;
pub mod hooks;
pub mod kinds;

mod api;
pub use api::remote;
mod hub;
mod types;

pub use api::remote::{RemoteChildRef, RemoteFailure, RemoteHub, RemoteHubError};
pub use api::ChildRef;
pub use api::{Hub, HubBuilder, HubUnavailable, ShutdownTimedOut, SpawnError};
pub use core::declared::list::DeclaredView;
pub use hub::protocol::supervisor::{HubInfo, HubMsg};
pub use process_hub_derive::ChildMessage;

/// What `#[derive(ChildMessage)]` expands to refers to; not an API.
#[doc(hidden)]
pub mod __private {
    pub use crate::api::child_codec::{
        codec, reply_bytes, reply_typed, Decoder, Encoder, FieldCodec, WireField,
    };
    pub use ractor;
}
pub use config::{
    AutoRecoveryConfig, DeclaredCommit, LeaderElector, ManifestLocation, StartBudget,
};
pub use config::{ConfigError, Distribution, ProcessHub, ProcessHubBuilder};
// Hot swap with state handover (docs/strategies.md).
pub use config::{HotSwapConfig, LoadBalancerConfig, Migration, PartitionTolerance, SyncStrategy};
pub use config::{RedundancySignal, ReplicationModel};
pub use core::declared::list::DeclaredChild;
pub use core::recovery::RecoveryState;
pub use events::HandoverOutcome;
pub use events::{EventSink, HubEvent, MoveReason, SubscriptionId};
pub use hooks::{HookAction, HookError, HookEvent, HookHandler, HookKey, Hooks};
pub use kinds::HandoverError;
pub use kinds::{ChildKinds, KindError};
pub use model::{
    ChildArgs, ChildId, ChildSpec, DownReason, Metadata, NodeName, Pid, Restart, Row, Shutdown,
};
pub use types::Role;
pub use types::{
    AwaitNormalTimeout, ChildMessageError, ChildRefError, ChildStartError, ChildStopError,
    RecoveryError, StartError, StopError, WaitForMembersTimeout,
};
pub use types::{ChildDown, DownSink, MonitorId, MonitorOptions};
pub use types::{
    ChildFailure, ChildInfo, OnFailure, PendingStart, PendingStop, ProcessEntry, ProcessScope,
    StartOptions, StartResult, StartedChild, StopFailure, StopOptions, StopOutcome, StopResult,
    StoppedChild,
};
// A cluster node as a library user builds one (docs/cluster.md, "Running nodes from a library"),
// and its seeds from DNS (docs/cluster.md, "Discovery").
pub use cluster::discovery::Discovery;
pub use cluster::node::{ClusterConfig, ClusterError, ClusterNode, TlsConfig};
pub use cluster::IntoNetwork;

/// The Rust snippets of the README, docs/api.md and docs/cluster.md, compiled (and run, unless
/// marked `no_run`) by `cargo test --doc`, so the documentation cannot drift from the API.
#[cfg(doctest)]
mod documentation_snippets {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/api.md")]
    struct Api;
    #[doc = include_str!("../docs/cluster.md")]
    struct Cluster;
}
