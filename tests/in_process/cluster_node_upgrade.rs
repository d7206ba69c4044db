//! A rolling upgrade: a node of this build (wire version 3: sealed, compact frames) works in one
//! cluster with a node of the build before sealing (version 1, open frames only), a node of the
//! build before compact frames (version 2, sealed) and a node of its own version. Four real
//! nodes (OS processes).

use crate::common::{self, alone};

use std::collections::BTreeSet;

use common::free_port;
use common::peers::{Local, Peer};
use process_hub::cluster::transport::TransportEvent;
use process_hub::cluster::wire::WireMsg;

/// Waits until `peer` reported every node of `nodes` up, in any order.
fn wait_up(peer: &mut Peer, nodes: &[&str]) {
    let mut left: BTreeSet<&str> = nodes.iter().copied().collect();
    while !left.is_empty() {
        let line = peer.wait_line(|l| l.starts_with("UP "));
        left.retain(|node| !line.starts_with(&format!("UP {node}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_talks_to_nodes_one_and_two_versions_older() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_node_talks_to_nodes_one_and_two_versions_older",
    ) {
        return;
    }
    let hub = "t-upgrade";
    let old_port = free_port();
    let mid_port = free_port();
    let new_port = free_port();
    let mut local = Local::start(
        "secret",
        vec![
            format!("127.0.0.1:{old_port}"),
            format!("127.0.0.1:{mid_port}"),
            format!("127.0.0.1:{new_port}"),
        ],
        hub,
    )
    .await;
    let (old_name, mid_name, new_name) = ("old@127.0.0.1", "mid@127.0.0.1", "new@127.0.0.1");
    let mut old = Peer::spawn_env(
        "old",
        old_port,
        "secret",
        &[],
        hub,
        false,
        &[("PH_PEER_WIRE", "1")],
    );
    let mut mid = Peer::spawn_env(
        "mid",
        mid_port,
        "secret",
        &[],
        hub,
        false,
        &[("PH_PEER_WIRE", "2")],
    );
    let mut new = Peer::spawn("new", new_port, "secret", &[], hub);
    local.wait_all_up(&[old_name, mid_name, new_name]).await;
    // Every peer sees every other node (each spoken to in the version it speaks).
    wait_up(&mut old, &["local@127.0.0.1", mid_name, new_name]);
    wait_up(&mut mid, &["local@127.0.0.1", old_name, new_name]);
    wait_up(&mut new, &["local@127.0.0.1", old_name, mid_name]);
    let compact_before = local.node.frame_counts().compact;

    for peer in [old_name, mid_name, new_name] {
        local
            .transport
            .send(
                &peer.to_owned(),
                &WireMsg::ChildCast {
                    id: "ping".into(),
                    payload: peer.as_bytes().to_vec(),
                    hops: 0,
                },
            )
            .unwrap();
    }
    let mut echoed = BTreeSet::new();
    while echoed.len() < 3 {
        if let TransportEvent::Message {
            from,
            msg: WireMsg::ChildCast { payload, .. },
        } = local
            .wait_event(|e| matches!(e, TransportEvent::Message { .. }))
            .await
        {
            assert_eq!(payload, [b"echo:".as_slice(), from.as_bytes()].concat());
            echoed.insert(from);
        }
    }
    let counts = local.node.frame_counts();
    assert_eq!(counts.forged, 0);
    assert_eq!(counts.undecodable, 0, "every peer got frames it reads");
    // The new peer's echo (and its heartbeats) came compact; the older peers' could not.
    assert!(counts.compact > compact_before, "{counts:?}");
}
