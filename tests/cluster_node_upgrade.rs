//! A rolling upgrade: a node that seals its frames (wire version 2) works in one cluster with a
//! node of the build before (version 1, open frames only) and with another sealing node. Three
//! real nodes (OS processes).

mod common;

use std::collections::BTreeSet;

use common::free_port;
use common::peers::{Local, Peer};
use process_hub::cluster::transport::TransportEvent;
use process_hub::cluster::wire::WireMsg;

#[test]
#[ignore = "runs as the second node of the multi-process tests"]
fn peer_node_entry() {
    common::peers::peer_node_entry();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealing_node_talks_to_a_node_one_version_older() {
    let hub = "t-upgrade";
    let old_port = free_port();
    let new_port = free_port();
    let mut local = Local::start(
        "secret",
        vec![
            format!("127.0.0.1:{old_port}"),
            format!("127.0.0.1:{new_port}"),
        ],
        hub,
    )
    .await;
    let (old_name, new_name) = ("old@127.0.0.1", "new@127.0.0.1");
    let mut old = Peer::spawn_env(
        "old",
        old_port,
        "secret",
        &[],
        hub,
        false,
        &[("PH_PEER_WIRE", "1")],
    );
    let mut new = Peer::spawn("new", new_port, "secret", &[], hub);
    local.wait_all_up(&[old_name, new_name]).await;
    old.wait_line(|l| l.starts_with("UP local@"));
    new.wait_line(|l| l.starts_with("UP local@"));
    // The old and the new peer see each other too (the new one speaks open frames to it).
    old.wait_line(|l| l.starts_with(&format!("UP {new_name}")));

    for peer in [old_name, new_name] {
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
    while echoed.len() < 2 {
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
    assert_eq!(local.node.frame_counts().forged, 0);
}
