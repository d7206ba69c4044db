//! Typed calls this node waits on: one entry per call in flight to a peer, keyed by request id.
//!
//! The caller's task registers the call, sends the frame itself and awaits the answer; the wire
//! inbox completes it (`TypedReply`), and fails every call waiting on a peer the moment that
//! peer goes down, so a caller learns `unreachable` at once rather than at its timeout. No
//! actor sits on this path: a typed call costs one frame each way and a map entry while it
//! waits, nothing per child.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::cluster::wire::ChildFailure;
use crate::model::{ChildId, NodeName};

/// The outcome of a typed call as the host sent it: the reply bytes or a failure.
pub(crate) type TypedOutcome = Result<Vec<u8>, ChildFailure>;

struct Waiting {
    peer: NodeName,
    id: ChildId,
    done: oneshot::Sender<TypedOutcome>,
}

/// The typed calls in flight from this node.
#[derive(Default)]
pub(crate) struct TypedCalls {
    next: AtomicU64,
    /// By request id, so a peer's failure answers its calls in the order they were made
    /// (the simulator replays a seed exactly).
    waiting: Mutex<BTreeMap<u64, Waiting>>,
}

impl TypedCalls {
    /// Registers a call of child `id` about to be sent to `peer`; the receiver gets its
    /// outcome. Forget it with [`TypedCalls::forget`] if the caller stops waiting.
    pub fn register(&self, peer: NodeName, id: ChildId) -> (u64, oneshot::Receiver<TypedOutcome>) {
        let request_id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (done, rx) = oneshot::channel();
        self.lock().insert(request_id, Waiting { peer, id, done });
        (request_id, rx)
    }

    /// Completes call `request_id` (an answer from `from`); an answer from another node than
    /// the one asked, or for a call nobody waits on, is dropped.
    pub fn complete(&self, from: &NodeName, request_id: u64, outcome: TypedOutcome) {
        let mut waiting = self.lock();
        if waiting.get(&request_id).is_some_and(|w| &w.peer == from) {
            if let Some(w) = waiting.remove(&request_id) {
                let _ = w.done.send(outcome);
            }
        }
    }

    /// The caller gave up on `request_id` (timeout, dropped future).
    pub fn forget(&self, request_id: u64) {
        self.lock().remove(&request_id);
    }

    /// Fails every call waiting on `peer`, which went down.
    pub fn peer_down(&self, peer: &NodeName, this: &NodeName) {
        let mut waiting = self.lock();
        let ids: Vec<u64> = waiting
            .iter()
            .filter(|(_, w)| &w.peer == peer)
            .map(|(id, _)| *id)
            .collect();
        for request_id in ids {
            if let Some(w) = waiting.remove(&request_id) {
                let _ = w.done.send(Err(ChildFailure {
                    id: w.id,
                    node: peer.clone(),
                    reason: "unreachable".into(),
                    message: format!("node {peer} went down (seen from {this})"),
                }));
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}
