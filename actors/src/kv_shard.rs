//! `kv_shard`: a small in-memory key-value map. No arguments needed.

use std::collections::BTreeMap;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};

/// The kind name.
pub const KIND: &str = "kv_shard";

/// Optional arguments: initial entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
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
        }
        Ok(())
    }
}
