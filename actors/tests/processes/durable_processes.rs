//! Durable children across real `process-hub node` processes: three nodes with
//! `--auto-recovery` declare children (`"durable": true`) and stop some; every node is SIGKILLed
//! and restarted on its data directory; every declared child then runs exactly once across the
//! cluster, no stopped child runs, and every node's `GET /v1/declared` lists the same children.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use process_hub_actors::cli::node_settings::BackendChoice;
use process_hub_actors::harness::admin_client::AdminClientError;
use process_hub_actors::harness::outage::{counter_specs, stop_concurrently};
use process_hub_actors::harness::{
    wait_for, whole_cluster_outage, AdminClient, Census, ClusterOptions, LocalCluster,
    OutageSettings,
};

/// Generous: the nodes share two cores with the rest of the suite.
const DEADLINE: Duration = Duration::from_secs(60);
const GRACE_MS: u64 = 500;
const CHILDREN: usize = 24;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_process-hub"))
}

fn options(backend: BackendChoice) -> ClusterOptions {
    ClusterOptions {
        hub: "durable".into(),
        backend,
        extra_args: vec![
            "--auto-recovery".into(),
            "--reconcile-grace-ms".into(),
            GRACE_MS.to_string(),
            "--reconcile-interval-ms".into(),
            "1000".into(),
        ],
        ..ClusterOptions::default()
    }
}

fn all_normal(clients: &[(String, AdminClient)]) -> Option<()> {
    clients
        .iter()
        .all(|(_, c)| c.health().is_ok_and(|h| h.recovery_state == "normal"))
        .then_some(())
}

/// Every registry runs each of `declared` once and none of `stopped`, and every node's declared
/// list is exactly `declared`.
fn settled(
    clients: &[(String, AdminClient)],
    declared: &BTreeSet<String>,
    stopped: &BTreeSet<String>,
) -> Option<()> {
    let census = Census::take(clients).ok()?;
    let lists_agree = clients.iter().all(|(_, c)| {
        c.declared().is_ok_and(|l| {
            l.children
                .iter()
                .map(|c| c.id.clone())
                .collect::<BTreeSet<_>>()
                == *declared
        })
    });
    (census.all_run_once(declared) && census.resurrected(stopped).is_empty() && lists_agree)
        .then_some(())
}

fn declared_children_survive_a_whole_cluster_sigkill(backend: BackendChoice) {
    let mut cluster =
        LocalCluster::start(binary(), 3, &options(backend), None).expect("nodes spawn");
    let all = cluster.named_clients();
    let ready = cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("every node to be normal", DEADLINE, || all_normal(&all)));
    if let Err(e) = ready {
        panic!("{e}\n{}", cluster.log_tails(40));
    }

    let ids: Vec<String> = (0..CHILDREN).map(|i| format!("d-{i:03}")).collect();
    // Through a node that is not the leader (the lowest name), so the mutations are forwarded.
    let started = cluster.nodes[1]
        .client()
        .start(&counter_specs(&ids, true))
        .expect("durable start");
    assert_eq!(started.started.len(), CHILDREN, "{started:?}");
    let stopped: BTreeSet<String> = ids.iter().step_by(4).cloned().collect();
    let declared: BTreeSet<String> = ids
        .iter()
        .filter(|id| !stopped.contains(*id))
        .cloned()
        .collect();
    let stop_list: Vec<String> = stopped.iter().cloned().collect();
    let failures = stop_concurrently(&cluster.nodes[2].client(), &stop_list, 3);
    assert!(failures.is_empty(), "{failures:?}");
    if let Err(e) = wait_for("the stops to reach every node", DEADLINE, || {
        settled(&all, &declared, &stopped)
    }) {
        panic!("{e}\n{}", cluster.log_tails(40));
    }

    let report = whole_cluster_outage(
        &mut cluster,
        &declared,
        &stopped,
        &OutageSettings {
            reconcile_grace: Duration::from_millis(GRACE_MS),
            deadline: DEADLINE,
            settle: Duration::ZERO,
        },
        &|_| {},
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    assert!(report.clean(), "{report:#?}\n{}", cluster.log_tails(40));
    // The same check, read again now that every node is normal: every declared child once,
    // no stopped child anywhere, the same list on every node.
    let census = Census::take(&all).expect("census");
    assert!(census.all_run_once(&declared), "{census:?}");
    assert_eq!(census.resurrected(&stopped), Vec::<String>::new());
    assert!(census.duplicates().is_empty(), "{census:?}");
    let versions: BTreeSet<u64> = report.declared_versions.values().copied().collect();
    assert_eq!(versions.len(), 1, "{:?}", report.declared_versions);
    assert_eq!(report.declared_versions.len(), 3);
}

