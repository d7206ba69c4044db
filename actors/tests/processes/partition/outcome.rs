//! What a cluster of the partition tests says once it settled, read from every node's admin
//! API: node 1's declared list, whether every node's list is the same, and every registry copy.
//! Each test judges it by its own rules (`settled`, `contradicts` in its file).

use std::collections::BTreeSet;

use process_hub::admin::DeclaredResponse;
use process_hub_actors::harness::{AdminClient, Census};

/// The cluster's declared lists and registry copies, read once.
pub struct Outcome {
    /// Node 1's declared list (the first client's).
    pub declared: BTreeSet<String>,
    /// Every node's declared list is the same (same version and ids, none parked).
    pub lists_agree: bool,
    /// Every node's registry copy.
    pub census: Census,
}

impl Outcome {
    /// Reads every node of `clients` (named as their registries name them); `None` if one
    /// does not answer.
    pub fn take(clients: &[(String, AdminClient)]) -> Option<Self> {
        let lists = clients
            .iter()
            .map(|(_, c)| c.declared().ok())
            .collect::<Option<Vec<_>>>()?;
        let ids = |l: &DeclaredResponse| l.children.iter().map(|c| c.id.clone()).collect();
        let declared: BTreeSet<String> = ids(lists.first()?);
        let lists_agree = lists
            .iter()
            .all(|l| !l.parked && l.version == lists[0].version && ids(l) == declared);
        Some(Self {
            declared,
            lists_agree,
            census: Census::take(clients).ok()?,
        })
    }

    /// Every copy has `id` running on exactly one node, the same one.
    pub fn runs_once(&self, id: &str) -> bool {
        self.census.all_run_once(&BTreeSet::from([id.to_owned()]))
    }

    /// No copy has `id` running anywhere.
    pub fn runs_nowhere(&self, id: &str) -> bool {
        self.census.hosts(id).is_empty()
    }
}
