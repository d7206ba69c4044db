//! How a frame travels: sent (dropped, delayed or held on the way), decoded and handed to the
//! receiving hub's sink under the router's lock, or lost in flight when its link or an endpoint
//! goes away.

use std::sync::{Arc, Mutex, Weak};

use rand::Rng;
use tokio::sync::mpsc;

use super::hold;
use super::links::{FrameEvent, FrameFate};
use super::state::{Delayed, RouterState};
use super::InProcessCluster;
use crate::cluster::transport::{EventSink, TransportError, TransportEvent};
use crate::cluster::wire::{self, WireMsg};
use crate::model::NodeName;

impl InProcessCluster {
    /// Decodes and hands a frame to a sink (under the router's lock); counts the outcome.
    pub(super) fn deliver(
        state: &mut RouterState,
        hub_id: &str,
        from: &str,
        to: &str,
        sink: &EventSink,
        bytes: &[u8],
    ) {
        match wire::decode_for(hub_id, bytes) {
            Ok(frame) if frame.from != from => {
                tracing::warn!(hub_id, claimed = %frame.from, actual = from, "frame claims another sender; dropped");
                state.stats.undecodable += 1;
            }
            Ok(frame) => {
                state.stats.delivered += 1;
                if let Some(observer) = &state.observer {
                    observer(&FrameEvent {
                        from,
                        to,
                        kind: frame.payload.kind(),
                        fate: FrameFate::Delivered,
                    });
                }
                match frame.payload {
                    // Membership comes from the router's link table here.
                    WireMsg::Hello { .. } | WireMsg::Heartbeat { .. } => {}
                    msg => sink(TransportEvent::Message {
                        from: from.to_owned(),
                        msg,
                    }),
                }
            }
            Err(error) => {
                tracing::warn!(hub_id, from, %error, "undecodable frame dropped");
                state.stats.undecodable += 1;
            }
        }
    }

    pub(super) fn send(
        &self,
        hub_id: &str,
        from: &NodeName,
        from_endpoint: u64,
        to: &NodeName,
        bytes: Vec<u8>,
    ) -> Result<(), TransportError> {
        let mut state = self.lock();
        let key = (hub_id.to_owned(), from.clone());
        if state.endpoints.get(&key).map(|e| e.id) != Some(from_endpoint) {
            return Err(TransportError::Closed);
        }
        let Some(target) = state.endpoints.get(&(hub_id.to_owned(), to.clone())) else {
            return Err(TransportError::Unreachable(to.clone()));
        };
        if from == to || !state.reachable(from, to) {
            return Err(TransportError::Unreachable(to.clone()));
        }
        let (to_endpoint, sink) = (target.id, target.sink.clone());
        if !state.carries(from, to) {
            // Cut one way: the sender cannot tell, the frame is lost.
            state.stats.dropped_random += 1;
            state.observe(hub_id, from, to, &bytes, FrameFate::Dropped);
            return Ok(());
        }
        let link = state
            .links
            .get(&(from.clone(), to.clone()))
            .copied()
            .unwrap_or_default();
        let drop_p = state.drop_probability.max(link.drop_probability);
        if drop_p > 0.0 && state.rng.gen_bool(drop_p) {
            state.stats.dropped_random += 1;
            state.observe(hub_id, from, to, &bytes, FrameFate::Dropped);
            return Ok(());
        }
        if !state.dropped_kinds.is_empty() {
            let kind = wire::decode_for(hub_id, &bytes).map(|f| f.payload.kind());
            if let Ok(kind) = kind {
                if state.dropped_kinds.contains(&(kind.to_owned(), to.clone())) {
                    state.stats.dropped_by_kind += 1;
                    return Ok(());
                }
            }
        }
        let (sender, receiver) = ((from, from_endpoint), (to, to_endpoint));
        let Some(bytes) = hold::hold_if_matched(&mut state, hub_id, sender, receiver, bytes) else {
            return Ok(());
        };
        match link.delay.or(state.delay) {
            None => Self::deliver(&mut state, hub_id, from, to, &sink, &bytes),
            Some((min, max)) => {
                let delay = if max > min {
                    state.rng.gen_range(min..=max)
                } else {
                    min
                };
                let item = Delayed {
                    at: tokio::time::Instant::now() + delay,
                    from: from.clone(),
                    from_endpoint,
                    to_endpoint,
                    bytes,
                };
                if link.reorder {
                    drop(state);
                    return self.deliver_alone(hub_id, to, item);
                }
                let lane_key = (hub_id.to_owned(), from.clone(), to.clone());
                let item = match state.lanes.get(&lane_key) {
                    Some(lane) => match lane.send(item) {
                        Ok(()) => return Ok(()),
                        Err(mpsc::error::SendError(item)) => item,
                    },
                    None => item,
                };
                let (tx, rx) = mpsc::unbounded_channel();
                let _ = tx.send(item);
                state.lanes.insert(lane_key.clone(), tx);
                drop(state);
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    self.lock().lanes.remove(&lane_key);
                    return Err(TransportError::Node(
                        "message delay needs a tokio runtime".to_owned(),
                    ));
                };
                runtime.spawn(Self::run_lane(
                    Arc::downgrade(&self.state),
                    lane_key.0,
                    to.clone(),
                    rx,
                ));
            }
        }
        Ok(())
    }

    /// Delivers one link's delayed frames in order. Holds the router weakly: when the cluster is
    /// dropped, the lane's sender goes with it and the task ends.
    async fn run_lane(
        router: Weak<Mutex<RouterState>>,
        hub_id: String,
        to: NodeName,
        mut rx: mpsc::UnboundedReceiver<Delayed>,
    ) {
        while let Some(item) = rx.recv().await {
            tokio::time::sleep_until(item.at).await;
            let Some(router) = router.upgrade() else {
                return;
            };
            let mut state = super::lock_router(&router);
            Self::deliver_late(&mut state, &hub_id, &to, &item);
        }
    }

    /// Delivers a frame that was delayed, if both its endpoints are still the ones it was sent
    /// between and their link is up; else it is lost in flight.
    pub(super) fn deliver_late(
        state: &mut RouterState,
        hub_id: &str,
        to: &NodeName,
        item: &Delayed,
    ) {
        let from_ok = state
            .endpoints
            .get(&(hub_id.to_owned(), item.from.clone()))
            .map(|e| e.id)
            == Some(item.from_endpoint);
        let to_sink = state
            .endpoints
            .get(&(hub_id.to_owned(), to.clone()))
            .filter(|e| e.id == item.to_endpoint)
            .map(|e| e.sink.clone());
        match to_sink {
            Some(sink) if from_ok && state.carries(&item.from, to) => {
                Self::deliver(state, hub_id, &item.from, to, &sink, &item.bytes);
            }
            _ => {
                state.stats.dropped_in_flight += 1;
                state.observe(hub_id, &item.from, to, &item.bytes, FrameFate::LostInFlight);
            }
        }
    }
}
