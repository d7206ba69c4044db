//! Hot swap with state handover: the decisions, as plain data and time as an input.
//!
//! A hot move of a child whose kind opts in ([`crate::ChildKinds::handover`]) goes:
//! 1. the old node takes the child out of its local routing and asks it for its state (the
//!    *export*); from then on casts that reach the old node for it are **held**
//!    ([`HeldCasts`]) instead of landing in a mailbox nobody reads again;
//! 2. the state crosses the wire ahead of the start (`WireMsg::HandoverState`, on the same
//!    FIFO link) and waits on the new node ([`PendingImports`]) until the child starts there;
//!    its first message is the *import*, before anything else can reach it;
//! 3. once the new node confirms the start, the held casts are forwarded to it and the old
//!    instance is stopped; for `retention_ms` the old node forwards what still reaches it.
//!
//! An export that fails or does not answer within `handover_data_wait_ms` makes the move a
//! cold swap (the child starts without state); a start that fails or is not confirmed within
//! `child_migration_timeout_ms` leaves the child where it was, its state intact.
//!
//! Both buffers are bounded: state above [`MAX_HANDOVER_BYTES`] is refused by the exporting
//! node and by the receiving one; held casts and pending imports have byte budgets, and what
//! does not fit is refused (logged and counted), never queued without limit.

use std::collections::BTreeMap;

use crate::config::Migration;
use crate::model::{ChildId, NodeName};

/// The largest state a child may hand over (4 MiB): it crosses in one frame, with room to
/// spare under the frame budget.
pub const MAX_HANDOVER_BYTES: usize = 4 * 1024 * 1024;

/// The most bytes of held casts one moving child may accumulate (beyond: refused).
pub const MAX_HELD_BYTES: usize = 8 * 1024 * 1024;

/// The most bytes of states a node keeps waiting for their children to start (beyond:
/// refused; the child then starts without state, as in a cold swap).
pub const MAX_PENDING_IMPORT_BYTES: usize = 64 * 1024 * 1024;

/// The metadata key a hot move's start carries for each child whose state was sent ahead: the
/// receiving node refuses to start such a child without its state (the state frame was lost,
/// or overtaken by the start) instead of starting it empty while the mover reports the state
/// taken; the mover then keeps the child and moves it again. Taken out before the row is
/// written, so no row ever shows it.
///
/// Its value is the [`state_digest`] of the state sent, so that the start takes that state and
/// no other: a state left waiting by an earlier move of the same child (one that arrived after
/// its start was refused, while the mover resumed the child and it went on answering) is
/// stale. An empty value (a node that sends no digest) takes whichever state waits.
pub const HANDOVER_METADATA_KEY: &str = "__process_hub_handover__";

/// Names a handed-over state in its move's start ([`HANDOVER_METADATA_KEY`]): 64 bits of its
/// BLAKE3 hash, in hex.
pub fn state_digest(state: &[u8]) -> String {
    let hash = blake3::hash(state);
    hash.as_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How a child moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveMode {
    /// Export, start there with the state, stop here after confirmation.
    Hot,
    /// Stop here, start there without state.
    Cold,
}

/// How a child of a kind moves under the hub's migration strategy: hot only when the hub says
/// hot *and* the kind can hand its state over.
pub fn move_mode(migration: Migration, kind_hands_over: bool) -> MoveMode {
    match migration {
        Migration::Hot if kind_hands_over => MoveMode::Hot,
        _ => MoveMode::Cold,
    }
}

/// A cast that reached the old node while its child was moving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldCast {
    /// A typed cast (`ChildRef::cast`, `WireMsg::TypedCast`), as ractor serialized it.
    Typed {
        /// The variant's name.
        variant: String,
        /// Its fields.
        args: Vec<u8>,
    },
    /// A cast by bytes (`Hub::cast_child`, `WireMsg::ChildCast`).
    Bytes {
        /// The kind's payload.
        payload: Vec<u8>,
    },
}

impl HeldCast {
    fn bytes(&self) -> usize {
        match self {
            HeldCast::Typed { variant, args } => variant.len() + args.len(),
            HeldCast::Bytes { payload } => payload.len(),
        }
    }
}

/// Where a cast to a moving child goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldOutcome {
    /// Kept; it goes to the new instance after its import.
    Held,
    /// The child moved: send the cast to this node.
    Forward {
        /// The child's new node.
        to: NodeName,
        /// The cast, given back.
        cast: HeldCast,
    },
    /// The child's buffer is full: refused.
    Full,
}

/// The state of one moving child on its old node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handoff {
    /// The export is taken or under way: casts are held, in arrival order.
    Holding {
        /// The casts held so far.
        held: Vec<HeldCast>,
        /// Their size.
        bytes: usize,
    },
    /// The child runs on `to`; until `until_ms` what reaches this node is forwarded there.
    Forwarding {
        /// The new host.
        to: NodeName,
        /// The end of the retention period.
        until_ms: u64,
    },
}

impl Handoff {
    /// A move that just began.
    pub fn holding() -> Self {
        Handoff::Holding {
            held: Vec::new(),
            bytes: 0,
        }
    }

