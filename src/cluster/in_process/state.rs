//! The router's shared state: nodes, hub endpoints, cut links, and the reachability that
//! membership events are derived from.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use rand::rngs::StdRng;
use tokio::sync::mpsc;

use super::RouterStats;
use crate::cluster::transport::{EventSink, TransportEvent};
use crate::core::boot_token::BootToken;
use crate::model::NodeName;

pub(super) struct NodeState {
    pub(super) alive: bool,
    pub(super) boot_token: BootToken,
    pub(super) generation: u64,
}

pub(super) struct Endpoint {
    pub(super) id: u64,
    pub(super) sink: EventSink,
}

pub(super) struct Delayed {
    pub(super) at: tokio::time::Instant,
    pub(super) from: NodeName,
    pub(super) from_endpoint: u64,
    pub(super) to_endpoint: u64,
    pub(super) bytes: Vec<u8>,
}

pub(super) struct RouterState {
    pub(super) rng: StdRng,
    pub(super) nodes: BTreeMap<NodeName, NodeState>,
    /// `(hub id, node) -> endpoint`.
    pub(super) endpoints: BTreeMap<(String, NodeName), Endpoint>,
    /// Cut links, as `(lower, higher)` name pairs.
    pub(super) cuts: BTreeSet<(NodeName, NodeName)>,
    /// Links cut one way, as `(from, to)`: every frame from `from` to `to` is lost, and `to`
    /// takes `from` for down (its heartbeats stop arriving), while `from` still hears `to`.
    pub(super) one_way: BTreeSet<(NodeName, NodeName)>,
    pub(super) drop_probability: f64,
    pub(super) delay: Option<(Duration, Duration)>,
    /// `(message kind, receiver)` pairs whose frames are lost.
    pub(super) dropped_kinds: BTreeSet<(String, NodeName)>,
    /// Frames matching this are held back (see `hold.rs`).
    pub(super) hold: Option<super::HoldFilter>,
    /// The frames held back, in the order they were sent.
    pub(super) held: Vec<super::hold::Held>,
    /// One in-order delivery queue per `(hub, from, to)` for delayed frames.
    pub(super) lanes: HashMap<(String, NodeName, NodeName), mpsc::UnboundedSender<Delayed>>,
    pub(super) next_id: u64,
    pub(super) stats: RouterStats,
    /// Faults of single directed links, `(from, to)`.
    pub(super) links: BTreeMap<(NodeName, NodeName), super::LinkFaults>,
    /// Told the fate of every frame.
    pub(super) observer: Option<super::FrameObserver>,
}

impl RouterState {
    pub(super) fn reachable(&self, a: &str, b: &str) -> bool {
        let alive = |n: &str| self.nodes.get(n).is_some_and(|s| s.alive);
        let key = if a < b {
            (a.to_owned(), b.to_owned())
        } else {
            (b.to_owned(), a.to_owned())
        };
        alive(a) && alive(b) && !self.cuts.contains(&key)
    }

    /// Whether `me` hears `peer`: the link is up and not cut one way from `peer` to `me`.
    /// What `me`'s membership says of `peer`.
    pub(super) fn hears(&self, me: &str, peer: &str) -> bool {
        self.reachable(me, peer) && !self.one_way.contains(&(peer.to_owned(), me.to_owned()))
    }

    /// Whether frames from `from` to `to` may arrive: the link is up and not cut that way.
    pub(super) fn carries(&self, from: &str, to: &str) -> bool {
        self.hears(to, from)
    }

    /// Every `(hub, me, peer)` with endpoints on both, where `me` hears `peer` now.
    pub(super) fn reachable_pairs(&self) -> BTreeSet<(String, NodeName, NodeName)> {
        let mut by_hub: BTreeMap<&str, Vec<&NodeName>> = BTreeMap::new();
        for (hub, node) in self.endpoints.keys() {
            by_hub.entry(hub).or_default().push(node);
        }
        let mut pairs = BTreeSet::new();
        for (hub, nodes) in by_hub {
            for me in &nodes {
                for peer in &nodes {
                    if me != peer && self.hears(me, peer) {
                        pairs.insert((hub.to_owned(), (*me).clone(), (*peer).clone()));
                    }
                }
            }
        }
        pairs
    }

    pub(super) fn token(&self, node: &str) -> BootToken {
        self.nodes[node].boot_token
    }

    pub(super) fn sink(&self, hub: &str, node: &str) -> Option<EventSink> {
        self.endpoints
            .get(&(hub.to_owned(), node.to_owned()))
            .map(|e| e.sink.clone())
    }

    /// The events that turn the `before` reachable pairs into the current ones. An endpoint
    /// that is gone (closed, crashed) gets nothing; its live peers see it go down.
    pub(super) fn diff_events(
        &self,
        before: &BTreeSet<(String, NodeName, NodeName)>,
    ) -> Vec<(EventSink, TransportEvent)> {
        let after = self.reachable_pairs();
        let mut events = Vec::new();
        for (hub, me, peer) in before.difference(&after) {
            if let Some(sink) = self.sink(hub, me) {
                events.push((sink, TransportEvent::NodeDown { node: peer.clone() }));
            }
        }
        for (hub, me, peer) in after.difference(before) {
            if let Some(sink) = self.sink(hub, me) {
                let boot_token = self.token(peer);
                events.push((
                    sink,
                    TransportEvent::NodeUp {
                        node: peer.clone(),
                        boot_token,
                    },
                ));
            }
        }
        events
    }
}

pub(super) fn emit(events: Vec<(EventSink, TransportEvent)>) {
    for (sink, event) in events {
        sink(event);
    }
}

pub(super) fn ordered(a: &str, b: &str) -> (NodeName, NodeName) {
    if a < b {
        (a.to_owned(), b.to_owned())
    } else {
        (b.to_owned(), a.to_owned())
    }
}
