//! # process_hub
//!
//! A distributed process hub for [ractor]: a cluster-wide registry plus a distributed
//! supervisor. Hand it child specs; it places each child on the node that owns it, restarts it
//! there, moves it when nodes come and go, and keeps a copy of the registry on every node.
//!
//! The crate is laid out by architecture: [`model`] is the pure row model and its merge rules,
//! [`storage`] holds the registry backends.

#![warn(missing_docs)]

pub mod cluster;
pub mod core;
pub mod model;
pub mod storage;
