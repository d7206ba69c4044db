//! A hub reachable from other nodes: [`RemoteHub`], the client of a hub's remote endpoint, and
//! the endpoint's protocol (defined in `hub/protocol/endpoint.rs`, below both the endpoint actor
//! and this client, and re-exported here).
//!
//! Each hub on a ractor_cluster node runs an endpoint actor, the analogue of Erlang's
//! `GenServer.call({hub, node}, ...)`: a remotable actor (its message, [`EndpointMsg`], is a
//! `RactorClusterMessage`) that joins the pg group [`endpoint_group`]`(hub_id)` under the name
//! [`endpoint_name`]. ractor_cluster advertises it to every connected node, so an actor on any
//! node of the cluster, including a node that runs no hub at all (a client node: only a
//! `ClusterNode`), can start and stop children, look them up, message them and read the
//! members through it.
//!
//! The request and the reply travel as bytes ([`EndpointBytes`]: a version, then bincode), so
//! a request that does not decode is answered with a typed refusal instead of being dropped by
//! ractor_cluster, and both sides bound what they decode ([`MAX_ENDPOINT_BYTES`]). The endpoint
//! treats every request as untrusted: the specs are checked with the API's own rules before
//! anything starts, and the work of one request runs beside the actor, at most
//! [`MAX_IN_FLIGHT`] at once.

mod child;
mod client;
mod sink;

pub use crate::hub::protocol::endpoint::{
    decode, down_sink_group, encode, endpoint_group, endpoint_group_hub, endpoint_name,
    endpoint_node, is_down_sink_group, DownSinkMsg, EndpointBytes, EndpointMsg, EndpointReply,
    EndpointRequest, Json, RemoteDown, RemoteFailure, ENDPOINT_VERSION, MAX_ENDPOINT_BYTES,
    MAX_ENDPOINT_MONITORS, MAX_IN_FLIGHT, MAX_MONITORS_PER_CLIENT, MAX_REMOTE_TIMEOUT,
    MAX_VARIANT_LEN, PROBE_EVERY, PROBE_TIMEOUT,
};
pub use child::RemoteChildRef;
pub use client::{RemoteHub, RemoteHubError};
