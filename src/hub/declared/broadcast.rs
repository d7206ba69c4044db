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
//! - **Announcements.** An announcement overtakes the deltas it counts (it is read from the
//!   persisted copy, and a delta waits for the earlier tickets), and while a long burst is
//!   declared a peer is always a few deltas behind. So an announcement ahead of this copy from
//!   a peer whose deltas are arriving (one applied within [`ANNOUNCED_WAIT`]) asks for nothing
//!   at once: it is checked again [`ANNOUNCED_WAIT`] later, and again as long as deltas keep
//!   moving this copy; only a copy that stood still that long while still behind asks for the
//!   announcer's copy. With no delta arriving the copy is asked for at once, as a lost delta
//!   needs. Asking at once in a burst would make every announcement a whole copy (a clone of
//!   every child, encoded, on both sides), quadratic in the burst.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
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

/// How long an announcement ahead of this copy waits for the deltas on their way (module doc).
pub(super) const ANNOUNCED_WAIT: Duration = Duration::from_secs(1);

/// What an announcement ahead of this copy is weighed with (see the module doc).
#[derive(Default)]
pub(super) struct AnnouncedAhead {
    /// Peers whose announcement waits for their deltas, each with this copy's version when it
    /// was last checked.
    checks: HashMap<NodeName, u64>,
    /// When each peer's latest delta was applied here.
    last_delta: HashMap<NodeName, Instant>,
}

impl AnnouncedAhead {
    /// `node` went down: its announcement no longer counts.
    pub(super) fn forget(&mut self, node: &NodeName) {
        self.checks.remove(node);
        self.last_delta.remove(node);
    }

    /// Whether `node`'s deltas are arriving: one was applied less than [`ANNOUNCED_WAIT`] ago.
    fn deltas_arriving(&self, node: &NodeName, now: Instant) -> bool {
        self.last_delta
            .get(node)
            .is_some_and(|at| now.duration_since(*at) < ANNOUNCED_WAIT)
    }
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
                self.announced_ahead
                    .last_delta
                    .insert(from.clone(), Instant::now());
                let mut after = AfterPersist::default();
                self.apply(effects, &mut after);
                // This copy is now exactly the sender's: a leader decided it.
                self.settled.settle(&self.hub.node, self.state.list());
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

    /// `from` announced a copy ahead of this one (module doc, "Announcements").
    pub(super) fn announced(&mut self, myself: &ActorRef<DeclaredMsg>, from: NodeName) {
        if self.parked() {
            // No delta moves a parked copy: only a whole copy restores it.
            self.send_summary(&from, true);
            return;
        }
        if !self.behind(&from) || self.announced_ahead.checks.contains_key(&from) {
            return;
        }
        if !self.announced_ahead.deltas_arriving(&from, Instant::now()) {
            // Nothing on its way from `from`: only its copy brings this one there.
            self.send_summary(&from, true);
            return;
        }
        self.check_announced_later(myself, from);
    }

    /// Checks `from`'s announcement again [`ANNOUNCED_WAIT`] from now, against this copy's
    /// version now.
    fn check_announced_later(&mut self, myself: &ActorRef<DeclaredMsg>, from: NodeName) {
        self.announced_ahead
            .checks
            .insert(from.clone(), self.state.list().version());
        myself.send_after(ANNOUNCED_WAIT, move || DeclaredMsg::AnnouncedCheck { from });
    }

    /// [`ANNOUNCED_WAIT`] after `from`'s announcement: caught up, still moving (wait again),
    /// or stood still behind it (ask for `from`'s copy).
    pub(super) fn check_announced(&mut self, myself: &ActorRef<DeclaredMsg>, from: NodeName) {
        let Some(checked_at) = self.announced_ahead.checks.remove(&from) else {
            return;
        };
        if !self.behind(&from) {
            return;
        }
        let now = self.state.list().version();
        if now != checked_at {
            // Deltas moved this copy meanwhile: wait for the rest.
            self.check_announced_later(myself, from);
            return;
        }
        tracing::debug!(
            peer = %from,
            mine = now,
            "no delta reached the announced declared copy; fetching it"
        );
        self.send_summary(&from, true);
    }

    /// Whether `from`'s latest announcement is ahead of this copy as it stands in memory (the
    /// deltas applied, persisted or about to be).
    fn behind(&self, from: &NodeName) -> bool {
        !self
            .recovery
            .ahead_of(self.state.list(), std::slice::from_ref(from))
            .is_empty()
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
