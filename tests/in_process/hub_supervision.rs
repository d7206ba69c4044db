//! The child supervisor: restart types, restart intensity and its escalation, per-child shutdown
//! timeouts, and what a restart does to the registry.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{spawn_with, wait_event, wait_until};
use process_hub::{
    ChildSpec, HookEvent, HookHandler, HookKey, Hub, HubEvent, ProcessHub, Restart, Shutdown,
    StartOptions, StopOptions,
};
use process_hub_actors::crasher::{CrasherArgs, CrasherMsg};
use ractor::{Actor, ActorProcessingErr, ActorRef};

fn crasher(id: &str, restart: Restart) -> ChildSpec {
    ChildSpec::new(id, "crasher").with_restart(restart)
}

fn crasher_ref(hub: &Hub, id: &str) -> ractor::ActorRef<CrasherMsg> {
    hub.local_child_ref::<CrasherMsg>(&id.into())
        .expect("crasher runs here")
}

async fn hub(id: &str) -> Hub {
    spawn_with(ProcessHub::new(id)).await
}

#[tokio::test]
async fn permanent_children_restart_after_any_exit_with_a_new_pid() {
    let hub = hub("sup-permanent").await;
    let updates = Arc::new(Mutex::new(Vec::new()));
    let u = updates.clone();
    hub.register_hook(
        HookKey::ChildProcessPidUpdate,
        HookHandler::observe("track", 0, move |e| {
            if let HookEvent::ChildProcessPidUpdate {
                old_pid, new_pid, ..
            } = e
            {
                u.lock().unwrap().push((*old_pid, *new_pid));
            }
        }),
    )
    .unwrap();
    let (_, mut rx) = hub.subscribe_channel();
    hub.start_child(crasher("p", Restart::Permanent), StartOptions::new())
        .await
        .unwrap();
    let pid0 = hub.get_pid(&"p".into()).unwrap();

    crasher_ref(&hub, "p").cast(CrasherMsg::Panic).unwrap();
    let e = wait_event(&mut rx, "restart after panic", |e| {
        matches!(e, HubEvent::ChildRestarted { .. })
    })
    .await;
    let HubEvent::ChildRestarted {
        old_pid, new_pid, ..
    } = e
    else {
        unreachable!()
    };
    assert_eq!(old_pid, pid0);
    assert_ne!(new_pid, pid0);
    // The row follows the restart, and the pid update hook fired with the same pids.
    wait_until("row has the new pid", || {
        hub.get_pid(&"p".into()) == Some(new_pid)
    })
    .await;
    wait_until("pid update hook fired", || {
        updates.lock().unwrap().contains(&(pid0, new_pid))
    })
    .await;

    // A normal exit restarts a permanent child too.
    crasher_ref(&hub, "p")
        .cast(CrasherMsg::StopNormally)
        .unwrap();
    wait_event(&mut rx, "restart after normal exit", |e| {
        matches!(e, HubEvent::ChildRestarted { .. })
    })
    .await;
    assert!(hub.child_lookup(&"p".into()).is_some());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn transient_children_restart_only_after_an_abnormal_exit() {
    let hub = hub("sup-transient").await;
    let (_, mut rx) = hub.subscribe_channel();
    hub.start_child(crasher("t", Restart::Transient), StartOptions::new())
        .await
        .unwrap();
    crasher_ref(&hub, "t").cast(CrasherMsg::Fail).unwrap();
    wait_event(&mut rx, "restart after error", |e| {
        matches!(e, HubEvent::ChildRestarted { .. })
    })
    .await;
    // The restarted child's pid is recorded before it is stopped normally.
    wait_until("new pid recorded", || {
        hub.local_child(&"t".into()).is_some()
    })
    .await;
    crasher_ref(&hub, "t")
        .cast(CrasherMsg::StopNormally)
        .unwrap();
    let exited = wait_event(&mut rx, "normal exit", |e| {
        matches!(e, HubEvent::ChildExited { .. })
    })
    .await;
    assert!(matches!(
        exited,
        HubEvent::ChildExited {
            will_restart: false,
            ..
        }
    ));
    wait_event(&mut rx, "row removed", |e| {
        matches!(e, HubEvent::RegistryRemoved { .. })
    })
    .await;
    assert!(hub.child_lookup(&"t".into()).is_none());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn temporary_children_are_never_restarted_and_leave_the_registry() {
    let hub = hub("sup-temporary").await;
    let (_, mut rx) = hub.subscribe_channel();
    hub.start_child(crasher("tmp", Restart::Temporary), StartOptions::new())
        .await
        .unwrap();
    crasher_ref(&hub, "tmp").cast(CrasherMsg::Panic).unwrap();
    let exited = wait_event(&mut rx, "exit", |e| {
        matches!(e, HubEvent::ChildExited { .. })
    })
    .await;
    assert!(matches!(
        exited,
        HubEvent::ChildExited {
            will_restart: false,
            ..
        }
    ));
    wait_event(&mut rx, "row removed", |e| {
        matches!(e, HubEvent::RegistryRemoved { .. })
    })
    .await;
    assert!(hub.child_lookup(&"tmp".into()).is_none());
    assert!(hub.local_child(&"tmp".into()).is_none());
    hub.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exceeding_restart_intensity_escalates_and_the_node_restores_its_children() {
    let config = ProcessHub::builder("sup-intensity")
        .restart_intensity(2, 3600)
        .build()
        .unwrap();
    let hub = spawn_with(config).await;
    let (_, mut rx) = hub.subscribe_channel();
    hub.start_children(
        vec![
            crasher("boom", Restart::Permanent),
            ChildSpec::new("bystander", "counter"),
        ],
        StartOptions::new(),
    )
    .await
    .unwrap();
    let bystander_pid = hub.get_pid(&"bystander".into()).unwrap();
    for round in 0..2 {
        crasher_ref(&hub, "boom").cast(CrasherMsg::Panic).unwrap();
        wait_event(
            &mut rx,
            &format!("restart {round}"),
            |e| matches!(e, HubEvent::ChildRestarted { id, .. } if id.as_str() == "boom"),
        )
        .await;
        wait_until("restarted crasher registered", || {
            hub.local_child(&"boom".into()).is_some()
        })
        .await;
    }
    // The third crash within the window exceeds 2 restarts: the child supervisor escalates.
    crasher_ref(&hub, "boom").cast(CrasherMsg::Panic).unwrap();
    wait_event(&mut rx, "escalation", |e| {
        matches!(e, HubEvent::RestartIntensityExceeded { .. })
    })
    .await;
    wait_event(
        &mut rx,
        "child supervisor restarted",
        |e| matches!(e, HubEvent::HubActorRestarted { actor } if actor == "child_supervisor"),
    )
    .await;
    // The new child supervisor restores both children from the registry, under new pids.
    wait_until("bystander restored", || {
        hub.get_pid(&"bystander".into())
            .is_some_and(|p| p != bystander_pid)
            && hub.local_child(&"bystander".into()).is_some()
    })
    .await;
    wait_until("crasher restored", || {
        hub.local_child(&"boom".into()).is_some()
    })
    .await;
    assert!(hub.is_alive());
    // The hub still serves requests.
    assert!(hub
        .start_child(ChildSpec::new("later", "counter"), StartOptions::new())
        .await
        .unwrap()
        .is_ok());
    hub.shutdown().await.unwrap();
}

/// Starts fine the first time, fails in `pre_start` on every later start.
#[derive(Clone)]
struct StartsOnce(Arc<AtomicUsize>);

impl Actor for StartsOnce {
    type Msg = CrasherMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<CrasherMsg>, _: ()) -> Result<(), ActorProcessingErr> {
        if self.0.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err("this kind starts only once".into());
        }
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<CrasherMsg>,
        msg: CrasherMsg,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CrasherMsg::Panic => panic!("told to panic"),
            _ => Ok(()),
        }
    }
}

