//! Two nodes connected over TLS (rustls, test CA in `tests/fixtures/tls`) exchange frames; a
//! plain-TCP node cannot join a TLS listener.

use crate::common::{self, alone};

use common::free_port;
use common::peers::{tls_config, Local, Peer};
use process_hub::cluster::transport::TransportEvent;
use process_hub::cluster::wire::WireMsg;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_talk_over_tls_and_plain_tcp_is_refused() {
    if alone::ran_in_own_process(
        module_path!(),
        "nodes_talk_over_tls_and_plain_tcp_is_refused",
    ) {
        return;
    }
    let hub = "t-tls";
    let mut local = Local::start_with("secret", vec![], hub, Some(tls_config())).await;
    let seed = format!("127.0.0.1:{}", local.node.port());
    let _peer = Peer::spawn_with(
        "secure",
        free_port(),
        "secret",
        std::slice::from_ref(&seed),
        hub,
        true,
    );
    let name = "secure@127.0.0.1".to_owned();
    local.wait_up(&name).await;
    // Sent again until answered: a frame is best effort, and under load the peer may not have
    // taken this node for up yet when the first one arrives.
    let cast = WireMsg::ChildCast {
        id: "x".into(),
        payload: b"over tls".to_vec(),
        hops: 0,
    };
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    let echo = loop {
        local.transport.send(&name, &cast).unwrap();
        let next = tokio::time::Instant::now() + std::time::Duration::from_millis(500);
        match tokio::time::timeout_at(next.min(deadline), local.events.recv()).await {
            Ok(Some(event @ TransportEvent::Message { .. })) => break event,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the transport's events ended"),
            Err(_) if tokio::time::Instant::now() >= deadline => panic!("no echo over TLS"),
            Err(_) => {}
        }
    };
    assert!(
        matches!(&echo, TransportEvent::Message { msg: WireMsg::ChildCast { payload, .. }, .. } if payload == b"echo:over tls"),
        "{echo:?}"
    );

    // A plain-TCP node with the right cookie still cannot get in: it keeps retrying (its own
    // counters say so) and never becomes a peer.
    let mut plain = Peer::spawn("plain", free_port(), "secret", &[seed], hub);
    plain.wait_line(|l| {
        let attempts = l
            .strip_prefix("STATS attempts=")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok());
        attempts.is_some_and(|n| n >= 3) && l.ends_with("connected=0")
    });
    assert!(!local
        .node
        .stats()
        .await
        .unwrap()
        .connected
        .contains_key("plain@127.0.0.1"));
    assert_eq!(local.transport.peers(), vec![name]);
}
