//! A node with the wrong cookie is refused, again and again, and never comes up.

use crate::common::{self, alone};

use common::peers::{Local, Peer};
use common::{free_port, wait_for_async};
use process_hub::cluster::transport::TransportEvent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_cookie_is_refused() {
    if alone::ran_in_own_process(module_path!(), "a_wrong_cookie_is_refused") {
        return;
    }
    let hub = "t-cookie";
    let mut local = Local::start("right", vec![], hub).await;
    let seed = format!("127.0.0.1:{}", local.node.port());
    let _peer = Peer::spawn("intruder", free_port(), "wrong", &[seed], hub);
    wait_for_async("a second refused session", || async {
        let stats = local.node.stats().await.unwrap();
        if stats.unauthenticated_closes >= 2 {
            // Refused more than once: the intruder retried (backoff) and never got in.
            assert!(stats.connected.is_empty(), "{stats:?}");
            Ok(())
        } else {
            Err(format!("fewer than two refused sessions: {stats:?}"))
        }
    })
    .await;
    assert!(local.transport.peers().is_empty());
    while let Ok(event) = local.events.try_recv() {
        assert!(
            !matches!(event, TransportEvent::NodeUp { .. }),
            "an unauthenticated node came up: {event:?}"
        );
    }
}