#[test]
fn declared_children_survive_a_whole_cluster_sigkill_on_the_memory_backend() {
    declared_children_survive_a_whole_cluster_sigkill(BackendChoice::Memory);
}

#[test]
fn declared_children_survive_a_whole_cluster_sigkill_on_the_durable_backend() {
    declared_children_survive_a_whole_cluster_sigkill(BackendChoice::Durable);
}

// ---------------------------------------------------------------------------------------------
// What survives, per backend and mode (docs/recovery.md, "What survives"): plain and durable
// children across (a) one node's restart in a cluster, (b) a single-node hub's restart, (c) a
// whole-cluster outage, with auto-recovery on and off.
// ---------------------------------------------------------------------------------------------

const SURVIVAL_CHILDREN: usize = 20;

/// The flags of a survival cluster: short graces, and a short replay wait for the disk
/// backends without auto-recovery.
fn survival_options(backend: BackendChoice, auto_recovery: bool) -> ClusterOptions {
    let mut extra_args = vec!["--recovery-replay-wait-ms".to_owned(), "300".into()];
    if auto_recovery {
        extra_args.extend([
            "--auto-recovery".into(),
            "--reconcile-grace-ms".into(),
            GRACE_MS.to_string(),
            "--reconcile-interval-ms".into(),
            "1000".into(),
        ]);
    }
    ClusterOptions {
        hub: "survival".into(),
        backend,
        extra_args,
        ..ClusterOptions::default()
    }
}

fn on_disk(backend: BackendChoice) -> bool {
    backend != BackendChoice::Memory
}

/// The children that run after a restart that took every copy of the registry but the disks
/// (a single-node hub's restart, a whole-cluster outage): the declared ones with auto-recovery;
/// without it, the plain ones a disk backend kept.
fn survivors(
    backend: BackendChoice,
    auto_recovery: bool,
    plain: &BTreeSet<String>,
    durable: &BTreeSet<String>,
) -> BTreeSet<String> {
    if auto_recovery {
        durable.clone()
    } else if on_disk(backend) {
        plain.clone()
    } else {
        BTreeSet::new()
    }
}

/// The state of a survival cluster, for the waits below.
struct Survival<'a> {
    what: String,
    cluster: &'a mut LocalCluster,
    auto_recovery: bool,
}

impl Survival<'_> {
    fn clients(&self) -> Vec<(String, AdminClient)> {
        self.cluster.named_clients()
    }

    fn fail(&self, e: impl std::fmt::Display) -> ! {
        panic!("{}: {e}\n{}", self.what, self.cluster.log_tails(40))
    }

    /// Waits until the running nodes form one cluster and, with auto-recovery, every node is
    /// `normal` (its first reconcile round ran).
    fn ready(&mut self) {
        if let Err(e) = self.cluster.wait_formed(DEADLINE) {
            self.fail(e);
        }
        if self.auto_recovery {
            let all = self.clients();
            if let Err(e) = wait_for("every node to be normal", DEADLINE, || all_normal(&all)) {
                self.fail(e);
            }
        }
    }

    /// Waits until every copy lists each of `expected` once on the same node, and no copy lists
    /// any of `absent`, not even as a row without a host; then no child is listed that is not
    /// expected, and none runs twice.
    fn expect(&self, cell: &str, expected: &BTreeSet<String>, absent: &BTreeSet<String>) {
        let all = self.clients();
        let outcome = wait_for(cell, DEADLINE, || {
            let census = Census::take(&all).ok()?;
            let lingering = census
                .views
                .values()
                .any(|view| absent.iter().any(|id| view.contains_key(id)));
            (census.all_run_once(expected) && !lingering).then_some(census)
        });
        let census = outcome.unwrap_or_else(|e| {
            let census = Census::take(&all).ok();
            self.fail(format!("{cell}: {e}; census {census:?}"))
        });
        assert!(
            census.duplicates().is_empty(),
            "{}: {cell}: children run twice: {census:?}",
            self.what
        );
        let listed: BTreeSet<&String> = census.views.values().flat_map(|v| v.keys()).collect();
        let unexpected: Vec<&&String> = listed
            .iter()
            .filter(|id| !expected.contains(**id))
            .collect();
        assert!(
            unexpected.is_empty(),
            "{}: {cell}: children nobody expects are listed: {unexpected:?}",
            self.what
        );
    }
}

