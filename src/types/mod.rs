//! What a request carries and answers, below the layers that use it: options, results, errors,
//! monitors, a replica's role. Ids stay in [`crate::model`]. Private: users name these through
//! the crate root.

pub(crate) mod errors;
pub(crate) mod monitor;
pub(crate) mod options;
pub(crate) mod results;
mod roles;

pub use errors::{
    AwaitNormalTimeout, ChildMessageError, ChildRefError, ChildStartError, ChildStopError,
    RecoveryError, StartError, StopError, WaitForMembersTimeout,
};
pub use monitor::{ChildDown, DownSink, MonitorId, MonitorOptions};
pub use options::{OnFailure, StartOptions, StopOptions};
pub use results::{
    ChildFailure, ChildInfo, PendingStart, PendingStop, ProcessEntry, ProcessScope, StartResult,
    StartedChild, StopFailure, StopOutcome, StopResult, StoppedChild,
};
pub use roles::Role;
