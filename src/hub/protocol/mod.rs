//! Every hub actor's messages, reply-port aliases and batch/report types: the hub's vocabulary.
//!
//! A leaf: nothing here imports another part of `hub/`, so any actor can name any other's
//! messages without importing its implementation (ractor keeps `actor/messages.rs` apart for the
//! same reason). One file per actor.

mod child_supervisor;
mod coordinator;
mod declared;
pub(crate) mod endpoint;
mod janitor;
mod reconciler;
mod registry;
pub(crate) mod supervisor;

pub(crate) use child_supervisor::{
    ChildSupMsg, NodeStartReport, NodeStopReport, StartBatch, StartReply, StopBatch, StopReply,
};
pub(crate) use coordinator::{
    ChildCallReplyPort, ClusterMsg, CoordinatorMsg, StartReplyPort, StopReplyPort,
};
pub(crate) use declared::DeclaredMsg;
pub(crate) use janitor::JanitorMsg;
pub(crate) use reconciler::{ReconcilerMsg, RoundCarry, RoundReport};
pub(crate) use registry::{RegistryMsg, RegistryOp, WriteDone};
pub(crate) use supervisor::HubMsg;
