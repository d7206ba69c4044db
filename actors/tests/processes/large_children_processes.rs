//! Children as large as the admin API allows, between real `process-hub node` processes: forty
//! children with a megabyte of metadata each run on one node; a second node joins, gets the whole
//! registry (more than twice what one frame may carry) and takes its share of the children. A
//! child too large to ever cross the wire is refused at start.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::harness::{wait_for, ClusterOptions, LocalCluster};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(90);
const CHILDREN: usize = 40;
const MB: usize = 1024 * 1024;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn big(id: String, bytes: usize) -> StartSpec {
    StartSpec {
        id,
        kind: "counter".into(),
        args: None,
        restart: None,
        metadata: Some(
            [("blob".to_owned(), "m".repeat(bytes))]
                .into_iter()
                .collect(),
        ),
        durable: false,
        nodes: None,
        guided_fallback: false,
    }
}

#[test]
fn a_node_joining_forty_one_megabyte_children_gets_them_and_its_share() {
    let options = ClusterOptions {
        hub: "large".into(),
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 1, &options, None).expect("a node spawns");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    let a = cluster.nodes[0].client();
    // Four children of a megabyte per request: under the 8 MiB body limit.
    for batch in 0..CHILDREN / 4 {
        let specs: Vec<StartSpec> = (0..4)
            .map(|i| big(format!("big-{:03}", batch * 4 + i), MB))
            .collect();
        let answer = a.start(&specs).expect("the start is answered");
        assert_eq!(answer.started.len(), 4, "errors: {:?}", answer.errors);
    }
    // Too large to ever cross the wire: refused on its own, with its reason.
    let answer = a
        .start(&[big("huge".into(), 3 * MB), big("small".into(), 10)])
        .expect("answered");
    assert_eq!(
        answer
            .started
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["small"]
    );
    assert_eq!(answer.errors.len(), 1, "{:?}", answer.errors);
    assert_eq!(answer.errors[0].code, "too_large", "{:?}", answer.errors);

    cluster.add_node(&options).expect("b spawns");
    if let Err(e) = cluster.wait_formed(DEADLINE) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    let b = cluster.nodes[1].client();
    let b_name = cluster.nodes[1].node_name.clone();
    let hosted_on_b = wait_for(
        "b to hold all 41 rows, with the metadata, and run its share",
        DEADLINE,
        || {
            let children = b.children().ok()?;
            if children.len() != CHILDREN + 1 {
                return None;
            }
            let whole = children
                .iter()
                .filter(|c| c.id.starts_with("big-"))
                .all(|c| c.metadata.get("blob").is_some_and(|blob| blob.len() == MB));
            let on_b: BTreeSet<String> = children
                .iter()
                .filter(|c| c.nodes.iter().any(|n| n.node == b_name))
                .map(|c| c.id.clone())
                .collect();
            (whole && !on_b.is_empty()).then_some(on_b)
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    assert!(hosted_on_b.len() < CHILDREN + 1, "{hosted_on_b:?}");
    cluster.shutdown(Duration::from_secs(10));
}
