//! Reachability (issue 32): "down" is a cluster decision, not one link's.
//!
//! The transport's `NodeUp` / `NodeDown` say what *this node* reaches; they only change this
//! node's record in the reachability table (`core::reachability`), which is published to the
//! peers and merged with theirs. The members of the ring follow the *decision* computed from the
//! table: a peer leaves the ring (grace, reap, re-placement, `NodeDown` event, quorum) when it is
//! out of this node's component or set aside by the resolution, not when its link to this node
//! drops. A member reached only through others (indirectly connected) stays in the ring; sends
//! to it fail as they would to any unreachable node (`node_unavailable`).
//!
//! **Publication.** This node's record goes to every peer it reaches when it changes, and its
//! whole table to a peer that comes up. A record that is newer than the one held is merged and
//! passed on to the peers the record's observer does not reach (the observer sent it to the
//! others itself). Anti-entropy: a digest of the table to one peer in turn, every
//! [`GOSSIP_MS`] for [`ACTIVE_ROUNDS`] periods after the table changed, and otherwise one per
//! full-sync period; the peer answers with what it holds newer. At rest that is one small
//! frame per node per sync period.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ractor::ActorRef;

use super::{CoordinatorState, Timer};
use crate::cluster::wire::WireMsg;
use crate::core::boot_token::BootToken;
use crate::core::reachability::bound::GOSSIP_MS;
use crate::core::reachability::{
    rule, Decision, DigestEntry, Merge, Observation, ReachTable, Resolver, ResolverConfig,
};
use crate::hub::protocol::{ChildSupMsg, ClusterMsg, CoordinatorMsg};
use crate::hub::simulation::InjectedBug;
use crate::hub::HubShared;
use crate::model::NodeName;
use crate::telemetry::refusals::Refusal;

/// How many anti-entropy periods digests keep going after the table last changed.
const ACTIVE_ROUNDS: u64 = 10;

/// The Coordinator's reachability state.
pub(crate) struct ReachState {
    /// Every observer's latest record, this node's own included.
    pub table: ReachTable,
    pub resolver: Resolver,
    /// The decision last carried out.
    pub decision: Decision,
    /// Peers this node's transport reaches now.
    pub reachable: BTreeSet<NodeName>,
    /// The boot token each peer last announced on a direct link (to admit it to the ring).
    pub tokens: BTreeMap<NodeName, BootToken>,
    /// The next reachability deadline.
    pub check_timer: Option<Timer>,
    /// The next anti-entropy digest while the table is changing.
    pub digest_timer: Option<Timer>,
    /// Digests go every period until this instant (`HubShared::mono_ms`).
    pub active_until: u64,
    /// Whose turn it is to get the next digest.
    pub turn: usize,
    /// Members whose link to this node dropped and that no member has vouched for since, each
    /// with this node's record key (incarnation, version) of the drop: quorum does not count
    /// them, so a side cut off cleanly loses quorum at once rather than a gossip delay later.
    /// Only a member's answer to that record or a later one vouches (`rule::vouches`); while
    /// one waits, this node asks again every anti-entropy period.
    pub suspects: BTreeMap<NodeName, (u64, u64)>,
}

impl ReachState {
    /// The state of a hub that just opened its endpoint: a table holding only its own record,
    /// of an incarnation later than any of a previous Coordinator of this hub.
    pub fn new(hub: &HubShared) -> Self {
        let incarnation = hub.partition.next_incarnation(hub.clock.now_ms());
        Self {
            table: ReachTable::new(hub.node.clone(), incarnation),
            resolver: Resolver::new(ResolverConfig::new(hub.config.stable_after_ms)),
            decision: Decision::default(),
            reachable: BTreeSet::new(),
            tokens: BTreeMap::new(),
            check_timer: None,
            digest_timer: None,
            active_until: 0,
            turn: 0,
            suspects: BTreeMap::new(),
        }
    }

    /// Aborts the timers (the Coordinator is stopping).
    pub fn timers(&mut self) -> impl Iterator<Item = Timer> {
        self.check_timer
            .take()
            .into_iter()
            .chain(self.digest_timer.take())
    }
}

