//! `GET /v1/registry/summary`: a node's registry copy in a few numbers.
//!
//! Watching a cluster converge by fetching `GET /v1/children` means moving and parsing every
//! row (about 100 bytes of JSON per child) from every node on every poll; at 10,000 children
//! that is ~50 ms per poll per node, which is both a coarse clock and a load on the nodes being
//! watched. The summary answers the same questions ("does this node list every child?", "does
//! every child run on a member?", "how many per node?") in O(rows) on the node, without
//! copying the rows, and in a few hundred bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::Row;

/// The answer of `GET /v1/registry/summary`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistrySummary {
    /// This node's name (`name@host`).
    pub node: String,
    /// The hub's members as this node sees them (itself included), sorted: the same list as
    /// `GET /v1/health`.
    pub members: Vec<String>,
    /// Rows in this node's registry copy (stubs included).
    pub rows: usize,
    /// Rows with at least one binding on a node of `members`: children that run on a node
    /// this node considers up.
    pub placed: usize,
    /// Rows with no binding at all (stubs of a dead node's children awaiting re-placement).
    pub unbound: usize,
    /// Bindings per hosting node (a child briefly on two nodes counts for both), including
    /// nodes that are no longer members.
    pub per_node: BTreeMap<String, usize>,
    /// Rows per child kind (the dashboard's "per kind"). Bounded by the kinds the nodes
    /// register, since a row's kind is checked at its start.
    #[serde(default)]
    pub per_kind: BTreeMap<String, usize>,
}

impl RegistrySummary {
    /// An empty summary of `node`'s copy with `members` up.
    pub fn new(node: impl Into<String>, members: Vec<String>) -> Self {
        Self {
            node: node.into(),
            members,
            ..Self::default()
        }
    }

    /// Counts one row.
    pub fn add(&mut self, row: &Row, members: &BTreeSet<&str>) {
        let nodes: Vec<(&str, crate::model::Pid)> = row
            .node_pids
            .iter()
            .map(|(n, p)| (n.as_str(), *p))
            .collect();
        self.add_placement(&row.spec.kind, &nodes, members);
    }

    /// Counts one row from its placement (see [`crate::storage::Placement`]).
    pub fn add_placement(
        &mut self,
        kind: &str,
        nodes: &[(&str, crate::model::Pid)],
        members: &BTreeSet<&str>,
    ) {
        self.rows += 1;
        if nodes.is_empty() {
            self.unbound += 1;
        }
        if nodes.iter().any(|(n, _)| members.contains(n)) {
            self.placed += 1;
        }
        for (node, _) in nodes {
            count(&mut self.per_node, node);
        }
        count(&mut self.per_kind, kind);
    }

    /// The summary of `rows` as seen by `node` with `members` up.
    pub fn of_rows<'a>(
        node: impl Into<String>,
        members: Vec<String>,
        rows: impl IntoIterator<Item = &'a Row>,
    ) -> Self {
        let mut summary = Self::new(node, members.clone());
        let up: BTreeSet<&str> = members.iter().map(String::as_str).collect();
        for row in rows {
            summary.add(row, &up);
        }
        summary
    }

    /// The summary from the counts the store keeps on write
    /// ([`crate::storage::RegistryCounts`]), in O(nodes + kinds) instead of a pass over every
    /// row: what a benchmark or a dashboard polls. `None` when two bound nodes are not members
    /// (nodes down whose bindings are not reaped yet): which rows still run on a member then
    /// takes the pass. With one such node (a node in its grace, the usual case) the rows bound
    /// on it alone are what runs on no member.
    pub fn of_counts(
        node: impl Into<String>,
        members: Vec<String>,
        counts: &crate::storage::RegistryCounts,
    ) -> Option<Self> {
        let mut gone = counts.per_node.keys().filter(|n| !members.contains(n));
        let off_members = match (gone.next(), gone.next()) {
            // Every bound row is bound on a member.
            (None, _) => 0,
            // A row bound on the one node that is not a member and elsewhere too is bound on
            // a member: only the rows bound on it alone run on no member.
            (Some(node), None) => counts.sole.get(node).copied().unwrap_or(0),
            // A row may be bound on two of them and no member: that takes the pass.
            (Some(_), Some(_)) => return None,
        };
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let (rows, unbound) = (to_usize(counts.rows), to_usize(counts.unbound));
        Some(Self {
            node: node.into(),
            members,
            rows,
            placed: rows
                .saturating_sub(unbound)
                .saturating_sub(to_usize(off_members)),
            unbound,
            per_node: counts
                .per_node
                .iter()
                .map(|(n, d)| (n.clone(), to_usize(d.count)))
                .collect(),
            per_kind: counts
                .per_kind
                .iter()
                .map(|(k, n)| (k.clone(), to_usize(*n)))
                .collect(),
        })
    }

    /// Whether this copy lists exactly `expected` children, each running on a member.
    pub fn complete(&self, expected: usize) -> bool {
        self.rows == expected && self.placed == expected
    }
}

