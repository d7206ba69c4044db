//! Three nodes of one hub form a full mesh from a chain of seeds (transitive connections), and a
//! node hosting only another hub id is connected but never seen by this hub.

use crate::common::{self, alone};

use common::peers::{Local, Peer};
use common::{free_port, wait_for_async};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_seeds_forms_a_mesh_and_hubs_are_found_per_hub_id() {
    if alone::ran_in_own_process(
        module_path!(),
        "a_chain_of_seeds_forms_a_mesh_and_hubs_are_found_per_hub_id",
    ) {
        return;
    }
    let hub = "t-mesh";
    let mut local = Local::start("secret", vec![], hub).await;
    let local_seed = format!("127.0.0.1:{}", local.node.port());
    let one_port = free_port();
    let _one = Peer::spawn(
        "one",
        one_port,
        "secret",
        std::slice::from_ref(&local_seed),
        hub,
    );
    // `two` only knows `one` (and itself, as a seed list shared by all nodes would say); it
    // reaches `local` through ractor_cluster's transitive mode.
    let two_port = free_port();
    let mut two = Peer::spawn(
        "two",
        two_port,
        "secret",
        &[
            format!("127.0.0.1:{two_port}"),
            format!("127.0.0.1:{one_port}"),
        ],
        hub,
    );
    let _other = Peer::spawn("other", free_port(), "secret", &[local_seed], "another-hub");

    local.wait_all_up(&["one@127.0.0.1", "two@127.0.0.1"]).await;
    two.wait_line(|l| l == "UP local@127.0.0.1" || l.starts_with("UP local@127.0.0.1 "));

    wait_for_async("`other` to connect", || async {
        let stats = local.node.stats().await.unwrap();
        if stats.connected.contains_key("other@127.0.0.1") {
            Ok(())
        } else {
            Err(format!("`other` never connected: {stats:?}"))
        }
    })
    .await;
    assert_eq!(
        local.transport.peers(),
        vec!["one@127.0.0.1".to_owned(), "two@127.0.0.1".to_owned()],
        "a node without this hub id is connected but is not a peer of the hub"
    );
}
