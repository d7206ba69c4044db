//! A task an actor owns: aborted when the actor's state is dropped, whether the actor stopped
//! or failed (ractor skips `post_stop` after a failure, but always drops the state), so no
//! work outlives the actor that started it, and a restarted actor never races its
//! predecessor's leftovers.

use tokio::task::JoinHandle;

/// A spawned task, aborted on drop.
pub(crate) struct OwnedTask(JoinHandle<()>);

impl OwnedTask {
    /// Spawns `work` on the current runtime, owned by the returned value.
    pub(crate) fn spawn(work: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(work))
    }
}

impl Drop for OwnedTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