impl CoordinatorState {
    /// The transport reaches `node` (it greeted this hub): this node's record changes; a member
    /// is told up again at once (a new boot token is a restart, reaped now), a new peer joins
    /// the ring once the table says it is in this node's component.
    pub(super) fn on_link_up(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        node: NodeName,
        boot_token: BootToken,
    ) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let reach = &mut cluster.reach;
        reach.reachable.insert(node.clone());
        reach.suspects.remove(&node);
        reach.tokens.insert(node.clone(), boot_token);
        let changed = reach.table.set_reachable(reach.reachable.clone());
        // The newcomer gets the whole table; the others this node's new record.
        let all: Vec<Observation> = reach.table.records().values().cloned().collect();
        if let Err(e) = cluster
            .transport
            .send(&node, &WireMsg::Reachability { records: all })
        {
            tracing::debug!(peer = %node, error = %e, "reachability table not sent");
        }
        if let Some(own) = changed {
            self.publish_own_record(own, Some(&node));
        }
        let member = self
            .cluster
            .as_ref()
            .is_some_and(|c| c.peers.contains(&node));
        if member {
            // Reached directly again (it was indirectly connected, or restarted faster than it
            // could be seen down): the old node-up handling (its registry, a restart's reap).
            self.member_up(myself, node, boot_token);
        }
        self.reach_activity(myself);
        self.decide_reach(myself);
    }

    /// The transport lost `node`: this node's record changes; requests waiting on it fail now
    /// (nothing can reach it from here), but it leaves the ring only if the decision says so.
    /// A peer that said goodbye leaves at once.
    pub(super) fn on_link_down(&mut self, myself: &ActorRef<CoordinatorMsg>, node: NodeName) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let reach = &mut cluster.reach;
        if !reach.reachable.remove(&node) {
            return;
        }
        let changed = reach.table.set_reachable(reach.reachable.clone());
        if cluster.peers.contains(&node) {
            reach.suspects.insert(node.clone(), reach.table.own().key());
        }
        let leaving = cluster.leaving.contains(&node);
        let member = cluster.peers.contains(&node);
        cluster.delivered_by.remove(&node);
        if let Some(own) = changed {
            self.publish_own_record(own, None);
        }
        if leaving || self.hub.has_bug(InjectedBug::ActOnOwnView) {
            self.member_down(myself, node.clone());
        } else if member {
            tracing::info!(peer = %node, "peer unreachable from here; the cluster decides whether it is down");
            self.goodbye_answered(myself, &node);
            self.fail_pending_on(myself, &node);
            self.fail_relayed_on(&node);
            self.publish_membership();
        }
        self.reach_activity(myself);
        self.decide_reach(myself);
    }

    /// Records from `from`: the newer ones are merged, passed on to the peers their observers
    /// do not reach, and decided on.
    pub(super) fn on_reach_records(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        from: NodeName,
        records: Vec<Observation>,
    ) {
        let now = self.hub.clock.now_ms();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let mut newer = Vec::new();
        let mut raised = None;
        let me = self.hub.node.clone();
        // A peer that lost a link sends its new record (and asks again while it waits): if this
        // node reaches a peer that record lacks, it answers with its own record and the asker's
        // as merged here, so the asker knows the neighbour is still reached (quorum counts it
        // again) and that the answer was written after its record of the drop.
        let vouch = rule::asks_to_vouch(&records, &me, &from, cluster.reach.table.own());
        for record in &records {
            match cluster.reach.table.merge(record.clone(), now) {
                Ok(Merge::Newer) => newer.push(record.clone()),
                Ok(Merge::Known) => {}
                Ok(Merge::OwnRaised) => {
                    // A record in this node's name outranked its own (a previous life's, its
                    // wall clock having gone back across a restart): the raised own record
                    // replaces it everywhere.
                    tracing::info!(peer = %from, "a record in this node's name outranked its own; raised above it");
                    raised = Some(cluster.reach.table.own().clone());
                }
                Err(error) => {
                    tracing::warn!(peer = %from, observer = %record.observer, %error, "reachability record refused");
                    self.hub.refusals.count(Refusal::Reachability);
                }
            }
        }
        if vouch {
            let table = &cluster.reach.table;
            let answer: Vec<Observation> = std::iter::once(table.own().clone())
                .chain(table.get(&from).cloned())
                .collect();
            if let Err(e) = cluster
                .transport
                .send(&from, &WireMsg::Reachability { records: answer })
            {
                tracing::debug!(peer = %from, error = %e, "reachability record not sent");
            }
        }
        // Suspects the sender (a member this node reaches) vouches for in an answer to this
        // node's record of the drop are counted again.
        let table = &cluster.reach.table;
        let before = cluster.reach.suspects.len();
        let reached = cluster.reach.reachable.contains(&from);
        cluster.reach.suspects.retain(|x, suspected_at| {
            !(reached && rule::vouches(&records, &me, &from, x, *suspected_at, table.records()))
        });
        let vouched = cluster.reach.suspects.len() != before;
        if let Some(own) = raised {
            self.publish_own_record(own, None);
        }
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if newer.is_empty() {
            if vouched {
                self.quorum_recount(myself);
            }
            return;
        }
        for peer in &cluster.reach.reachable {
            if *peer == from {
                continue;
            }
            let records: Vec<Observation> = newer
                .iter()
                .filter(|r| r.observer != *peer && !r.reachable.contains(peer))
                .cloned()
                .collect();
            if records.is_empty() {
                continue;
            }
            if let Err(e) = cluster
                .transport
                .send(peer, &WireMsg::Reachability { records })
            {
                tracing::debug!(%peer, error = %e, "reachability records not passed on");
            }
        }
        self.reach_activity(myself);
        self.decide_reach(myself);
    }

    /// A peer's digest: answer with the records held newer, and with this node's own digest
    /// when the peer holds newer ones and asked for it.
    pub(super) fn on_reach_digest(
        &mut self,
        from: NodeName,
        digest: Vec<DigestEntry>,
        reply: bool,
    ) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let table = &cluster.reach.table;
        let records = table.newer_than(&digest);
        if !records.is_empty() {
            if let Err(e) = cluster
                .transport
                .send(&from, &WireMsg::Reachability { records })
            {
                tracing::debug!(peer = %from, error = %e, "reachability records not sent");
            }
        }
        if reply && table.behind(&digest) {
            let msg = WireMsg::ReachDigest {
                digest: table.digest(),
                reply: false,
            };
            if let Err(e) = cluster.transport.send(&from, &msg) {
                tracing::debug!(peer = %from, error = %e, "reachability digest not sent");
            }
        }
    }

    /// Sends this node's digest to the next reachable peer in turn.
    pub(super) fn send_reach_digest(&mut self) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let reach = &mut cluster.reach;
        if reach.reachable.is_empty() {
            return;
        }
        reach.turn = (reach.turn + 1) % reach.reachable.len();
        let Some(peer) = reach.reachable.iter().nth(reach.turn) else {
            return;
        };
        let msg = WireMsg::ReachDigest {
            digest: reach.table.digest(),
            reply: true,
        };
        if let Err(e) = cluster.transport.send(peer, &msg) {
            tracing::debug!(%peer, error = %e, "reachability digest not sent");
        }
    }

    /// The anti-entropy timer: a digest, and the next one while the table is still changing.
    pub(super) fn on_reach_digest_tick(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let now = self.hub.mono_ms();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        cluster.reach.digest_timer = None;
        let active = now < cluster.reach.active_until;
        let waiting = !cluster.reach.suspects.is_empty();
        if waiting {
            // Asks again for the vouches still missing (a question or its answer may be lost).
            let own = cluster.reach.table.own().clone();
            self.publish_own_record(own, None);
        }
        if active {
            self.send_reach_digest();
        }
        if active || waiting {
            self.arm_reach_digest(myself);
        }
    }

    /// The table changed: digests go every period for a while.
    fn reach_activity(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let now = self.hub.mono_ms();
        if let Some(cluster) = &mut self.cluster {
            cluster.reach.active_until = now + ACTIVE_ROUNDS * GOSSIP_MS;
        }
        self.arm_reach_digest(myself);
    }

    fn arm_reach_digest(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if cluster.reach.digest_timer.is_none() {
            cluster.reach.digest_timer =
                Some(myself.send_after(Duration::from_millis(GOSSIP_MS), || {
                    CoordinatorMsg::Cluster(ClusterMsg::ReachDigestTick)
                }));
        }
    }

    /// Sends this node's new record to every peer it reaches (but `except`, which gets the
    /// whole table), and to the members it lost: a link may fail one way only, and a member
    /// that still hears this node learns from the record that it is not heard here, so its
    /// resolution takes this node out of its component (and out of its quorum) at once.
    /// Over a link that is down both ways the send fails and nothing else happens.
    fn publish_own_record(&self, own: Observation, except: Option<&NodeName>) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        let msg = WireMsg::Reachability { records: vec![own] };
        for peer in cluster
            .reach
            .reachable
            .iter()
            .chain(cluster.reach.suspects.keys())
        {
            if Some(peer) == except {
                continue;
            }
            if let Err(e) = cluster.transport.send(peer, &msg) {
                tracing::debug!(%peer, error = %e, "reachability record not sent");
            }
        }
    }

    /// Decides from the table now and carries the decision out: peers out of the component or
    /// set aside leave the ring, reachable peers back in it join, this node enters or leaves
    /// the set-aside state, and the next deadline is armed.
    pub(super) fn decide_reach(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let now = self.hub.mono_ms();
        let me = self.hub.node.clone();
        let own_view = self.hub.has_bug(InjectedBug::ActOnOwnView);
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let reach = &mut cluster.reach;
        let decision = if own_view {
            // The injected bug: this node's own links are the truth (the behaviour before
            // reachability was shared).
            let mut component = reach.reachable.clone();
            component.insert(me.clone());
            Decision {
                component,
                ..Decision::default()
            }
        } else {
            reach.resolver.decide(&reach.table, now)
        };
        if let Some(t) = reach.check_timer.take() {
            t.abort();
        }
        if let Some(at) = decision.next_check_at {
            let after = Duration::from_millis(at.saturating_sub(now));
            reach.check_timer =
                Some(myself.send_after(after, || CoordinatorMsg::Cluster(ClusterMsg::ReachCheck)));
        }
        let downs: Vec<NodeName> = cluster
            .peers
            .iter()
            .filter(|p| !decision.is_member(p))
            .cloned()
            .collect();
        let ups: Vec<(NodeName, BootToken)> = reach
            .reachable
            .iter()
            .filter(|p| !cluster.peers.contains(*p) && decision.is_member(p))
            .filter_map(|p| reach.tokens.get(p).map(|t| (p.clone(), *t)))
            .collect();
        let me_aside = decision.me_aside;
        if decision != reach.decision {
            tracing::info!(
                component = ?decision.component,
                set_aside = ?decision.set_aside,
                indirect = ?decision.indirect,
                unresolved = decision.unresolved,
                "reachability decision"
            );
        }
        self.hub
            .partition
            .set_indirect(decision.indirect.iter().cloned().collect());
        reach.decision = decision;
        for node in downs {
            self.member_down(myself, node);
        }
        for (node, token) in ups {
            self.member_up(myself, node, token);
        }
        // Set aside: the children are released first, then the record says so (the others
        // take this node out of the ring only then). Back: the record says so first.
        if me_aside {
            self.set_aside_mode(myself, true);
        }
        let own = self
            .cluster
            .as_mut()
            .and_then(|c| c.reach.table.set_aside(me_aside));
        if let Some(own) = own {
            self.publish_own_record(own, None);
            self.reach_activity(myself);
        }
        if !me_aside {
            self.set_aside_mode(myself, false);
        }
        if let Some(cluster) = &mut self.cluster {
            let peers = &cluster.peers;
            cluster.reach.suspects.retain(|x, _| peers.contains(x));
        }
        self.quorum_recount(myself);
    }

    /// How many members quorum counts (`core::quorum::counted_members`).
    pub(super) fn quorum_members(&self) -> usize {
        let members = self.hub.members();
        match &self.cluster {
            Some(c) => {
                crate::core::quorum::counted_members(&members, |m| c.reach.suspects.contains_key(m))
            }
            None => members.len(),
        }
    }

    /// Enters or leaves the set-aside state: set aside, this node stops its children as a
    /// release (as partition mode does) and refuses work, before the others re-place them
    /// after their grace; back, it asks for the registries and lets the passes run.
    fn set_aside_mode(&mut self, myself: &ActorRef<CoordinatorMsg>, aside: bool) {
        let hub = self.hub.clone();
        if !hub.partition.set_set_aside(aside) {
            return;
        }
        if aside {
            tracing::warn!(
                children = hub.local_children.len(),
                "set aside by the reachability resolution: stopping this node's children, \
                 refusing starts and stops until fully connected again"
            );
            if !hub.partition.quorum_lost() {
                if let Some(supervisor) = hub.child_supervisor() {
                    let _ = supervisor.cast(ChildSupMsg::ReleaseAll);
                }
            }
        } else {
            tracing::info!("fully connected again: back in the ring");
            if !hub.partition.quorum_lost() {
                self.resume_after_release(myself);
            }
        }
    }
}