fn start_children(client: &AdminClient, ids: &BTreeSet<String>, durable: bool) {
    let ids: Vec<String> = ids.iter().cloned().collect();
    let answer = client
        .start(&counter_specs(&ids, durable))
        .expect("start answered");
    assert_eq!(answer.started.len(), ids.len(), "{answer:?}");
}

fn ids(prefix: &str) -> BTreeSet<String> {
    (0..SURVIVAL_CHILDREN)
        .map(|i| format!("{prefix}-{i:02}"))
        .collect()
}

/// Cells (a) and (c) on a cluster of three nodes.
fn survival_in_a_cluster(backend: BackendChoice, auto_recovery: bool) {
    let mut cluster =
        LocalCluster::start(binary(), 3, &survival_options(backend, auto_recovery), None)
            .expect("nodes spawn");
    let mut s = Survival {
        what: format!("cluster, {backend:?}, auto-recovery {auto_recovery}"),
        cluster: &mut cluster,
        auto_recovery,
    };
    s.ready();
    let plain = ids("p");
    let durable = if auto_recovery {
        ids("d")
    } else {
        BTreeSet::new()
    };
    start_children(&s.cluster.nodes[0].client(), &plain, false);
    if auto_recovery {
        // Through a node that is not the leader (the lowest name): the mutation is forwarded.
        start_children(&s.cluster.nodes[1].client(), &durable, true);
    }
    let everything: BTreeSet<String> = plain.union(&durable).cloned().collect();
    s.expect("every child running", &everything, &BTreeSet::new());

    // (a) One node restarts; its peers hold the registry: every child runs again, once. Its
    // peers re-place its children (possibly before it is back); the returning node restarts
    // what its kept rows say it ran only once its peers' registries told it what runs where.
    s.cluster.nodes[2].kill();
    s.cluster.nodes[2].restart().expect("node restarts");
    s.ready();
    s.expect("(a) one node restarted", &everything, &BTreeSet::new());
    if on_disk(backend) {
        let node = &s.cluster.nodes[2];
        if let Err(e) = wait_for("the restarted node's boot hold to end", DEADLINE, || {
            node.log_tail(usize::MAX)
                .contains("boot hold ended")
                .then_some(())
        }) {
            s.fail(e);
        }
        s.expect(
            "(a) one node restarted, its hold ended",
            &everything,
            &BTreeSet::new(),
        );
    }

    // (c) Every node SIGKILLed and restarted on its data directory.
    for node in &mut s.cluster.nodes {
        node.kill();
    }
    if on_disk(backend) && !auto_recovery {
        // The nodes given seeds come back first, while their seed (node 0) is still down: each
        // has heard no peer, so it restarts none of the children its rows say it ran (its
        // cluster might run them without it), past its replay wait and however long it stays
        // isolated.
        for node in &mut s.cluster.nodes[1..] {
            node.restart().expect("node restarts");
        }
        for node in &s.cluster.nodes[1..] {
            let waiting = wait_for("the replay to wait for a peer", DEADLINE, || {
                node.log_tail(usize::MAX)
                    .contains("recovery replay waits for a peer")
                    .then_some(())
            });
            if let Err(e) = waiting {
                s.fail(e);
            }
            let view = process_hub_actors::harness::census::view_of(&node.client())
                .unwrap_or_else(|e| s.fail(e));
            let running: Vec<&String> = view
                .iter()
                .filter(|(_, hosts)| hosts.contains(&node.node_name))
                .map(|(id, _)| id)
                .collect();
            assert!(
                running.is_empty(),
                "{}: {} heard no peer and runs {running:?}",
                s.what,
                node.name
            );
        }
    }
    for node in &mut s.cluster.nodes {
        if !node.is_running() {
            node.restart().expect("node restarts");
        }
    }
    s.ready();
    let expected = survivors(backend, auto_recovery, &plain, &durable);
    let absent: BTreeSet<String> = everything.difference(&expected).cloned().collect();
    s.expect("(c) whole-cluster outage", &expected, &absent);
    cluster.shutdown(Duration::from_secs(5));
}

