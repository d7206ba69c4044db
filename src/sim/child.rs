//! The child the simulator's hubs host: an actor that does nothing until told to fail.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::{Deserialize, Serialize};

use crate::kinds::ChildKinds;

/// The kind name of the simulator's child.
pub const SIM_KIND: &str = "sim";

/// What a simulated child can be told.
#[derive(Debug)]
pub enum SimChildMsg {
    /// Fail (an abnormal exit: a permanent child is restarted by its supervisor).
    Fail,
}

impl ractor::Message for SimChildMsg {}

/// Its (empty) arguments.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SimChildArgs {}

/// The simulator's child.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimChild;

impl Actor for SimChild {
    type Msg = SimChildMsg;
    type State = ();
    type Arguments = Option<SimChildArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SimChildMsg::Fail => Err("told to fail by the simulator".into()),
        }
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
