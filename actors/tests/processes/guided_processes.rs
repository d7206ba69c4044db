//! Guided placement on real `process-hub node` processes started with `--distribution guided`,
//! driven through the admin API as an operator would: a spec naming its node (`nodes`) starts
//! there whichever node is asked; a spec without one is refused `child_mapping_missing`, one
//! naming a stranger `child_mapping_invalid`, one naming two nodes `child_mapping_mismatch`;
//! the other specs of the same request start.

use std::path::Path;
use std::time::Duration;

use process_hub::admin::StartSpec;
use process_hub_actors::harness::{ClusterOptions, LocalCluster};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn counter(id: &str, nodes: Option<Vec<String>>) -> StartSpec {
    StartSpec {
        nodes,
        ..StartSpec::new(id, "counter")
    }
}

#[test]
fn a_guided_cluster_places_each_child_on_the_node_its_spec_names() {
    let options = ClusterOptions {
        extra_args: vec!["--distribution".into(), "guided".into()],
        ..ClusterOptions::default()
    };
    let mut cluster = LocalCluster::start(binary(), 2, &options, None).expect("nodes spawn");
    cluster
        .wait_formed(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.nodes[1].log_tail(30)));
    let first = cluster.nodes[0].client();
    let a = cluster.nodes[0].node_name.clone();
    let b = cluster.nodes[1].node_name.clone();
    let specs: Vec<StartSpec> = (0..6usize)
        .map(|i| {
            let on = if i.is_multiple_of(2) { &a } else { &b };
            counter(&format!("g{i}"), Some(vec![on.clone()]))
        })
        .chain([
            counter("unmapped", None),
            counter("stranger", Some(vec!["nobody@nowhere".into()])),
            counter("both", Some(vec![a.clone(), b.clone()])),
        ])
        .collect();
    let answer = first.start(&specs).expect("start answers");
    assert_eq!(answer.started.len(), 6, "{answer:?}");
    for started in &answer.started {
        let i: usize = started.id[1..].parse().expect("gN");
        let want = if i.is_multiple_of(2) { &a } else { &b };
        let on: Vec<&str> = started.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(on, [want.as_str()], "{started:?}");
    }
    let code = |id: &str| {
        answer
            .errors
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.code.clone())
            .unwrap_or_default()
    };
    assert_eq!(code("unmapped"), "child_mapping_missing", "{answer:?}");
    assert_eq!(code("stranger"), "child_mapping_invalid", "{answer:?}");
    assert_eq!(code("both"), "child_mapping_mismatch", "{answer:?}");
    // Every node's registry tells the same host (once the start's row reached it).
    let second = cluster.nodes[1].client();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let view = loop {
        match second.child("g0") {
            Ok(view) => break view,
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("g0 is not known on the second node: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_eq!(view.nodes.len(), 1, "{view:?}");
    assert_eq!(view.nodes[0].node, a);
}
