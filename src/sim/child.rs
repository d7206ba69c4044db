//! The child the simulator's hubs host: an actor that answers pings, counts numbered casts per
//! sender (noting whether they came in order), and fails when told to. Its message type is
//! remotable, so the run reaches it through typed references from any node.

use std::collections::BTreeMap;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use crate::kinds::ChildKinds;

/// The kind name of the simulator's child.
pub const SIM_KIND: &str = "sim";

/// What a simulated child can be told.
#[derive(RactorClusterMessage)]
pub enum SimChildMsg {
    /// Fail (an abnormal exit: a permanent child is restarted by its supervisor).
    Fail,
    /// Cast number `seq` of the sender tagged `tag`.
    Note(u64, u64),
    /// Answered with the same number.
    #[rpc]
    Ping(u64, RpcReplyPort<u64>),
    /// What this instance saw of sender `tag`'s casts: `[count, 1 if every one came after the
    /// one numbered before it else 0]`.
    #[rpc]
    Seen(u64, RpcReplyPort<Vec<u64>>),
}

/// Its (empty) arguments.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SimChildArgs {}

/// The simulator's child.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimChild;

/// One sender's casts as an instance saw them.
#[derive(Clone, Copy, Debug, Default)]
pub struct SenderLog {
    last: u64,
    count: u64,
    in_order: bool,
}

impl Actor for SimChild {
    type Msg = SimChildMsg;
    type State = BTreeMap<u64, SenderLog>;
    type Arguments = Option<SimChildArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(BTreeMap::new())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        senders: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SimChildMsg::Fail => return Err("told to fail by the simulator".into()),
            SimChildMsg::Note(tag, seq) => {
                let log = senders.entry(tag).or_insert(SenderLog {
                    in_order: true,
                    ..SenderLog::default()
                });
                log.in_order &= seq > log.last;
                log.last = seq;
                log.count += 1;
            }
            SimChildMsg::Ping(n, reply) => {
                let _ = reply.send(n);
            }
            SimChildMsg::Seen(tag, reply) => {
                let log = senders.get(&tag).copied().unwrap_or(SenderLog {
                    in_order: true,
                    ..SenderLog::default()
                });
                let _ = reply.send(vec![log.count, u64::from(log.in_order)]);
            }
        }
        Ok(())
    }
}

/// The kinds every simulated node registers: [`SIM_KIND`], whose command handler answers any
/// payload with itself (so a message by id is seen to reach the child and come back).
pub fn sim_kinds() -> ChildKinds {
    let mut kinds = ChildKinds::new();
    kinds.register(SIM_KIND, SimChild);
    kinds.register_command(SIM_KIND, |cell, payload| {
        Box::pin(async move {
            if cell.get_status() == ractor::ActorStatus::Running {
                Ok(payload)
            } else {
                Err("the child is not running".to_owned())
            }
        })
    });
    kinds
}
