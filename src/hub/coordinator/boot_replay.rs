//! The boot hold carried out (`core::boot_rows`): the children this node ran before it booted,
//! as its disk backend kept their rows, are left out of its redistribution passes until the
//! hold ends; then, with `recovery_replay` on, this node restarts those that no live node runs,
//! on their ring owners.
//!
//! The Coordinator checks the hold on a timer (armed at start, again until the hold ends): the
//! hold ends with replay on once `recovery_replay_wait_ms` passed, every peer that came up
//! delivered its registry and, on a node given seeds, at least one peer did (never while it
//! heard nobody, isolated or not), so a child a peer re-placed while this node was down is seen
//! running there and not started twice; with replay off (auto-recovery) once the first
//! reconcile round completed, which restored the declared children.

use std::collections::BTreeSet;
use std::time::Duration;

use ractor::ActorRef;

use super::cluster::{Cause, Internal};
use super::rebalance::batches;
use super::CoordinatorState;
use crate::core::boot_rows::plan_replay;
use crate::core::placement::HashRing;
use crate::core::recovery::RecoveryState;
use crate::core::redistribution::Liveness;
use crate::events::MoveReason;
use crate::hub::protocol::{ClusterMsg, CoordinatorMsg};
use crate::model::{NodeName, Row};

/// How often a due hold is checked again while it waits for a peer's registry or the first
/// reconcile round.
const RECHECK: Duration = Duration::from_millis(100);

impl CoordinatorState {
    /// Arms the next check of the boot hold, if there is one.
    pub(super) fn arm_boot_hold(&self, myself: &ActorRef<CoordinatorMsg>) {
        let due = match self
            .hub
            .boot_hold
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            Some(hold) => hold.due_ms,
            None => return,
        };
        let now = self.hub.clock.now_ms();
        let after = if due > now {
            Duration::from_millis(due - now)
        } else {
            RECHECK
        };
        myself.send_after(after, || CoordinatorMsg::Cluster(ClusterMsg::BootHoldCheck));
    }

    /// Ends the boot hold when it may end (and carries out its replay), else checks again later.
    pub(super) fn check_boot_hold(&mut self, myself: &ActorRef<CoordinatorMsg>) {
        let now = self.hub.clock.now_ms();
        let settled = self.cluster.as_ref().is_none_or(|c| c.settled());
        let recovered = self
            .hub
            .recovery
            .as_ref()
            .is_none_or(|r| r.state.current() == RecoveryState::Normal);
        let hold = {
            let mut slot = self.hub.boot_hold.lock().unwrap_or_else(|e| e.into_inner());
            match slot.as_mut() {
                None => return,
                Some(hold) if !hold.released(now, settled, recovered) => {
                    if now >= hold.due_ms && hold.waits_for_peer() && !hold.wait_logged {
                        hold.wait_logged = true;
                        tracing::warn!(
                            children = hold.hosted.len(),
                            "recovery replay waits for a peer: this node was given seeds and has \
                             heard none, and its cluster may run these children without it; they \
                             are restarted once a peer delivers its registry (see health's \
                             unreached_seeds); a node meant to run alone is started without seeds"
                        );
                    }
                    None
                }
                Some(_) => slot.take(),
            }
        };
        let Some(hold) = hold else {
            self.arm_boot_hold(myself);
            return;
        };
        tracing::info!(
            children = hold.hosted.len(),
            replay = hold.replay,
            "boot hold ended: the children this node ran before it booted are no longer held"
        );
        if !hold.replay {
            // The reconcile restored what is declared; a pass places what is left as usual.
            self.redistribute(myself, &[], &[]);
            return;
        }
        if self.hub.partition.partitioned() {
            // Nothing starts on a side without quorum: leaving partition mode runs a pass.
            return;
        }
        let rows: Vec<Row> = hold
            .hosted
            .iter()
            .filter_map(|id| self.hub.storage.get(id))
            .collect();
        let me = self.hub.node.clone();
        let alone = (
            BTreeSet::new(),
            BTreeSet::new(),
            HashRing::new([me.clone()]),
        );
        let (up, in_grace, ring): (&BTreeSet<NodeName>, BTreeSet<NodeName>, &HashRing) =
            match &self.cluster {
                Some(cluster) => (
                    &cluster.peers,
                    cluster.grace_timers.keys().cloned().collect(),
                    &cluster.ring,
                ),
                None => (&alone.0, alone.1.clone(), &alone.2),
            };
        let busy: BTreeSet<_> = self
            .cluster
            .as_ref()
            .map(|c| c.migrating.iter().chain(c.failed.keys()).cloned().collect())
            .unwrap_or_default();
        let live = Liveness {
            me: &me,
            up,
            in_grace: &in_grace,
        };
        let waiting: Vec<&Row> = rows.iter().filter(|r| !busy.contains(&r.spec.id)).collect();
        let plan = plan_replay(waiting, ring, self.hub.config.replication_factor, live);
        let replacing = plan.replacing();
        tracing::info!(
            held = hold.hosted.len(),
            restarting = replacing,
            "recovery replay: restarting the children this node's rows say it ran"
        );
        if replacing == 0 {
            return;
        }
        let replace: Vec<(NodeName, Row)> = plan
            .replacements
            .into_iter()
            .flat_map(|(owner, rows)| rows.into_iter().map(move |r| (owner.clone(), r)))
            .collect();
        if let Some(cluster) = &mut self.cluster {
            cluster
                .migrating
                .extend(replace.iter().map(|(_, r)| r.spec.id.clone()));
        }
        let by_node = batches(replace.iter().map(|(n, r)| (n, r)));
        let rows = replace
            .into_iter()
            .map(|(_, r)| (r.spec.id.clone(), r))
            .collect();
        let cause = Cause::Replaced {
            why: MoveReason::NodeDown,
        };
        self.start_internal(myself, by_node, Internal::Replace { rows, cause });
    }
}
