//! Partition mode: the Coordinator feeds every membership change to the hub's
//! [`QuorumTracker`] and carries out its verdict.
//!
//! - **Quorum lost**: the flag every actor reads is set (starts and stops are refused at the
//!   API, start batches and restarts by the ChildSupervisor, passes, retries and reconcile
//!   rounds wait), and the ChildSupervisor stops every local child as a release: its row stays
//!   here as an unbound stub (for `stub_ttl_ms`), so this node still knows what it held, while
//!   the majority (which sees this node down) re-places those children after its grace.
//! - **Quorum regained**: the flag is cleared, every peer is asked for its registry again, and
//!   the redistribution pass those registries trigger (each is an event of its batch) re-places
//!   the stubs nobody runs and moves back what the ring gives this node.
//!
//! A dynamic quorum also changes with time alone (lost nodes age out of its threshold), so it
//! is re-judged on a timer.

use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;

use super::CoordinatorState;
use crate::cluster::wire::WireMsg;
use crate::core::quorum::{PartitionTolerance, QuorumTracker, Verdict};
use crate::events::HubEvent;
use crate::hub::protocol::{ChildSupMsg, ClusterMsg, CoordinatorMsg};
use crate::model::NodeName;

/// How often a dynamic quorum is re-judged at most (a quarter of its threshold, within these).
const QUORUM_TICK_MIN: Duration = Duration::from_millis(50);
const QUORUM_TICK_MAX: Duration = Duration::from_secs(5);

/// How long a restarted Coordinator gives its peers to reconnect before it judges quorum again.
const QUORUM_RECHECK: Duration = Duration::from_secs(2);

impl CoordinatorState {
    /// The tracker of a Coordinator that starts with no peer, and whether it took over a
    /// predecessor's (a restarted Coordinator goes on from the losses and the largest
    /// membership its predecessor saw). A strategy that starts partitioned (a static quorum
    /// with `startup_confirm`, a majority of a larger configured cluster) refuses work until
    /// enough peers are up; it stops no child here: a restarted Coordinator is told its peers
    /// again, and judges quorum once more after [`QUORUM_RECHECK`].
    pub(super) fn new_quorum(&self) -> (QuorumTracker, bool) {
        if let Some(saved) = self.hub.partition.saved_tracker() {
            self.hub.partition.set_partitioned(saved.is_partitioned());
            return (saved, true);
        }
        let tracker = QuorumTracker::new(self.hub.config.partition_tolerance.clone(), 1);
        if self.hub.partition.set_partitioned(tracker.is_partitioned()) && tracker.is_partitioned()
        {
            tracing::info!("no quorum yet: starts and stops are refused until enough peers are up");
        }
        self.hub.partition.save_tracker(&tracker);
        (tracker, false)
    }

    /// A restarted Coordinator judges quorum again once its peers had time to reconnect.
    pub(super) fn arm_quorum_recheck(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if std::mem::take(&mut cluster.quorum_recheck) {
            if let Some(t) = cluster.quorum_timer.take() {
                t.abort();
            }
            cluster.quorum_timer = Some(myself.send_after(QUORUM_RECHECK, || {
                CoordinatorMsg::Cluster(ClusterMsg::QuorumTick)
            }));
        }
    }

    /// `node` went down: judges quorum with the members left.
    pub(super) fn quorum_node_down(&mut self, myself: &ActorRef<CoordinatorMsg>, node: &NodeName) {
        let now = self.hub.mono_ms();
        let members = self.quorum_members();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let verdict = cluster.quorum.node_down(node, now, members);
        self.on_verdict(myself, verdict);
        self.arm_quorum_tick(myself);
    }

    /// `node` came up: judges quorum with it.
    pub(super) fn quorum_node_up(&mut self, myself: &ActorRef<CoordinatorMsg>, node: &NodeName) {
        let now = self.hub.mono_ms();
        let members = self.quorum_members();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let verdict = cluster.quorum.node_up(node, now, members);
        self.on_verdict(myself, verdict);
    }

    /// The members quorum counts changed without a member going (a suspect vouched for, or
    /// a link dropped): judges quorum again.
    pub(super) fn quorum_recount(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let now = self.hub.mono_ms();
        let members = self.quorum_members();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let verdict = cluster.quorum.tick(now, members);
        self.on_verdict(myself, verdict);
        self.arm_quorum_tick(myself);
    }

