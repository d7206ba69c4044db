//! The durable cluster's resident memory in `bench scale`, per node and per declared child.
//!
//! Each node is read from `/proc/<pid>/status`: `VmRSS` (resident now) and `VmHWM` (the most
//! it was resident since it started, so the peak of a phase without sampling it). Read before
//! the declare (the formed, empty cluster), [`crate::demo::MEMORY_SETTLE`] after the declare
//! converged (its peak: the declare, the declared list's replication; settled: what the declared
//! children keep), and once the whole-cluster outage is over (its peak: the reboot and the
//! recovery rounds; settled: the recovered cluster). Every figure is given per declared child
//! (the node's bytes above its empty reading, over N), so a size's figures extrapolate to
//! another: a node's peak at a million children is about its `declare_peak_bytes_per_child`
//! times a million, plus its empty reading.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::harness::LocalCluster;

/// One node's reading, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeMemory {
    /// `VmRSS`: resident now.
    pub resident: u64,
    /// `VmHWM`: the most resident since the process started.
    pub peak: u64,
}

fn status_bytes(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Every live node's reading, by node name (none where `/proc` cannot be read).
pub fn read(cluster: &LocalCluster) -> BTreeMap<String, NodeMemory> {
    cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let status = std::fs::read_to_string(format!("/proc/{}/status", node.pid()?)).ok()?;
            let memory = NodeMemory {
                resident: status_bytes(&status, "VmRSS:"),
                peak: status_bytes(&status, "VmHWM:"),
            };
            Some((node.node_name.clone(), memory))
        })
        .collect()
}

/// The readings of one durable cluster, in its order.
#[derive(Clone, Debug, Default)]
pub struct DurableMemory {
    /// The formed cluster, before the declare.
    pub empty: BTreeMap<String, NodeMemory>,
    /// After the declare converged and settled.
    pub declared: BTreeMap<String, NodeMemory>,
    /// After the outage's recovery (restarted processes: their peak is the recovery's).
    pub recovered: BTreeMap<String, NodeMemory>,
}

impl DurableMemory {
    /// The size's JSON fields: `durable_rss_bytes_per_child` (summed over the nodes, settled
    /// after the declare, comparable to the memory cluster's `rss_bytes_per_child`) and
    /// `durable_nodes` (each node's peak and settled bytes per declared child, per phase).
    pub fn fields(&self, n: usize) -> Map<String, Value> {
        let per_child = |bytes: u64, empty: u64| bytes.saturating_sub(empty) as f64 / n as f64;
        let mut nodes = Map::new();
        let mut summed = 0.0;
        for (name, empty) in &self.empty {
            let mut node = Map::new();
            node.insert("empty_bytes".into(), json!(empty.resident));
            if let Some(declared) = self.declared.get(name) {
                let settled = per_child(declared.resident, empty.resident);
                summed += settled;
                node.insert("declare_settled_bytes_per_child".into(), json!(settled));
                node.insert(
                    "declare_peak_bytes_per_child".into(),
                    json!(per_child(declared.peak, empty.resident)),
                );
            }
            if let Some(recovered) = self.recovered.get(name) {
                node.insert(
                    "recovery_settled_bytes_per_child".into(),
                    json!(per_child(recovered.resident, empty.resident)),
                );
                node.insert(
                    "recovery_peak_bytes_per_child".into(),
                    json!(per_child(recovered.peak, empty.resident)),
                );
            }
            nodes.insert(name.clone(), Value::Object(node));
        }
        let mut out = Map::new();
        if !self.declared.is_empty() {
            out.insert("durable_rss_bytes_per_child".into(), json!(summed));
        }
        out.insert("durable_nodes".into(), Value::Object(nodes));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_bytes() {
        let status = "Name:\tprocess-hub\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(status_bytes(status, "VmRSS:"), 1024 * 1024);
        assert_eq!(status_bytes(status, "VmHWM:"), 2048 * 1024);
        assert_eq!(status_bytes(status, "VmSwap:"), 0);
    }

    #[test]
    fn figures_are_per_declared_child_above_the_empty_reading() {
        let at = |resident, peak| NodeMemory { resident, peak };
        let memory = DurableMemory {
            empty: [("n1".to_owned(), at(1_000, 1_000))].into(),
            declared: [("n1".to_owned(), at(5_000, 9_000))].into(),
            recovered: [("n1".to_owned(), at(7_000, 11_000))].into(),
        };
        let fields = memory.fields(10);
        assert_eq!(fields["durable_rss_bytes_per_child"], json!(400.0));
        let n1 = &fields["durable_nodes"]["n1"];
        assert_eq!(n1["declare_settled_bytes_per_child"], json!(400.0));
        assert_eq!(n1["declare_peak_bytes_per_child"], json!(800.0));
        assert_eq!(n1["recovery_settled_bytes_per_child"], json!(600.0));
        assert_eq!(n1["recovery_peak_bytes_per_child"], json!(1_000.0));
    }
}
