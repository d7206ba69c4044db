//! The single-node API, ported from the original's suite (empty start, async and awaited
//! starts, duplicates, timeout 0, the same spec twice in one call, failing child starts,
//! rollback, stopping unknown and known children) plus lookups, options and `HubMsg`.

use crate::common;

use std::time::Duration;

use common::{spawn_hub, spawn_with, wait_until};
use process_hub::{
    ChildId, ChildSpec, ChildStartError, ChildStopError, Hub, HubMsg, OnFailure, ProcessHub,
    ProcessScope, Restart, SpawnError, StartError, StartOptions, StopError, StopOptions,
};
use process_hub_actors::counter::{CounterArgs, CounterMsg};
use process_hub_actors::crasher::CrasherArgs;
use ractor::call_t;

fn counter(id: &str) -> ChildSpec {
    ChildSpec::new(id, "counter")
}

fn ids(n: usize, prefix: &str) -> Vec<ChildSpec> {
    (0..n).map(|i| counter(&format!("{prefix}{i}"))).collect()
}

#[tokio::test]
async fn empty_start_is_no_children() {
    let hub = spawn_hub("api-empty").await;
    assert_eq!(
        hub.start_children(vec![], StartOptions::new()).await,
        Err(StartError::NoChildren)
    );
    assert_eq!(
        hub.stop_children(vec![], StopOptions::new()).await,
        Err(StopError::NoChildren)
    );
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn awaited_start_records_every_child_and_lookups_see_them() {
    let hub = spawn_hub("api-awaited").await;
    let opts = StartOptions::new().tag("web").metadata("owner", "team-a");
    let result = hub.start_children(ids(50, "c"), opts).await.unwrap();
    assert!(result.awaited && result.is_ok(), "{result:?}");
    assert_eq!(result.started.len(), 50);
    // Awaited means recorded: every lookup answers right away.
    let node = hub.node().clone();
    for s in &result.started {
        let info = hub.child_lookup(&s.id).expect("row exists");
        assert_eq!(info.nodes, s.nodes);
        assert_eq!(info.nodes[0].0, node);
        assert!(info.metadata.is_none());
        let with = hub.child_lookup_with_metadata(&s.id).unwrap();
        assert_eq!(with.metadata.unwrap()["owner"], "team-a");
        assert_eq!(hub.get_pid(&s.id), Some(s.nodes[0].1));
        assert!(hub.local_child(&s.id).is_some());
    }
    assert_eq!(hub.process_list(ProcessScope::Global).len(), 50);
    assert_eq!(hub.process_list(ProcessScope::Local).len(), 50);
    assert_eq!(hub.tag_query("web").len(), 50);
    assert!(hub.tag_query("db").is_empty());
    assert_eq!(hub.registry_dump().len(), 50);
    assert_eq!(hub.nodes(true), vec![node.clone()]);
    assert!(hub.nodes(false).is_empty());
    assert!(hub.is_alive());
    hub.shutdown().await.unwrap();
    assert!(!hub.is_alive());
}

#[tokio::test]
async fn async_start_returns_once_initiated_and_children_appear() {
    let hub = spawn_hub("api-async").await;
    let result = hub
        .start_children(ids(20, "a"), StartOptions::new().awaitable(false))
        .await
        .unwrap();
    assert!(!result.awaited);
    assert!(result.started.is_empty() && result.errors.is_empty());
    wait_until("20 children registered", || hub.registry_dump().len() == 20).await;
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn duplicates_are_refused_with_already_started() {
    let hub = spawn_hub("api-dup").await;
    let first = hub
        .start_child(counter("d"), StartOptions::new())
        .await
        .unwrap();
    assert!(first.is_ok());
    let pid = first.pid_of(&"d".into()).unwrap();
    let again = hub
        .start_child(counter("d"), StartOptions::new())
        .await
        .unwrap();
    assert!(again.started.is_empty());
    assert_eq!(again.errors[0].reason, ChildStartError::AlreadyStarted);
    // Without check_existing, a child already running on its node counts as started (OTP's
    // `already_started` with the pid), so a start is idempotent.
    let idem = hub
        .start_child(counter("d"), StartOptions::new().check_existing(false))
        .await
        .unwrap();
    assert_eq!(idem.pid_of(&"d".into()), Some(pid));
    assert_eq!(hub.registry_dump().len(), 1);
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn same_spec_twice_in_one_call_is_one_start_and_one_error() {
    let hub = spawn_hub("api-twice").await;
    let result = hub
        .start_children(
            vec![counter("x"), counter("x"), counter("y")],
            StartOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(result.started.len(), 2);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(result.errors[0].id.as_str(), "x");
    assert_eq!(result.errors[0].reason, ChildStartError::AlreadyStarted);
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn timeout_zero_reports_node_receive_timeout() {
    let hub = spawn_hub("api-timeout0").await;
    let result = hub
        .start_children(ids(5, "t"), StartOptions::new().timeout(Duration::ZERO))
        .await
        .unwrap();
    assert!(result.started.is_empty());
    assert_eq!(result.errors.len(), 5);
    assert!(result
        .errors
        .iter()
        .all(|e| e.reason == ChildStartError::NodeReceiveTimeout));
    // As in the original, the children were delivered and still start.
    wait_until("timed-out children still start", || {
        hub.registry_dump().len() == 5
    })
    .await;
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn failing_child_starts_are_typed_errors_not_crashes() {
    let hub = spawn_hub("api-failing").await;
    let specs = vec![
        counter("ok"),
        ChildSpec::new("nokind", "no_such_kind"),
        counter("badargs").with_args(&"not an object").unwrap(),
        ChildSpec::new("prefail", "crasher")
            .with_args(&CrasherArgs {
                fail_in_pre_start: true,
                ..Default::default()
            })
            .unwrap(),
        ChildSpec::new("prepanic", "crasher")
            .with_args(&CrasherArgs {
                panic_in_pre_start: true,
                ..Default::default()
            })
            .unwrap(),
    ];
    let result = hub
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    assert_eq!(result.started_ids(), vec![ChildId::from("ok")]);
    let reason = |id: &str| {
        result
            .errors
            .iter()
            .find(|e| e.id.as_str() == id)
            .unwrap()
            .reason
            .clone()
    };
    // Refused where the request entered, listing the kinds there are.
    let unknown = reason("nokind");
    assert!(
        matches!(&unknown, ChildStartError::UnknownKind { kind, known }
            if kind == "no_such_kind" && known.iter().any(|k| k == "counter")),
        "{unknown:?}"
    );
    assert!(
        unknown
            .to_string()
            .starts_with(r#"unknown child kind "no_such_kind"; known kinds: counter"#),
        "{unknown}"
    );
    assert!(matches!(
        reason("badargs"),
        ChildStartError::InvalidArgs { .. }
    ));
    assert!(matches!(
        reason("prefail"),
        ChildStartError::StartupFailed { .. }
    ));
    assert!(matches!(
        reason("prepanic"),
        ChildStartError::StartupFailed { .. }
    ));
    assert!(hub.is_alive());
    assert_eq!(hub.registry_dump().len(), 1);
    // The hub keeps working after the failures.
    assert!(hub
        .start_child(counter("after"), StartOptions::new())
        .await
        .unwrap()
        .is_ok());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn rollback_leaves_nothing_behind() {
    let hub = spawn_hub("api-rollback").await;
    let mut specs = ids(10, "rb");
    specs.push(ChildSpec::new("rb-bad", "no_such_kind"));
    let result = hub
        .start_children(specs, StartOptions::new().on_failure(OnFailure::Rollback))
        .await
        .unwrap();
    assert!(result.rollback);
    assert!(result.started.is_empty());
    assert_eq!(result.rolled_back.len(), 10);
    assert_eq!(result.errors.len(), 1);
    assert!(hub.registry_dump().is_empty());
    assert!(hub.process_list(ProcessScope::Local).is_empty());
    for i in 0..10 {
        assert!(hub.local_child(&format!("rb{i}").into()).is_none());
    }
    // Continue (the default) keeps what started.
    let mut specs = ids(3, "keep");
    specs.push(ChildSpec::new("keep-bad", "no_such_kind"));
    let result = hub
        .start_children(specs, StartOptions::new())
        .await
        .unwrap();
    assert!(!result.rollback);
    assert_eq!(result.started.len(), 3);
    assert_eq!(hub.registry_dump().len(), 3);
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn stop_unknown_and_known_children() {
    let hub = spawn_hub("api-stop").await;
    let unknown = hub.stop_child("ghost", StopOptions::new()).await.unwrap();
    assert!(unknown.stopped.is_empty());
    assert_eq!(unknown.errors[0].reason, ChildStopError::NotFound);
    assert_eq!(unknown.errors[0].node, None);

    let started = hub
        .start_children(ids(3, "s"), StartOptions::new())
        .await
        .unwrap();
    let cell = hub.local_child(&"s0".into()).unwrap();
    let result = hub
        .stop_children(
            vec!["s0".into(), "s1".into(), "nope".into()],
            StopOptions::new(),
        )
        .await
        .unwrap();
    let stopped: Vec<_> = result.stopped.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(stopped, ["s0", "s1"]);
    assert_eq!(result.stopped[0].nodes, vec![hub.node().clone()]);
    assert_eq!(result.errors.len(), 1);
    assert_eq!(cell.get_status(), ractor::ActorStatus::Stopped);
    assert!(hub.child_lookup(&"s0".into()).is_none());
    assert!(hub.child_lookup(&"s2".into()).is_some());
    assert_eq!(started.started.len(), 3);
    // Non-awaitable stop.
    let r = hub
        .stop_child("s2", StopOptions::new().awaitable(false))
        .await
        .unwrap();
    assert!(!r.awaited);
    wait_until("s2 leaves the registry", || hub.registry_dump().is_empty()).await;
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn invalid_options_are_rejected_with_the_right_error() {
    let hub = spawn_hub("api-opts").await;
    let reserved = StartOptions::new().metadata(process_hub::model::RESERVED_METADATA_KEY, "x");
    assert!(matches!(
        hub.start_child(counter("r"), reserved).await,
        Err(StartError::ReservedMetadataKey(_))
    ));
    let rollback_async = StartOptions::new()
        .awaitable(false)
        .on_failure(OnFailure::Rollback);
    assert!(matches!(
        hub.start_child(counter("r"), rollback_async).await,
        Err(StartError::InvalidOption {
            option: "on_failure",
            ..
        })
    ));
    let huge = StartOptions::new().timeout(Duration::from_secs(10_000));
    assert!(matches!(
        hub.start_child(counter("r"), huge).await,
        Err(StartError::InvalidOption {
            option: "timeout",
            ..
        })
    ));
    assert!(matches!(
        hub.stop_child("r", StopOptions::new().timeout(Duration::from_secs(10_000)))
            .await,
        Err(StopError::InvalidOption {
            option: "timeout",
            ..
        })
    ));
    let bad_id = hub
        .start_child(ChildSpec::new("", "counter"), StartOptions::new())
        .await
        .unwrap();
    assert!(matches!(
        bad_id.errors[0].reason,
        ChildStartError::InvalidId { .. }
    ));
    assert!(hub.registry_dump().is_empty());
    hub.shutdown().await.unwrap();

    // Config options are checked at spawn and name the option.
    let bad = ProcessHub::builder("api-opts-cfg")
        .restart_intensity(10, 0)
        .build_unchecked();
    match Hub::spawn(bad, process_hub_actors::default_kinds()).await {
        Err(SpawnError::Config(process_hub::ConfigError::OutOfRange { option, .. })) => {
            assert_eq!(option, "max_seconds")
        }
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn the_api_works_as_hub_messages() {
    let hub = spawn_hub("api-msg").await;
    let actor = hub.actor();
    let spec = counter("m").with_args(&CounterArgs { start: 41 }).unwrap();
    let t = Some(Duration::from_secs(10));
    let result = actor
        .call(
            |reply| HubMsg::StartChild {
                spec,
                opts: StartOptions::new(),
                reply,
            },
            t,
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(result.is_ok());
    let info = actor
        .call(
            |reply| HubMsg::ChildLookup {
                id: "m".into(),
                with_metadata: true,
                reply,
            },
            t,
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(info.spec.kind, "counter");
    assert!(info.metadata.is_some());
    // The child is a real actor with a typed message API.
    let child = hub.local_child_ref::<CounterMsg>(&"m".into()).unwrap();
    child.cast(CounterMsg::Increment(1)).unwrap();
    assert_eq!(call_t!(child, CounterMsg::Get, 10_000).unwrap(), 42);
    let list = actor
        .call(
            |reply| HubMsg::ProcessList {
                scope: ProcessScope::Global,
                reply,
            },
            t,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(list.len(), 1);
    let stopped = actor
        .call(
            |reply| HubMsg::StopChild {
                id: "m".into(),
                opts: StopOptions::new(),
                reply,
            },
            t,
        )
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(stopped.is_ok());
    let dump = actor
        .call(|reply| HubMsg::RegistryDump { reply }, t)
        .await
        .unwrap()
        .unwrap();
    assert!(dump.is_empty());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn static_children_start_at_boot_or_boot_fails() {
    let config = ProcessHub::builder("api-static")
        .child_spec(counter("boot-1"))
        .child_spec(counter("boot-2").with_restart(Restart::Transient))
        .build()
        .unwrap();
    let hub = spawn_with(config).await;
    assert!(hub.child_lookup(&"boot-1".into()).is_some());
    assert!(hub.child_lookup(&"boot-2".into()).is_some());
    hub.shutdown().await.unwrap();

    let config = ProcessHub::builder("api-static-bad")
        .child_spec(counter("fine"))
        .child_spec(ChildSpec::new("broken", "no_such_kind"))
        .build()
        .unwrap();
    match Hub::spawn(config, process_hub_actors::default_kinds()).await {
        Err(SpawnError::StaticChildren { errors }) => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].id.as_str(), "broken");
        }
        other => panic!("expected StaticChildren, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_starts_of_one_id_yield_one_child() {
    let hub = spawn_hub("api-concurrent").await;
    let attempts = (0..16).map(|_| {
        let hub = hub.clone();
        tokio::spawn(async move {
            hub.start_child(counter("contended"), StartOptions::new())
                .await
        })
    });
    let mut started = 0;
    let mut refused = 0;
    for attempt in futures::future::join_all(attempts).await {
        let result = attempt.unwrap().unwrap();
        started += result.started.len();
        refused += result
            .errors
            .iter()
            .filter(|e| e.reason == ChildStartError::AlreadyStarted)
            .count();
    }
    assert_eq!((started, refused), (1, 15));
    assert_eq!(hub.registry_dump().len(), 1);
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn hubs_in_one_process_are_independent() {
    let a = spawn_hub("api-indep-a").await;
    let b = spawn_hub("api-indep-b").await;
    assert!(a
        .start_child(counter("same"), StartOptions::new())
        .await
        .unwrap()
        .is_ok());
    assert!(b
        .start_child(counter("same"), StartOptions::new())
        .await
        .unwrap()
        .is_ok());
    assert_ne!(a.get_pid(&"same".into()), b.get_pid(&"same".into()));
    a.stop_child("same", StopOptions::new()).await.unwrap();
    assert!(a.child_lookup(&"same".into()).is_none());
    assert!(b.child_lookup(&"same".into()).is_some());
    a.shutdown().await.unwrap();
    assert!(b.is_alive());
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stop_followed_at_once_by_a_start_keeps_the_new_child_recorded() {
    let hub = spawn_hub("api-stop-start").await;
    let slow = ChildSpec::new("phoenix", "crasher")
        .with_args(&CrasherArgs {
            slow_stop_ms: 200,
            ..Default::default()
        })
        .unwrap();
    hub.start_child(slow.clone(), StartOptions::new())
        .await
        .unwrap();
    let old = hub.local_child(&"phoenix".into()).unwrap();
    let (_, mut rx) = hub.subscribe_channel();
    hub.stop_child("phoenix", StopOptions::new().awaitable(false))
        .await
        .unwrap();
    let again = hub
        .start_child(slow, StartOptions::new().check_existing(false))
        .await
        .unwrap();
    let new_pid = again.pid_of(&"phoenix".into()).expect("started again");
    assert_ne!(new_pid, old.get_id().pid());
    common::wait_event(&mut rx, "old instance stopped", |e| {
        matches!(e, process_hub::HubEvent::ChildStopped { .. })
    })
    .await;
    // Registry writes apply in order: once this awaited start is answered, a late unbind of
    // the stopped instance (if any) would already be visible.
    hub.start_child(counter("barrier"), StartOptions::new())
        .await
        .unwrap();
    assert_eq!(hub.get_pid(&"phoenix".into()), Some(new_pid));
    assert!(hub.local_child(&"phoenix".into()).is_some());
    hub.shutdown().await.unwrap();
}