/// Adds one to `key`'s count, cloning the key only the first time it is seen.
fn count(counts: &mut BTreeMap<String, usize>, key: &str) {
    match counts.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            counts.insert(key.to_owned(), 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildSpec, Metadata};

    fn row(id: &str, nodes: &[(&str, u64)]) -> Row {
        let mut row = Row::authored(
            ChildSpec::new(id, "counter"),
            Metadata::default(),
            "a@h",
            0,
            false,
        )
        .expect("no reserved key");
        for (node, pid) in nodes {
            row.node_pids.insert((*node).to_owned(), *pid);
        }
        row
    }

    #[test]
    fn counts_rows_placement_and_hosts() {
        let rows = [
            row("c1", &[("a@h", 1)]),
            row("c2", &[("b@h", 2)]),
            row("c3", &[("dead@h", 3)]),
            row("c4", &[]),
            row("c5", &[("a@h", 5), ("b@h", 6)]),
        ];
        let s = RegistrySummary::of_rows("a@h", vec!["a@h".into(), "b@h".into()], &rows);
        assert_eq!(s.rows, 5);
        assert_eq!(s.placed, 3, "c1, c2 and c5 run on members");
        assert_eq!(s.unbound, 1);
        assert_eq!(s.per_node.get("a@h"), Some(&2));
        assert_eq!(s.per_node.get("b@h"), Some(&2));
        assert_eq!(s.per_node.get("dead@h"), Some(&1));
        assert_eq!(
            s.per_kind.get("counter"),
            Some(&5),
            "every row is a counter"
        );
        assert!(!s.complete(5));
        assert!(!s.complete(3), "rows must match the expected count too");
    }

    /// The summary from the counts kept on write is the summary of a pass over the rows,
    /// field for field; with a bound node that is not a member it defers to the pass.
    #[test]
    fn the_summary_from_counts_equals_the_summary_from_rows() {
        let members = vec!["a@h".to_owned(), "b@h".to_owned()];
        let mut rows = vec![
            row("c1", &[("a@h", 1)]),
            row("c2", &[("b@h", 2)]),
            row("c4", &[]),
            row("c5", &[("a@h", 5), ("b@h", 6)]),
        ];
        rows[1].spec.kind = "other".into();
        let counts = crate::storage::RegistryCounts::of_rows(&rows);
        assert_eq!(
            RegistrySummary::of_counts("a@h", members.clone(), &counts),
            Some(RegistrySummary::of_rows("a@h", members.clone(), &rows))
        );
        // One bound node that is not a member: the counts still tell which rows run on a
        // member (c6 does, on b; c3 does not).
        rows.push(row("c3", &[("dead@h", 3)]));
        rows.push(row("c6", &[("dead@h", 7), ("b@h", 8)]));
        let counts = crate::storage::RegistryCounts::of_rows(&rows);
        let from_counts = RegistrySummary::of_counts("a@h", members.clone(), &counts);
        assert_eq!(
            from_counts,
            Some(RegistrySummary::of_rows("a@h", members.clone(), &rows))
        );
        assert_eq!(from_counts.map(|s| s.placed), Some(4));
        // Two: a row bound on both and no member takes the pass.
        rows.push(row("c7", &[("dead@h", 9), ("gone@h", 10)]));
        let counts = crate::storage::RegistryCounts::of_rows(&rows);
        assert_eq!(RegistrySummary::of_counts("a@h", members, &counts), None);
    }

    #[test]
    fn complete_when_every_row_runs_on_a_member() {
        let rows = [row("c1", &[("a@h", 1)]), row("c2", &[("b@h", 2)])];
        let s = RegistrySummary::of_rows("a@h", vec!["a@h".into(), "b@h".into()], &rows);
        assert!(s.complete(2));
        assert!(!s.complete(3));
        let after_kill = RegistrySummary::of_rows("a@h", vec!["a@h".into()], &rows);
        assert!(
            !after_kill.complete(2),
            "a child on a departed node is not placed"
        );
    }

    #[test]
    fn serializes_with_stable_field_names() {
        let s = RegistrySummary::of_rows("a@h", vec!["a@h".into()], &[row("c1", &[("a@h", 1)])]);
        let json = serde_json::to_value(&s).expect("serializes");
        for field in [
            "node", "members", "rows", "placed", "unbound", "per_node", "per_kind",
        ] {
            assert!(json.get(field).is_some(), "missing {field}");
        }
        assert_eq!(json["per_node"]["a@h"], 1);
    }
}
