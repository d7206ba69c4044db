//! The answer to a submitted mutation: resolves once the write is durable.
//!
//! A commit can be awaited from async code or waited on from a thread, because the registry is
//! written from actors while tests, benchmarks and user backends often call it synchronously.

use tokio::sync::oneshot;

use super::StorageError;

/// Resolves to the outcome of one submitted batch.
#[must_use = "a commit that is not waited on does not tell whether the write is durable"]
pub struct Commit(Inner);

enum Inner {
    Ready(Result<(), StorageError>),
    Pending(oneshot::Receiver<Result<(), StorageError>>),
}

/// The backend's half of a pending [`Commit`]: resolve it once the batch is durable.
pub struct CommitSender(oneshot::Sender<Result<(), StorageError>>);

impl CommitSender {
    /// Tells the waiter how the batch ended. A waiter that gave up is not an error.
    pub fn resolve(self, outcome: Result<(), StorageError>) {
        let _ = self.0.send(outcome);
    }
}

impl Commit {
    /// A commit whose outcome is already known (synchronous backends).
    pub fn ready(outcome: Result<(), StorageError>) -> Self {
        Self(Inner::Ready(outcome))
    }

    /// A commit resolved later through the returned sender.
    pub fn pending() -> (CommitSender, Self) {
        let (tx, rx) = oneshot::channel();
        (CommitSender(tx), Self(Inner::Pending(rx)))
    }

    /// Blocks the calling thread until the outcome is known.
    pub fn wait(self) -> Result<(), StorageError> {
        match self.0 {
            Inner::Ready(outcome) => outcome,
            Inner::Pending(rx) => {
                futures::executor::block_on(rx).unwrap_or(Err(StorageError::Closed))
            }
        }
    }

    /// Waits for the outcome without blocking the async runtime.
    pub async fn wait_async(self) -> Result<(), StorageError> {
        match self.0 {
            Inner::Ready(outcome) => outcome,
            Inner::Pending(rx) => rx.await.unwrap_or(Err(StorageError::Closed)),
        }
    }
}
