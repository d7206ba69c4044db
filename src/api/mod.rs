//! The public API: the [`Hub`] handle, [`ChildRef`], the remote client and [`SpawnError`].

pub(crate) mod child_codec;
pub(crate) mod child_ref;
pub(crate) mod errors;
mod handle;
mod membership;
mod monitoring;
pub mod remote;

pub use child_ref::ChildRef;
pub use errors::SpawnError;
pub use handle::{Hub, HubBuilder, HubUnavailable, ShutdownTimedOut};
