//! The pure core: decisions without actors, IO or clocks.
//!
//! Everything here takes time and observations as inputs and returns what to do, so every corner
//! (a restart storm, a batch naming one id twice, a recovery round) is a unit or property test and
//! every node reaches the same answer from the same inputs. The actors own the timers, the files
//! and the sockets, call into it, and carry out what it returns.

pub mod activity;
pub mod backoff;
pub mod batch_start;
pub mod boot;
pub mod boot_rows;
pub mod boot_token;
pub mod child_route;
pub mod declared;
pub mod discovery;
pub mod event_batch;
pub mod explain;
pub mod failure_detector;
pub mod gossip;
pub mod guided;
pub mod handover;
pub mod health;
pub mod held_reap;
pub mod isolation;
pub mod left_to_owner;
pub mod load;
pub mod manifest_ship;
pub mod placement;
pub mod quorum;
pub mod reachability;
pub mod read_ahead;
pub mod reassembly;
pub mod reconcile;
pub mod reconcile_round;
pub mod recovery;
pub mod redistribution;
pub mod registry_write;
pub mod remote_monitors;
pub mod replication;
pub mod sync_digest;
pub mod sync_lag;

mod intensity;
mod plan;
mod restart;

pub use intensity::{IntensityVerdict, RestartIntensity};
pub use plan::{plan_start, PlannedChild, Rejection, StartPlan};
pub use restart::{restart_decision, ExitKind, RestartDecision};
