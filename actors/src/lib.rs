//! Ready-made child actors that a process hub hosts, their kind registrations, and the pieces of
//! the `process-hub` binary.
//!
//! Kinds: [`counter::Counter`] (`"counter"`), [`kv_shard::KvShard`] (`"kv_shard"`),
//! [`ticker::Ticker`] (`"ticker"`) and [`crasher::Crasher`] (`"crasher"`, for tests). Each has a
//! message type usable from user code; [`register_all`] adds them all to a kind table.

pub mod admin_client;
pub mod baseline;
pub mod bench;
pub mod cli;
pub mod command;
pub mod counter;
pub mod crasher;
pub mod ctl;
pub mod demo;
pub mod harness;
pub mod kv_shard;
pub mod node;
pub mod notify;
/// `process-hub simulate`: only in a build with the `sim` feature (test-only code stays out of
/// what ships).
#[cfg(feature = "sim")]
pub mod simulate;
pub mod ticker;

use process_hub::ChildKinds;

/// Registers every kind of this crate under its name.
pub fn register_all(kinds: &mut ChildKinds) {
    counter::register(kinds);
    kv_shard::register(kinds);
    kinds
        .register(ticker::KIND, ticker::Ticker)
        .register(crasher::KIND, crasher::Crasher);
    command::register_commands(kinds);
}

/// A kind table with every kind of this crate.
pub fn default_kinds() -> ChildKinds {
    let mut kinds = ChildKinds::new();
    register_all(&mut kinds);
    kinds
}
