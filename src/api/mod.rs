//! The public API: the [`Hub`] handle, [`ChildRef`], the remote client and [`SpawnError`].

pub(crate) mod child_ref;
pub(crate) mod errors;
mod handle;
mod membership;
mod monitoring;
pub mod remote;

// The old paths of what moved to `crate::types`, for the crate's code until it names them
// there.
pub use crate::core::declared_list::DeclaredView;
pub(crate) use crate::types::errors as typed_errors;
pub(crate) use crate::types::{monitor, options, results};
pub(crate) use crate::types::{
    ChildDown, ChildInfo, ChildStartError, ChildStopError, MonitorOptions, StartError,
    StartOptions, StartResult, StopError, StopOptions, StopOutcome, StopResult,
};
pub use child_ref::ChildRef;
pub use errors::SpawnError;
pub use handle::{Hub, HubBuilder, HubUnavailable, ShutdownTimedOut};
