//! Faults of single links, and an observer of every frame's fate.
//!
//! The router's cluster-wide knobs (`set_drop_probability`, `set_delay`) fault every link alike;
//! a fault schedule that wants one slow, lossy or reordering link sets [`LinkFaults`] on it (per
//! direction). A reordering link delays each frame on its own timer, so a later frame can arrive
//! first; any other delayed link keeps its frames in order.
//!
//! The [`FrameObserver`] sees every frame delivered, dropped or lost in flight, with its sender,
//! receiver and message kind: the deterministic simulator writes them into its trace.

use std::sync::Arc;
use std::time::Duration;

use super::state::{Delayed, RouterState};
use super::InProcessCluster;
use crate::cluster::transport::TransportError;
use crate::cluster::wire;

/// The faults of one directed link.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkFaults {
    /// Each frame is lost with this probability (the larger of it and the cluster's).
    pub drop_probability: f64,
    /// Each frame is delayed by a uniform duration in this range (instead of the cluster's).
    pub delay: Option<(Duration, Duration)>,
    /// Delayed frames may overtake each other.
    pub reorder: bool,
}

/// What became of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFate {
    /// Handed to the receiving hub.
    Delivered,
    /// Lost to a drop probability.
    Dropped,
    /// Lost because an endpoint or the link went away while it was delayed.
    LostInFlight,
}

/// One frame's fate, as the observer sees it.
#[derive(Clone, Copy, Debug)]
pub struct FrameEvent<'a> {
    /// The sending node.
    pub from: &'a str,
    /// The receiving node.
    pub to: &'a str,
    /// The message kind ([`crate::cluster::wire::WireMsg::kind`]; `undecodable` if it is not
    /// a frame of the hub).
    pub kind: &'a str,
    /// What became of it.
    pub fate: FrameFate,
}

/// Told every frame's fate. Called with the router's lock held: it must not call the router.
pub type FrameObserver = Arc<dyn Fn(&FrameEvent<'_>) + Send + Sync>;

impl InProcessCluster {
    /// Sets the faults of the link from `from` to `to` (the default clears them).
    pub fn set_link_faults(&self, from: &str, to: &str, faults: LinkFaults) {
        let mut state = self.lock();
        let key = (from.to_owned(), to.to_owned());
        if faults == LinkFaults::default() {
            state.links.remove(&key);
        } else {
            state.links.insert(key, faults);
        }
    }

    /// Whether frames from `from` to `to` arrive as they were sent: both nodes run, the link is
    /// up (and not cut that way), and neither it nor the whole router drops, delays or reorders
    /// them.
    pub fn link_is_clean(&self, from: &str, to: &str) -> bool {
        let state = self.lock();
        state.carries(from, to)
            && state.drop_probability == 0.0
            && !state.links.contains_key(&(from.to_owned(), to.to_owned()))
    }

    /// Clears the faults of every link.
    pub fn clear_link_faults(&self) {
        self.lock().links.clear();
    }

    /// Tells `observer` every frame's fate from now on (`None`: nobody).
    pub fn set_observer(&self, observer: Option<FrameObserver>) {
        self.lock().observer = observer;
    }

    /// Delivers one delayed frame on its own timer (a reordering link).
    pub(super) fn deliver_alone(
        &self,
        hub_id: &str,
        to: &str,
        item: Delayed,
    ) -> Result<(), TransportError> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(TransportError::Node(
                "message delay needs a tokio runtime".to_owned(),
            ));
        };
        let router = Arc::downgrade(&self.state);
        let (hub_id, to) = (hub_id.to_owned(), to.to_owned());
        runtime.spawn(async move {
            tokio::time::sleep_until(item.at).await;
            let Some(router) = router.upgrade() else {
                return;
            };
            let mut state = super::lock_router(&router);
            Self::deliver_late(&mut state, &hub_id, &to, &item);
        });
        Ok(())
    }
}

impl RouterState {
    /// Tells the observer, if any, what became of a frame.
    pub(super) fn observe(
        &self,
        hub_id: &str,
        from: &str,
        to: &str,
        bytes: &[u8],
        fate: FrameFate,
    ) {
        if let Some(observer) = &self.observer {
            let frame = wire::decode_for(hub_id, bytes);
            let kind = frame.as_ref().map_or("undecodable", |f| f.payload.kind());
            observer(&FrameEvent {
                from,
                to,
                kind,
                fate,
            });
        }
    }
}
