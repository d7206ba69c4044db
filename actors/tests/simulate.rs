//! `process-hub simulate` as a user runs it: a sweep's JSON line, a seed's trace and its hash, and
//! for each invariant a bug that the sweep catches, with the failing seed and the command that
//! replays it.

use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_process-hub"))
        .arg("simulate")
        .args(args)
        .output()
        .unwrap()
}

fn last_json(output: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line {last:?} is not JSON: {e}"))
}

#[test]
fn a_sweep_prints_its_totals_as_the_last_json_line() {
    let output = simulate(&["--seeds", "6", "--from", "40", "--json", "--jobs", "2"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report = last_json(&output);
    assert_eq!(report["seeds"], 6);
    assert_eq!(report["failed"], serde_json::json!([]));
    for key in ["steps", "invariant_checks", "virtual_ms", "wall_ms"] {
        assert!(report[key].as_u64().unwrap() > 0, "{key} in {report}");
    }
    // Virtual time runs far ahead of the wall clock.
    assert!(report["virtual_ms"].as_u64().unwrap() > report["wall_ms"].as_u64().unwrap());
    // The longest double run within connected nodes is measured (0 when none ran twice).
    assert!(report["worst_double_ms"].is_u64(), "{report}");
    assert!(stderr.contains("6/6 seeds"), "progress on stderr: {stderr}");
}

#[test]
fn one_seed_replays_the_same_trace_every_time() {
    let first = simulate(&["--seed", "11", "--trace"]);
    let second = simulate(&["--seed", "11", "--trace"]);
    assert!(first.status.success());
    let (a, b) = (
        String::from_utf8_lossy(&first.stdout),
        String::from_utf8_lossy(&second.stdout),
    );
    let hash = |out: &str| {
        out.lines()
            .last()
            .and_then(|l| l.strip_prefix("trace_hash="))
            .map(str::to_owned)
    };
    assert!(hash(&a).is_some_and(|h| h.len() == 16), "{a}");
    assert_eq!(hash(&a), hash(&b));
    // Not only the hash: the whole trace, line for line (wall times excepted).
    let trace = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| !l.starts_with("seed "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(trace(&a), trace(&b));
    assert!(a.contains("frame"), "the trace shows the frames");
    let other = simulate(&["--seed", "12"]);
    assert_ne!(
        hash(&String::from_utf8_lossy(&other.stdout)),
        hash(&a),
        "another seed is another run"
    );
}

/// A sweep with `bug` injected fails; the failing seed names `invariant` and how to replay it.
fn caught(bug: &str, invariant: &str, seeds: &str) {
    caught_with(bug, invariant, &["--seeds", seeds]);
}

/// [`caught`] with every seed run `migration = hot`.
fn caught_hot(bug: &str, invariant: &str, seeds: &str) {
    caught_with(bug, invariant, &["--seeds", seeds, "--migration", "hot"]);
}

/// [`caught`] with the sweep's flags; returns the failing seed's line.
fn caught_with(bug: &str, invariant: &str, sweep: &[&str]) -> String {
    // One job, stopping at the first seed that catches the bug: the tests of this file run
    // beside each other, and the seeds after a caught one would show nothing more.
    let mut args = sweep.to_vec();
    args.extend(["--json", "--jobs", "1", "--fail-fast", "--inject-bug", bug]);
    let output = simulate(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "a sweep with {bug} passed: {stderr}"
    );
    let report = last_json(&output);
    let failed = report["failed"].as_array().unwrap();
    assert!(!failed.is_empty(), "{report}");
    let seed = failed[0].as_u64().unwrap();
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&format!("seed {seed} FAILED")))
        .unwrap_or_else(|| panic!("no failure line for seed {seed}: {stderr}"));
    assert!(
        line.contains(&format!(": {invariant}: ")),
        "{bug} should break {invariant}: {line}"
    );
    assert!(
        line.contains(&format!("bash scripts/simulate.sh --seed {seed} --trace")),
        "{line}"
    );
    line.to_owned()
}

#[test]
fn an_acknowledged_start_that_was_never_declared_is_caught() {
    caught("acknowledge_without_declaring", "declared_run_once", "4");
}

#[test]
fn a_durable_stop_that_leaves_the_child_declared_is_caught() {
    caught("stop_without_undeclaring", "stopped_stays_stopped", "4");
}

#[test]
fn peers_reports_that_are_dropped_are_caught() {
    // A node that drops its peers' reports of what they run starts their children again: the
    // child runs on two connected nodes past the bound before the registries are compared.
    caught("ignore_peer_bindings", "double_run_bounded", "6");
}

#[test]
fn children_that_never_move_to_their_owner_are_caught() {
    // A child that never moves to its new owner is started there by the owner's own pass while
    // the old host keeps it: two connected nodes past the bound.
    caught("never_migrate", "double_run_bounded", "4");
}

#[test]
fn a_node_adopting_an_older_copy_is_caught() {
    caught("adopt_older_copies", "versions_monotonic", "40");
}

#[test]
fn a_stop_request_never_answered_is_caught() {
    caught("forget_stop_replies", "requests_answered", "4");
}

#[test]
fn two_leaving_nodes_handing_children_to_each_other_are_caught() {
    caught(
        "hand_over_without_goodbye_answers",
        "no_handover_to_leaving",
        "2",
    );
}

#[test]
fn typed_calls_never_answered_are_caught() {
    caught("ignore_typed_calls", "calls_answered", "2");
}

#[test]
fn typed_casts_lost_are_caught() {
    caught("drop_typed_casts", "casts_in_order", "2");
}

#[test]
fn a_monitor_firing_twice_is_caught() {
    caught("deliver_monitors_twice", "monitors_fire_once", "2");
}

#[test]
fn a_hot_moved_state_never_given_to_the_new_instance_is_caught() {
    caught_hot("drop_handover_import", "handover_state_kept", "2");
}

#[test]
fn calls_answered_by_the_old_instance_after_its_export_are_caught() {
    // Seed 2 answers a call on the old node between the export and the import. (The bug forks
    // the state too, once both instances answer: seed 1 is caught by `handover_state_kept`.)
    caught_with(
        "answer_calls_during_move",
        "no_acked_message_lost_across_move",
        &[
            "--seeds",
            "1",
            "--from",
            "2",
            "--migration",
            "hot",
            "--distribution",
            "consistent-hash",
        ],
    );
}

#[test]
fn one_seed_in_three_runs_hot_and_says_so() {
    let hot = simulate(&["--seed", "1", "--trace"]);
    let out = String::from_utf8_lossy(&hot.stdout);
    assert!(hot.status.success(), "{out}");
    assert!(
        out.lines().next().unwrap().ends_with(", migration hot"),
        "{out}"
    );
    assert!(out.contains("seed 1: migration hot"), "{out}");
    assert!(out.contains(": imported "), "hot moves in the trace: {out}");
    let cold = simulate(&["--seed", "2"]);
    assert!(String::from_utf8_lossy(&cold.stdout).contains("seed 2: migration cold"));
}

#[test]
fn partial_partitions_forced_strike_heal_and_say_so() {
    let run = simulate(&["--seed", "3", "--trace", "--partial-partitions"]);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{out}");
    assert!(
        out.lines().next().unwrap().ends_with(", partial faults"),
        "{out}"
    );
    let faults = ["partial cut", "one-way drop", "lossy link", "flapping link"];
    let struck = out
        .lines()
        .filter(|l| l.contains(".p: ") && !l.contains(".p: heal "))
        .filter(|l| faults.iter().any(|f| l.contains(f)))
        .count();
    assert!(struck > 0, "no partial fault struck: {out}");
    assert!(out.contains(".p: heal "), "a partial fault healed: {out}");
    assert!(
        out.contains("seed 3: migration cold, partial faults"),
        "{out}"
    );
    assert!(
        out.contains("no child ran twice within connected nodes")
            || out.contains("longest double run within connected nodes: "),
        "{out}"
    );
}

#[test]
fn a_forced_node_count_boots_that_many_nodes_and_the_seed_passes() {
    // Few steps: a 12-node run costs several 3-node runs.
    let run = simulate(&["--seed", "5", "--nodes", "12", "--steps", "8", "--trace"]);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{out}");
    // Seed 5 is a quorum run: a majority of the 13 nodes the run may grow to.
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains(" 12 nodes, registry on disk, majority quorum"),
        "{out}"
    );
    assert!(
        out.contains("frame n12 -> "),
        "the twelfth node takes part: {out}"
    );
    assert!(!out.contains("FAILED"), "{out}");
    assert!(out.contains(", 8 steps, "), "every step ran: {out}");
    // Without the flag the seed draws its own 3 or 4.
    let drawn = simulate(&["--seed", "5", "--steps", "1", "--trace"]);
    let first = String::from_utf8_lossy(&drawn.stdout);
    let first = first.lines().next().unwrap_or_default();
    assert!(
        first.contains(" 3 nodes, ") || first.contains(" 4 nodes, "),
        "{first}"
    );
    let refused = simulate(&["--seed", "5", "--nodes", "0"]);
    assert_eq!(refused.status.code(), Some(2), "0 nodes is refused");
}

