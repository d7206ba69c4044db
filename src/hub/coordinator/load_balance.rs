//! Load-based placement carried out (`Distribution::LoadBalanced`): the report timer, the
//! leader's table and rebalance plan, and the busiest node's moves. The decisions are
//! `core::load`'s; this file samples, sends and moves.

use std::time::Duration;

use ractor::ActorRef;

use super::CoordinatorState;
use crate::cluster::wire::WireMsg;
use crate::config::Distribution;
use crate::core::guided::Guided;
use crate::core::load::plan_rebalance;
use crate::events::MoveReason;
use crate::hub::protocol::{ClusterMsg, CoordinatorMsg, RegistryOp};
use crate::model::{NodeName, Row};

/// Report intervals the leader lets pass after asking for a move before it plans another.
const REBALANCE_COOLDOWN_TICKS: u32 = 2;

impl CoordinatorState {
    /// Arms the next load report (only with `Distribution::LoadBalanced`).
    pub(in crate::hub) fn arm_load_timer(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        if self.hub.config.distribution != Distribution::LoadBalanced {
            return;
        }
        let period = Duration::from_millis(self.hub.config.load_balancer.push_interval_ms);
        if let Some(cluster) = &mut self.cluster {
            let timer = myself.send_after(period, || CoordinatorMsg::Cluster(ClusterMsg::LoadTick));
            if let Some(old) = cluster.load_timer.replace(timer) {
                old.abort();
            }
        }
    }

    /// Every report interval: a member sends its load to the leader; the leader folds in its
    /// own, sends the table to every member, and asks the busiest member to move children when
    /// the cluster is uneven past the threshold.
    pub(super) fn on_load_tick(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        self.arm_load_timer(myself);
        let hub = self.hub.clone();
        let Some(transport) = self.cluster.as_ref().map(|c| c.transport.clone()) else {
            return;
        };
        let mut sample = hub
            .loads
            .sample(hub.local_children.len(), hub.measures_host_load());
        sample.moving = self
            .cluster
            .as_ref()
            .map_or(0, |c| (c.migrating.len() + c.failed.len()) as u64);
        let Some(leader) = hub.leader() else {
            return;
        };
        if leader != hub.node {
            // Reports gathered while this node led are stale by the time it leads again.
            hub.loads.forget_reports();
            if let Err(e) = transport.send(&leader, &WireMsg::LoadReport { sample }) {
                tracing::debug!(%leader, error = %e, "load report not sent");
            }
            return;
        }
        let config = &hub.config.load_balancer;
        hub.loads.note_report(&hub.node, sample, config.decay());
        let members = self.hub.placeable_members();
        let loads = hub.loads.leader_table(&members);
        if let Err(e) = transport.broadcast(&WireMsg::LoadTable { loads }) {
            tracing::debug!(error = %e, "load table not sent");
        }
        let Some(threshold) = config.rebalance_threshold() else {
            return;
        };
        if hub.partition.partitioned() {
            return; // this side moves nothing until quorum returns
        }
        if let Some(cluster) = &mut self.cluster {
            // The reports of the interval after a move may predate it: acting on them would
            // move the same imbalance twice.
            if cluster.load_cooldown > 0 {
                cluster.load_cooldown -= 1;
                return;
            }
        }
        let counts = hub.loads.children_counts(&members);
        if counts.len() < members.len() {
            return; // not every member has reported yet
        }
        if hub.loads.moves_under_way(&members) {
            return; // counts taken mid-move would send the same children twice
        }
        let Some(plan) = plan_rebalance(&counts, threshold, u64::from(config.rebalance_batch))
        else {
            return;
        };
        tracing::debug!(from = %plan.from, to = %plan.to, count = plan.count, ?counts, "load rebalance asked");
        if let Some(cluster) = &mut self.cluster {
            cluster.load_cooldown = REBALANCE_COOLDOWN_TICKS;
        }
        if plan.from == hub.node {
            self.rebalance_out(myself, &leader, plan.to, plan.count);
        } else if let Err(e) = transport.send(
            &plan.from,
            &WireMsg::Rebalance {
                to: plan.to.clone(),
                count: plan.count,
            },
        ) {
            tracing::debug!(node = %plan.from, error = %e, "rebalance request not sent");
        }
    }

