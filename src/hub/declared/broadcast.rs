//! How the declared list's changes travel between nodes (a child module of the DeclaredLeader,
//! `super`): the leader broadcasts a delta per persisted operation instead of its whole copy,
//! in version order, and a peer applies it or fetches the whole copy.
//!
//! - **Order.** Each operation's persist is awaited by its own task, and tasks may wake in any
//!   order once a group commit lands; a delta whose base a peer has not reached yet would make
//!   it fetch the whole copy. The [`Outbox`] hands out a [`Ticket`] per operation in the
//!   actor's (version) order and sends the messages in that order, skipping a ticket whose
//!   persist failed (dropped unsent).
//! - **Fallback.** A peer that cannot prove a delta's base (`DeltaReceipt::NeedWhole`) asks the
//!   sender for its whole copy (`DeclaredOffer` with `reply`) at most once per hub timeout
//!   until that copy arrives, so a missed delta followed by a burst costs one whole copy, not
//!   one per delta. The periodic `DeclaredVersion` announcements heal a delta that was lost
//!   with nothing after it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

use ractor::ActorRef;

use super::{AfterPersist, DeclaredLeaderState};
use crate::cluster::wire::budget::{chunk_by_bytes, encoded_len, FRAME_BUDGET_BYTES};
use crate::cluster::wire::WireMsg;
use crate::core::declared::delta::{DeclaredDelta, ListStamp};
use crate::core::declared::list::{DeclaredChild, DeclaredList};
use crate::core::declared::state::DeltaReceipt;
use crate::hub::protocol::DeclaredMsg;
use crate::hub::HubShared;
use crate::model::NodeName;
use crate::telemetry::refusals::Refusal;

/// Where released messages go (the transport's broadcast; a recorder in tests).
type Sink = Box<dyn Fn(WireMsg) + Send + Sync>;

/// Sends the leader's broadcasts in the order their tickets were taken.
pub(crate) struct Outbox {
    inner: Mutex<OutboxInner>,
    sink: Sink,
}

#[derive(Default)]
struct OutboxInner {
    /// Tickets handed out so far.
    issued: u64,
    /// The next ticket to send.
    next: u64,
    /// Released tickets waiting for an earlier one; empty: nothing to send (persist failed).
    ready: BTreeMap<u64, Vec<WireMsg>>,
}

impl Outbox {
    /// An outbox sending through `sink`.
    pub(crate) fn new(sink: impl Fn(WireMsg) + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(OutboxInner::default()),
            sink: Box::new(sink),
        })
    }

    /// An outbox sending to the hub's peers (none: nothing is encoded).
    pub(crate) fn for_hub(hub: Arc<HubShared>) -> Arc<Self> {
        Self::new(move |msg| {
            if hub.alone() {
                return;
            }
            if let Some(transport) = hub.transport() {
                if let Err(e) = transport.broadcast(&msg) {
                    tracing::warn!(error = %e, kind = msg.kind(), "declared list broadcast failed");
                }
            }
        })
    }

    /// Reserves the next place in the broadcast order. Taken by the actor, in mutation order.
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let seq = inner.issued;
        inner.issued += 1;
        Ticket {
            outbox: self.clone(),
            seq,
            released: false,
        }
    }

    /// Releases ticket `seq` and sends every message now due, in order. Sending under the lock
    /// keeps two tasks releasing at once from interleaving their sends.
    fn release(&self, seq: u64, msgs: Vec<WireMsg>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.ready.insert(seq, msgs);
        loop {
            let next = inner.next;
            let Some(msgs) = inner.ready.remove(&next) else {
                break;
            };
            inner.next += 1;
            for msg in msgs {
                (self.sink)(msg);
            }
        }
    }
}

/// One operation's place in the broadcast order. Dropped unsent (the persist failed, the task
/// ended early), it releases its place empty so later broadcasts are not held back.
pub(crate) struct Ticket {
    outbox: Arc<Outbox>,
    seq: u64,
    released: bool,
}

impl Ticket {
    /// Sends `msg` once every earlier ticket is released.
    #[cfg(test)]
    pub(crate) fn send(self, msg: WireMsg) {
        self.send_all(vec![msg]);
    }

    /// Sends `msgs`, in order, once every earlier ticket is released.
    pub(crate) fn send_all(mut self, msgs: Vec<WireMsg>) {
        self.released = true;
        self.outbox.release(self.seq, msgs);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.released {
            self.outbox.release(self.seq, Vec::new());
        }
    }
}

/// The messages that tell the peers about an operation: the delta from `base` when there is
/// one and it fits a frame's budget, else (no base: the leader was parked, or nothing newer; or
/// a delta too large) the whole copy, in parts if needed ([`offer_messages`]).
pub(super) fn broadcast_message(after: &mut AfterPersist, list: &DeclaredList) -> Vec<WireMsg> {
    let delta = after
        .base
        .take()
        .and_then(|base: ListStamp| DeclaredDelta::between(base, list, &after.sent))
        .filter(|delta| encoded_len(delta) <= FRAME_BUDGET_BYTES);
    match delta {
        Some(delta) => vec![WireMsg::DeclaredDelta { delta }],
        None => offer_messages(list, false),
    }
}

/// Numbers this process's offers in parts, so a receiver tells the parts of two offers apart.
static NEXT_OFFER_ID: AtomicU64 = AtomicU64::new(1);

