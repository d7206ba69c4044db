//! A node with the wrong cookie is refused, again and again, and never comes up.

#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

use process_hub::cluster::transport::TransportEvent;
use support::{free_port, Local, Peer, DEADLINE};

#[test]
#[ignore = "runs as the second node of the multi-process tests"]
fn peer_node_entry() {
    support::peer_node_entry();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_cookie_is_refused() {
    let hub = "t-cookie";
    let mut local = Local::start("right", vec![], hub).await;
    let seed = format!("127.0.0.1:{}", local.node.port());
    let _peer = Peer::spawn("intruder", free_port(), "wrong", &[seed], hub);
    let end = Instant::now() + DEADLINE;
    loop {
        let stats = local.node.stats().await.unwrap();
        if stats.unauthenticated_closes >= 2 {
            // Refused more than once: the intruder retried (backoff) and never got in.
            assert!(stats.connected.is_empty(), "{stats:?}");
            break;
        }
        assert!(
            Instant::now() < end,
            "no refused session within {DEADLINE:?}: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(local.transport.peers().is_empty());
    while let Ok(event) = local.events.try_recv() {
        assert!(
            !matches!(event, TransportEvent::NodeUp { .. }),
            "an unauthenticated node came up: {event:?}"
        );
    }
}
