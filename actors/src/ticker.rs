//! `ticker`: counts ticks of a periodic timer (`{"interval_ms": 100}`, default 1000).

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

/// The kind name.
pub const KIND: &str = "ticker";

/// Optional arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// A misspelled argument is refused (`invalid_args`) rather than silently defaulted.
#[serde(default, deny_unknown_fields)]
pub struct TickerArgs {
    /// The tick period in ms (at least 1).
    pub interval_ms: u64,
}

impl Default for TickerArgs {
    fn default() -> Self {
        Self { interval_ms: 1000 }
    }
}

/// Messages of a ticker.
#[derive(Debug)]
pub enum TickerMsg {
    /// One tick (sent by its own timer).
    Tick,
    /// Answers the number of ticks so far.
    Count(RpcReplyPort<u64>),
}

impl ractor::Message for TickerMsg {}

/// The ticker actor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ticker;

/// A ticker's state.
pub struct TickerState {
    ticks: u64,
    timer: Option<JoinHandle<()>>,
    interval: Duration,
}

impl Actor for Ticker {
    type Msg = TickerMsg;
    type State = TickerState;
    type Arguments = Option<TickerArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let args = args.unwrap_or_default();
        if args.interval_ms == 0 {
            return Err("interval_ms must be at least 1".into());
        }
        Ok(TickerState {
            ticks: 0,
            timer: None,
            interval: Duration::from_millis(args.interval_ms),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.timer = Some(myself.send_interval(state.interval, || TickerMsg::Tick));
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TickerMsg::Tick => state.ticks += 1,
            TickerMsg::Count(reply) => {
                let _ = reply.send(state.ticks);
            }
        }
        Ok(())
    }
}