    /// Holds `cast`, or says where it goes.
    pub fn hold(&mut self, cast: HeldCast) -> HoldOutcome {
        match self {
            Handoff::Holding { held, bytes } => {
                let size = cast.bytes();
                if *bytes + size > MAX_HELD_BYTES {
                    return HoldOutcome::Full;
                }
                *bytes += size;
                held.push(cast);
                HoldOutcome::Held
            }
            Handoff::Forwarding { to, .. } => HoldOutcome::Forward {
                to: to.clone(),
                cast,
            },
        }
    }

    /// The move completed: from now on casts are forwarded to `to` until `until_ms`; answers
    /// the casts held so far, in arrival order.
    pub fn forward_to(&mut self, to: NodeName, until_ms: u64) -> Vec<HeldCast> {
        let previous = std::mem::replace(self, Handoff::Forwarding { to, until_ms });
        match previous {
            Handoff::Holding { held, .. } => held,
            Handoff::Forwarding { .. } => Vec::new(),
        }
    }

    /// The move was abandoned (the child stays): the held casts, for the old instance.
    pub fn release(self) -> Vec<HeldCast> {
        match self {
            Handoff::Holding { held, .. } => held,
            Handoff::Forwarding { .. } => Vec::new(),
        }
    }

    /// Whether the retention period is over at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        matches!(self, Handoff::Forwarding { until_ms, .. } if now_ms >= *until_ms)
    }
}

/// Why a node refused a state sent to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportRefused {
    /// The state is larger than [`MAX_HANDOVER_BYTES`].
    #[error("handover state of {bytes} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The states waiting on this node already fill [`MAX_PENDING_IMPORT_BYTES`].
    #[error("{waiting} bytes of handover state already wait on this node")]
    Full {
        /// What waits.
        waiting: usize,
    },
}

/// States received for children about to start on this node, each kept until its child
/// starts or `handover_data_wait_ms` passes.
#[derive(Debug, Default)]
pub struct PendingImports {
    states: BTreeMap<ChildId, (Vec<u8>, u64)>,
    bytes: usize,
    /// When each state received lately stops counting as a move under way (taken or not): a
    /// start of a child that already runs here, meanwhile, met a hot move it did not take.
    arrived: BTreeMap<ChildId, u64>,
}

impl PendingImports {
    /// Keeps `state` for child `id` until `expires_ms` (a newer state replaces an older one).
    pub fn accept(
        &mut self,
        id: ChildId,
        state: Vec<u8>,
        now_ms: u64,
        expires_ms: u64,
    ) -> Result<(), ImportRefused> {
        self.expire(now_ms);
        if state.len() > MAX_HANDOVER_BYTES {
            return Err(ImportRefused::TooLarge {
                bytes: state.len(),
                limit: MAX_HANDOVER_BYTES,
            });
        }
        let replaced = self.states.get(&id).map_or(0, |(s, _)| s.len());
        if self.bytes - replaced + state.len() > MAX_PENDING_IMPORT_BYTES {
            return Err(ImportRefused::Full {
                waiting: self.bytes,
            });
        }
        self.bytes = self.bytes - replaced + state.len();
        self.arrived.insert(id.clone(), expires_ms);
        self.states.insert(id, (state, expires_ms));
        Ok(())
    }

    /// Whether a state for child `id` arrived within its wait at `now_ms` (taken or not):
    /// drops it if it still waits. Asked when a move's start finds the child already running
    /// here, whose instance keeps its own state: the mover must not count its state as taken.
    pub fn met_running(&mut self, id: &ChildId, now_ms: u64) -> bool {
        if let Some((state, _)) = self.states.remove(id) {
            self.bytes -= state.len();
        }
        self.arrived.get(id).is_some_and(|until| now_ms < *until)
    }

    /// The state waiting for child `id`, if any and not expired at `now_ms`, and if it is the
    /// one `digest` names ([`state_digest`]; empty: any). A state another move of the child
    /// sent is not taken, and keeps waiting: two moves under way at once each find their own.
    pub fn take(&mut self, id: &ChildId, now_ms: u64, digest: &str) -> Option<Vec<u8>> {
        let (state, _) = self.states.get(id)?;
        if !digest.is_empty() && state_digest(state) != digest {
            return None;
        }
        let (state, expires) = self.states.remove(id)?;
        self.bytes -= state.len();
        (now_ms < expires).then_some(state)
    }

