//! Ready-made child actors that a process hub hosts, their kind registrations, and the pieces of
//! the `process-hub` binary.
pub mod baseline;
pub mod cli;
pub mod demo;
pub mod harness;
