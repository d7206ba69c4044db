//! A node speaks only for itself, seen from outside: two real `process-hub node` processes run a
//! cluster, and this test joins it as a hostile node holding the cookie that sends node `a`
//! frames in node `b`'s name: an empty full sync (which, taken for `b`'s, would remove every row
//! `b` binds on `a`), a `Goodbye` (which would drop `b` from `a`'s ring) and a `Hello` with
//! another boot token (which would make `a` reap `b`'s bindings). Open and sealed with keys of
//! its own. Through `a`'s admin API, nothing changes.

use crate::common::alone;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use process_hub::admin::StartSpec;
use process_hub::cluster::gateway::{gateway_scope, GatewayFrame, GATEWAY_GROUP};
use process_hub::cluster::node::{ClusterConfig, ClusterNode};
use process_hub::cluster::wire::seal::{self, SealKey};
use process_hub::cluster::wire::{encode, WireMsg};
use process_hub::core::boot_token::BootToken;
use process_hub_actors::harness::{free_port, wait_for, ClusterOptions, LocalCluster};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);
const CHILDREN: usize = 24;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

/// `node -> children bound there`, from one node's registry copy.
fn placement(client: &process_hub_actors::harness::AdminClient) -> Option<Vec<(String, String)>> {
    let children = client.children().ok()?;
    if children.len() != CHILDREN {
        return None;
    }
    children
        .iter()
        .map(|c| match c.nodes.as_slice() {
            [one] => Some((c.id.clone(), one.node.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_forged_in_a_members_name_change_nothing_on_the_others() {
    if alone::ran_in_own_process(
        module_path!(),
        "frames_forged_in_a_members_name_change_nothing_on_the_others",
    ) {
        return;
    }
    let options = ClusterOptions {
        hub: "forgery".into(),
        cookie: "forgery-cookie".into(),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 2, &options, None).expect("nodes spawn");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    let a = cluster.nodes[0].client();
    let (a_name, b_name) = (
        cluster.nodes[0].node_name.clone(),
        cluster.nodes[1].node_name.clone(),
    );
    let specs: Vec<StartSpec> = (0..CHILDREN)
        .map(|i| StartSpec::new(format!("f-{i:03}"), "counter"))
        .collect();
    a.start(&specs).expect("children start");
    let before = wait_for("every child placed, on both nodes", DEADLINE, || {
        let placed = placement(&a)?;
        let hosts: BTreeSet<&String> = placed.iter().map(|(_, n)| n).collect();
        (hosts.len() == 2).then_some(placed)
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));

    // The hostile node: the cookie, a name of its own, and raw frames in `b`'s name.
    let mut config =
        ClusterConfig::new("rogue", "127.0.0.1", free_port().unwrap(), &options.cookie);
    config.seeds = vec![cluster.nodes[0].listen.to_string()];
    let rogue = ClusterNode::start(config)
        .await
        .expect("the rogue node starts");
    let scope = gateway_scope(&options.hub);
    let gateways = wait_for("the rogue sees the hub's gateways", DEADLINE, || {
        let remote: Vec<_> = ractor::pg::get_scoped_members(&scope, &GATEWAY_GROUP.to_owned())
            .into_iter()
            .filter(|c| !c.get_id().is_local())
            .collect();
        (remote.len() >= 2).then_some(remote)
    })
    .expect("gateways advertised");
    let forged = [
        WireMsg::FullSync { rows: Vec::new() },
        WireMsg::Goodbye,
        WireMsg::Hello {
            boot_token: BootToken::random(),
            members: vec![a_name.clone(), b_name.clone()],
            reply: false,
        },
    ];
    let mut frames = Vec::new();
    for msg in &forged {
        let open = encode(&options.hub, &b_name, msg).unwrap();
        frames.push(seal::seal(&open, &SealKey::random()).unwrap());
        frames.push(open);
    }
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        for cell in &gateways {
            let gateway: ractor::ActorRef<GatewayFrame> = cell.clone().into();
            for frame in &frames {
                let _ = gateway.cast(GatewayFrame(frame.clone()));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Throughout: `a` still holds every row where it was, and `b` is still its member.
        let now = placement(&a);
        assert_eq!(
            now.as_ref(),
            Some(&before),
            "a's registry changed under forged frames\n{}",
            cluster.log_tails(30)
        );
        let health = a.health().expect("a answers");
        assert!(
            health.members.contains(&b_name),
            "b dropped from a's members: {:?}",
            health.members
        );
    }
    let log = cluster.nodes[0].log_tail(400);
    assert!(
        log.contains("frame refused"),
        "a logs the forged frames it refused:\n{log}"
    );
    rogue.shutdown();
    cluster.shutdown(Duration::from_secs(5));
}