    /// The leader (`from`) asked this node to move `count` of its children placed by load to
    /// `to`: the lowest ids that run here, are not moving already and do not run on `to`, each
    /// re-recorded on `to` in place of this node. Refused while a move is still under way here
    /// (the leader asks again after the next reports), or when `from` is not the leader or
    /// `to` not a member.
    pub(super) fn rebalance_out(
        &mut self,
        myself: &ActorRef<CoordinatorMsg>,
        from: &NodeName,
        to: NodeName,
        count: u64,
    ) {
        let hub = self.hub.clone();
        let me = hub.node.clone();
        if hub.has_bug(crate::hub::simulation::InjectedBug::IgnoreRebalance)
            || hub.partition.partitioned()
        {
            return;
        }
        let config = &hub.config.load_balancer;
        if hub.config.distribution != Distribution::LoadBalanced
            || config.rebalance_threshold().is_none()
            || hub.leader().as_ref() != Some(from)
            || to == me
            || !self.hub.placeable_members().contains(&to)
        {
            tracing::debug!(%from, %to, "rebalance request ignored");
            return;
        }
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        if cluster.self_leaving || !cluster.migrating.is_empty() || !cluster.failed.is_empty() {
            tracing::debug!(%to, count, "rebalance deferred: moves under way");
            return;
        }
        // At most this node's own batch, whatever the request says.
        let count = count.min(u64::from(config.rebalance_batch));
        let stopping = hub.replicas_stopping();
        let mut ids: Vec<_> = hub
            .local_children
            .iter()
            .map(|e| e.key().clone())
            .filter(|id| !stopping.contains(id))
            .collect();
        ids.sort();
        let mut rows: Vec<Row> = Vec::new();
        for id in ids {
            if rows.len() as u64 >= count {
                break;
            }
            let Some(mut row) = hub.storage.get(&id) else {
                continue;
            };
            let Some(mut guided) = Guided::of(&row.metadata) else {
                continue;
            };
            if !guided.by_load || guided.nodes.contains(&to) || row.node_pids.contains_key(&to) {
                continue;
            }
            // Its slot: this node's, or (it fell back here from nodes that were gone) a slot of
            // a node it knows does not run it: unbound here, and a member or a node it heard
            // from before (its boot token is kept after it goes down), so seen go down.
            let known_idle = |n: &NodeName| {
                !row.node_pids.contains_key(n)
                    && (cluster.peers.contains(n) || cluster.tokens.get(n).is_some())
            };
            let slot = guided.load_slot(&me, known_idle);
            let Some(slot) = slot.and_then(|i| guided.nodes.get_mut(i)) else {
                continue;
            };
            *slot = to.clone();
            guided.write(&mut row.metadata);
            rows.push(row);
        }
        if rows.is_empty() {
            return;
        }
        tracing::info!(%to, moving = rows.len(), "moving children for load");
        cluster
            .migrating
            .extend(rows.iter().map(|r| r.spec.id.clone()));
        // A child moving cold is a stub between its stop here and its start there: every
        // node's copy names the new node first, so a node re-placing the stub meanwhile places
        // it there, never back here. (A hot move starts it there before it stops here.)
        let (hot, cold) = self.split_hot(rows);
        let reauthor: Vec<RegistryOp> = cold.iter().cloned().map(RegistryOp::Reauthor).collect();
        if !reauthor.is_empty() {
            self.registry_write(myself, reauthor, None);
        }
        self.migrate(
            myself,
            to,
            hot.into_iter().chain(cold).collect(),
            MoveReason::LoadImbalance,
        );
    }
}
