//! What the registries of a cluster of node processes say about a set of children: where each
//! one runs according to every node's copy, and from that which declared children are lost,
//! which stopped children run again, and which run on more than one node.
//!
//! "Running" means what an operator sees: a child listed by `GET /v1/children` with a host
//! (node and pid). Each node's registry copy is read separately, so a disagreement between
//! copies shows up instead of being averaged away.

use std::collections::{BTreeMap, BTreeSet};

use crate::admin_client::{AdminClient, AdminClientError};

/// Every node's registry view of the children: node -> child id -> the hosts that copy lists.
#[derive(Clone, Debug, Default)]
pub struct Census {
    /// Per node (the node whose admin API answered), per child, the hosts its copy lists.
    pub views: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Census {
    /// Reads `GET /v1/children` from every `(node, client)`.
    pub fn take(clients: &[(String, AdminClient)]) -> Result<Self, AdminClientError> {
        let mut views = BTreeMap::new();
        for (node, client) in clients {
            views.insert(node.clone(), view_of(client)?);
        }
        Ok(Self { views })
    }

    /// The union over every node's copy of the hosts of `id`.
    pub fn hosts(&self, id: &str) -> BTreeSet<String> {
        self.views
            .values()
            .filter_map(|view| view.get(id))
            .flatten()
            .cloned()
            .collect()
    }

    /// Every copy lists each of `declared` on exactly one host, the same host in every copy.
    pub fn all_run_once(&self, declared: &BTreeSet<String>) -> bool {
        !self.views.is_empty()
            && self.views.values().all(|view| runs_once_in(view, declared))
            && declared.iter().all(|id| self.hosts(id).len() == 1)
    }

    /// Declared children that no node's copy lists on any host.
    pub fn lost(&self, declared: &BTreeSet<String>) -> Vec<String> {
        declared
            .iter()
            .filter(|id| self.hosts(id).is_empty())
            .cloned()
            .collect()
    }

    /// Stopped children that some node's copy lists on a host.
    pub fn resurrected(&self, stopped: &BTreeSet<String>) -> Vec<String> {
        stopped
            .iter()
            .filter(|id| !self.hosts(id).is_empty())
            .cloned()
            .collect()
    }

    /// Children listed on more than one host (over the union of the copies), with the hosts.
    pub fn duplicates(&self) -> BTreeMap<String, BTreeSet<String>> {
        let ids: BTreeSet<&String> = self.views.values().flat_map(|v| v.keys()).collect();
        ids.into_iter()
            .filter_map(|id| {
                let hosts = self.hosts(id);
                (hosts.len() > 1).then(|| (id.clone(), hosts))
            })
            .collect()
    }

    /// Children running per host, as `node`'s copy says.
    pub fn per_host(&self, node: &str) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for hosts in self.views.get(node).into_iter().flat_map(|v| v.values()) {
            for host in hosts {
                *counts.entry(host.clone()).or_insert(0) += 1;
            }
        }
        counts
    }

    /// What each node's copy shows for `id`, for a report: `n1: [n2@..]; n2: absent; ...`.
    pub fn describe(&self, id: &str) -> String {
        self.views
            .iter()
            .map(|(node, view)| match view.get(id) {
                Some(hosts) => format!("{node}: {hosts:?}"),
                None => format!("{node}: absent"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One node's copy: child id -> hosts.
pub fn view_of(client: &AdminClient) -> Result<BTreeMap<String, Vec<String>>, AdminClientError> {
    Ok(client
        .children()?
        .into_iter()
        .map(|c| (c.id, c.nodes.into_iter().map(|n| n.node).collect()))
        .collect())
}

/// `view` lists each of `declared` on exactly one host.
pub fn runs_once_in(view: &BTreeMap<String, Vec<String>>, declared: &BTreeSet<String>) -> bool {
    declared
        .iter()
        .all(|id| view.get(id).is_some_and(|hosts| hosts.len() == 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One node's copy as test data: (child id, hosts).
    type View<'a> = &'a [(&'a str, &'a [&'a str])];

    fn census(views: &[(&str, View)]) -> Census {
        Census {
            views: views
                .iter()
                .map(|(node, children)| {
                    let view = children
                        .iter()
                        .map(|(id, hosts)| {
                            (
                                id.to_string(),
                                hosts.iter().map(|h| h.to_string()).collect(),
                            )
                        })
                        .collect();
                    (node.to_string(), view)
                })
                .collect(),
        }
    }

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lost_resurrected_and_duplicates_are_read_over_every_copy() {
        let c = census(&[
            ("a", &[("x", &["a"]), ("s", &["b"])]),
            ("b", &[("x", &["b"]), ("y", &["a"])]),
        ]);
        let declared = set(&["x", "y", "z"]);
        assert_eq!(c.lost(&declared), vec!["z".to_string()]);
        assert_eq!(c.resurrected(&set(&["s", "t"])), vec!["s".to_string()]);
        // The copies disagree on x's host: over the union it runs on two nodes.
        assert_eq!(c.duplicates().get("x"), Some(&set(&["a", "b"])));
        assert!(!c.all_run_once(&set(&["x"])));
        assert_eq!(c.describe("y"), "a: absent; b: [\"a\"]");
    }

    #[test]
    fn all_run_once_needs_one_agreed_host_in_every_copy() {
        let agreed = census(&[("a", &[("x", &["b"])]), ("b", &[("x", &["b"])])]);
        assert!(agreed.all_run_once(&set(&["x"])));
        assert!(!agreed.all_run_once(&set(&["x", "y"])));
        let twice = census(&[("a", &[("x", &["a", "b"])])]);
        assert!(!twice.all_run_once(&set(&["x"])));
        assert!(!Census::default().all_run_once(&set(&[])));
        assert_eq!(agreed.per_host("a").get("b"), Some(&1));
    }
}
