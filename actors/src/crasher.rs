//! `crasher`: an actor that fails on demand, for tests and demos of supervision.
//!
//! `{"fail_in_pre_start": true}` makes its start fail; `{"fail_after_ms": N}` makes it fail on
//! its own N ms after each start (a child that cannot stay up, which drives the restart
//! intensity); the messages make a running one panic, return an error, stop normally, or hang in
//! its stop.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};

/// The kind name.
pub const KIND: &str = "crasher";

/// Optional arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
// A misspelled argument is refused (`invalid_args`) rather than silently defaulted.
#[serde(default, deny_unknown_fields)]
pub struct CrasherArgs {
    /// Fail in `pre_start` (the start is an error, not a crash).
    pub fail_in_pre_start: bool,
    /// Panic in `pre_start` instead.
    pub panic_in_pre_start: bool,
    /// Take this long in `post_stop` (to exercise shutdown timeouts).
    pub slow_stop_ms: u64,
    /// Fail (an abnormal exit) this long after each start; `None`: never on its own.
    pub fail_after_ms: Option<u64>,
}

/// Messages of a crasher.
#[derive(Debug)]
pub enum CrasherMsg {
    /// Panic in the handler (an abnormal exit).
    Panic,
    /// Return an error from the handler (an abnormal exit).
    Fail,
    /// Stop normally.
    StopNormally,
    /// Answers `pong`.
    Ping(RpcReplyPort<&'static str>),
}

impl ractor::Message for CrasherMsg {}

/// The crasher actor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Crasher;

impl Actor for Crasher {
    type Msg = CrasherMsg;
    type State = CrasherArgs;
    type Arguments = Option<CrasherArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let args = args.unwrap_or_default();
        if args.panic_in_pre_start {
            panic!("crasher told to panic in pre_start");
        }
        if args.fail_in_pre_start {
            return Err("crasher told to fail in pre_start".into());
        }
        Ok(args)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(ms) = state.fail_after_ms {
            myself.send_after(Duration::from_millis(ms), || CrasherMsg::Fail);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.slow_stop_ms > 0 {
            tokio::time::sleep(Duration::from_millis(state.slow_stop_ms)).await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CrasherMsg::Panic => panic!("crasher told to panic"),
            CrasherMsg::Fail => return Err("crasher told to fail".into()),
            CrasherMsg::StopNormally => myself.stop(None),
            CrasherMsg::Ping(reply) => {
                let _ = reply.send("pong");
            }
        }
        Ok(())
    }
}
