//! One node's declared-list state as the DeclaredLeader actor will hold it: the adopted copy,
//! whether it is parked, and the effects each event calls for, in the order they must happen.
//!
//! The actor owns the IO (the store, the broadcast, the shipper, the hooks) and carries out the
//! returned [`DeclaredEffect`]s in order. The order encodes the promises of docs/recovery.md:
//! - a leader mutation is **persisted before it is acknowledged**, then broadcast, then shipped:
//!   `[Persist, Acknowledge, Broadcast, Ship]`;
//! - an adopted copy is persisted whole before the node plans a round from it;
//! - a parked node refuses mutations, plans parked rounds, and unparks only on a real copy or
//!   the operator's `clear`.
//!
//! [`choose_leader`] is the leader rule: the elector's choice when it is a member of the hub,
//! else the lexicographically lowest member.

use std::collections::BTreeSet;

use crate::core::boot::{restores_parked, BootDecision, ParkReason};
use crate::core::declared::delta::{DeclaredDelta, DeltaOutcome};
use crate::core::declared::list::{
    check_version, DeclaredChange, DeclaredError, DeclaredList, ImplausibleVersion, Tiebreak,
};
use crate::model::{ChildId, ChildSpec, Metadata, NodeName, Row};

/// Something the actor must do, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeclaredEffect {
    /// Persist one mutation (`DeclaredStore::save_change`) and wait until it is durable.
    PersistChange(DeclaredChange),
    /// Persist the whole current list (`DeclaredStore::save_whole`) and wait until it is durable.
    PersistWhole,
    /// Answer the caller of the mutation (only after the persist above succeeded).
    Acknowledge,
    /// Send the current list to the hub's other members.
    Broadcast,
    /// Offer the current list to the manifest shipper (leaders only).
    Ship,
    /// Fire `declared_tiebreak`.
    FireTiebreak(Tiebreak),
    /// Fire the alarm-grade `declared_parked`.
    FireParked(ParkReason),
    /// The park ended (a copy arrived or the operator cleared): log it, update health.
    Unparked,
    /// The offered copy's version is implausible ([`check_version`]): it was not weighed.
    /// Log it and count it.
    RefusedVersion(ImplausibleVersion),
}

/// What a leader's delta did to this node's state ([`DeclaredState::delta`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeltaReceipt {
    /// Applied: carry out these effects (persist the changes only, then ship if leading).
    Applied(Vec<DeclaredEffect>),
    /// Nothing to do: this copy already is the delta's result, or ranks above it.
    Ignored,
    /// This copy is not the delta's base (or the node is parked): fetch the sender's whole copy.
    NeedWhole,
    /// The delta's target version is implausible ([`check_version`]): nothing was changed.
    RefusedVersion(ImplausibleVersion),
}

/// The node's declared-list state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredState {
    node: NodeName,
    list: DeclaredList,
    parked: Option<ParkReason>,
}

