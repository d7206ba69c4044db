//! The cluster: how a hub talks to its peers on other nodes.
//!
//! The hub sees one seam, [`transport::Network`] / [`transport::Transport`]: open a hub's endpoint,
//! send versioned [`wire`] frames to a node by name, receive membership events and frames. Two
//! implementations sit behind it: [`in_process`] (many nodes in one process, with a router that
//! injects faults, for tests) and [`node`] (ractor_cluster: one node per OS process).

pub mod discovery;
pub mod gateway;
pub mod in_process;
pub mod node;
pub mod tls;
pub mod transport;
pub mod wire;

pub use discovery::{Discovery, DiscoveryError};
pub use tls::TlsError;
pub use transport::{EventSink, IntoNetwork, Network, Transport, TransportError, TransportEvent};
pub use wire::{WireFrame, WireMsg};
