//! The plan a redistribution pass carries out: made when it runs, or made ahead during a
//! node's grace for the pass at its end ([`ReadAhead`]).

use std::collections::BTreeSet;

use super::cluster::ClusterState;
use super::CoordinatorState;
use crate::core::placement::HashRing;
use crate::core::read_ahead::{DeclaredBasis, PassInputs, ReadAhead};
use crate::core::redistribution::{
    may_plan, plan_replicated_redistribution, Liveness, RedistributionPlan,
};
use crate::hub::HubShared;
use crate::model::{NodeName, Row};

/// The inputs of a pass run now and its plan: the one made during the grace when nothing it
/// depends on changed since, else one made from a walk of the store.
pub(super) fn pass_plan(
    hub: &HubShared,
    cluster: &mut ClusterState,
    declared: &DeclaredBasis,
) -> (PassInputs, RedistributionPlan) {
    let in_grace = cluster.grace_timers.keys().cloned().collect();
    let inputs = pass_inputs(hub, cluster, in_grace);
    let walk = std::time::Instant::now();
    let ahead = cluster.read_ahead.take().and_then(|ahead| {
        ahead.take_if(hub.storage.generation(), &inputs, declared, |id| {
            hub.storage.contains(id)
        })
    });
    let planned_ahead = ahead.is_some();
    let plan = match ahead {
        Some(plan) => plan,
        None => plan_now(hub, &cluster.ring, &inputs, declared),
    };
    tracing::debug!(
        planned = plan.migrating() + plan.replacing(),
        planned_ahead,
        took_us = walk.elapsed().as_micros() as u64,
        "redistribution pass: planned"
    );
    (inputs, plan)
}

/// What a pass with `inputs` under `declared` does, planned from the rows that can move.
fn plan_now(
    hub: &HubShared,
    ring: &HashRing,
    inputs: &PassInputs,
    declared: &DeclaredBasis,
) -> RedistributionPlan {
    let rows = rows_that_can_move(hub, ring, inputs);
    let live = Liveness {
        me: &hub.node,
        up: &inputs.up,
        in_grace: &inputs.in_grace,
    };
    plan_replicated_redistribution(
        rows,
        ring,
        inputs.factor,
        live,
        declared.knowledge(),
        &inputs.busy,
    )
}

/// What a pass knows of the declared list now: none without auto-recovery, a copy it cannot
/// trust while parked or behind a peer, else the copy published.
pub(super) fn declared_basis(hub: &HubShared) -> DeclaredBasis {
    let Some(recovery) = &hub.recovery else {
        return DeclaredBasis::Off;
    };
    let snapshot = recovery.snapshot();
    let behind = !recovery.ahead_of_me(&hub.peers()).is_empty();
    if snapshot.parked || behind {
        DeclaredBasis::Untrusted
    } else {
        DeclaredBasis::Current(snapshot.list)
    }
}

/// What the pass's choice of rows depends on besides the rows, with `in_grace` the nodes it
/// counts as within their grace.
fn pass_inputs(
    hub: &HubShared,
    cluster: &ClusterState,
    in_grace: BTreeSet<NodeName>,
) -> PassInputs {
    PassInputs {
        ring: cluster.ring.members().cloned().collect(),
        up: cluster.peers.clone(),
        in_grace,
        busy: cluster
            .migrating
            .iter()
            .chain(cluster.failed.keys())
            .cloned()
            .chain(hub.replicas_stopping())
            // The children this node ran before it booted wait for the boot hold to end.
            .chain(hub.boot_held())
            .collect(),
        factor: hub.config.replication_factor,
    }
}

/// The rows a pass with `inputs` plans from, in id order, as a pass over every row would meet
/// them. Only the rows that can move are read whole: chosen from the ids and bindings
/// (`may_plan`), which the store reads without unpacking a row.
fn rows_that_can_move(hub: &HubShared, ring: &HashRing, inputs: &PassInputs) -> Vec<Row> {
    let live = Liveness {
        me: &hub.node,
        up: &inputs.up,
        in_grace: &inputs.in_grace,
    };
    let mut rows = hub.storage.rows_where(&mut |p| {
        let bound = p.nodes.iter().map(|(node, _)| *node);
        may_plan(p.id, bound, ring, inputs.factor, live, &inputs.busy)
    });
    rows.sort_unstable_by(|a, b| a.spec.id.cmp(&b.spec.id));
    rows
}

impl CoordinatorState {
    /// Half-way through `node`'s grace: makes the plan the pass at its end will make, as it
    /// will make it ([`ReadAhead`]), so that the pass need not walk the store and plan when
    /// nothing changed in between.
    pub(super) fn read_ahead(&mut self, node: &NodeName) {
        let hub = self.hub.clone();
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let in_its_grace = !cluster.peers.contains(node) && cluster.grace_timers.contains_key(node);
        if !in_its_grace || cluster.self_leaving || hub.partition.partitioned() {
            return;
        }
        let Some(generation) = hub.storage.generation() else {
            return;
        };
        let in_grace = cluster
            .grace_timers
            .keys()
            .filter(|n| *n != node)
            .cloned()
            .collect();
        let inputs = pass_inputs(&hub, cluster, in_grace);
        let declared = declared_basis(&hub);
        let plan = plan_now(&hub, &cluster.ring, &inputs, &declared);
        // A write while the rows were read: the pass plans itself.
        cluster.read_ahead = (hub.storage.generation() == Some(generation))
            .then(|| ReadAhead::new(generation, inputs, declared, plan));
        tracing::debug!(
            peer = %node,
            planned = cluster.read_ahead.as_ref().map(ReadAhead::len),
            "planned ahead what moves when the grace ends"
        );
    }
}
