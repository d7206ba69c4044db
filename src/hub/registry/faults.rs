//! A disk that fails under the Registry: the request whose write failed gets the error, the
//! actor stays up, and health says `degraded` until a write succeeds again. A child module of
//! the Registry (`super`).
//!
//! A failed commit is rolled back by the store (nothing of it is visible), and the overlay
//! drops it like a committed batch, so the actor's view stays what the disk holds. Two things
//! are left to do, both here:
//! 1. the write's delta was broadcast before the commit (so that it leaves before the writer is
//!    answered): peers may hold a binding this node never recorded (a start that was refused),
//!    or miss one it still holds (a stop whose unbind failed). At the next probe tick this node
//!    sends its full sync, which replaces whatever the peers hold of its observations;
//! 2. while no write has succeeded since the failure, it probes the disk with a write that
//!    changes nothing ([`Storage::probe`](crate::storage::Storage::probe)) every
//!    [`PROBE_INTERVAL`], so health turns back to `ok` once space returns even when no request
//!    comes.

use std::time::Duration;

use ractor::ActorRef;

use super::RegistryState;
use crate::hub::protocol::RegistryMsg;

/// How long after a failed write the Registry probes the disk (and again while probes fail).
pub(super) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// What the Registry remembers of failed writes between probes.
#[derive(Default)]
pub(super) struct Probing {
    /// A probe tick is scheduled.
    scheduled: bool,
    /// A write failed since the last tick: the peers' copy of this node's rows may be wrong.
    resync: bool,
}

impl RegistryState {
    /// A commit failed: resync the peers and probe at the next tick.
    pub(super) fn write_failed(&mut self, myself: &ActorRef<RegistryMsg>) {
        self.probing.resync = true;
        if !self.probing.scheduled {
            self.probing.scheduled = true;
            myself.send_after(PROBE_INTERVAL, || RegistryMsg::Probe);
        }
    }

    /// The probe tick: resync the peers if a write failed since the last one, and probe the
    /// disk while no write has succeeded (a failed probe schedules the next tick).
    pub(super) fn probe(&mut self) {
        self.probing.scheduled = false;
        if std::mem::take(&mut self.probing.resync) {
            self.send_full_sync(None);
        }
        if self.shared.registry_fault.get().is_some() {
            self.seq += 1;
            let seq = self.seq;
            let commit = self.shared.storage.probe();
            self.enqueue(Some(commit), Vec::new(), None, seq);
        }
    }
}
