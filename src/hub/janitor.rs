//! The Janitor actor: sweeps expired TTL rows every `storage_purge_interval`.
//!
//! Expired rows are already invisible to reads (the storage filters them); the sweep frees
//! them, through the Registry so that the single-writer rule holds.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;

use super::protocol::{JanitorMsg, RegistryMsg};
use super::HubShared;

pub(crate) struct Janitor;

pub(crate) struct JanitorState {
    hub: Arc<HubShared>,
    timer: Option<JoinHandle<()>>,
}

impl Actor for Janitor {
    type Msg = JanitorMsg;
    type State = JanitorState;
    type Arguments = Arc<HubShared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        hub: Arc<HubShared>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(JanitorState { hub, timer: None })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let period = state.hub.config.storage_purge_interval();
        state.timer = Some(myself.send_interval(period, || JanitorMsg::Sweep));
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::ProcessHub;
    use crate::hooks::Hooks;
    use crate::hub::protocol::RegistryOp;
    use crate::hub::registry::{Registry, RegistryArgs};
    use crate::kinds::ChildKinds;
    use crate::model::{ChildSpec, Metadata, Row};
    use crate::storage::{MemoryStorage, Storage};

    #[tokio::test]
    async fn expired_ttl_rows_are_swept_and_live_ones_kept() {
        let memory = Arc::new(MemoryStorage::new());
        let config = ProcessHub::builder("janitor")
            .storage_purge_interval(Duration::from_millis(10))
            .build()
            .unwrap();
        let storage: Arc<dyn Storage> = memory.clone();
        let shared = Arc::new(HubShared::new(
            config,
            storage,
            ChildKinds::new(),
            Hooks::new(),
        ));
        let args = RegistryArgs {
            shared: shared.clone(),
            strip_local: true,
        };
        let (registry, _) = Actor::spawn(None, Registry, args).await.unwrap();
        shared.set_refs(|r| r.registry = Some(registry.clone()));
        let (janitor, _) = Actor::spawn(None, Janitor, shared.clone()).await.unwrap();
        let row = |id: &str| {
            Row::authored(ChildSpec::new(id, "k"), Metadata::new(), "n@h", 0, false).unwrap()
        };
        let ops = vec![
            RegistryOp::PutWithTtl {
                row: row("short"),
                ttl: Duration::from_millis(1),
            },
            RegistryOp::PutWithTtl {
                row: row("long"),
                ttl: Duration::from_secs(3600),
            },
            RegistryOp::Insert(row("plain")),
        ];
        registry
            .cast(RegistryMsg::Write { ops, done: None })
            .unwrap();
        let start = std::time::Instant::now();
        while memory.get_stored(&"plain".into()).is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "write never applied"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        while memory.get_stored(&"short".into()).is_some() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "expired row never swept"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(memory.get_stored(&"long".into()).is_some());
        assert!(memory.get_stored(&"plain".into()).is_some());
        janitor.stop(None);
        registry.stop(None);
    }
}
