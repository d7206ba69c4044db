//! Serializable commands for the kinds of this crate: a child's message API as plain data.
//!
//! The typed messages (`CounterMsg`, ...) carry reply ports and cannot cross a wire or an HTTP
//! body. A [`KindCommand`] can: it names what to do, [`execute`] turns it into the kind's typed
//! message for a local child and returns the answer as JSON. The cluster and the admin API use
//! it to message a child by id wherever it runs.

use std::time::Duration;

use ractor::{ActorCell, ActorRef};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::counter::CounterMsg;
use crate::crasher::CrasherMsg;
use crate::kv_shard::KvMsg;
use crate::ticker::TickerMsg;

/// How long `execute` waits for a child's answer.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// A command to a `counter`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum CounterCommand {
    /// Add `by`.
    Increment {
        /// The amount.
        by: i64,
    },
    /// Read the value.
    Get,
}

/// A command to a `kv_shard`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum KvCommand {
    /// Set a key.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Read a key.
    Get {
        /// The key.
        key: String,
    },
    /// Remove a key.
    Delete {
        /// The key.
        key: String,
    },
    /// Count the keys.
    Len,
}

/// A command to a `ticker`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum TickerCommand {
    /// Read the tick count.
    Count,
}

/// A command to a `crasher`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum CrasherCommand {
    /// Panic.
    Panic,
    /// Return an error from the handler.
    Fail,
    /// Stop normally.
    StopNormally,
    /// Answer `pong`.
    Ping,
}

/// A command to a child of one of this crate's kinds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    content = "command",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum KindCommand {
    /// To a `counter`.
    Counter(CounterCommand),
    /// To a `kv_shard`.
    KvShard(KvCommand),
    /// To a `ticker`.
    Ticker(TickerCommand),
    /// To a `crasher`.
    Crasher(CrasherCommand),
}

/// Why a command could not be executed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum CommandError {
    /// The child's actor is not of the command's kind.
    #[error("the child is not a {kind}")]
    WrongKind {
        /// The command's kind.
        kind: String,
    },
    /// The child did not answer (stopped, or slower than the reply timeout).
    #[error("the child did not answer: {message}")]
    NoAnswer {
        /// What happened.
        message: String,
    },
}

fn typed<M: ractor::Message>(cell: &ActorCell, kind: &str) -> Result<ActorRef<M>, CommandError> {
    match cell.is_message_type_of::<M>() {
        Some(true) => Ok(cell.clone().into()),
        _ => Err(CommandError::WrongKind {
            kind: kind.to_owned(),
        }),
    }
}

fn no_answer(e: impl std::fmt::Display) -> CommandError {
    CommandError::NoAnswer {
        message: e.to_string(),
    }
}

async fn ask<M: ractor::Message, T: Send + 'static>(
    actor: &ActorRef<M>,
    build: impl FnOnce(ractor::RpcReplyPort<T>) -> M,
) -> Result<T, CommandError> {
    match actor
        .call(build, Some(REPLY_TIMEOUT))
        .await
        .map_err(no_answer)?
    {
        ractor::rpc::CallResult::Success(v) => Ok(v),
        ractor::rpc::CallResult::Timeout => Err(no_answer("timed out")),
        ractor::rpc::CallResult::SenderError => Err(no_answer("the child stopped")),
    }
}

