//! The public API: the [`Hub`] handle, the [`HubMsg`] messages, options, results and errors.

pub(crate) mod child_ref;
pub(crate) mod declared;
pub(crate) mod errors;
mod handle;
mod membership;
pub(crate) mod monitor;
mod monitoring;
pub(crate) mod msg;
pub(crate) mod options;
pub(crate) mod reads;
pub mod remote;
pub(crate) mod results;

pub(crate) use crate::types::errors as typed_errors;
pub(crate) use crate::types::{ChildStartError, ChildStopError, StartError, StopError};
pub use child_ref::ChildRef;
pub use declared::DeclaredView;
pub use errors::SpawnError;
pub use handle::{Hub, HubBuilder, HubUnavailable, ShutdownTimedOut};
pub use monitor::{ChildDown, DownSink, MonitorId, MonitorOptions};
pub use msg::{HubInfo, HubMsg};
pub use options::{OnFailure, StartOptions, StopOptions};
pub use results::{
    ChildFailure, ChildInfo, PendingStart, PendingStop, ProcessEntry, ProcessScope, StartResult,
    StartedChild, StopFailure, StopOutcome, StopResult, StoppedChild,
};
