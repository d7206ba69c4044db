//! The run's operations: the next one the workload or the partial faults draw, and carrying
//! it out on the cluster.

use super::*;

impl Run {
    /// The partial fault that strikes or heals now, in a run that draws them.
    pub(super) fn next_partial(&mut self) -> Option<Op> {
        let (now, up) = (self.trace.now_ms(), self.cluster.up());
        match self.partial.as_mut()?.next(now, &up)? {
            crate::sim::partial::Change::Strike(fault) => Some(Op::Partial { fault }),
            crate::sim::partial::Change::Heal(fault) => Some(Op::EndPartial { fault }),
        }
    }

    pub(super) fn next_op(&mut self) -> Op {
        let up = self.cluster.up();
        let down = self.cluster.down();
        let running: BTreeSet<ChildId> = self.cluster.running().into_keys().collect();
        let durable = lock(&self.live_durable).clone();
        let world = WorldView {
            up: &up,
            down: &down,
            all: self.cluster.nodes.len(),
            plain: &self.live_plain,
            durable: &durable,
            running: &running,
            partial_partitions: self.quorum(),
        };
        self.workload.next(&mut self.rng, &world)
    }

    pub(super) async fn apply(&mut self, op: Op) {
        if matches!(
            op,
            Op::Heal
                | Op::Partial { .. }
                | Op::EndPartial { .. }
                | Op::Partition { .. }
                | Op::Restart { .. }
                | Op::Join { .. }
                | Op::Outage
        ) {
            self.note_sides_changed();
        }
        match op {
            Op::Start {
                node,
                ids,
                durable,
                guided,
            } => self.start(&node, ids, durable, guided),
            Op::Stop { node, id, durable } => self.stop(&node, id, durable),
            Op::CallChild { node, id } => self.call(&node, id),
            Op::CastChild { node, id } => {
                if let Some(hub) = self.cluster.hub(&node) {
                    let _ = hub.cast_child(id, b"cast".to_vec());
                }
            }
            Op::TypedCall { node, id } => {
                if let Some(hub) = self.cluster.hub(&node) {
                    self.next_message += 1;
                    let request = lock(&self.ledger).issue(
                        format!("typed call {id}"),
                        &node,
                        self.trace.now_ms(),
                    );
                    let ledger = self.ledger.clone();
                    messaging::typed_call(
                        hub,
                        id,
                        self.next_message,
                        &self.messages,
                        &self.trace,
                        move || lock(&ledger).answered(request),
                    );
                }
            }
            Op::TypedCast { node, id } => {
                if let Some(hub) = self.cluster.hub(&node) {
                    self.next_message += 1;
                    messaging::typed_cast(hub, id, 0, self.next_message, &self.trace);
                }
            }
            Op::Monitor { node, id, cancel } => {
                if let Some(hub) = self.cluster.hub(&node) {
                    messaging::monitor(hub, id, cancel, &self.messages, &self.trace);
                }
            }
            Op::FailActor { node, actor } => {
                if let Some(hub) = self.cluster.hub(&node) {
                    let shared = hub.shared();
                    let cell = match actor {
                        "registry" => shared.registry().map(|r| r.get_cell()),
                        "child_supervisor" => shared.child_supervisor().map(|r| r.get_cell()),
                        "coordinator" => shared.coordinator().map(|r| r.get_cell()),
                        "declared_leader" => shared.declared_leader().map(|r| r.get_cell()),
                        _ => shared.reconciler().map(|r| r.get_cell()),
                    };
                    if let Some(cell) = cell {
                        cell.kill();
                    }
                }
            }
            Op::FailChild { id } => {
                for node in self.cluster.up() {
                    let hub = self.cluster.hub(&node).cloned();
                    if let Some(child) = hub.and_then(|h| h.local_child_ref::<SimChildMsg>(&id)) {
                        let _ = child.cast(SimChildMsg::Fail);
                    }
                }
            }
            Op::Crash { node } => self.cluster.crash(&node).await,
            Op::Outage => {
                self.gone_in_outage.extend(self.live_plain.iter().cloned());
                for node in self.cluster.up() {
                    self.cluster.crash(&node).await;
                }
                for node in self.cluster.down() {
                    if let Err(e) = self.cluster.restart(&node, false).await {
                        self.trace
                            .line(format!("restart of {} failed: {e}", short(&node)));
                    }
                }
            }
            Op::Restart { node, lose_disk } => {
                if let Err(e) = self.cluster.restart(&node, lose_disk).await {
                    self.trace
                        .line(format!("restart of {} failed: {e}", short(&node)));
                }
            }
            Op::Join { node } => {
                if let Err(e) = self.cluster.add(short(&node)).await {
                    self.trace
                        .line(format!("join of {} failed: {e}", short(&node)));
                }
            }
            Op::Leave { node } => self.cluster.leave(&node).await,
            Op::LeaveTogether { nodes } => {
                // A flapping link is not clean: it may cut the goodbyes just after the leave
                // starts (seed 2474 under `majority-quorum:5`).
                let clean = messaging::links_clean(&self.cluster, &nodes);
                let before = lock(&self.ledger).handovers.len();
                self.cluster.leave_together(&nodes).await;
                let handovers = lock(&self.ledger).handovers[before..].to_vec();
                if let Err(v) = messaging::judge_handovers(&nodes, &clean, &handovers) {
                    self.found.get_or_insert(v);
                }
            }
            Op::Partition { groups } => {
                self.cluster.partition(&groups);
                if let Some(book) = &self.book {
                    lock(book).set_split(true);
                }
            }
            Op::Cut { a, b } => self.cluster.router.cut(&a, &b),
            Op::Partial { fault } => self.cluster.strike(&fault, &self.sides_changed),
            Op::EndPartial { fault } => self.cluster.end(&fault),
            Op::Heal => {
                self.cluster.heal();
                if let Some(partial) = &mut self.partial {
                    partial.healed();
                }
                if let Some(book) = &self.book {
                    lock(book).set_split(false);
                }
            }
            Op::FaultLink { from, to, faults } => self.cluster.fault_link(&from, &to, faults),
            Op::DropBurst { probability } => self.cluster.router.set_drop_probability(probability),
            Op::SlowDisk { node, latency_ms } => {
                if let Some(n) = self.cluster.nodes.get(&node) {
                    n.disks()
                        .for_each(|d| d.set_latency(Duration::from_millis(latency_ms)));
                }
            }
            Op::FullDisk { node, full } => {
                if let Some(n) = self.cluster.nodes.get(&node) {
                    n.disk.set_full(full);
                }
            }
            Op::SkewClock { node, skew_ms } => {
                if let Some(n) = self.cluster.nodes.get(&node) {
                    n.clock.set_skew(skew_ms);
                }
            }
            Op::Hostile { from, to, frame } => {
                let bytes = crate::sim::hostile::frame_bytes(&from, &frame);
                let _ = self.cluster.router.inject_frame(
                    crate::sim::cluster::SIM_HUB,
                    &from,
                    &to,
                    bytes,
                );
            }
            Op::Idle => {}
        }
    }
}
