//! The public API: the [`Hub`] handle, the [`HubMsg`] messages, options, results and errors.

pub(crate) mod child_ref;
pub(crate) mod errors;
mod handle;
mod membership;
pub(crate) mod monitor;
mod monitoring;
pub(crate) mod msg;
pub(crate) mod options;
pub mod remote;
pub(crate) mod results;
pub(crate) mod typed_errors;

pub use crate::core::declared_list::DeclaredView;
pub use child_ref::ChildRef;
pub use errors::WaitForMembersTimeout;
pub use errors::{
    AwaitNormalTimeout, ChildMessageError, ChildStartError, ChildStopError, RecoveryError,
    SpawnError, StartError, StopError,
};
pub use handle::{Hub, HubBuilder, HubUnavailable, ShutdownTimedOut};
pub use monitor::{ChildDown, DownSink, MonitorId, MonitorOptions};
pub use msg::{HubInfo, HubMsg};
pub use options::{OnFailure, StartOptions, StopOptions};
pub use results::{
    ChildFailure, ChildInfo, PendingStart, PendingStop, ProcessEntry, ProcessScope, StartResult,
    StartedChild, StopFailure, StopOutcome, StopResult, StoppedChild,
};
pub use typed_errors::ChildRefError;
