//! A frozen node (SIGSTOP: its TCP connection stays open) is declared down by the heartbeat
//! failure detector, and comes back with the same boot token when it resumes (a flap).

use crate::common::{self, alone};

use common::free_port;
use common::peers::{Local, Peer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_times_out_and_comes_back_as_a_flap() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_frozen_node_times_out_and_comes_back_as_a_flap",
    ) {
        return;
    }
    let hub = "t-freeze";
    let mut local = Local::start("secret", vec![], hub).await;
    let seed = format!("127.0.0.1:{}", local.node.port());
    let peer = Peer::spawn("frozen", free_port(), "secret", &[seed], hub);
    let name = "frozen@127.0.0.1";
    let token = local.wait_up(name).await;
    // SIGSTOP keeps the TCP connection open but silences the node: only the heartbeat failure
    // detector can notice.
    peer.signal("-STOP");
    local.wait_down(name).await;
    peer.signal("-CONT");
    let again = local.wait_up(name).await;
    assert_eq!(
        again, token,
        "same boot after a freeze: a flap, not a restart"
    );
}
