//! The run's checks: the invariants after every step and at quiescence, judged from what the
//! hubs show.

use super::*;

impl Run {
    /// The invariants that hold at every step.
    pub(super) fn check_always(&mut self) -> Result<(), Violation> {
        self.checks += 1;
        requests_answered(&lock(&self.ledger), false)?;
        if let Some(v) = self.found.take() {
            return Err(v);
        }
        lock(&self.messages).check()?;
        let mut versions = Vec::new();
        for node in self.cluster.nodes.values() {
            let Some(hub) = node.hub() else { continue };
            if let Some(view) = hub.declared_children().filter(|v| !v.parked) {
                versions.push(format!("{}:v{}", short(&node.name), view.version));
                self.versions
                    .observe(&node.name, node.disk_generation, view.version)?;
            }
        }
        self.trace.line(format!("versions {}", versions.join(" ")));
        let running = self.cluster.running();
        let mut rings: BTreeMap<NodeName, HashRing> = BTreeMap::new();
        for node in self.cluster.up() {
            let component = self.cluster.component_of(&node);
            rings.insert(node, HashRing::new(component));
        }
        let guided = &self.guided;
        let replicas = self.cluster.replicas;
        let placements: Vec<(&NodeName, &ChildId, Option<&NodeName>)> = running
            .iter()
            .flat_map(|(id, nodes)| {
                let rings = &rings;
                nodes.keys().map(move |node| {
                    let owner = match guided.get(id) {
                        // A guided child that may fall back may stay wherever the ring put it.
                        Some((_, true)) => Some(node),
                        Some((on, false)) => Some(on),
                        // A replica is in place on any of the child's owners.
                        None if replicas > 1 => rings.get(node).and_then(|r| {
                            let owners = r.owners(id, replicas);
                            if owners.contains(&node) {
                                Some(node)
                            } else {
                                owners.first().copied()
                            }
                        }),
                        None => rings.get(node).and_then(|r| r.owner(id)),
                    };
                    (node, id, owner)
                })
            })
            .collect();
        self.placement.observe(self.trace.now_ms(), placements)?;
        if let Some(book) = &self.book {
            lock(book).check()?;
        }
        if replicas > 1 {
            one_active_replica(&self.active_replicas())?;
        }
        Ok(())
    }

    /// Each child's active replicas as the nodes running them see it, with the members each
    /// of those nodes sees.
    pub(super) fn active_replicas(&self) -> BTreeMap<ChildId, Vec<(NodeName, Vec<NodeName>)>> {
        let mut active: BTreeMap<ChildId, Vec<(NodeName, Vec<NodeName>)>> = BTreeMap::new();
        for node in self.cluster.up() {
            let Some(hub) = self.cluster.hub(&node) else {
                continue;
            };
            let members = hub.nodes(true);
            let local: Vec<ChildId> = hub
                .shared()
                .local_children
                .iter()
                .map(|e| e.key().clone())
                .collect();
            for id in local {
                let Some(info) = hub.child_lookup_with_metadata(&id) else {
                    continue;
                };
                let roles = hub.replica_roles(
                    &id,
                    info.metadata.as_ref(),
                    info.nodes.iter().map(|(n, _)| n),
                );
                if roles
                    .iter()
                    .any(|(n, r)| *n == node && *r == crate::core::replication::Role::Active)
                {
                    active
                        .entry(id)
                        .or_default()
                        .push((node.clone(), members.clone()));
                }
            }
        }
        active
    }

    /// The invariants that hold once the cluster is whole and quiet.
    pub(super) fn check_quiescent(&mut self) -> Result<usize, Violation> {
        self.checks += 1;
        let up = self.cluster.up();
        let views: Vec<NodeView> = up
            .iter()
            .filter_map(|n| self.cluster.hub(n))
            .map(NodeView::of)
            .collect();
        registries_agree(&views)?;
        let replicas = self.cluster.replicas;
        if replicas > 1 {
            replicas_on_owners(&views, &up, replicas)?;
        } else {
            each_once_where_placed(&views, &up, &self.guided)?;
        }
        let ledger = lock(&self.ledger);
        let running: BTreeMap<ChildId, BTreeMap<NodeName, Pid>> = self.cluster.running();
        let superseded = match declared_lists_agree(&views)? {
            Some((stamp, children)) => {
                let verdict = judge_declared(&ledger, &stamp, &children)?;
                let copies = replicas.min(up.len()).max(1);
                declared_run_as_decided_with(
                    &running,
                    &children,
                    &ledger.durable,
                    &verdict.stopped,
                    copies,
                )?;
                verdict.superseded
            }
            None => 0,
        };
        requests_answered(&ledger, true)?;
        Ok(superseded)
    }
}
