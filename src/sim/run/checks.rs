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
        let by_load = self.load_balanced();
        let recorded = self.recorded_owners_as_running_nodes_see(&running, &rings);
        let placements: Vec<(&NodeName, &ChildId, Option<&NodeName>)> = running
            .iter()
            .flat_map(|(id, nodes)| {
                let rings = &rings;
                let recorded = &recorded;
                nodes.keys().map(move |node| {
                    let owner = match guided.get(id) {
                        // A guided child that may fall back may stay wherever the ring put it.
                        Some((_, true)) => Some(node),
                        Some((on, false)) => Some(on),
                        // Placed by load: in place on any node its row records.
                        None if by_load => {
                            recorded
                                .get(&(node.clone(), id.clone()))
                                .and_then(|owners| {
                                    if owners.contains(node) {
                                        Some(node)
                                    } else {
                                        owners.first()
                                    }
                                })
                        }
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
        self.watch_doubles();
        if let Some(v) = self.found.take() {
            return Err(v);
        }
        if let Some(book) = &self.book {
            lock(book).check()?;
        }
        // Under active-active every replica is active by design: what holds there is that each
        // child runs on exactly its owners once settled (`registries_agree`, at quiescence).
        if replicas > 1
            && self.cluster.replication_model == crate::config::ReplicationModel::ActivePassive
        {
            one_active_replica(&self.active_replicas())?;
        }
        if self.quorum() {
            let minority_acks = lock(&self.ledger).minority_acks.clone();
            if !minority_acks.is_empty() {
                return Err(Violation {
                    invariant: super::super::invariants::Invariant::QuorumNoMinorityAck,
                    detail: format!(
                        "requests {minority_acks:?} were acknowledged by a node without quorum"
                    ),
                });
            }
            // A side is a connected component: the hub counts the members connected to it
            // through some path (a node it reaches only through another stays a member).
            let components: BTreeMap<NodeName, BTreeSet<NodeName>> = self
                .cluster
                .connected()
                .into_iter()
                .flat_map(|(side, _)| side.clone().into_iter().map(move |n| (n, side.clone())))
                .collect();
            let now = self.trace.now_ms();
            for (node, side) in &components {
                match super::super::split::lacks_quorum(
                    &self.cluster.partition_tolerance,
                    side.len(),
                ) {
                    Some(true) => {
                        self.minority_since.entry(node.clone()).or_insert(now);
                    }
                    _ => {
                        self.minority_since.remove(node);
                    }
                }
            }
            self.minority_since
                .retain(|n, _| components.contains_key(n));
            let sides = super::super::split::clean_sides(&components);
            self.split
                .observe(self.trace.now_ms(), sides.as_deref(), &running)?;
        }
        Ok(())
    }

    /// Whether `node` has been on a side without quorum for longer than the detection bound.
    /// (Judged again now: a node that joined within the step may have given it quorum.)
    pub(super) fn long_in_minority(&self, node: &str) -> bool {
        let side = self
            .cluster
            .connected()
            .into_iter()
            .find(|(side, _)| side.contains(node))
            .map_or(0, |(side, _)| side.len());
        let lacks = super::super::split::lacks_quorum(&self.cluster.partition_tolerance, side)
            == Some(true);
        lacks
            && self
                .minority_since
                .get(node)
                .is_some_and(|since| self.trace.now_ms().saturating_sub(*since) > SPLIT_BOUND_MS)
    }

    /// Whether a request made now through `node` is held to `quorum_no_minority_ack`, as
    /// its task will find it: a request task runs when the run next yields, after the rest of
    /// its burst; when an operation of that burst may have given `node`'s side quorum again
    /// (a heal, a new partition, a node restarted or joined), the hub takes the request with
    /// quorum restored, and acknowledging it is right (seeds 5004, 5012, 5079 forced to
    /// `majority-quorum:5`: a start or stop answered at the heal's or the restart's instant).
    pub(super) fn minority_watch(&self, node: &str) -> MinorityWatch {
        MinorityWatch {
            minority: self.long_in_minority(node),
            sides: self.sides_changed.clone(),
            issued: self.sides_changed.load(std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// Notes that the sides may have changed (what [`MinorityWatch::still`] looks at).
    pub(super) fn note_sides_changed(&self) {
        self.sides_changed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether this run's hubs keep a quorum (`partition_tolerance` other than divergence).
    pub(super) fn quorum(&self) -> bool {
        self.cluster.partition_tolerance != crate::config::PartitionTolerance::Divergence
    }

    /// Whether this run places children by load.
    pub(super) fn load_balanced(&self) -> bool {
        self.cluster.distribution == crate::config::Distribution::LoadBalanced
    }

    /// In a load-balanced run: for each running child and each node running it, the nodes the
    /// child's row on that node records (`core::replication::owners_of` over the node's ring).
    fn recorded_owners_as_running_nodes_see(
        &self,
        running: &BTreeMap<ChildId, BTreeMap<NodeName, Pid>>,
        rings: &BTreeMap<NodeName, HashRing>,
    ) -> BTreeMap<(NodeName, ChildId), Vec<NodeName>> {
        let mut out = BTreeMap::new();
        if !self.load_balanced() {
            return out;
        }
        for (id, nodes) in running {
            for node in nodes.keys() {
                let (Some(hub), Some(ring)) = (self.cluster.hub(node), rings.get(node)) else {
                    continue;
                };
                let metadata = hub.child_lookup_with_metadata(id).and_then(|i| i.metadata);
                if placed_by_load(metadata.as_ref()) {
                    // In place wherever it runs: its nodes gone, it fell back to the ring and
                    // stays there (as a guided child that may fall back).
                    out.insert((node.clone(), id.clone()), vec![node.clone()]);
                    continue;
                }
                let owners = crate::core::replication::owners_of(
                    ring,
                    id,
                    self.cluster.replicas,
                    metadata.as_ref(),
                    |n| ring.contains(n),
                );
                out.insert((node.clone(), id.clone()), owners);
            }
        }
        out
    }

    /// The load-balanced run's quiescent checks: each child where its row records, and no
    /// rebalance left undone.
    fn check_load_balanced(&self, views: &[NodeView], up: &[NodeName]) -> Result<(), Violation> {
        let Some(first) = views.first().and_then(|v| self.cluster.hub(&v.node)) else {
            return Ok(());
        };
        let ring = HashRing::new(up.iter().cloned());
        let copies = self.cluster.replicas.min(up.len()).max(1);
        let expected: BTreeMap<ChildId, BTreeSet<NodeName>> = views[0]
            .registry
            .iter()
            .map(|(id, on)| {
                let metadata = first
                    .child_lookup_with_metadata(id)
                    .and_then(|i| i.metadata);
                if may_fall_back(metadata.as_ref()) && on.len() == copies {
                    // Placed by load, or guided and allowed to fall back: on as many nodes as
                    // it has replicas, wherever a fallback to the ring left it.
                    return (id.clone(), on.keys().cloned().collect());
                }
                let owners = crate::core::replication::owners_of(
                    &ring,
                    id,
                    self.cluster.replicas,
                    metadata.as_ref(),
                    |n| up.contains(n),
                );
                (id.clone(), owners.into_iter().collect())
            })
            .collect();
        runs_where_recorded(views, &expected)?;
        let children: BTreeMap<NodeName, u64> = views
            .iter()
            .map(|v| (v.node.clone(), v.running.len() as u64))
            .collect();
        let threshold = first
            .shared()
            .config
            .load_balancer
            .rebalance_threshold()
            .unwrap_or(f64::INFINITY);
        no_rebalance_left_undone(&children, threshold, |from, to| {
            let Some(hub) = self.cluster.hub(from) else {
                return false;
            };
            let local: Vec<ChildId> = hub
                .shared()
                .local_children
                .iter()
                .map(|e| e.key().clone())
                .collect();
            local.iter().any(|id| {
                hub.child_lookup_with_metadata(id).is_some_and(|info| {
                    let placed = info
                        .metadata
                        .as_ref()
                        .and_then(crate::core::guided::Guided::of);
                    placed.is_some_and(|g| g.by_load && !g.nodes.contains(to))
                        && info.nodes.iter().any(|(n, _)| n == from)
                        && !info.nodes.iter().any(|(n, _)| n == to)
                })
            })
        })
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
        undeclared_stays_gone(&views, &self.gone_in_outage)?;
        let replicas = self.cluster.replicas;
        if self.load_balanced() {
            self.check_load_balanced(&views, &up)?;
        } else if replicas > 1 {
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
        super::super::invariants::answers_truthful(&ledger)?;
        Ok(superseded)
    }
}

/// Whether the row's metadata names nodes the child may leave for the ring when they are gone
/// (a guided start that allows it, and every placement by load).
fn may_fall_back(metadata: Option<&crate::model::Metadata>) -> bool {
    metadata
        .and_then(crate::core::guided::Guided::of)
        .is_some_and(|g| g.fallback)
}

/// Whether the row's metadata says the hub placed the child by load.
fn placed_by_load(metadata: Option<&crate::model::Metadata>) -> bool {
    metadata
        .and_then(crate::core::guided::Guided::of)
        .is_some_and(|g| g.by_load)
}

/// A request's standing under `quorum_no_minority_ack` ([`Run::minority_watch`]).
pub(super) struct MinorityWatch {
    minority: bool,
    sides: Arc<std::sync::atomic::AtomicU64>,
    issued: u64,
}

impl MinorityWatch {
    /// Whether the request, now that its task runs, comes through a node long without quorum:
    /// it did when it was made, and no operation since may have given its side quorum.
    pub(super) fn still(&self) -> bool {
        self.minority && self.sides.load(std::sync::atomic::Ordering::SeqCst) == self.issued
    }
}
