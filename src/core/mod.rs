//! The pure core of the single-node hub: decisions without actors, clocks or IO.
//!
//! The actors in [`crate::hub`] call these functions and carry out what they return, so every
//! corner of the decisions (a restart storm, a batch naming one id twice) is a plain unit or
//! property test. Time is an input (`now_ms`), never read from a clock here.

mod intensity;
mod plan;
mod restart;

pub use intensity::{IntensityVerdict, RestartIntensity};
pub use plan::{plan_start, PlannedChild, Rejection, StartPlan};
pub use restart::{restart_decision, ExitKind, RestartDecision};