/// Cell (b): a hub of one node (no `--join`) restarts.
fn survival_on_one_node(backend: BackendChoice, auto_recovery: bool) {
    let mut cluster =
        LocalCluster::start(binary(), 1, &survival_options(backend, auto_recovery), None)
            .expect("node spawns");
    let mut s = Survival {
        what: format!("single node, {backend:?}, auto-recovery {auto_recovery}"),
        cluster: &mut cluster,
        auto_recovery,
    };
    s.ready();
    let plain = ids("p");
    let durable = if auto_recovery {
        ids("d")
    } else {
        BTreeSet::new()
    };
    let client = s.cluster.nodes[0].client();
    start_children(&client, &plain, false);
    if auto_recovery {
        start_children(&client, &durable, true);
    }
    let everything: BTreeSet<String> = plain.union(&durable).cloned().collect();
    s.expect("every child running", &everything, &BTreeSet::new());
    s.cluster.nodes[0].kill();
    s.cluster.nodes[0].restart().expect("node restarts");
    s.ready();
    let expected = survivors(backend, auto_recovery, &plain, &durable);
    let absent: BTreeSet<String> = everything.difference(&expected).cloned().collect();
    s.expect("(b) the single node restarted", &expected, &absent);
    cluster.shutdown(Duration::from_secs(5));
}

/// Every cell of one backend: the cluster and the single node, with auto-recovery on and off,
/// the four side by side.
fn what_survives(backend: BackendChoice) {
    std::thread::scope(|scope| {
        let runs = [
            scope.spawn(move || survival_in_a_cluster(backend, true)),
            scope.spawn(move || survival_in_a_cluster(backend, false)),
            scope.spawn(move || survival_on_one_node(backend, true)),
            scope.spawn(move || survival_on_one_node(backend, false)),
        ];
        for run in runs {
            if let Err(panic) = run.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

#[test]
fn what_survives_on_the_memory_backend() {
    what_survives(BackendChoice::Memory);
}

#[test]
fn what_survives_on_the_lmdb_backend() {
    what_survives(BackendChoice::Lmdb);
}

#[test]
fn what_survives_on_the_durable_backend() {
    what_survives(BackendChoice::Durable);
}

/// Sends `signal` to a node process this test started (SIGSTOP freezes it: its connections
/// stay open and it answers nothing; SIGCONT lets it go on as if no time had passed).
fn signal_node(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)
        .unwrap_or_else(|e| panic!("{signal} to {pid}: {e}"));
}

/// Lets a frozen node go on when the test ends, whatever happened, so that the harness can stop
/// it gracefully.
struct Thaw(u32);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0 as i32),
            nix::sys::signal::Signal::SIGCONT,
        );
    }
}

