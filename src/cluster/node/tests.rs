//! A node's start as a whole: what it refuses before anything runs.

use super::{ClusterConfig, ClusterError, ClusterNode};
use crate::cluster::discovery::Discovery;

#[tokio::test]
async fn a_node_refuses_to_start_with_a_discovery_it_cannot_use() {
    use std::time::Duration;
    const FIVE: Duration = Duration::from_secs(5);
    for discovery in [
        Discovery::Dns {
            name: "bad name".into(),
            port: None,
            interval: FIVE,
        },
        Discovery::Dns {
            name: "peers".into(),
            port: Some(0),
            interval: FIVE,
        },
        Discovery::DnsSrv {
            name: "_ph._tcp.peers".into(),
            interval: Duration::from_millis(1),
        },
    ] {
        let config = ClusterConfig::new("a", "127.0.0.1", 0, "cookie").with_discovery(discovery);
        match ClusterNode::start(config).await {
            Err(ClusterError::Config(reason)) => {
                assert!(reason.starts_with("discovery "), "{reason}")
            }
            other => panic!("started: {other:?}"),
        }
    }
}
