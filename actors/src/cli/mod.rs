//! The pieces of the `process-hub` command line that are worth testing on their own.

pub mod node_settings;
pub mod partition_tolerance;
pub mod secrets;
pub mod sync;
