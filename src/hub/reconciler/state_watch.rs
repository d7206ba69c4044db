//! The hub's recovery state as callers see it: `recovery_state()` and `await_normal(timeout)`
//! (docs/recovery.md, "Failure modes").
//!
//! The Reconciler publishes the state (from [`crate::core::recovery::RoundSchedule`]); any number
//! of callers read it without a round trip to an actor, and `await_normal` returns once the first
//! round has completed. `Normal` is terminal, so a waiter can never miss it.

use std::time::Duration;

use tokio::sync::watch;

use crate::core::recovery::RecoveryState;
use crate::types::AwaitNormalTimeout;

/// The published recovery state of one hub on one node. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct RecoveryStateWatch {
    tx: watch::Sender<RecoveryState>,
}

impl RecoveryStateWatch {
    /// Starts at `initial` (`Recovering` with auto-recovery, `Normal` without).
    pub fn new(initial: RecoveryState) -> Self {
        Self {
            tx: watch::Sender::new(initial),
        }
    }

    /// Publishes a state. Moving back from `Normal` is refused (it is terminal).
    pub fn publish(&self, state: RecoveryState) {
        self.tx.send_if_modified(|current| {
            if *current == RecoveryState::Normal || *current == state {
                return false;
            }
            *current = state;
            true
        });
    }

    /// The current state.
    pub fn current(&self) -> RecoveryState {
        *self.tx.borrow()
    }

    /// Waits until the state is `Normal`, at most `timeout`.
    pub async fn await_normal(&self, timeout: Duration) -> Result<(), AwaitNormalTimeout> {
        let mut rx = self.tx.subscribe();
        let reached = async move {
            rx.wait_for(|s| *s == RecoveryState::Normal)
                .await
                .map(|_| ())
        };
        match tokio::time::timeout(timeout, reached).await {
            // The sender lives in `self`, so the wait only ends by reaching the state.
            Ok(_) => Ok(()),
            Err(_) => Err(AwaitNormalTimeout {
                waited_ms: timeout.as_millis() as u64,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn await_normal_returns_once_the_first_round_completes() {
        let watch = RecoveryStateWatch::new(RecoveryState::Recovering);
        assert_eq!(
            watch.await_normal(Duration::from_millis(1)).await,
            Err(AwaitNormalTimeout { waited_ms: 1 })
        );
        let waiter = {
            let watch = watch.clone();
            tokio::spawn(async move { watch.await_normal(Duration::from_secs(30)).await })
        };
        watch.publish(RecoveryState::Normal);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        // Terminal: it never goes back, and later waiters return at once.
        watch.publish(RecoveryState::Recovering);
        assert_eq!(watch.current(), RecoveryState::Normal);
        assert_eq!(watch.await_normal(Duration::ZERO).await, Ok(()));
    }

    #[tokio::test]
    async fn without_auto_recovery_it_is_normal_from_the_start() {
        let watch = RecoveryStateWatch::new(RecoveryState::Normal);
        assert_eq!(watch.await_normal(Duration::ZERO).await, Ok(()));
    }
}