#[test]
fn a_bad_flag_is_refused() {
    let output = simulate(&["--seeds", "1", "--inject-bug", "nonsense"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown bug"), "{stderr}");
}

#[test]
fn two_active_replicas_are_caught() {
    caught("every_replica_active", "one_active_replica", "4");
}

#[test]
fn a_replica_lost_with_its_node_and_never_re_created_is_caught() {
    // Placed by the ring: in a load-balanced run the same lost replica may be seen first by
    // `load_balanced` (its row records a node that does not run it).
    caught_with(
        "skip_replica_recreation",
        "registries_agree",
        &["--seeds", "12", "--distribution", "consistent-hash"],
    );
}

#[test]
fn active_active_runs_hold_each_child_on_its_owners() {
    // Under active-active every replica is active (`one_active_replica` does not apply), and
    // each child still runs on exactly its two owners once settled.
    let line = caught_with(
        "skip_replica_recreation",
        "registries_agree",
        &[
            "--seeds",
            "2",
            "--distribution",
            "consistent-hash",
            "--replication-factor",
            "2",
            "--replication-model",
            "active-active",
        ],
    );
    assert!(
        line.ends_with("--replication-factor 2 --replication-model active-active)"),
        "the replay names every forced flag: {line}"
    );
}

#[test]
fn a_rotating_sweep_forces_each_seeds_family_and_replays_it() {
    // Seeds 42 and 43 fall in the seventh family (`(s / 7) % 7 == 6`): two active-passive
    // replicas, forced, so the bug that makes both active is caught on either seed.
    let line = caught_with(
        "every_replica_active",
        "one_active_replica",
        &["--from", "42", "--seeds", "2", "--rotate-forced"],
    );
    assert!(
        line.ends_with("--replication-factor 2 --replication-model active-passive)"),
        "{line}"
    );
}

#[test]
fn a_node_that_ignores_the_load_balancer_is_caught() {
    caught("ignore_rebalance", "load_balanced", "2");
}

#[test]
fn a_node_that_keeps_its_children_without_quorum_is_caught() {
    // Seeds 33 and 40 are quorum runs that split the cluster cleanly; the seeds between run
    // without a quorum, where the bug changes nothing.
    caught_with(
        "keep_children_without_quorum",
        "quorum_one_side",
        &["--from", "33", "--seeds", "8"],
    );
}

#[test]
fn a_node_that_takes_work_without_quorum_is_caught() {
    caught_with(
        "accept_without_quorum",
        "quorum_no_minority_ack",
        &["--from", "33", "--seeds", "1"],
    );
}

#[test]
fn gossip_that_never_repairs_a_lost_delta_is_caught() {
    // Without rounds nor requests for a sync, a gossip delta lost to a dropping link is never
    // made good: once the cluster is healed and quiet, a node still lacks bindings its peers
    // hold (seed 13, every hub gossiping, no partial fault drawn; on other seeds the stale copy
    // shows first as a child run twice past the bound, or a declared child not run).
    caught_with(
        "gossip_without_rounds",
        "registries_agree",
        &[
            "--from",
            "13",
            "--seeds",
            "2",
            "--sync",
            "gossip:1000:2",
            "--no-partial-partitions",
        ],
    );
}

#[test]
fn a_node_acting_on_its_own_view_of_a_partial_partition_is_caught() {
    // Seed 8 with partial faults: a partition of three nodes leaves the restarted n1 in no
    // group, so n2 and n4 reach each other only through it; a node that takes a peer it does
    // not reach for down re-places its children, and d19 runs on n2 and n4 past the bound.
    caught_with(
        "act_on_own_view",
        "double_run_bounded",
        &["--from", "8", "--seeds", "1", "--partial-partitions"],
    );
}

#[test]
fn an_error_answered_for_a_change_that_happened_is_caught() {
    caught_with(
        "error_after_undeclaring",
        "answers_truthful",
        &["--from", "6", "--seeds", "1"],
    );
}
