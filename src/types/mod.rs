//! What a request carries and answers, below the layers that use it: a replica's role (and,
//! as the API's types move down, options, results, errors and monitors). Ids stay in
//! [`crate::model`]. Private: users name these through the crate root.

pub(crate) mod errors;
mod roles;

pub use errors::{
    AwaitNormalTimeout, ChildMessageError, ChildRefError, ChildStartError, ChildStopError,
    RecoveryError, StartError, StopError, WaitForMembersTimeout,
};
pub use roles::Role;
