//! The round schedule and the start pacer, driven by a test clock.

use proptest::prelude::*;

use super::*;

fn config(grace: u64, interval: u64) -> AutoRecoveryConfig {
    AutoRecoveryConfig {
        reconcile_grace_ms: grace,
        reconcile_interval_ms: interval,
        ..AutoRecoveryConfig::default()
    }
}

#[test]
fn without_auto_recovery_the_hub_is_normal_from_init() {
    let mut s = RoundSchedule::new(None, 0);
    assert_eq!(s.state(), RecoveryState::Normal);
    s.on_sync_completed();
    assert_eq!(s.poll(u64::MAX), RoundDecision::Idle);
}

#[test]
fn the_first_round_runs_after_the_grace_with_or_without_peers() {
    let mut s = RoundSchedule::new(Some(&config(500, 1_000)), 100);
    assert_eq!(s.state(), RecoveryState::Recovering);
    assert_eq!(s.poll(100), RoundDecision::WaitUntil(600));
    assert_eq!(s.poll(599), RoundDecision::WaitUntil(600));
    // No sync has completed (a lone node): the first round runs anyway.
    assert_eq!(s.poll(600), RoundDecision::Start { first: true });
    assert!(s.running());
    assert_eq!(s.poll(700), RoundDecision::Idle, "never two rounds at once");
    assert_eq!(
        s.on_round_completed(),
        Some(StateTransition {
            from: RecoveryState::Recovering,
            to: RecoveryState::Normal
        })
    );
    assert_eq!(s.state(), RecoveryState::Normal);
}

#[test]
fn later_rounds_follow_syncs_at_most_one_per_interval() {
    let mut s = RoundSchedule::new(Some(&config(50, 1_000)), 0);
    assert_eq!(s.poll(50), RoundDecision::Start { first: true });
    s.on_round_completed();
    // Quiet: no sync, no round.
    assert_eq!(s.poll(10_000), RoundDecision::Idle);
    s.on_sync_completed();
    assert_eq!(s.poll(10_000), RoundDecision::Start { first: false });
    assert_eq!(s.on_round_completed(), None, "normal is terminal");
    // A sync right after: rate-limited to the interval after the last round's start.
    s.on_sync_completed();
    s.on_sync_completed();
    assert_eq!(s.poll(10_200), RoundDecision::WaitUntil(11_000));
    assert_eq!(s.poll(11_000), RoundDecision::Start { first: false });
    s.on_round_completed();
    assert_eq!(
        s.poll(20_000),
        RoundDecision::Idle,
        "the two syncs made one round"
    );
}

#[test]
fn a_sync_during_a_round_asks_for_another() {
    let mut s = RoundSchedule::new(Some(&config(50, 1_000)), 0);
    assert_eq!(s.poll(50), RoundDecision::Start { first: true });
    s.on_sync_completed();
    s.on_round_completed();
    assert_eq!(s.poll(1_050), RoundDecision::Start { first: false });
}

#[test]
fn an_aborted_first_round_stays_recovering_and_retries() {
    let mut s = RoundSchedule::new(Some(&config(50, 1_000)), 0);
    assert_eq!(s.poll(50), RoundDecision::Start { first: true });
    s.on_round_aborted();
    assert_eq!(s.state(), RecoveryState::Recovering);
    assert_eq!(s.poll(60), RoundDecision::WaitUntil(1_050));
    assert_eq!(s.poll(1_050), RoundDecision::Start { first: false });
    assert!(s.on_round_completed().is_some());
}

#[test]
fn a_parked_round_is_followed_by_another_one_interval_later() {
    let mut s = RoundSchedule::new(Some(&config(50, 1_000)), 0);
    assert_eq!(s.poll(50), RoundDecision::Start { first: true });
    s.on_round_completed();
    s.on_round_parked();
    // No sync came: the parked round asks for the next one itself, rate-limited as ever.
    assert_eq!(s.poll(60), RoundDecision::WaitUntil(1_050));
    assert_eq!(s.poll(1_050), RoundDecision::Start { first: false });
    s.on_round_completed();
    assert_eq!(
        s.poll(5_000),
        RoundDecision::Idle,
        "a round that was not parked asks for nothing"
    );
    let mut off = RoundSchedule::new(None, 0);
    off.on_round_parked();
    assert_eq!(off.poll(u64::MAX), RoundDecision::Idle);
}

