//! A node joining a running cluster, timed per kind of move: children whose kind hands its
//! state over move hot under `--migration hot`, the others move cold, in the same pass. So one
//! join measures both, side by side (`bench cluster --migration`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use process_hub::core::placement::HashRing;
use process_hub::ChildId;
use serde::Serialize;

use super::local_cluster::{wait_for, ClusterOptions, HarnessError, LocalCluster};

/// What one join moved, and how long each kind of move took.
#[derive(Debug, Clone, Serialize)]
pub struct JoinReport {
    /// The node that joined.
    pub joined: String,
    /// Children of a kind that hands its state over that the joiner took.
    pub moved_handover: usize,
    /// From the join until the joiner's registry shows it running every one of them.
    pub handover_ms: u64,
    /// `handover_ms` spread over the children it moved.
    pub handover_ms_per_child: f64,
    /// Children of a kind without handover that the joiner took (always a cold swap).
    pub moved_cold: usize,
    /// From the join until the joiner's registry shows it running every one of them.
    pub cold_swap_ms: u64,
    /// `cold_swap_ms` spread over the children it moved.
    pub cold_swap_ms_per_child: f64,
}

/// The ids of `ids` that `node` owns (is among the first `k` owners of) once it is a member
/// with `members`.
fn owned_by<'a>(
    ids: &'a [String],
    members: &[String],
    node: &str,
    k: usize,
) -> BTreeSet<&'a String> {
    let ring = HashRing::new(members.iter().cloned());
    ids.iter()
        .filter(|id| {
            ring.owners(&ChildId::from(id.as_str()), k)
                .iter()
                .any(|o| o.as_str() == node)
        })
        .collect()
}

/// Adds a node to `cluster` and times the moves to it: `handover` are ids of a kind that
/// hands its state over, `cold` of a kind that does not; `k` the replication factor.
pub fn measure_join(
    cluster: &mut LocalCluster,
    options: &ClusterOptions,
    handover: &[String],
    cold: &[String],
    k: usize,
    deadline: Duration,
) -> Result<JoinReport, HarnessError> {
    let began = Instant::now();
    let index = cluster.add_node(options)?;
    let joined = cluster.nodes[index].node_name.clone();
    let client = cluster.nodes[index].client();
    let mut members: Vec<String> = cluster
        .nodes
        .iter_mut()
        .filter_map(|n| n.is_running().then(|| n.node_name.clone()))
        .collect();
    members.sort();
    let want_handover = owned_by(handover, &members, &joined, k);
    let want_cold = owned_by(cold, &members, &joined, k);
    let (mut handover_at, mut cold_at) = (None, None);
    wait_for("the joiner to run every child it owns", deadline, || {
        let children = client.children().ok()?;
        let here: BTreeSet<&String> = children
            .iter()
            .filter(|c| c.nodes.iter().any(|n| n.node == joined))
            .map(|c| &c.id)
            .collect();
        if handover_at.is_none() && want_handover.iter().all(|id| here.contains(*id)) {
            handover_at = Some(began.elapsed());
        }
        if cold_at.is_none() && want_cold.iter().all(|id| here.contains(*id)) {
            cold_at = Some(began.elapsed());
        }
        (handover_at.is_some() && cold_at.is_some()).then_some(())
    })?;
    let ms = |d: Option<Duration>| d.unwrap_or_default().as_millis() as u64;
    let per = |total: u64, n: usize| if n == 0 { 0.0 } else { total as f64 / n as f64 };
    let (handover_ms, cold_swap_ms) = (ms(handover_at), ms(cold_at));
    Ok(JoinReport {
        joined,
        moved_handover: want_handover.len(),
        handover_ms,
        handover_ms_per_child: per(handover_ms, want_handover.len()),
        moved_cold: want_cold.len(),
        cold_swap_ms,
        cold_swap_ms_per_child: per(cold_swap_ms, want_cold.len()),
    })
}
