//! Start planning: which children of a start request go to which node, and which are refused
//! before anything is sent.
//!
//! The pipeline of Elixir's ProcessHub (validate -> check_existing -> owner -> group by node), as
//! one pure function. The owner is a parameter: on one node it is always the local node; the
//! cluster passes its placement ring instead, and nothing else changes.

use std::collections::BTreeMap;

use crate::model::{
    validate_child, ChildId, ChildSpec, FastHashSet, InvalidChild, Metadata, NodeName,
};

/// Why a child of a request is refused before delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The registry already has a row with this id (`check_existing`), or the id appears earlier
    /// in the same request.
    AlreadyStarted,
    /// The id is empty or too long.
    InvalidId(String),
    /// The child breaks another rule every way in applies ([`validate_child`]): a kind out of
    /// bounds, or a spec and metadata too large to ever cross the wire.
    Invalid(InvalidChild),
}

/// One child to deliver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedChild {
    /// The spec, as the caller gave it.
    pub spec: ChildSpec,
}

/// The result of planning one start request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartPlan {
    /// Children grouped by the node that must start them, in request order within a node.
    pub by_node: BTreeMap<NodeName, Vec<PlannedChild>>,
    /// Children refused, with the reason, in request order.
    pub rejected: Vec<(ChildId, Rejection)>,
}

impl StartPlan {
    /// How many children will be delivered.
    pub fn delivered(&self) -> usize {
        self.by_node.values().map(Vec::len).sum()
    }
}

/// Plans a start request.
///
/// - a child that [`validate_child`] refuses (with the request's `metadata`) is rejected with
///   its reason;
/// - an id seen earlier in the same request is rejected as `AlreadyStarted` (the first wins);
/// - with `check_existing`, an id `exists` reports is rejected as `AlreadyStarted`;
/// - every other child goes to `owner(id)`.
pub fn plan_start(
    specs: Vec<ChildSpec>,
    metadata: &Metadata,
    check_existing: bool,
    exists: impl Fn(&ChildId) -> bool,
    owner: impl Fn(&ChildId) -> NodeName,
) -> StartPlan {
    let mut plan = StartPlan::default();
    let mut seen: FastHashSet<ChildId> =
        FastHashSet::with_capacity_and_hasher(specs.len(), Default::default());
    for spec in specs {
        match validate_child(&spec, metadata) {
            Ok(()) => {}
            Err(InvalidChild::Id(e)) => {
                plan.rejected
                    .push((spec.id.clone(), Rejection::InvalidId(e.reason.to_owned())));
                continue;
            }
            Err(e) => {
                plan.rejected.push((spec.id.clone(), Rejection::Invalid(e)));
                continue;
            }
        }
        if !seen.insert(spec.id.clone()) || (check_existing && exists(&spec.id)) {
            plan.rejected
                .push((spec.id.clone(), Rejection::AlreadyStarted));
            continue;
        }
        let node = owner(&spec.id);
        plan.by_node
            .entry(node)
            .or_default()
            .push(PlannedChild { spec });
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn local(_: &ChildId) -> NodeName {
        "n@h".to_owned()
    }

    #[test]
    fn same_id_twice_is_one_start_and_one_rejection() {
        let specs = vec![ChildSpec::new("a", "k"), ChildSpec::new("a", "k")];
        let plan = plan_start(specs, &Metadata::new(), true, |_| false, local);
        assert_eq!(plan.delivered(), 1);
        assert_eq!(plan.rejected, vec![("a".into(), Rejection::AlreadyStarted)]);
    }

    #[test]
    fn check_existing_consults_the_registry_only_when_asked() {
        let specs = || vec![ChildSpec::new("a", "k"), ChildSpec::new("b", "k")];
        let exists = |id: &ChildId| id.as_str() == "a";
        let plan = plan_start(specs(), &Metadata::new(), true, exists, local);
        assert_eq!(plan.delivered(), 1);
        assert_eq!(plan.rejected[0].0.as_str(), "a");
        let plan = plan_start(specs(), &Metadata::new(), false, exists, local);
        assert_eq!(plan.delivered(), 2);
        assert!(plan.rejected.is_empty());
    }

    #[test]
    fn invalid_ids_are_rejected_not_delivered() {
        let plan = plan_start(
            vec![ChildSpec::new("", "k")],
            &Metadata::new(),
            true,
            |_| false,
            local,
        );
        assert_eq!(plan.delivered(), 0);
        assert!(matches!(plan.rejected[0].1, Rejection::InvalidId(_)));
    }

    #[test]
    fn a_child_too_large_for_the_wire_is_rejected_alone() {
        let big = "x".repeat(crate::model::MAX_CHILD_BYTES as usize);
        let specs = vec![
            ChildSpec::new("big", "k").with_args(&big).unwrap(),
            ChildSpec::new("small", "k"),
        ];
        let plan = plan_start(specs, &Metadata::new(), true, |_| false, local);
        assert_eq!(plan.delivered(), 1);
        assert!(matches!(
            plan.rejected[..],
            [(_, Rejection::Invalid(InvalidChild::TooLarge { .. }))]
        ));
    }

    #[test]
    fn children_are_grouped_by_owner() {
        let specs = vec![
            ChildSpec::new("a1", "k"),
            ChildSpec::new("b1", "k"),
            ChildSpec::new("a2", "k"),
        ];
        let owner = |id: &ChildId| format!("{}@h", &id.as_str()[..1]);
        let plan = plan_start(specs, &Metadata::new(), true, |_| false, owner);
        let a: Vec<_> = plan.by_node["a@h"]
            .iter()
            .map(|c| c.spec.id.as_str())
            .collect();
        assert_eq!(a, ["a1", "a2"]);
        assert_eq!(plan.by_node["b@h"].len(), 1);
    }

    proptest! {
        /// Every requested child is either delivered once or rejected; no id is delivered twice.
        #[test]
        fn every_child_accounted_for(ids in proptest::collection::vec(0u8..20, 0..50)) {
            let specs: Vec<_> = ids.iter().map(|i| ChildSpec::new(format!("c{i}"), "k")).collect();
            let plan = plan_start(specs.clone(), &Metadata::new(), true, |id| id.as_str() == "c7", local);
            prop_assert_eq!(plan.delivered() + plan.rejected.len(), specs.len());
            let delivered: Vec<_> = plan.by_node.values().flatten().map(|c| c.spec.id.clone()).collect();
            let unique: FastHashSet<_> = delivered.iter().cloned().collect();
            prop_assert_eq!(unique.len(), delivered.len());
            prop_assert!(!unique.contains(&ChildId::from("c7")));
        }
    }
}
