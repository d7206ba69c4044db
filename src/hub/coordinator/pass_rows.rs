//! The rows a redistribution pass plans from: read when it runs, or read ahead during a
//! node's grace for the pass at its end ([`ReadAhead`]).

use std::collections::BTreeSet;

use super::cluster::ClusterState;
use super::CoordinatorState;
use crate::core::placement::HashRing;
use crate::core::read_ahead::{PassInputs, ReadAhead};
use crate::core::redistribution::{may_plan, Liveness};
use crate::hub::HubShared;
use crate::model::{NodeName, Row};

/// The inputs of a pass run now and the rows it plans from: those read during the grace when
/// nothing changed since, else a walk of the store.
pub(super) fn pass_rows(hub: &HubShared, cluster: &mut ClusterState) -> (PassInputs, Vec<Row>) {
    let in_grace = cluster.grace_timers.keys().cloned().collect();
    let inputs = pass_inputs(hub, cluster, in_grace);
    // The rows read during the grace when nothing changed since, else a walk of the store.
    let walk = std::time::Instant::now();
    let ahead = cluster.read_ahead.take().and_then(|ahead| {
        ahead.take_if(hub.storage.generation(), &inputs, |id| {
            hub.storage.contains(id)
        })
    });
    let read_ahead = ahead.is_some();
    let rows = match ahead {
        Some(rows) => rows,
        None => rows_that_can_move(hub, &cluster.ring, &inputs),
    };
    tracing::debug!(
        read = rows.len(),
        read_ahead,
        took_us = walk.elapsed().as_micros() as u64,
        "redistribution pass: rows that can move"
    );
    (inputs, rows)
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
    /// Half-way through `node`'s grace: reads the rows the pass at its end will read, as it
    /// will read them ([`ReadAhead`]), so that the pass need not walk the store when nothing
    /// changed in between.
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
        let rows = rows_that_can_move(&hub, &cluster.ring, &inputs);
        // A write while the rows were read: the pass walks the store itself.
        cluster.read_ahead = (hub.storage.generation() == Some(generation))
            .then(|| ReadAhead::new(generation, inputs, rows));
        tracing::debug!(
            peer = %node,
            rows = cluster.read_ahead.as_ref().map(ReadAhead::len),
            "read ahead the rows that can move when the grace ends"
        );
    }
}