    /// The cluster was made smaller on purpose: a majority quorum is counted of `size` members
    /// from now on (a static quorum keeps its configured size).
    pub(super) fn reset_cluster_size(&mut self, myself: &ActorRef<CoordinatorMsg>, size: usize) {
        let members = self.quorum_members();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        tracing::info!(size, members, "cluster size reset");
        let verdict = cluster.quorum.reset_cluster_size(size, members);
        self.on_verdict(myself, verdict);
    }

    /// The dynamic quorum's timer: lost nodes may have aged out of the threshold.
    pub(super) fn on_quorum_tick(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let now = self.hub.mono_ms();
        let members = self.quorum_members();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        cluster.quorum_timer = None;
        let verdict = cluster.quorum.tick(now, members);
        self.on_verdict(myself, verdict);
        self.arm_quorum_tick(myself);
    }

    fn arm_quorum_tick(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let PartitionTolerance::DynamicQuorum {
            threshold_time_ms, ..
        } = self.hub.config.partition_tolerance
        else {
            return;
        };
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if cluster.quorum_timer.is_some() || !cluster.quorum.is_partitioned() {
            return;
        }
        let every =
            (Duration::from_millis(threshold_time_ms) / 4).clamp(QUORUM_TICK_MIN, QUORUM_TICK_MAX);
        cluster.quorum_timer =
            Some(myself.send_after(every, || CoordinatorMsg::Cluster(ClusterMsg::QuorumTick)));
    }

    fn on_verdict(&mut self, myself: &ActorRef<CoordinatorMsg>, verdict: Verdict) {
        if let Some(cluster) = &self.cluster {
            self.hub.partition.save_tracker(&cluster.quorum);
        }
        match verdict {
            Verdict::Unchanged => {}
            Verdict::Lost => self.enter_partition_mode(),
            Verdict::Regained => self.leave_partition_mode(myself),
        }
    }

    fn enter_partition_mode(&mut self) {
        let hub = self.hub.clone();
        if !hub.partition.set_partitioned(true) {
            return;
        }
        let members = self.hub.members();
        tracing::warn!(
            ?members,
            children = hub.local_children.len(),
            "quorum lost: partition mode; stopping this node's children, refusing starts and stops"
        );
        hub.events
            .publish(|| HubEvent::PartitionModeEntered { members });
        if hub.has_bug(crate::hub::shared::simulation::InjectedBug::KeepChildrenWithoutQuorum) {
            return;
        }
        // The ChildSupervisor stops what runs when it handles this (a batch in progress
        // included); one restarting reads the flag in its restore.
        if let Some(supervisor) = hub.child_supervisor() {
            let _ = supervisor.cast(ChildSupMsg::ReleaseAll);
        }
    }

    fn leave_partition_mode(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let hub = self.hub.clone();
        if !hub.partition.set_partitioned(false) {
            return;
        }
        let members = self.hub.members();
        tracing::info!(?members, "quorum regained: leaving partition mode");
        hub.events.publish(|| HubEvent::PartitionModeLeft {
            members: members.clone(),
        });
        if let Some(t) = self.cluster.as_mut().and_then(|c| c.quorum_timer.take()) {
            t.abort();
        }
        if !hub.partition.set_aside() {
            self.resume_after_release(myself);
        }
    }

    /// This node runs children again (quorum regained, or back from being set aside): it asks
    /// every peer for its registry, and the pass those registries trigger re-places the stubs
    /// nobody runs and moves back what the ring gives this node.
    pub(super) fn resume_after_release(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let hub = self.hub.clone();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        // The pass waits for the peers' registries: each one that arrives (`Synced`) is a join
        // event of the batch, so the pass sees what the majority re-placed before it re-places
        // a stub itself. With no peer left, this node's own stubs still get their pass.
        for peer in cluster.peers.clone() {
            if let Err(e) = cluster.transport.send(&peer, &WireMsg::SyncRequest) {
                tracing::debug!(%peer, error = %e, "sync request not sent");
            }
        }
        if cluster.peers.is_empty() {
            cluster
                .joins
                .on_event(hub.node.clone(), Instant::now().into_std());
        }
        self.arm_flush(myself);
        if !self.cluster.as_ref().is_some_and(|c| c.failed.is_empty()) {
            self.retry_failed(myself);
        }
    }
}