    /// Drops every state expired at `now_ms`.
    pub fn expire(&mut self, now_ms: u64) {
        self.arrived.retain(|_, until| now_ms < *until);
        let expired: Vec<ChildId> = self
            .states
            .iter()
            .filter(|(_, (_, expires))| now_ms >= *expires)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some((state, _)) = self.states.remove(&id) {
                self.bytes -= state.len();
            }
        }
    }

    /// The bytes waiting.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(n: usize) -> HeldCast {
        HeldCast::Typed {
            variant: "Increment".into(),
            args: vec![0; n],
        }
    }

    #[test]
    fn only_a_hot_hub_and_a_kind_that_hands_over_move_hot() {
        assert_eq!(move_mode(Migration::Hot, true), MoveMode::Hot);
        assert_eq!(move_mode(Migration::Hot, false), MoveMode::Cold);
        assert_eq!(move_mode(Migration::Cold, true), MoveMode::Cold);
        assert_eq!(move_mode(Migration::Cold, false), MoveMode::Cold);
    }

    #[test]
    fn casts_are_held_in_order_then_forwarded_after_the_move() {
        let mut h = Handoff::holding();
        assert_eq!(h.hold(typed(1)), HoldOutcome::Held);
        assert_eq!(
            h.hold(HeldCast::Bytes { payload: vec![7] }),
            HoldOutcome::Held
        );
        let held = h.forward_to("b@x".into(), 100);
        assert_eq!(held, vec![typed(1), HeldCast::Bytes { payload: vec![7] }]);
        assert_eq!(
            h.hold(typed(1)),
            HoldOutcome::Forward {
                to: "b@x".into(),
                cast: typed(1)
            }
        );
        assert!(!h.expired(99));
        assert!(h.expired(100));
    }

    #[test]
    fn held_casts_are_bounded() {
        let mut h = Handoff::holding();
        assert_eq!(h.hold(typed(MAX_HELD_BYTES - 20)), HoldOutcome::Held);
        assert_eq!(h.hold(typed(100)), HoldOutcome::Full);
        assert_eq!(h.release().len(), 1);
    }

    #[test]
    fn a_pending_state_is_taken_once_and_expires() {
        let mut p = PendingImports::default();
        p.accept("a".into(), vec![1, 2], 0, 10).unwrap();
        assert_eq!(p.bytes(), 2);
        assert_eq!(p.take(&"a".into(), 5, ""), Some(vec![1, 2]));
        assert_eq!(p.take(&"a".into(), 5, ""), None);
        p.accept("b".into(), vec![1], 0, 10).unwrap();
        assert_eq!(p.take(&"b".into(), 10, ""), None, "expired");
        assert_eq!(p.bytes(), 0);
        p.accept("c".into(), vec![1], 0, 10).unwrap();
        p.expire(10);
        assert_eq!(p.bytes(), 0);
    }

    #[test]
    fn a_start_takes_only_the_state_its_digest_names() {
        let mut p = PendingImports::default();
        let (stale, current) = (vec![1, 2], vec![1, 2, 3]);
        // A refused move's state arrived late and waits; the next move's start names its own.
        p.accept("a".into(), stale.clone(), 0, 10).unwrap();
        assert_eq!(p.take(&"a".into(), 1, &state_digest(&current)), None);
        p.accept("a".into(), current.clone(), 2, 10).unwrap();
        assert_eq!(
            p.take(&"a".into(), 3, &state_digest(&stale)),
            None,
            "nor does an older start take a newer move's state"
        );
        assert_eq!(p.bytes(), current.len(), "the newer state still waits");
        assert_eq!(
            p.take(&"a".into(), 4, &state_digest(&current)),
            Some(current)
        );
        assert_eq!(p.bytes(), 0);
        assert_eq!(state_digest(&stale).len(), 16);
        assert_ne!(state_digest(&stale), state_digest(&[2, 1]));
    }

    #[test]
    fn a_state_that_arrived_lately_is_met_by_a_running_child_until_its_wait_ends() {
        let mut p = PendingImports::default();
        p.accept("a".into(), vec![1, 2], 0, 10).unwrap();
        assert_eq!(p.take(&"a".into(), 1, ""), Some(vec![1, 2]));
        // Taken by one start, a second mover's start still meets the move.
        assert!(p.met_running(&"a".into(), 5));
        p.accept("b".into(), vec![1], 0, 10).unwrap();
        assert!(p.met_running(&"b".into(), 5));
        assert_eq!(
            p.bytes(),
            0,
            "the state a running child will never take is dropped"
        );
        assert!(!p.met_running(&"b".into(), 10), "its wait is over");
        assert!(!p.met_running(&"c".into(), 0));
    }

    #[test]
    fn oversized_and_overflowing_states_are_refused() {
        let mut p = PendingImports::default();
        assert!(matches!(
            p.accept("a".into(), vec![0; MAX_HANDOVER_BYTES + 1], 0, 10),
            Err(ImportRefused::TooLarge { .. })
        ));
        let mut n = 0;
        while p.bytes() + MAX_HANDOVER_BYTES <= MAX_PENDING_IMPORT_BYTES {
            p.accept(
                format!("c{n}").as_str().into(),
                vec![0; MAX_HANDOVER_BYTES],
                0,
                10,
            )
            .unwrap();
            n += 1;
        }
        assert!(matches!(
            p.accept("z".into(), vec![0; MAX_HANDOVER_BYTES], 0, 10),
            Err(ImportRefused::Full { .. })
        ));
        // Replacing a child's own state does not count it twice.
        p.accept("c0".into(), vec![0; MAX_HANDOVER_BYTES], 0, 10)
            .unwrap();
    }
}
