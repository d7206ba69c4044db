//! The pure core: decisions without actors, IO or clocks.
//!
//! Everything here takes time and observations as inputs and returns what to do, so every corner
//! is a unit or property test and every node reaches the same answer from the same inputs. The
//! actors own the timers, the files and the sockets, and call into it.

pub mod boot;
pub mod declared_list;
pub mod declared_state;
pub mod manifest_ship;
pub mod reconcile;
pub mod recovery;
pub mod recovery_config;