#[tokio::test]
async fn a_child_that_cannot_restart_escalates_and_is_dropped_on_restore() {
    let mut kinds = process_hub_actors::default_kinds();
    let starts = Arc::new(AtomicUsize::new(0));
    let s = starts.clone();
    kinds.register_with("once", move || StartsOnce(s.clone()));
    let config = ProcessHub::builder("sup-cannot-restart")
        .restart_intensity(3, 3600)
        .build()
        .unwrap();
    let (hub, _) = Hub::spawn(config, kinds).await.unwrap();
    let (_, mut rx) = hub.subscribe_channel();
    hub.start_children(
        vec![
            ChildSpec::new("once", "once"),
            ChildSpec::new("bystander", "counter"),
        ],
        StartOptions::new(),
    )
    .await
    .unwrap();
    crasher_ref(&hub, "once").cast(CrasherMsg::Panic).unwrap();
    // Every restart attempt fails and counts: the 4th attempt exceeds 3 and escalates.
    wait_event(&mut rx, "escalation", |e| {
        matches!(e, HubEvent::RestartIntensityExceeded { .. })
    })
    .await;
    // The restored node drops the child that cannot start and keeps the bystander.
    wait_event(
        &mut rx,
        "restore gives up on the child",
        |e| matches!(e, HubEvent::ChildStartFailed { id, .. } if id.as_str() == "once"),
    )
    .await;
    wait_until("row of the broken child removed", || {
        hub.child_lookup(&"once".into()).is_none()
    })
    .await;
    wait_until("bystander restored", || {
        hub.local_child(&"bystander".into()).is_some()
    })
    .await;
    assert_eq!(
        starts.load(Ordering::SeqCst),
        5,
        "first start, 3 restarts, 1 restore"
    );
    assert!(hub.is_alive());
    hub.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_hub_whose_actors_keep_failing_gives_up() {
    // No child restarts allowed (every crash escalates), one child supervisor restart allowed.
    let config = ProcessHub::builder("sup-giveup")
        .restart_intensity(0, 3600)
        .hub_max_restarts(1)
        .build()
        .unwrap();
    let hub = spawn_with(config).await;
    let (_, mut rx) = hub.subscribe_channel();
    hub.start_child(crasher("doomed", Restart::Permanent), StartOptions::new())
        .await
        .unwrap();
    crasher_ref(&hub, "doomed").cast(CrasherMsg::Panic).unwrap();
    wait_event(&mut rx, "first escalation", |e| {
        matches!(e, HubEvent::RestartIntensityExceeded { .. })
    })
    .await;
    wait_event(&mut rx, "child supervisor restarted", |e| {
        matches!(e, HubEvent::HubActorRestarted { .. })
    })
    .await;
    wait_until("crasher restored", || {
        hub.local_child(&"doomed".into()).is_some()
    })
    .await;
    crasher_ref(&hub, "doomed").cast(CrasherMsg::Panic).unwrap();
    wait_event(&mut rx, "hub gives up", |e| {
        matches!(e, HubEvent::HubStopping { .. })
    })
    .await;
    wait_until("hub stopped", || !hub.is_alive()).await;
    assert!(matches!(
        hub.start_child(ChildSpec::new("x", "counter"), StartOptions::new())
            .await,
        Err(process_hub::StartError::HubUnavailable(_))
    ));
}

#[tokio::test]
async fn a_child_that_ignores_its_stop_is_killed_after_its_shutdown_timeout() {
    let hub = hub("sup-shutdown").await;
    let slow = ChildSpec::new("slow", "crasher")
        .with_args(&CrasherArgs {
            slow_stop_ms: 60_000,
            ..Default::default()
        })
        .unwrap()
        .with_shutdown(Shutdown::TimeoutMs(100));
    let brutal = ChildSpec::new("brutal", "counter").with_shutdown(Shutdown::Kill);
    hub.start_children(vec![slow, brutal], StartOptions::new())
        .await
        .unwrap();
    let cell = hub.local_child(&"slow".into()).unwrap();
    let result = hub
        .stop_children(
            vec!["slow".into(), "brutal".into()],
            StopOptions::new().timeout(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(result.stopped.len(), 2);
    // Well before its 60 s post_stop could finish: it was killed at its 100 ms grace.
    assert_eq!(cell.get_status(), ractor::ActorStatus::Stopped);
    assert!(hub.registry_dump().is_empty());
    hub.shutdown().await.unwrap();
}
