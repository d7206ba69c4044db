//! Quickstart: a ractor application hosts a process hub.
//!
//! The application actor spawns a hub supervised by itself, registers the `counter` and
//! `crasher` kinds from `process_hub_actors`, subscribes to the hub's events, starts children
//! by sending `HubMsg`s, crashes one child and watches the hub restart it, then shuts down.
//!
//! Run: `cargo run --example quickstart`

use std::time::Duration;

use process_hub::{ChildSpec, Hub, HubEvent, HubMsg, ProcessHub, Restart, StartOptions};
use process_hub_actors::counter::{CounterArgs, CounterMsg};
use process_hub_actors::crasher::CrasherMsg;
use ractor::rpc::CallResult;
use ractor::{call_t, Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

/// The application's own messages: hub events arrive here, mapped by the subscription.
enum AppMsg {
    Hub(HubEvent),
}

impl ractor::Message for AppMsg {}

struct App;

struct AppState {
    hub: Hub,
}

impl Actor for App {
    type Msg = AppMsg;
    type State = AppState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<AppMsg>,
        _: (),
    ) -> Result<AppState, ActorProcessingErr> {
        // 1. The kinds this node can run, and a hub supervised by this actor.
        let mut kinds = process_hub::ChildKinds::new();
        process_hub_actors::register_all(&mut kinds);
        let config = ProcessHub::builder("quickstart")
            .node_name("app@localhost")
            .build()?;
        let (hub, _join) = Hub::builder(config, kinds)
            .supervisor(myself.get_cell())
            .spawn()
            .await?;

        // 2. Watch what happens: hub events come to this actor as `AppMsg::Hub`.
        hub.subscribe_mapped(myself.clone(), AppMsg::Hub);

        // 3. Start children by message, the actor way.
        let specs = vec![
            ChildSpec::new("counter-1", "counter").with_args(&CounterArgs { start: 10 })?,
            ChildSpec::new("counter-2", "counter"),
            ChildSpec::new("fragile", "crasher").with_restart(Restart::Permanent),
        ];
        let hub_ref = hub.actor();
        let answer = hub_ref
            .call(
                |reply| HubMsg::StartChildren {
                    specs,
                    opts: StartOptions::new().tag("demo"),
                    reply,
                },
                Some(Duration::from_secs(10)),
            )
            .await?; // the hub is not running
                     // A timeout or a dropped reply is an error of this actor's start, not a panic in it.
        let result = match answer {
            CallResult::Success(result) => result?, // Err(StartError): the request was refused
            CallResult::Timeout => return Err("the hub did not answer within 10 s".into()),
            CallResult::SenderError => return Err("the hub dropped the request".into()),
        };
        println!(
            "started {} children: {:?}",
            result.started.len(),
            result.started_ids()
        );

        // 4. Talk to a child, then crash one.
        let counter = hub
            .local_child_ref::<CounterMsg>(&"counter-1".into())
            .ok_or("counter-1 is not running")?;
        counter.cast(CounterMsg::Increment(5))?;
        println!("counter-1 = {}", call_t!(counter, CounterMsg::Get, 5_000)?);
        let fragile = hub
            .local_child_ref::<CrasherMsg>(&"fragile".into())
            .ok_or("fragile is not running")?;
        println!(
            "crashing 'fragile' (pid {:?})",
            hub.get_pid(&"fragile".into())
        );
        fragile.cast(CrasherMsg::Panic)?;
        Ok(AppState { hub })
    }

    async fn handle(
        &self,
        myself: ActorRef<AppMsg>,
        msg: AppMsg,
        state: &mut AppState,
    ) -> Result<(), ActorProcessingErr> {
        let AppMsg::Hub(event) = msg;
        match &event {
            HubEvent::ChildExited {
                id,
                reason,
                will_restart,
                ..
            } => {
                println!("event: {id} exited ({reason}); restart: {will_restart}");
            }
            HubEvent::ChildRestarted {
                id,
                old_pid,
                new_pid,
                ..
            } => {
                println!("event: {id} restarted, pid {old_pid} -> {new_pid}");
                println!("tagged 'demo': {:?}", state.hub.tag_query("demo").len());
                state.hub.shutdown().await?;
                myself.stop(Some("demo complete".into()));
            }
            other => println!("event: {other:?}"),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<AppMsg>,
        event: SupervisionEvent,
        _state: &mut AppState,
    ) -> Result<(), ActorProcessingErr> {
        // The hub is this actor's child. It only fails when its own restart intensity is
        // exceeded; a graceful shutdown ends it normally.
        if let SupervisionEvent::ActorFailed(_, err) = event {
            println!("the hub gave up: {err}");
            myself.stop(Some("hub failed".into()));
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The crash below is on purpose; print one line instead of a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("(a child panicked, as asked: {info})")
    }));
    let (_app, join) = Actor::spawn(None, App, ()).await?;
    tokio::time::timeout(Duration::from_secs(30), join).await??;
    println!("done");
    Ok(())
}
