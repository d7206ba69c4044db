//! `counter`: an integer that can be incremented and read. Needs no arguments; accepts an
//! optional start value (`{"start": 5}`). It hands its value over when it moves under
//! `migration = "hot"` (8 bytes, little endian; [`register`]).

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};

/// The kind name.
pub const KIND: &str = "counter";

/// Optional arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
// A misspelled argument is refused (`invalid_args`) rather than silently defaulted.
#[serde(default, deny_unknown_fields)]
pub struct CounterArgs {
    /// The initial value (default 0).
    pub start: i64,
}

/// Messages of a counter. `ChildMessage`: a `ChildRef<CounterMsg>` reaches a counter on any
/// node, in the hub's serde encoding, while the counter is not advertised to other nodes.
#[derive(Debug, process_hub::ChildMessage)]
pub enum CounterMsg {
    /// Adds to the value.
    Increment(i64),
    /// Answers the value.
    #[rpc]
    Get(RpcReplyPort<i64>),
    /// Answers the value as handover state (hot swap).
    #[rpc]
    Export(RpcReplyPort<Vec<u8>>),
    /// Takes the value from handover state (hot swap; malformed state is ignored).
    Import(Vec<u8>),
}

/// Registers the counter kind, with its state handover.
pub fn register(kinds: &mut process_hub::ChildKinds) {
    kinds
        .register(KIND, Counter)
        .handover(KIND, CounterMsg::Export, CounterMsg::Import);
}

/// The counter actor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counter;

impl Actor for Counter {
    type Msg = CounterMsg;
    type State = i64;
    type Arguments = Option<CounterArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<i64, ActorProcessingErr> {
        Ok(args.unwrap_or_default().start)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        value: &mut i64,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CounterMsg::Increment(by) => *value += by,
            CounterMsg::Get(reply) => {
                let _ = reply.send(*value);
            }
            CounterMsg::Export(reply) => {
                let _ = reply.send(value.to_le_bytes().to_vec());
            }
            CounterMsg::Import(state) => match <[u8; 8]>::try_from(state.as_slice()) {
                Ok(bytes) => *value = i64::from_le_bytes(bytes),
                Err(_) => tracing::warn!(
                    bytes = state.len(),
                    "counter: malformed handover state ignored"
                ),
            },
        }
        Ok(())
    }
}
