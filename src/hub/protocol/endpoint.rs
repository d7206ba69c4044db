//! The protocol of a hub's remote endpoint: its names, bounds, requests, replies and encoding.
//!
//! Both sides speak it: the server (the endpoint actor, `hub/endpoint/`) and the client
//! ([`crate::RemoteHub`], `api/remote/`), so it lives here, below both; users see it as
//! `process_hub::remote::*`.
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

use bincode::Options;
use ractor::RpcReplyPort;
use ractor_cluster::{BytesConvertable, RactorClusterMessage};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::model::{ChildId, ChildSpec, DownReason, NodeName};
use crate::types::errors::ChildRefError;
use crate::types::options::StartOptions;
use crate::types::results::{ChildInfo, StartResult, StopResult};

/// The version of the endpoint's encoding, the first two bytes of every request and reply.
pub const ENDPOINT_VERSION: u16 = 1;

/// Largest request or reply decoded (ractor_cluster's own frame limit).
pub const MAX_ENDPOINT_BYTES: u64 = crate::cluster::wire::MAX_FRAME_BYTES;

/// Requests one endpoint works on at once; beyond it a request is refused `overloaded`.
pub const MAX_IN_FLIGHT: usize = 1024;

/// Longest timeout a remote request may ask of the endpoint (that of the API's options).
pub const MAX_REMOTE_TIMEOUT: std::time::Duration = crate::types::options::MAX_TIMEOUT;

/// Longest variant name a typed message may carry (ractor's names are Rust identifiers).
pub const MAX_VARIANT_LEN: usize = 256;

/// The most monitors one client (one sink) may hold on one endpoint; beyond it a monitor is
/// refused `too_many_monitors`.
pub const MAX_MONITORS_PER_CLIENT: usize = 10_000;

/// The most monitors one endpoint holds for all its clients.
pub const MAX_ENDPOINT_MONITORS: usize = 100_000;

/// How often a client probes each endpoint it holds monitors through.
pub const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a probe waits: an endpoint that does not answer within it is taken as gone (its
/// node froze or the connection to it is half-open), and its monitors fire `node_down`.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The pg group (default scope) every endpoint of hub `hub_id` joins.
pub fn endpoint_group(hub_id: &str) -> String {
    format!("process_hub.endpoint.{hub_id}")
}

/// The actor name of hub `hub_id`'s endpoint on `node`; `nonce` tells a restarted endpoint
/// from its predecessor.
pub fn endpoint_name(hub_id: &str, node: &str, nonce: u64) -> String {
    format!("process_hub.endpoint|{hub_id}|{node}|{nonce:016x}")
}

/// The node an endpoint of `hub_id` named `name` serves, if the name is one.
pub fn endpoint_node<'a>(hub_id: &str, name: &'a str) -> Option<&'a str> {
    let rest = name.strip_prefix("process_hub.endpoint|")?;
    let rest = rest.strip_prefix(hub_id)?.strip_prefix('|')?;
    let (node, _nonce) = rest.rsplit_once('|')?;
    Some(node)
}

/// What a client asks of a hub's endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndpointRequest {
    /// `Hub::start_children`.
    StartChildren {
        /// The children.
        specs: Vec<ChildSpec>,
        /// The options.
        opts: StartOptions,
    },
    /// `Hub::stop_children` with the default options.
    StopChildren {
        /// The children.
        ids: Vec<ChildId>,
    },
    /// `Hub::child_lookup_with_metadata`.
    ChildLookup {
        /// The child.
        id: ChildId,
    },
    /// `Hub::call_child`.
    CallChild {
        /// The child.
        id: ChildId,
        /// What the kind's command handler decodes.
        payload: Vec<u8>,
        /// How long the child may take, in ms.
        timeout_ms: u64,
    },
    /// `Hub::cast_child`.
    CastChild {
        /// The child.
        id: ChildId,
        /// What the kind's command handler decodes.
        payload: Vec<u8>,
    },
    /// `Hub::nodes(true)`.
    Nodes,
    /// A typed call ([`RemoteChildRef::call`]): an `#[rpc]` variant as ractor serializes it.
    CallTyped {
        /// The child.
        id: ChildId,
        /// The variant's name.
        variant: String,
        /// Its encoded fields (at most [`crate::cluster::wire::budget::FRAME_BUDGET_BYTES`]).
        args: Vec<u8>,
        /// How long the child may take, in ms.
        timeout_ms: u64,
    },
    /// A typed cast ([`RemoteChildRef::cast`]).
    CastTyped {
        /// The child.
        id: ChildId,
        /// The variant's name.
        variant: String,
        /// Its encoded fields (at most [`crate::cluster::wire::budget::FRAME_BUDGET_BYTES`]).
        args: Vec<u8>,
        /// How long to retry while the child is between nodes, in ms (0: fail at once).
        within_ms: u64,
    },
    /// Monitors the child for the client's monitor `monitor`; the down goes to the client's
    /// sink, the actor in pg group `sink` ([`down_sink_group`]).
    Monitor {
        /// The child.
        id: ChildId,
        /// The client's sink group.
        sink: String,
        /// The client's monitor id.
        monitor: u64,
        /// See [`crate::MonitorOptions::follow_restarts`].
        follow_restarts: bool,
    },
    /// Cancels the client's monitor `monitor` held for `sink`.
    Demonitor {
        /// The client's sink group.
        sink: String,
        /// The client's monitor id.
        monitor: u64,
    },
    /// How many monitors the endpoint holds for `sink`; answered by the endpoint actor itself,
    /// so it is also the client's probe that the endpoint still answers.
    Held {
        /// The client's sink group.
        sink: String,
    },
}