#[test]
fn durable_stops_of_children_on_a_frozen_node_answer_pending_and_settle_when_it_returns() {
    // A long node-down grace: the frozen node's children stay bound to it for the whole test
    // (never re-placed), so every stop below meets an unreachable host.
    let mut opts = options(BackendChoice::Memory);
    opts.hub = "answers".into();
    opts.extra_args
        .extend(["--nodedown-grace-ms".into(), "600000".into()]);
    let mut cluster = LocalCluster::start(binary(), 3, &opts, None).expect("nodes spawn");
    let all = cluster.named_clients();
    let ready = cluster
        .wait_formed(DEADLINE)
        .and_then(|()| wait_for("every node to be normal", DEADLINE, || all_normal(&all)));
    if let Err(e) = ready {
        panic!("{e}\n{}", cluster.log_tails(40));
    }
    // 30 children over 3 nodes: the frozen node hosts some of them (all but certainly).
    let ids: Vec<String> = (0..30).map(|i| format!("z{i}")).collect();
    let started = cluster.nodes[1]
        .client()
        .start(&counter_specs(&ids, true))
        .expect("durable start");
    assert_eq!(started.started.len(), ids.len(), "{started:?}");
    let frozen = cluster.nodes[2].node_name.clone();
    let live: Vec<(String, AdminClient)> = all[..2].to_vec();
    let id_set: BTreeSet<String> = ids.iter().cloned().collect();
    // The same census twice, further apart than a reconcile interval and a redistribution
    // batch: no placement is moving (a migration's release and start would show in between).
    let stable = |clients: &[(String, AdminClient)]| -> Option<Census> {
        let first = Census::take(clients).ok()?;
        if !first.all_run_once(&id_set) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1_500));
        let second = Census::take(clients).ok()?;
        (second.views == first.views).then_some(second)
    };
    // Every copy, the node about to be frozen included, agrees and stands still.
    wait_for(
        "every copy to agree on every child's host, and stay",
        DEADLINE,
        || stable(&all),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));

    let pid = cluster.nodes[2].pid().expect("the node runs");
    signal_node(pid, nix::sys::signal::Signal::SIGSTOP);
    let thaw = Thaw(pid);
    // What the frozen node sent before the SIGSTOP may still be applied by the live nodes;
    // after that their bindings to it stay as they are (it sends nothing, its grace is 600 s).
    // The children on it are the ones both live copies then bind to it.
    let census = wait_for(
        "the live copies to settle after the freeze",
        DEADLINE,
        || stable(&live),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(40)));
    let host = |id: &String| census.hosts(id).into_iter().next().expect("placed");
    let on_frozen: Vec<String> = ids
        .iter()
        .filter(|id| host(id) == frozen)
        .cloned()
        .collect();
    assert!(!on_frozen.is_empty(), "{census:?}");
    let moved: Vec<&String> = started
        .started
        .iter()
        .filter(|s| s.nodes.iter().any(|n| n.node == frozen))
        .map(|s| &s.id)
        .filter(|id| !on_frozen.contains(id))
        .collect();
    if !moved.is_empty() {
        eprintln!("started on {frozen} but placed elsewhere before the freeze: {moved:?}");
    }
    let elsewhere = ids
        .iter()
        .find(|id| host(id) != frozen)
        .cloned()
        .expect("a child on another node");
    // Through both live nodes: the leader (the lowest name) and one that forwards to it.
    for (i, id) in on_frozen.iter().enumerate() {
        let client = &live[i % 2].1;
        let answer = client
            .stop(id)
            .unwrap_or_else(|e| panic!("the stop of {id} on the frozen node is no error: {e}"));
        assert!(
            answer.stopped.is_empty(),
            "{id}: {answer:?}\n{}",
            cluster.log_tails(40)
        );
        assert!(answer.errors.is_empty(), "{id}: {answer:?}");
        assert_eq!(answer.pending.len(), 1, "{id}: {answer:?}");
        assert_eq!(answer.pending[0].id, *id);
        assert_eq!(answer.pending[0].nodes, vec![frozen.clone()], "{answer:?}");
    }
    // A child on a live node stops at once, as ever.
    let answer = live[1].1.stop(&elsewhere).expect("a plain stop");
    assert_eq!(answer.stopped.len(), 1, "{answer:?}");
    assert!(answer.pending.is_empty(), "{answer:?}");
    // The list change is what was acknowledged: no live node declares them any more.
    let stopped: BTreeSet<String> = on_frozen
        .iter()
        .cloned()
        .chain([elsewhere.clone()])
        .collect();
    // (The leader answers once its copy committed; the other live node adopts the change from
    // its broadcast a moment later.)
    for (name, client) in &live {
        let kept = |client: &AdminClient| -> Option<Vec<String>> {
            let list = client.declared().ok()?;
            Some(
                list.children
                    .iter()
                    .map(|c| c.id.clone())
                    .filter(|id| stopped.contains(id))
                    .collect(),
            )
        };
        if let Err(e) = wait_for(
            "the live nodes to drop the stopped children",
            DEADLINE,
            || kept(client).filter(Vec::is_empty).map(|_| ()),
        ) {
            panic!("{name} still declares {:?}: {e}", kept(client));
        }
    }

    // The node comes back: it sees the list and stops what it still runs of them.
    signal_node(pid, nix::sys::signal::Signal::SIGCONT);
    drop(thaw);
    let declared: BTreeSet<String> = ids
        .iter()
        .filter(|id| !stopped.contains(*id))
        .cloned()
        .collect();
    if let Err(e) = wait_for("the pending stops to settle", DEADLINE, || {
        settled(&all, &declared, &stopped)
    }) {
        let census = Census::take(&all).map(|c| c.resurrected(&stopped));
        panic!("{e}: still running {census:?}\n{}", cluster.log_tails(60));
    }
    // A stop of a child that is gone changed nothing: 404.
    match live[0].1.stop(&on_frozen[0]) {
        Err(AdminClientError::Status { status, body, .. }) => {
            assert_eq!(status, 404, "{body}");
            assert!(body.contains("not_found"), "{body}");
        }
        other => panic!("a stop of a gone child: {other:?}"),
    }
}
