//! The last failed write of a store, kept until a write to it succeeds again: what health
//! reports as the reason a node is `degraded`.

use std::sync::Mutex;

use crate::storage::StorageError;

/// How a noted outcome changed the store's state, so the caller logs and reacts once per
/// change rather than once per write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultChange {
    /// Writes were taken and still are, or were failing and still fail.
    Unchanged,
    /// The first failure after writes were taken.
    Failing,
    /// The first success after writes had failed.
    Recovered,
}

/// The store's last failed write, while no write has succeeded since.
#[derive(Default)]
pub(crate) struct WriteFaultLatch(Mutex<Option<StorageError>>);

impl WriteFaultLatch {
    /// Records the outcome of a write to the store.
    pub fn note(&self, outcome: Result<(), &StorageError>) -> FaultChange {
        let mut fault = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match (outcome, fault.is_some()) {
            (Ok(()), true) => {
                *fault = None;
                FaultChange::Recovered
            }
            (Ok(()), false) => FaultChange::Unchanged,
            (Err(e), was_failing) => {
                *fault = Some(e.clone());
                if was_failing {
                    FaultChange::Unchanged
                } else {
                    FaultChange::Failing
                }
            }
        }
    }

    /// The last failed write, while no write has succeeded since.
    pub fn get(&self) -> Option<StorageError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::WriteFault;

    fn full() -> StorageError {
        StorageError::Write {
            path: "/x".into(),
            message: "No space left on device".into(),
            fault: WriteFault::NoSpace,
        }
    }

    #[test]
    fn a_fault_holds_until_a_write_succeeds_and_each_change_is_reported_once() {
        let latch = WriteFaultLatch::default();
        assert_eq!(latch.note(Ok(())), FaultChange::Unchanged);
        assert_eq!(latch.get(), None);
        assert_eq!(latch.note(Err(&full())), FaultChange::Failing);
        assert_eq!(latch.note(Err(&full())), FaultChange::Unchanged);
        assert_eq!(latch.get(), Some(full()));
        assert_eq!(latch.note(Ok(())), FaultChange::Recovered);
        assert_eq!(latch.get(), None);
        assert_eq!(latch.note(Ok(())), FaultChange::Unchanged);
    }
}