#[test]
fn the_pacer_spreads_a_cold_start() {
    let budget = StartBudget {
        max_starts_per_second: 1_000,
        max_starts_per_round: None,
    };
    let mut p = StartPacer::new(&budget, 0);
    let g = p.grant(2_500, 0);
    assert_eq!(g.now, 1_000, "one second's burst");
    assert_eq!(g.retry_at_ms, Some(1));
    let g = p.grant(1_500, 500);
    assert_eq!(g.now, 500);
    let g = p.grant(1_000, 1_500);
    assert_eq!(g.now, 1_000);
    assert_eq!(g.retry_at_ms, None);
}

/// The default budget is admission control for runaway lists, not a brake on a healthy
/// recovery: a node's share of a 250,000-child outage on 3 nodes goes through at once.
#[test]
fn the_default_budget_does_not_pace_a_nodes_share_of_a_large_recovery() {
    let mut p = StartPacer::new(&StartBudget::default(), 0);
    let share = 250_000 / 3 + 1;
    let g = p.grant(share, 0);
    assert_eq!(g.now, share);
    assert_eq!(g.retry_at_ms, None);
    // A list far beyond that is still paced.
    let g = p.grant(1_000_000, 1);
    assert!(g.now < 1_000_000 && g.retry_at_ms.is_some(), "{g:?}");
}

#[test]
fn the_round_quota_leaves_the_rest_for_the_next_round() {
    let budget = StartBudget {
        max_starts_per_second: 1_000_000,
        max_starts_per_round: Some(10),
    };
    let mut p = StartPacer::new(&budget, 0);
    assert_eq!(
        p.grant(25, 0),
        Grant {
            now: 10,
            retry_at_ms: None
        }
    );
    assert_eq!(p.grant(15, 1).now, 0);
    p.begin_round();
    assert_eq!(p.grant(15, 2).now, 10);
}

proptest! {
    /// However requests arrive, the pacer never grants more than the bucket allows: one
    /// second's burst plus the refill since the start.
    #[test]
    fn the_pacer_never_exceeds_its_rate(
        rate in 1u32..5_000,
        steps in prop::collection::vec((0u64..2_000, 0usize..10_000), 1..30),
    ) {
        let budget = StartBudget { max_starts_per_second: rate, max_starts_per_round: None };
        let mut p = StartPacer::new(&budget, 0);
        let mut now = 0;
        let mut granted = 0u64;
        for (dt, wanted) in steps {
            now += dt;
            let g = p.grant(wanted, now);
            prop_assert!(g.now <= wanted);
            if g.now < wanted {
                prop_assert!(g.retry_at_ms.unwrap() > now);
            }
            granted += g.now as u64;
            let allowed = u64::from(rate) + now * u64::from(rate) / 1000;
            prop_assert!(granted <= allowed, "{} > {}", granted, allowed);
        }
    }
}

#[test]
fn a_long_round_is_followed_by_a_rest_twice_as_long() {
    let mut s = RoundSchedule::new(Some(&config(50, 1_000)), 0);
    assert_eq!(s.poll(50), RoundDecision::Start { first: true });
    // The round took 10 s (a scan of a million rows): done at 10,050.
    s.on_round_completed();
    s.rest_after(10_000, 10_050);
    s.on_sync_completed();
    assert_eq!(
        s.poll(10_050),
        RoundDecision::WaitUntil(10_050 + ROUND_REST_FACTOR * 10_000)
    );
    assert_eq!(
        s.poll(10_050 + ROUND_REST_FACTOR * 10_000),
        RoundDecision::Start { first: false }
    );
    // A short round rests less than the interval: the interval rules.
    s.on_round_completed();
    s.rest_after(5, 30_055);
    s.on_sync_completed();
    assert_eq!(s.poll(30_060), RoundDecision::WaitUntil(31_050));
}
