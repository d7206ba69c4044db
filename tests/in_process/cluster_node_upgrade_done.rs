//! After a rolling upgrade: a node that refuses open peers (`refuse_open_peers`) never takes a
//! node of the build before for a member, and counts what it refused. Two real nodes (OS
//! processes).

use crate::common::{self, alone};

use common::free_port;
use common::peers::{Local, Peer};
use process_hub::cluster::gateway::WirePolicy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_refuses_open_peers_never_lets_an_old_node_in() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_node_that_refuses_open_peers_never_lets_an_old_node_in",
    ) {
        return;
    }
    let hub = "t-upgrade-done";
    let old_port = free_port();
    let policy = WirePolicy {
        refuse_open_peers: true,
        ..WirePolicy::default()
    };
    let local = Local::start_wire(
        "secret",
        vec![format!("127.0.0.1:{old_port}")],
        hub,
        None,
        policy,
    )
    .await;
    let mut old = Peer::spawn_env(
        "old",
        old_port,
        "secret",
        &[],
        hub,
        false,
        &[("PH_PEER_WIRE", "1")],
    );
    // Connected at the session level: the old node greets every tick, and is refused each time.
    common::wait_until("the old node's greetings are refused", || {
        local.node.frame_counts().open_refused >= 5
    })
    .await;
    assert!(local.transport.peers().is_empty());
    let stats = local.node.stats().await.unwrap();
    assert!(stats.connected.contains_key("old@127.0.0.1"), "{stats:?}");
    drop(old.wait_line(|l| l.starts_with("STATS")));
}