/// Executes `command` on the local child `cell`; the answer as JSON (`null` for casts).
pub async fn execute(cell: &ActorCell, command: KindCommand) -> Result<Value, CommandError> {
    match command {
        KindCommand::Counter(cmd) => {
            let actor = typed::<CounterMsg>(cell, "counter")?;
            match cmd {
                CounterCommand::Increment { by } => {
                    actor.cast(CounterMsg::Increment(by)).map_err(no_answer)?;
                    Ok(Value::Null)
                }
                CounterCommand::Get => Ok(json!(ask(&actor, CounterMsg::Get).await?)),
            }
        }
        KindCommand::KvShard(cmd) => {
            let actor = typed::<KvMsg>(cell, "kv_shard")?;
            match cmd {
                KvCommand::Put { key, value } => {
                    actor.cast(KvMsg::Put { key, value }).map_err(no_answer)?;
                    Ok(Value::Null)
                }
                KvCommand::Get { key } => {
                    Ok(json!(ask(&actor, |reply| KvMsg::Get { key, reply }).await?))
                }
                KvCommand::Delete { key } => {
                    actor.cast(KvMsg::Delete { key }).map_err(no_answer)?;
                    Ok(Value::Null)
                }
                KvCommand::Len => Ok(json!(ask(&actor, KvMsg::Len).await?)),
            }
        }
        KindCommand::Ticker(TickerCommand::Count) => {
            let actor = typed::<TickerMsg>(cell, "ticker")?;
            Ok(json!(ask(&actor, TickerMsg::Count).await?))
        }
        KindCommand::Crasher(cmd) => {
            let actor = typed::<CrasherMsg>(cell, "crasher")?;
            let msg = match cmd {
                CrasherCommand::Panic => CrasherMsg::Panic,
                CrasherCommand::Fail => CrasherMsg::Fail,
                CrasherCommand::StopNormally => CrasherMsg::StopNormally,
                CrasherCommand::Ping => return Ok(json!(ask(&actor, CrasherMsg::Ping).await?)),
            };
            actor.cast(msg).map_err(no_answer)?;
            Ok(Value::Null)
        }
    }
}

/// Registers [`execute`] as the command handler of every kind of this crate, so that a hub can
/// message their children by id from any node (`Hub::call_child` / `Hub::cast_child`): the
/// payload is a JSON [`KindCommand`], the answer the JSON value `execute` returns.
pub fn register_commands(kinds: &mut process_hub::ChildKinds) {
    for kind in [
        crate::counter::KIND,
        crate::kv_shard::KIND,
        crate::ticker::KIND,
        crate::crasher::KIND,
    ] {
        kinds.register_command(kind, |cell, payload| {
            Box::pin(async move {
                let command: KindCommand =
                    serde_json::from_slice(&payload).map_err(|e| e.to_string())?;
                let answer = execute(&cell, command).await.map_err(|e| e.to_string())?;
                serde_json::to_vec(&answer).map_err(|e| e.to_string())
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::{Counter, CounterArgs};
    use crate::kv_shard::KvShard;
    use ractor::Actor;

    #[test]
    fn commands_have_a_stable_json_form() {
        let cmd = KindCommand::Counter(CounterCommand::Increment { by: 2 });
        let text = serde_json::to_string(&cmd).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"counter","command":{"op":"increment","by":2}}"#
        );
        assert_eq!(serde_json::from_str::<KindCommand>(&text).unwrap(), cmd);
    }

    #[test]
    fn a_misspelled_field_of_a_command_or_arguments_is_refused_naming_it() {
        for (bad, field) in [
            (
                r#"{"kind":"counter","command":{"op":"increment","bye":2}}"#,
                "bye",
            ),
            (
                r#"{"kind":"counter","command":{"op":"increment","by":2},"comand":1}"#,
                "comand",
            ),
        ] {
            let e = serde_json::from_str::<KindCommand>(bad).unwrap_err();
            assert!(e.to_string().contains(field), "{bad}: {e}");
        }
        let e = serde_json::from_str::<CounterArgs>(r#"{"strat":2}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `strat`"), "{e}");
    }

    #[tokio::test]
    async fn commands_reach_the_typed_actor_and_wrong_kinds_are_refused() {
        let (counter, _) = Actor::spawn(None, Counter, Some(CounterArgs { start: 1 }))
            .await
            .unwrap();
        let cell = counter.get_cell();
        execute(
            &cell,
            KindCommand::Counter(CounterCommand::Increment { by: 4 }),
        )
        .await
        .unwrap();
        let value = execute(&cell, KindCommand::Counter(CounterCommand::Get))
            .await
            .unwrap();
        assert_eq!(value, json!(5));
        let wrong = execute(&cell, KindCommand::KvShard(KvCommand::Len)).await;
        assert!(matches!(wrong, Err(CommandError::WrongKind { .. })));
        let (kv, _) = Actor::spawn(None, KvShard, None).await.unwrap();
        let kv_cell = kv.get_cell();
        execute(
            &kv_cell,
            KindCommand::KvShard(KvCommand::Put {
                key: "a".into(),
                value: "1".into(),
            }),
        )
        .await
        .unwrap();
        let got = execute(
            &kv_cell,
            KindCommand::KvShard(KvCommand::Get { key: "a".into() }),
        )
        .await
        .unwrap();
        assert_eq!(got, json!("1"));
        counter.stop(None);
        kv.stop(None);
    }
}