impl DeclaredState {
    /// The state after the boot decision. `rows` are the registry rows (for a first-boot
    /// seed); `node` is this node's name.
    pub fn boot<'a>(
        node: &str,
        decision: BootDecision,
        rows: impl IntoIterator<Item = &'a Row>,
    ) -> (Self, Vec<DeclaredEffect>) {
        let mut state = Self {
            node: node.to_owned(),
            list: DeclaredList::new(),
            parked: None,
        };
        let effects = match decision {
            BootDecision::Adopt {
                list,
                source,
                tiebreak,
            } => {
                state.list = list;
                let mut effects = Vec::new();
                if source != crate::core::boot::CopySource::Local {
                    effects.push(DeclaredEffect::PersistWhole);
                }
                effects.extend(tiebreak.map(DeclaredEffect::FireTiebreak));
                effects
            }
            BootDecision::SeedFromRows => {
                let (list, rejected) = DeclaredList::seed_from_rows(rows, node);
                if !rejected.is_empty() {
                    tracing::warn!(
                        ?rejected,
                        "durable rows that are not permanent cannot be declared; not seeded"
                    );
                }
                state.list = list;
                vec![DeclaredEffect::PersistWhole]
            }
            BootDecision::StartEmpty => Vec::new(),
            BootDecision::Park(reason) => {
                state.parked = Some(reason.clone());
                vec![DeclaredEffect::FireParked(reason)]
            }
        };
        (state, effects)
    }

    /// The adopted copy (what `declared_children` answers).
    pub fn list(&self) -> &DeclaredList {
        &self.list
    }

    /// Why the node is parked, if it is (plan rounds parked while it is).
    pub fn parked(&self) -> Option<&ParkReason> {
        self.parked.as_ref()
    }

    /// The leader declares a child (a durable start, before the start itself).
    pub fn declare(
        &mut self,
        spec: ChildSpec,
        metadata: Metadata,
    ) -> Result<Vec<DeclaredEffect>, DeclaredError> {
        self.refuse_if_parked()?;
        let change = self.list.add(spec, metadata, &self.node)?;
        Ok(self.mutation_effects(change))
    }

    /// The leader undeclares a child (a deliberate stop, before the terminate).
    pub fn undeclare(&mut self, id: &ChildId) -> Result<Vec<DeclaredEffect>, DeclaredError> {
        self.refuse_if_parked()?;
        let change = self.list.remove(id, &self.node);
        Ok(self.mutation_effects(change))
    }

    /// The operator's `clear`: the empty list becomes the truth, one version above this copy,
    /// and a park ends.
    pub fn clear(&mut self) -> Vec<DeclaredEffect> {
        let change = self.list.clear(&self.node);
        let mut effects = self.mutation_effects(change);
        if self.parked.take().is_some() {
            effects.push(DeclaredEffect::Unparked);
        }
        effects
    }

    /// Another node's copy (a leader broadcast, a peer at join, a later manifest fetch).
    /// `is_leader`: this node ships what it adopts.
    pub fn offer(&mut self, offered: &DeclaredList, is_leader: bool) -> Vec<DeclaredEffect> {
        if let Err(refused) = check_version(self.list.version(), offered.version()) {
            return vec![DeclaredEffect::RefusedVersion(refused)];
        }
        let mut effects = Vec::new();
        if self.parked.is_some() {
            if !restores_parked(offered) {
                return effects;
            }
            self.parked = None;
            self.list = offered.clone();
            effects.push(DeclaredEffect::PersistWhole);
            effects.push(DeclaredEffect::Unparked);
        } else {
            let adoption = self.list.adopt(offered);
            if adoption.replaced() {
                effects.push(DeclaredEffect::PersistWhole);
            }
            effects.extend(
                adoption
                    .tiebreak()
                    .cloned()
                    .map(DeclaredEffect::FireTiebreak),
            );
            if !adoption.replaced() {
                return effects;
            }
        }
        if is_leader {
            effects.push(DeclaredEffect::Ship);
        }
        effects
    }

    /// A leader's delta (`WireMsg::DeclaredDelta`): applied only when this copy is exactly its
    /// base, and then persisted as the changes it made, not as a whole list. A parked node
    /// needs a whole copy (only a real copy restores it). `is_leader`: this node ships what it
    /// applies.
    pub fn delta(&mut self, delta: &DeclaredDelta, is_leader: bool) -> DeltaReceipt {
        if let Err(refused) = check_version(self.list.version(), delta.target.version) {
            return DeltaReceipt::RefusedVersion(refused);
        }
        if self.parked.is_some() {
            return DeltaReceipt::NeedWhole;
        }
        match self.list.apply_delta(delta) {
            DeltaOutcome::Applied(changes) => {
                let mut effects: Vec<DeclaredEffect> = changes
                    .into_iter()
                    .map(DeclaredEffect::PersistChange)
                    .collect();
                if is_leader {
                    effects.push(DeclaredEffect::Ship);
                }
                DeltaReceipt::Applied(effects)
            }
            DeltaOutcome::Ignored => DeltaReceipt::Ignored,
            DeltaOutcome::NeedWhole => DeltaReceipt::NeedWhole,
        }
    }

    fn refuse_if_parked(&self) -> Result<(), DeclaredError> {
        if self.parked.is_some() {
            return Err(DeclaredError::Parked);
        }
        Ok(())
    }

    fn mutation_effects(&self, change: DeclaredChange) -> Vec<DeclaredEffect> {
        if change == DeclaredChange::Unchanged {
            return vec![DeclaredEffect::Acknowledge];
        }
        vec![
            DeclaredEffect::PersistChange(change),
            DeclaredEffect::Acknowledge,
            DeclaredEffect::Broadcast,
            DeclaredEffect::Ship,
        ]
    }
}