/// What an endpoint answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndpointReply {
    /// A start's result (per-child failures are in it).
    Started(Json<StartResult>),
    /// A stop's result.
    Stopped(Json<StopResult>),
    /// A lookup's answer.
    Child(Option<ChildInfo>),
    /// The child's answer to a call.
    Called(Vec<u8>),
    /// The cast was routed.
    Cast,
    /// The hub's members, the endpoint's node included.
    Nodes(Vec<NodeName>),
    /// The request failed or was refused as a whole.
    Failed(RemoteFailure),
    /// A typed message to a child failed (the hub's own typed error).
    ChildFailed(Json<ChildRefError>),
    /// The monitor is set; its down will come to the client's sink.
    Monitoring,
    /// Whether the cancelled monitor was held.
    Demonitored(bool),
    /// The monitors held for the sink asked about.
    Held(u64),
}

/// A monitored child's down, forwarded by the endpoint on `endpoint` to the client's sink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteDown {
    /// The node of the endpoint that set the monitor.
    pub endpoint: NodeName,
    /// The client's monitor id.
    pub monitor: u64,
    /// The child.
    pub id: ChildId,
    /// Why it is down.
    pub reason: DownReason,
}

/// The message of a client's down sink: an encoded [`RemoteDown`].
#[derive(RactorClusterMessage)]
pub enum DownSinkMsg {
    /// An encoded [`RemoteDown`] (decoded with the endpoint's limits; garbage is dropped).
    Down(EndpointBytes),
}

const DOWN_SINK_PREFIX: &str = "process_hub.down_sink|";

/// The pg group (default scope) of a client's down sink: the client's process and a random
/// nonce, so the group names one sink of one client and is not guessed.
pub fn down_sink_group(process: u32, nonce: u128) -> String {
    format!("{DOWN_SINK_PREFIX}{process}|{nonce:032x}")
}

/// Whether `name` is a down sink's group as [`down_sink_group`] builds it.
pub fn is_down_sink_group(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(DOWN_SINK_PREFIX) else {
        return false;
    };
    let Some((process, nonce)) = rest.split_once('|') else {
        return false;
    };
    process.parse::<u32>().is_ok()
        && nonce.len() == 32
        && nonce.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The hub whose endpoint group `group` is, if it is one.
pub fn endpoint_group_hub(group: &str) -> Option<&str> {
    group.strip_prefix("process_hub.endpoint.")
}

/// A value that crosses as JSON inside the bincode envelope: the per-child errors of results
/// are internally tagged (`{"code": ...}`, as the admin API shows them), which only a
/// self-describing format can read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T: Serialize> Serialize for Json<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let bytes = serde_json::to_vec(&self.0).map_err(serde::ser::Error::custom)?;
        serializer.serialize_bytes(&bytes)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Json<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes = Vec::<u8>::deserialize(deserializer)?;
        serde_json::from_slice(&bytes)
            .map(Json)
            .map_err(serde::de::Error::custom)
    }
}

/// Why a remote request failed as a whole: a snake_case code and a sentence.
///
/// Codes: `bad_request` (did not decode, wrong version, too large), `invalid_child`,
/// `invalid_option`, `no_children`, `reserved_metadata_key`, `declared` (the declared list
/// refused), `hub_unavailable`, `overloaded`, and for a message to a child the codes of
/// [`crate::ChildMessageError`] (`not_found`, `timeout`, `command_failed`, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct RemoteFailure {
    /// What kind of failure.
    pub code: String,
    /// Human-readable detail.
    pub message: String,
}

