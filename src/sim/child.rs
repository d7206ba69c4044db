//! The child the simulator's hubs host: an actor that answers pings, counts numbered casts per
//! sender (noting whether they came in order), applies numbered increments, and fails when told
//! to. Its message type is remotable, so the run reaches it through typed references from any
//! node. It hands its state over when it moves under `migration = "hot"`, and in a run that
//! keeps a [`StateBook`](super::state::StateBook) it writes there what it does with its state, so the run can judge the
//! moves.

use std::collections::BTreeMap;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use super::state::{with_book, HandedState, SharedBook};
use crate::kinds::ChildKinds;

/// The kind name of the simulator's child.
pub const SIM_KIND: &str = "sim";

/// What a simulated child can be told.
#[derive(RactorClusterMessage)]
pub enum SimChildMsg {
    /// Fail (an abnormal exit: a permanent child is restarted by its supervisor).
    Fail,
    /// Cast number `seq` of the sender tagged `tag`.
    Note(u64, u64),
    /// Answered with the same number.
    #[rpc]
    Ping(u64, RpcReplyPort<u64>),
    /// What this instance saw of sender `tag`'s casts: `[count, 1 if every one came after the
    /// one numbered before it else 0]`.
    #[rpc]
    Seen(u64, RpcReplyPort<Vec<u64>>),
    /// Apply increment number `n` (each numbered once in a run); answered with
    /// `[lineage, incarnation]` once applied.
    #[rpc]
    Add(u64, RpcReplyPort<Vec<u64>>),
    /// Answers the state, to hand over (hot swap).
    #[rpc]
    Export(RpcReplyPort<Vec<u8>>),
    /// Takes a handed-over state (hot swap; a malformed one is ignored).
    Import(Vec<u8>),
}

/// Its (empty) arguments.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SimChildArgs {}

/// The simulator's child; with a book, it writes what it does with its state there.
#[derive(Clone, Debug, Default)]
pub struct SimChild {
    book: Option<SharedBook>,
}

/// One instance's state.
#[derive(Debug, Default)]
pub struct SimState {
    senders: BTreeMap<u64, SenderLog>,
    /// This instance's number in the book (0 without a book).
    incarnation: u64,
    /// The lineage its state belongs to.
    lineage: u64,
    /// The increments applied.
    applied: std::collections::BTreeSet<u64>,
}

/// One sender's casts as an instance saw them.
#[derive(Clone, Copy, Debug, Default)]
pub struct SenderLog {
    last: u64,
    count: u64,
    in_order: bool,
}

impl Actor for SimChild {
    type Msg = SimChildMsg;
    type State = SimState;
    type Arguments = Option<SimChildArgs>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (incarnation, lineage) = match &self.book {
            Some(book) => with_book(book, |b| b.born(myself.get_id().pid())),
            None => (0, 0),
        };
        Ok(SimState {
            incarnation,
            lineage,
            ..SimState::default()
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let book = self.book.as_ref();
        if let (Some(book), false) = (book, matches!(msg, SimChildMsg::Import(_))) {
            with_book(book, |b| b.handled(state.incarnation));
        }
        let senders = &mut state.senders;
        match msg {
            SimChildMsg::Fail => return Err("told to fail by the simulator".into()),
            SimChildMsg::Note(tag, seq) => {
                let log = senders.entry(tag).or_insert(SenderLog {
                    in_order: true,
                    ..SenderLog::default()
                });
                log.in_order &= seq > log.last;
                log.last = seq;
                log.count += 1;
            }
            SimChildMsg::Ping(n, reply) => {
                let _ = reply.send(n);
            }
            SimChildMsg::Seen(tag, reply) => {
                let log = senders.get(&tag).copied().unwrap_or(SenderLog {
                    in_order: true,
                    ..SenderLog::default()
                });
                let _ = reply.send(vec![log.count, u64::from(log.in_order)]);
            }
            SimChildMsg::Add(n, reply) => {
                state.applied.insert(n);
                if let Some(book) = book {
                    with_book(book, |b| b.apply(state.incarnation, n));
                }
                let _ = reply.send(vec![state.lineage, state.incarnation]);
            }
            SimChildMsg::Export(reply) => {
                let handed = HandedState {
                    lineage: state.lineage,
                    exporter: state.incarnation,
                    applied: state.applied.clone(),
                    senders: state
                        .senders
                        .iter()
                        .map(|(tag, l)| (*tag, [l.last, l.count, u64::from(l.in_order)]))
                        .collect(),
                };
                let _ = reply.send(serde_json::to_vec(&handed).unwrap_or_default());
            }
            SimChildMsg::Import(bytes) => match serde_json::from_slice::<HandedState>(&bytes) {
                Ok(handed) => {
                    state.lineage = handed.lineage;
                    state.applied = handed.applied.clone();
                    state.senders = handed
                        .senders
                        .iter()
                        .map(|(tag, [last, count, in_order])| {
                            let log = SenderLog {
                                last: *last,
                                count: *count,
                                in_order: *in_order == 1,
                            };
                            (*tag, log)
                        })
                        .collect();
                    if let Some(book) = book {
                        with_book(book, |b| b.import(state.incarnation, handed));
                    }
                }
                Err(e) => tracing::warn!(error = %e, "sim child: malformed handover state ignored"),
            },
        }
        Ok(())
    }
}

/// The kinds every simulated node registers: [`SIM_KIND`], whose command handler answers any
/// payload with itself (so a message by id is seen to reach the child and come back), and
/// which hands its state over in a hot move.
pub fn sim_kinds() -> ChildKinds {
    sim_kinds_with(None)
}

/// [`sim_kinds`] whose children write what they do with their state in `book` (the hot-swap
/// invariants judge the moves by it).
pub fn sim_kinds_with(book: Option<SharedBook>) -> ChildKinds {
    let mut kinds = ChildKinds::new();
    kinds.register(SIM_KIND, SimChild { book }).handover(
        SIM_KIND,
        SimChildMsg::Export,
        SimChildMsg::Import,
    );
    kinds.register_command(SIM_KIND, |cell, payload| {
        Box::pin(async move {
            if cell.get_status() == ractor::ActorStatus::Running {
                Ok(payload)
            } else {
                Err("the child is not running".to_owned())
            }
        })
    });
    kinds
}
