//! A node speaks only for itself: a peer holding the cookie cannot act in another node's name.
//! Three real nodes (OS processes): this test's node, a genuine peer `v`, and a hostile peer `m`
//! that sends this node frames in `v`'s name (open and sealed, a `ChildCast` and a `Goodbye`,
//! and key offers). None is taken for `v`'s; each is counted; `m`'s own frames still pass.

use crate::common::{self, alone};

use std::time::Duration;

use common::free_port;
use common::peers::{Local, Peer};
use process_hub::cluster::transport::TransportEvent;
use process_hub::cluster::wire::WireMsg;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_forged_in_another_nodes_name_are_dropped_and_counted() {
    if alone::ran_in_own_process(
        module_path!(),
        "frames_forged_in_another_nodes_name_are_dropped_and_counted",
    ) {
        return;
    }
    let hub = "t-forgery";
    let v_port = free_port();
    let m_port = free_port();
    let mut local = Local::start(
        "secret",
        vec![format!("127.0.0.1:{v_port}"), format!("127.0.0.1:{m_port}")],
        hub,
    )
    .await;
    let v_name = "v@127.0.0.1";
    let m_name = "m@127.0.0.1";
    let _v = Peer::spawn("v", v_port, "secret", &[], hub);
    let mut m = Peer::spawn_env(
        "m",
        m_port,
        "secret",
        &[],
        hub,
        false,
        &[("PH_PEER_FORGE", v_name)],
    );
    local.wait_all_up(&[v_name, m_name]).await;
    // Let the forger send a few hundred frames.
    m.wait_line(|l| {
        l.strip_prefix("FORGED ")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n >= 200)
    });

    // `m` in its own name is heard (the genuine peer echoes casts; `m` does too).
    local
        .transport
        .send(
            &m_name.to_owned(),
            &WireMsg::ChildCast {
                id: "ping".into(),
                payload: b"m".to_vec(),
                hops: 0,
            },
        )
        .unwrap();
    local
        .transport
        .send(
            &v_name.to_owned(),
            &WireMsg::ChildCast {
                id: "ping".into(),
                payload: b"v".to_vec(),
                hops: 0,
            },
        )
        .unwrap();
    let mut echoed = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    while echoed.len() < 2 {
        let event = tokio::time::timeout_at(deadline, local.events.recv())
            .await
            .expect("both peers echo")
            .expect("events continue");
        match event {
            TransportEvent::Message { from, msg } => {
                assert!(
                    !matches!(&msg, WireMsg::Goodbye)
                        && !matches!(&msg, WireMsg::ChildCast { id, .. } if id.as_str() == "forged"),
                    "a forged frame was delivered as {from}'s: {msg:?}"
                );
                if let WireMsg::ChildCast { payload, .. } = msg {
                    echoed.insert((from, payload));
                }
            }
            TransportEvent::NodeDown { node } => panic!("{node} went down"),
            TransportEvent::NodeUp { node, .. } => panic!("{node} re-announced (a forged boot)"),
        }
    }
    assert_eq!(
        echoed,
        [
            (m_name.to_owned(), b"echo:m".to_vec()),
            (v_name.to_owned(), b"echo:v".to_vec())
        ]
        .into_iter()
        .collect()
    );
    // Nothing forged was delivered meanwhile either.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(event) = local.events.try_recv() {
        if let TransportEvent::Message { from, msg } = &event {
            assert!(
                !matches!(msg, WireMsg::Goodbye)
                    && !matches!(msg, WireMsg::ChildCast { id, .. } if id.as_str() == "forged"),
                "a forged frame was delivered as {from}'s: {msg:?}"
            );
        }
        assert!(
            !matches!(
                event,
                TransportEvent::NodeDown { .. } | TransportEvent::NodeUp { .. }
            ),
            "membership changed: {event:?}"
        );
    }
    let counts = local.node.frame_counts();
    assert!(counts.forged >= 20, "forged frames counted: {counts:?}");
    assert!(
        counts.refused_offers >= 1,
        "unconfirmed key offers counted: {counts:?}"
    );
    assert_eq!(
        local.transport.peers(),
        vec![m_name.to_owned(), v_name.to_owned()]
    );
}
