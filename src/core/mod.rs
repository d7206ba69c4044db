//! The pure core: decisions without actors, IO or clocks.
//!
//! Everything here takes time and randomness as inputs and returns what to do, so every corner
//! is a unit or property test and every node reaches the same answer from the same inputs. The
//! actors in [`crate::cluster`] (and the hub's) own the timers and the sockets and call into it.

pub mod backoff;
pub mod boot_token;
pub mod event_batch;
pub mod failure_detector;
pub mod placement;