impl RemoteFailure {
    pub(crate) fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

impl From<crate::types::errors::StartError> for RemoteFailure {
    fn from(e: crate::types::errors::StartError) -> Self {
        use crate::types::errors::StartError as E;
        let code = match &e {
            E::NoChildren => "no_children",
            E::ReservedMetadataKey(_) => "reserved_metadata_key",
            E::InvalidOption { .. } => "invalid_option",
            E::HubUnavailable(_) => "hub_unavailable",
            E::Declared(_) => "declared",
            E::Partitioned => "partitioned",
            E::OutcomeUnknown { .. } => "outcome_unknown",
        };
        Self::new(code, e.to_string())
    }
}

impl From<crate::types::errors::StopError> for RemoteFailure {
    fn from(e: crate::types::errors::StopError) -> Self {
        use crate::types::errors::StopError as E;
        let code = match &e {
            E::NoChildren => "no_children",
            E::InvalidOption { .. } => "invalid_option",
            E::HubUnavailable(_) => "hub_unavailable",
            E::Declared(_) => "declared",
            E::Partitioned => "partitioned",
            E::OutcomeUnknown { .. } => "outcome_unknown",
        };
        Self::new(code, e.to_string())
    }
}

impl From<crate::types::errors::ChildMessageError> for RemoteFailure {
    fn from(e: crate::types::errors::ChildMessageError) -> Self {
        Self::new(&e.code.clone(), e.to_string())
    }
}

/// An encoded request or reply: the endpoint's wire type. Never fails to convert (decoding
/// happens in the endpoint and the client, where a bad one becomes a typed error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointBytes(pub Vec<u8>);

impl BytesConvertable for EndpointBytes {
    fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }
}

/// The endpoint actor's message: one remote call per request.
#[derive(RactorClusterMessage)]
pub enum EndpointMsg {
    /// An encoded [`EndpointRequest`], answered with an encoded [`EndpointReply`].
    #[rpc]
    Request(EndpointBytes, RpcReplyPort<EndpointBytes>),
}

fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_ENDPOINT_BYTES)
        .reject_trailing_bytes()
}

/// Encodes a request or a reply: the version, then the body.
pub fn encode<T: Serialize>(body: &T) -> EndpointBytes {
    let mut bytes = ENDPOINT_VERSION.to_le_bytes().to_vec();
    // A body past the limit encodes as nothing after the version, which the other side
    // refuses as `bad_request`.
    if let Ok(encoded) = options().serialize(body) {
        bytes.extend(encoded);
    }
    EndpointBytes(bytes)
}

