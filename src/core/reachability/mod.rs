//! Reachability as cluster knowledge (issue 32): whether a member is down is decided from what
//! *every* member observes, not from one link.
//!
//! - [`Observation`]: what one observer reaches now, versioned by the observer (and by its
//!   incarnation, so a restarted observer's records win over its previous life's);
//! - [`ReachTable`]: the latest observation per observer, merged by version, bounded, with
//!   ill-formed and hostile records refused by a typed [`ReachError`];
//! - [`rule`]: the pure rule every member computes identically from the same table: my
//!   component, the indirectly connected members, and which nodes a non-clique component sets
//!   aside;
//! - [`Resolver`]: the rule over time: resolution only once the picture has been stable for
//!   `stable_after`, and a set-aside node's way back with hysteresis;
//! - [`bound`]: the longest a child may run on two nodes while the cluster is connected.
//!
//! No actor, no IO, no clock: time is an input (`now_ms`, any monotonic milliseconds).

pub mod bound;
mod observation;
mod resolver;
pub mod rule;
mod table;

#[cfg(test)]
mod tests;

pub use bound::{double_run_bound, BoundTerms};
pub use observation::{Observation, ReachError, MAX_NAME_BYTES, MAX_NODES, MAX_VERSION};
pub use resolver::{Decision, Resolver, ResolverConfig};
pub use table::{DigestEntry, Merge, ReachTable, MAX_VERSION_STEP};