/// The hub's leader: the elector's choice when it is one of the hub's members, otherwise the
/// lexicographically lowest member. `None` without members.
pub fn choose_leader(members: &BTreeSet<NodeName>, elected: Option<&str>) -> Option<NodeName> {
    match elected {
        Some(e) if members.contains(e) => Some(e.to_owned()),
        _ => members.iter().next().cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::boot::{CopySource, DurableEvidence};

    fn spec(id: &str) -> ChildSpec {
        ChildSpec::new(id, "counter")
    }

    fn normal(node: &str) -> DeclaredState {
        DeclaredState::boot(node, BootDecision::StartEmpty, std::iter::empty()).0
    }

    fn parked(node: &str) -> DeclaredState {
        let reason = ParkReason {
            corrupt: true,
            evidence: DurableEvidence {
                seeded_marker: true,
                durable_rows: 0,
            },
            manifest_error: None,
        };
        let (state, effects) =
            DeclaredState::boot(node, BootDecision::Park(reason.clone()), std::iter::empty());
        assert_eq!(effects, vec![DeclaredEffect::FireParked(reason)]);
        state
    }

    #[test]
    fn a_mutation_persists_before_it_is_acknowledged() {
        let mut s = normal("n1");
        let effects = s.declare(spec("a"), Metadata::new()).unwrap();
        assert_eq!(
            effects,
            vec![
                DeclaredEffect::PersistChange(DeclaredChange::Put("a".into())),
                DeclaredEffect::Acknowledge,
                DeclaredEffect::Broadcast,
                DeclaredEffect::Ship,
            ]
        );
        assert_eq!(s.list().version(), 1);
        assert_eq!(s.list().last_mutated_by(), Some("n1"));
        // Repeating it is acknowledged without a write.
        assert_eq!(
            s.declare(spec("a"), Metadata::new()).unwrap(),
            vec![DeclaredEffect::Acknowledge]
        );
        assert!(matches!(
            s.undeclare(&"a".into()).unwrap()[0],
            DeclaredEffect::PersistChange(DeclaredChange::Removed(_))
        ));
        assert!(matches!(
            s.declare(
                spec("t").with_restart(crate::model::Restart::Temporary),
                Metadata::new()
            ),
            Err(DeclaredError::DurableRequiresPermanent { .. })
        ));
    }

    #[test]
    fn a_parked_node_refuses_mutations_until_a_real_copy_or_a_clear() {
        let mut s = parked("n1");
        assert_eq!(
            s.declare(spec("a"), Metadata::new()),
            Err(DeclaredError::Parked)
        );
        assert_eq!(s.undeclare(&"a".into()), Err(DeclaredError::Parked));
        // An empty fresh peer restores nothing.
        assert!(s.offer(&DeclaredList::new(), false).is_empty());
        assert!(s.parked().is_some());
        // A real copy does.
        let mut peer = normal("n2");
        peer.declare(spec("a"), Metadata::new()).unwrap();
        let effects = s.offer(peer.list(), true);
        assert_eq!(
            effects,
            vec![
                DeclaredEffect::PersistWhole,
                DeclaredEffect::Unparked,
                DeclaredEffect::Ship
            ]
        );
        assert_eq!(s.list(), peer.list());
        assert!(s.parked().is_none());

        let mut s = parked("n1");
        let effects = s.clear();
        assert!(effects.contains(&DeclaredEffect::Unparked));
        assert_eq!(s.list().version(), 1);
        assert!(s.list().is_empty());
    }

    #[test]
    fn adopting_copies_persists_and_reports_ties() {
        let mut s = normal("n2");
        let mut other = normal("n3");
        other.declare(spec("x"), Metadata::new()).unwrap();
        assert_eq!(
            s.offer(other.list(), false),
            vec![DeclaredEffect::PersistWhole]
        );
        // Older or equal: nothing.
        assert!(s.offer(other.list(), true).is_empty());
        // A tie from a partition, won by the lower node: adopt and report.
        let mut left = s.clone();
        left.node = "n1".into();
        left.declare(spec("l"), Metadata::new()).unwrap();
        s.declare(spec("r"), Metadata::new()).unwrap();
        let effects = s.offer(left.list(), true);
        assert_eq!(effects.len(), 3, "{effects:?}");
        assert_eq!(effects[0], DeclaredEffect::PersistWhole);
        assert!(
            matches!(&effects[1], DeclaredEffect::FireTiebreak(t) if t.winner.as_deref() == Some("n1"))
        );
        assert_eq!(effects[2], DeclaredEffect::Ship);
        // The winner's side then hears its own copy back: nothing to do.
        let adopted = s.list().clone();
        assert!(left.offer(&adopted, true).is_empty());
    }

    #[test]
    fn boot_seeds_or_restores() {
        let row = Row::authored(spec("a"), Metadata::new(), "n1", 0, true).unwrap();
        let (s, effects) = DeclaredState::boot("n1", BootDecision::SeedFromRows, [&row]);
        assert_eq!(effects, vec![DeclaredEffect::PersistWhole]);
        assert_eq!(s.list().version(), 1);
        assert!(s.list().contains(&"a".into()));

        let restored = s.list().clone();
        let decision = BootDecision::Adopt {
            list: restored.clone(),
            source: CopySource::Manifest,
            tiebreak: None,
        };
        let (s, effects) = DeclaredState::boot("n2", decision, std::iter::empty());
        assert_eq!(effects, vec![DeclaredEffect::PersistWhole]);
        assert_eq!(s.list(), &restored);
    }

    #[test]
    fn a_delta_persists_its_changes_only_and_a_parked_node_fetches_whole() {
        let mut leader = normal("n1");
        let mut peer = normal("n2");
        leader.declare(spec("a"), Metadata::new()).unwrap();
        peer.offer(leader.list(), false);
        let base = leader.list().stamp();
        let changes = vec![
            leader.list.add(spec("b"), Metadata::new(), "n1").unwrap(),
            leader.list.remove(&"a".into(), "n1"),
        ];
        let delta = DeclaredDelta::between(base, leader.list(), &changes).unwrap();
        assert_eq!(
            peer.delta(&delta, false),
            DeltaReceipt::Applied(vec![
                DeclaredEffect::PersistChange(DeclaredChange::Put("b".into())),
                DeclaredEffect::PersistChange(DeclaredChange::Removed("a".into())),
            ])
        );
        assert_eq!(peer.list(), leader.list());
        assert_eq!(peer.delta(&delta, false), DeltaReceipt::Ignored);

        let mut lost = parked("n3");
        assert_eq!(lost.delta(&delta, true), DeltaReceipt::NeedWhole);
        assert!(lost.parked().is_some());
    }

    #[test]
    fn the_leader_is_the_elected_member_or_the_lowest() {
        let members: BTreeSet<NodeName> = ["n2", "n1", "n3"].map(String::from).into();
        assert_eq!(choose_leader(&members, Some("n3")), Some("n3".into()));
        assert_eq!(choose_leader(&members, Some("n9")), Some("n1".into()));
        assert_eq!(choose_leader(&members, None), Some("n1".into()));
        assert_eq!(choose_leader(&BTreeSet::new(), None), None);
    }
}
