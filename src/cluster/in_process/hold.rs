//! Frames held back by the router (tests of a message that arrives late, or never): while a
//! hold filter is set, every frame it matches is kept, in order, instead of being delivered,
//! until the test releases (delivers) or discards them. Where [`InProcessCluster::set_delay`]
//! slows every frame, a hold picks one message, and the test decides when it arrives.

use std::sync::Arc;

use super::InProcessCluster;
use crate::cluster::wire::{self, WireMsg};
use crate::model::NodeName;

/// Decides whether a frame is held: `(from, to, message)`. Called with the router's lock held,
/// so it must not call the router.
pub type HoldFilter = Arc<dyn Fn(&str, &str, &WireMsg) -> bool + Send + Sync>;

/// One held frame, with the endpoints it was sent between (it is lost, not delivered, when
/// either endpoint is gone by the release).
pub(super) struct Held {
    hub_id: String,
    from: NodeName,
    from_endpoint: u64,
    to: NodeName,
    to_endpoint: u64,
    bytes: Vec<u8>,
}

impl InProcessCluster {
    /// Holds back every frame `filter` matches from now on (`None`: holds no more; frames
    /// already held stay held until [`release_held`](Self::release_held) or
    /// [`discard_held`](Self::discard_held)).
    pub fn hold_frames(&self, filter: Option<HoldFilter>) {
        self.lock().hold = filter;
    }

    /// How many frames are held.
    pub fn held_frames(&self) -> usize {
        self.lock().held.len()
    }

    /// Delivers the held frames in the order they were sent, each only if its link and both
    /// endpoints are still there (otherwise it counts as lost in flight); returns how many
    /// were delivered. They are not delayed again.
    pub fn release_held(&self) -> usize {
        let mut state = self.lock();
        let held = std::mem::take(&mut state.held);
        let mut delivered = 0;
        for frame in held {
            let from_ok = state
                .endpoints
                .get(&(frame.hub_id.clone(), frame.from.clone()))
                .map(|e| e.id)
                == Some(frame.from_endpoint);
            let sink = state
                .endpoints
                .get(&(frame.hub_id.clone(), frame.to.clone()))
                .filter(|e| e.id == frame.to_endpoint)
                .map(|e| e.sink.clone());
            match sink {
                Some(sink) if from_ok && state.reachable(&frame.from, &frame.to) => {
                    Self::deliver(
                        &mut state,
                        &frame.hub_id,
                        &frame.from,
                        &frame.to,
                        &sink,
                        &frame.bytes,
                    );
                    delivered += 1;
                }
                _ => state.stats.dropped_in_flight += 1,
            }
        }
        delivered
    }

    /// Loses the held frames (counted as lost in flight); returns how many there were.
    pub fn discard_held(&self) -> usize {
        let mut state = self.lock();
        let n = std::mem::take(&mut state.held).len();
        state.stats.dropped_in_flight += n as u64;
        n
    }
}

/// Keeps the frame if the hold filter matches it; returns it back otherwise.
pub(super) fn hold_if_matched(
    state: &mut super::state::RouterState,
    hub_id: &str,
    (from, from_endpoint): (&NodeName, u64),
    (to, to_endpoint): (&NodeName, u64),
    bytes: Vec<u8>,
) -> Option<Vec<u8>> {
    let Some(filter) = state.hold.clone() else {
        return Some(bytes);
    };
    let matched = wire::decode_for(hub_id, &bytes).is_ok_and(|f| filter(from, to, &f.payload));
    if !matched {
        return Some(bytes);
    }
    state.held.push(Held {
        hub_id: hub_id.to_owned(),
        from: from.clone(),
        from_endpoint,
        to: to.clone(),
        to_endpoint,
        bytes,
    });
    None
}
