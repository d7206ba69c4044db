//! Two real nodes (OS processes) exchange frames; a SIGKILLed node is seen down, and when it
//! restarts on the same port the survivor reconnects by itself and sees a new boot token.

use crate::common::{self, alone};

use common::free_port;
use common::peers::{Local, Peer};
use process_hub::cluster::transport::TransportEvent;
use process_hub::cluster::wire::WireMsg;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_exchange_frames_detect_a_kill_and_reconnect_to_a_restart() {
    if alone::ran_in_own_process(
        module_path!(),
        "nodes_exchange_frames_detect_a_kill_and_reconnect_to_a_restart",
    ) {
        return;
    }
    let hub = "t-restart";
    let port = free_port();
    let mut local = Local::start("secret", vec![format!("127.0.0.1:{port}")], hub).await;
    let peer_name = "peer@127.0.0.1";
    // The peer has no seeds: every connection below is made (and remade) by `local`.
    let mut peer = Peer::spawn("peer", port, "secret", &[], hub);
    let first = local.wait_up(peer_name).await;
    assert_eq!(
        first, peer.boot_token,
        "NodeUp carries the peer's boot token"
    );
    peer.wait_line(|l| l.starts_with("UP local@127.0.0.1"));
    assert_eq!(local.transport.peers(), vec![peer_name.to_owned()]);

    local
        .transport
        .send(
            &peer_name.to_owned(),
            &WireMsg::ChildCast {
                id: "ping".into(),
                payload: b"42".to_vec(),
                hops: 0,
            },
        )
        .unwrap();
    let echo = local
        .wait_event(|e| matches!(e, TransportEvent::Message { .. }))
        .await;
    assert_eq!(
        echo,
        TransportEvent::Message {
            from: peer_name.to_owned(),
            msg: WireMsg::ChildCast {
                id: "ping".into(),
                payload: b"echo:42".to_vec(),
                hops: 0
            }
        }
    );

    // SIGKILL: the TCP session closes, the peer's gateway proxy goes, NodeDown follows.
    drop(peer);
    local.wait_down(peer_name).await;
    assert!(local.transport.peers().is_empty());

    // Restarted on the same port with a new boot: `local` reconnects by itself (backoff).
    let peer = Peer::spawn("peer", port, "secret", &[], hub);
    let second = local.wait_up(peer_name).await;
    assert_eq!(second, peer.boot_token);
    assert_ne!(second, first, "a restart announces a new boot token");
    let stats = local.node.stats().await.unwrap();
    assert!(stats.attempts >= 2, "{stats:?}");
    assert!(stats.connected.contains_key(peer_name), "{stats:?}");
}