/// Decodes what [`encode`] produced; never panics, whatever the bytes.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, RemoteFailure> {
    if bytes.len() as u64 > MAX_ENDPOINT_BYTES + 2 {
        return Err(RemoteFailure::new("bad_request", "too large"));
    }
    let (version, body) = match bytes {
        [a, b, body @ ..] => (u16::from_le_bytes([*a, *b]), body),
        _ => return Err(RemoteFailure::new("bad_request", "no version")),
    };
    if version != ENDPOINT_VERSION {
        return Err(RemoteFailure::new(
            "bad_request",
            format!("endpoint version {version}; this node speaks {ENDPOINT_VERSION}"),
        ));
    }
    options()
        .deserialize(body)
        .map_err(|e| RemoteFailure::new("bad_request", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_hub_and_the_node() {
        let name = endpoint_name("orders", "a@127.0.0.1", 9);
        assert_eq!(endpoint_node("orders", &name), Some("a@127.0.0.1"));
        assert_eq!(endpoint_node("order", &name), None);
        assert_eq!(
            endpoint_node("orders", "process_hub.gateway.v2|orders|a|0"),
            None
        );
    }

    #[test]
    fn requests_round_trip_and_garbage_is_a_typed_refusal() {
        let reply = EndpointReply::Started(Json(StartResult {
            errors: vec![crate::types::results::ChildFailure {
                id: "c".into(),
                node: "a@h".into(),
                reason: crate::ChildStartError::AlreadyStarted,
            }],
            ..StartResult::default()
        }));
        assert_eq!(decode::<EndpointReply>(&encode(&reply).0), Ok(reply));
        let request = EndpointRequest::StartChildren {
            specs: vec![ChildSpec::new("c1", "counter")],
            opts: StartOptions::new().tag("t"),
        };
        let bytes = encode(&request);
        assert_eq!(decode::<EndpointRequest>(&bytes.0), Ok(request));
        for garbage in [&[][..], &[1][..], &[1, 0, 200, 1, 2][..], &[9, 9, 0, 0][..]] {
            let refused = decode::<EndpointRequest>(garbage).unwrap_err();
            assert_eq!(refused.code, "bad_request");
        }
        // A length prefix claiming gigabytes is refused before anything is allocated.
        let mut huge = ENDPOINT_VERSION.to_le_bytes().to_vec();
        huge.extend(0u32.to_le_bytes()); // StartChildren
        huge.extend(u64::MAX.to_le_bytes()); // the specs' count
        assert_eq!(
            decode::<EndpointRequest>(&huge).unwrap_err().code,
            "bad_request"
        );
    }

    #[test]
    fn typed_messages_and_monitors_round_trip_and_garbage_is_refused() {
        let requests = [
            EndpointRequest::CallTyped {
                id: "c".into(),
                variant: "Get".into(),
                args: vec![1, 2, 3],
                timeout_ms: 5,
            },
            EndpointRequest::CastTyped {
                id: "c".into(),
                variant: "Increment".into(),
                args: vec![],
                within_ms: 0,
            },
            EndpointRequest::Monitor {
                id: "c".into(),
                sink: down_sink_group(7, 9),
                monitor: 3,
                follow_restarts: true,
            },
            EndpointRequest::Demonitor {
                sink: down_sink_group(7, 9),
                monitor: 3,
            },
            EndpointRequest::Held {
                sink: down_sink_group(7, 9),
            },
        ];
        for request in requests {
            assert_eq!(decode::<EndpointRequest>(&encode(&request).0), Ok(request));
        }
        let replies = [
            EndpointReply::ChildFailed(Json(ChildRefError::BetweenNodes {
                id: "c".into(),
                host: Some("a@h".into()),
            })),
            EndpointReply::Monitoring,
            EndpointReply::Demonitored(true),
            EndpointReply::Held(2),
        ];
        for reply in replies {
            assert_eq!(decode::<EndpointReply>(&encode(&reply).0), Ok(reply));
        }
        let down = RemoteDown {
            endpoint: "a@h".into(),
            monitor: 4,
            id: "c".into(),
            reason: DownReason::NodeDown { node: "b@h".into() },
        };
        assert_eq!(decode::<RemoteDown>(&encode(&down).0), Ok(down));
        // Appended variants keep the earlier ones' numbers: `Nodes` is still 5.
        assert_eq!(&encode(&EndpointRequest::Nodes).0[2..], &5u32.to_le_bytes());
        // Garbage: truncated, an unknown variant, a DownReason past the last, a claimed
        // gigabyte of args.
        let mut bytes = encode(&EndpointRequest::CallTyped {
            id: "c".into(),
            variant: "Get".into(),
            args: vec![0; 16],
            timeout_ms: 5,
        })
        .0;
        bytes.truncate(bytes.len() - 4);
        assert_eq!(
            decode::<EndpointRequest>(&bytes).unwrap_err().code,
            "bad_request"
        );
        let mut unknown = ENDPOINT_VERSION.to_le_bytes().to_vec();
        unknown.extend(99u32.to_le_bytes());
        assert_eq!(
            decode::<EndpointRequest>(&unknown).unwrap_err().code,
            "bad_request"
        );
        let mut huge = ENDPOINT_VERSION.to_le_bytes().to_vec();
        huge.extend(6u32.to_le_bytes()); // CallTyped
        huge.extend(1u64.to_le_bytes());
        huge.push(b'c');
        huge.extend(3u64.to_le_bytes());
        huge.extend(b"Get");
        huge.extend(u64::MAX.to_le_bytes()); // the args' length
        assert_eq!(
            decode::<EndpointRequest>(&huge).unwrap_err().code,
            "bad_request"
        );
        let mut reason = encode(&RemoteDown {
            endpoint: "a".into(),
            monitor: 1,
            id: "c".into(),
            reason: DownReason::NoChild,
        })
        .0;
        let at = reason.len() - 4;
        reason[at..].copy_from_slice(&200u32.to_le_bytes());
        assert_eq!(
            decode::<RemoteDown>(&reason).unwrap_err().code,
            "bad_request"
        );
        for garbage in [&[][..], &[1, 0][..], &[1, 0, 0xff, 0xff, 0xff][..]] {
            assert!(decode::<RemoteDown>(garbage).is_err());
        }
    }

    #[test]
    fn down_sink_groups_are_recognised_and_nothing_else() {
        let group = down_sink_group(42, u128::MAX);
        assert!(is_down_sink_group(&group));
        for not in [
            "process_hub.down_sink|",
            "process_hub.down_sink|x|00000000000000000000000000000000",
            "process_hub.down_sink|1|0",
            "process_hub.down_sink|1|0000000000000000000000000000000g",
            "process_hub.endpoint.remote",
            "",
        ] {
            assert!(!is_down_sink_group(not), "{not}");
        }
        assert_eq!(
            endpoint_group_hub(&endpoint_group("orders")),
            Some("orders")
        );
        assert_eq!(endpoint_group_hub(&group), None);
    }
}
