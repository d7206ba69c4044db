//! Benchmarks of the `process-hub bench` command. Each prints one JSON object on stdout and
//! measures against a baseline in the same run; progress goes to stderr.

pub mod call;
pub mod cluster;
pub mod durable_memory;
pub mod frames;
mod latency;
pub mod recovery;
pub mod scale;
pub mod start;
pub mod storage;
pub mod sync;
pub mod wire;

use clap::Subcommand;

/// `process-hub bench <which>`.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Start and stop N children through a hub, against plain ractor spawn/stop.
    Start(start::StartBenchArgs),
    /// Registry storage: group commit against one fsync per write, and memory point reads.
    Storage(storage::StorageArgs),
    /// Start N children on a cluster of node processes, kill one; against plain ractor_cluster pg.
    Cluster(cluster::ClusterBenchArgs),
    /// Declare N durable children, stop some, SIGKILL every node, restart: recovery time,
    /// lost/resurrected/duplicates; against one fsync per declared-list mutation.
    Recovery(recovery::RecoveryBenchArgs),
    /// Every rate of a cluster of node processes at several sizes (1,000 to 250,000 children):
    /// start, converge, stop, failover, durable recovery, memory per child, against bare actors.
    Scale(scale::ScaleBenchArgs),
    /// A typed remote call and cast through the hub (`ChildRef`) between two node processes,
    /// against a plain ractor_cluster remote actor between the same two processes.
    Call(call::CallBenchArgs),
    /// Sealing frames (keyed BLAKE3) and checking seals, per frame size, against open frames.
    Frames(frames::FramesArgs),
    /// Registry synchronization on 3, 10 and 30 in-process nodes: gossip against pubsub
    /// (frames per change, the most one node sends, time until every registry agrees, the
    /// periodic sync's frames, a lost delta's repair).
    Sync(sync::SyncBenchArgs),
}

/// Runs a bench command; the error is printed by the caller.
pub fn run(cmd: BenchCommand) -> Result<(), String> {
    match cmd {
        BenchCommand::Start(args) => start::run(args),
        BenchCommand::Storage(args) => storage::run(&args),
        BenchCommand::Cluster(args) => cluster::run(args),
        BenchCommand::Recovery(args) => recovery::run(args),
        BenchCommand::Scale(args) => scale::run(args),
        BenchCommand::Frames(args) => frames::run(&args),
        BenchCommand::Call(args) => call::run(args),
        BenchCommand::Sync(args) => sync::run(args),
    }
}