/// `list` as one `DeclaredOffer` when it fits a frame's budget, else as `DeclaredOfferPart`s
/// cut to the budget (every child fits one: `model::MAX_CHILD_BYTES`).
pub(super) fn offer_messages(list: &DeclaredList, reply: bool) -> Vec<WireMsg> {
    if encoded_len(list) <= FRAME_BUDGET_BYTES {
        return vec![WireMsg::DeclaredOffer {
            list: list.clone(),
            reply,
        }];
    }
    let children: Vec<DeclaredChild> = list.children().values().cloned().collect();
    let parts = chunk_by_bytes(children, FRAME_BUDGET_BYTES);
    let offer_id = NEXT_OFFER_ID.fetch_add(1, AtomicOrdering::Relaxed);
    let total = parts.len() as u32;
    parts
        .into_iter()
        .zip(0..)
        .map(|(children, index)| WireMsg::DeclaredOfferPart {
            offer_id,
            index,
            total,
            version: list.version(),
            last_mutated_by: list.last_mutated_by().map(str::to_owned),
            reply,
            children,
        })
        .collect()
}

/// Peers asked for their whole copy, and when (see the module doc).
#[derive(Default)]
pub(super) struct WholeRequests(HashMap<NodeName, Instant>);

impl WholeRequests {
    /// `node`'s whole copy arrived.
    pub(super) fn arrived(&mut self, node: &NodeName) {
        self.0.remove(node);
    }
}

impl DeclaredLeaderState {
    /// A leader's delta from peer `from`: apply it (persisting its changes only), ignore it, or
    /// fetch `from`'s whole copy.
    pub(super) fn receive_delta(
        &mut self,
        myself: &ActorRef<DeclaredMsg>,
        from: NodeName,
        delta: DeclaredDelta,
    ) {
        let is_leader = self.hub.is_leader();
        match self.state.delta(&delta, is_leader) {
            DeltaReceipt::Applied(effects) => {
                let mut after = AfterPersist::default();
                self.apply(effects, &mut after);
                // This copy is now exactly the sender's.
                self.weighed_once_durable(myself, after, from);
            }
            DeltaReceipt::Ignored => tracing::trace!(
                peer = %from,
                version = delta.target.version,
                "declared delta already applied or outranked"
            ),
            DeltaReceipt::NeedWhole => self.fetch_whole(&from, &delta),
            DeltaReceipt::RefusedVersion(refused) => {
                tracing::warn!(peer = %from, %refused, "declared delta refused: implausible version");
                self.hub.refusals.count(Refusal::ImplausibleVersion);
            }
        }
    }

    /// Asks `from` for its whole copy, unless it was asked less than a hub timeout ago and has
    /// not answered yet.
    fn fetch_whole(&mut self, from: &NodeName, delta: &DeclaredDelta) {
        let now = Instant::now();
        let timeout = self.hub.config.default_timeout();
        if let Some(asked) = self.whole_requests.0.get(from) {
            if now.duration_since(*asked) < timeout {
                return;
            }
        }
        tracing::debug!(
            peer = %from,
            mine = self.state.list().version(),
            base = delta.base.version,
            target = delta.target.version,
            "declared delta not applicable to this copy; fetching the whole copy"
        );
        self.whole_requests.0.insert(from.clone(), now);
        self.send_copy(from, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u64) -> WireMsg {
        WireMsg::DeclaredVersion {
            version: n,
            last_mutated_by: None,
        }
    }

    fn recording() -> (Arc<Outbox>, Arc<Mutex<Vec<WireMsg>>>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let sink = sent.clone();
        let outbox = Outbox::new(move |m| sink.lock().unwrap().push(m));
        (outbox, sent)
    }

    #[test]
    fn broadcasts_leave_in_ticket_order_and_a_dropped_ticket_does_not_block() {
        let (outbox, sent) = recording();
        let tickets: Vec<Ticket> = (0..4).map(|_| outbox.ticket()).collect();
        let mut tickets = tickets.into_iter();
        let (t0, t1, t2, t3) = (
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
            tickets.next().unwrap(),
        );
        t2.send(msg(2));
        t3.send(msg(3));
        assert!(sent.lock().unwrap().is_empty(), "held back behind ticket 0");
        t0.send(msg(0));
        assert_eq!(*sent.lock().unwrap(), vec![msg(0)]);
        // Ticket 1's persist failed: it is dropped unsent, and what waited behind it leaves.
        drop(t1);
        assert_eq!(*sent.lock().unwrap(), vec![msg(0), msg(2), msg(3)]);
        outbox.ticket().send(msg(4));
        assert_eq!(sent.lock().unwrap().len(), 4);
    }

    #[test]
    fn tickets_released_from_many_threads_still_leave_in_order() {
        let (outbox, sent) = recording();
        let tickets: Vec<Ticket> = (0..64).map(|_| outbox.ticket()).collect();
        let handles: Vec<_> = tickets
            .into_iter()
            .enumerate()
            .rev()
            .map(|(i, t)| std::thread::spawn(move || t.send(msg(i as u64))))
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let expected: Vec<WireMsg> = (0..64).map(msg).collect();
        assert_eq!(*sent.lock().unwrap(), expected);
    }
}
