//! The Janitor actor: sweeps expired TTL rows every `storage_purge_interval`.
//!
//! Expired rows are already invisible to reads (the storage filters them); the sweep frees
//! them, through the Registry so that the single-writer rule holds.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;

use super::registry::RegistryMsg;
use super::HubShared;

pub(crate) enum JanitorMsg {
    Sweep,
}

impl ractor::Message for JanitorMsg {}

pub(crate) struct Janitor;

pub(crate) struct JanitorState {
    hub: Arc<HubShared>,
    timer: Option<JoinHandle<()>>,
}

impl Actor for Janitor {
    type Msg = JanitorMsg;
    type State = JanitorState;
    type Arguments = Arc<HubShared>;

    async fn pre_start(&self, _myself: ActorRef<Self::Msg>, hub: Arc<HubShared>) -> Result<Self::State, ActorProcessingErr> {
        Ok(JanitorState { hub, timer: None })
    }

    async fn post_start(&self, myself: ActorRef<Self::Msg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        let period = state.hub.config.storage_purge_interval();
        state.timer = Some(myself.send_interval(period, || JanitorMsg::Sweep));
        Ok(())
    }

    async fn post_stop(&self, _myself: ActorRef<Self::Msg>, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(&self, _myself: ActorRef<Self::Msg>, msg: Self::Msg, state: &mut Self::State) -> Result<(), ActorProcessingErr> {
        match msg {
            JanitorMsg::Sweep => {
                if let Some(registry) = state.hub.registry() {
                    let _ = registry.cast(RegistryMsg::SweepExpired { reply: None });
                }
            }
        }
        Ok(())
    }
}
