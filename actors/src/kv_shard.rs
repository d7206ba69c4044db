//! `kv_shard`: a small in-memory key-value map. No arguments needed. It hands its entries
//! over when it moves under `migration = "hot"` (a JSON object; [`register`]).

use std::collections::BTreeMap;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};

/// The kind name.
pub const KIND: &str = "kv_shard";

/// Optional arguments: initial entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
// A misspelled argument is refused (`invalid_args`) rather than silently defaulted.
#[serde(default, deny_unknown_fields)]
pub struct KvArgs {
    /// Entries present at start.
    pub entries: BTreeMap<String, String>,
}

/// Messages of a shard.
#[derive(Debug)]
pub enum KvMsg {
    /// Sets a key.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Answers a key's value.
    Get {
        /// The key.
        key: String,
        /// The answer.
        reply: RpcReplyPort<Option<String>>,
    },
    /// Removes a key.
    Delete {
        /// The key.
        key: String,
    },
    /// Answers the number of keys.
    Len(RpcReplyPort<usize>),
    /// Answers the entries as handover state (hot swap).
    Export(RpcReplyPort<Vec<u8>>),
    /// Takes the entries from handover state (hot swap; malformed state is ignored).
    Import(Vec<u8>),
}

/// Registers the shard kind, with its state handover.
pub fn register(kinds: &mut process_hub::ChildKinds) {
    kinds
        .register(KIND, KvShard)
        .handover(KIND, KvMsg::Export, KvMsg::Import);
}

impl ractor::Message for KvMsg {}

/// The shard actor.
#[derive(Clone, Copy, Debug, Default)]
pub struct KvShard;

impl Actor for KvShard {
    type Msg = KvMsg;
    type State = BTreeMap<String, String>;
    type Arguments = Option<KvArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(args.unwrap_or_default().entries)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        map: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            KvMsg::Put { key, value } => {
                map.insert(key, value);
            }
            KvMsg::Get { key, reply } => {
                let _ = reply.send(map.get(&key).cloned());
            }
            KvMsg::Delete { key } => {
                map.remove(&key);
            }
            KvMsg::Len(reply) => {
                let _ = reply.send(map.len());
            }
            KvMsg::Export(reply) => match serde_json::to_vec(map) {
                Ok(state) => {
                    let _ = reply.send(state);
                }
                // Dropping the port makes the move a cold swap, reported as such.
                Err(e) => tracing::warn!(error = %e, "kv_shard: entries not exported"),
            },
            KvMsg::Import(state) => match serde_json::from_slice(&state) {
                Ok(entries) => *map = entries,
                Err(e) => tracing::warn!(error = %e, "kv_shard: malformed handover state ignored"),
            },
        }
        Ok(())
    }
}
