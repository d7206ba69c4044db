//! What one durable start or stop through a node's admin API answered, read by the contract
//! of docs/api.md ("What an answer promises") and docs/operations.md (the statuses): the
//! partition tests check each answer against what the cluster shows once it healed.

use process_hub_actors::harness::AdminClientError;

/// A durable request's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Stop,
    Start,
}

/// What one admin request answered.
#[derive(Clone, Debug)]
pub enum Answer {
    /// 200: it took effect.
    Done,
    /// 202: the declared list's change is committed, the rest is not confirmed yet.
    Pending,
    /// An error status other than 504 (or a 200 naming the child among its errors): nothing
    /// changed.
    Refused { status: u16, body: String },
    /// 504 (`outcome_unknown`), or no answer at all: either outcome, but a consistent one.
    Unknown { detail: String },
}

impl Answer {
    /// Reads an admin call's result: `pending` tells a body that leaves the child pending,
    /// `failed` one that names it among the errors.
    pub fn of<T: std::fmt::Debug>(
        result: Result<T, AdminClientError>,
        pending: impl Fn(&T) -> bool,
        failed: impl Fn(&T) -> bool,
    ) -> Self {
        match result {
            Ok(body) if failed(&body) => Answer::Refused {
                status: 200,
                body: format!("{body:?}"),
            },
            Ok(body) if pending(&body) => Answer::Pending,
            Ok(_) => Answer::Done,
            Err(AdminClientError::Status {
                status: 504, body, ..
            }) => Answer::Unknown { detail: body },
            Err(AdminClientError::Status { status, body, .. }) => Answer::Refused { status, body },
            Err(e) => Answer::Unknown {
                detail: e.to_string(),
            },
        }
    }

    /// The kind, for the summary: `200`, `202 pending`, `503 partitioned`, `504 ...`.
    pub fn kind(&self) -> String {
        let code = |body: &str| {
            serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "?".into())
        };
        match self {
            Answer::Done => "200".into(),
            Answer::Pending => "202 pending".into(),
            Answer::Refused { status, body } => format!("{status} {}", code(body)),
            Answer::Unknown { detail } => format!("504 {}", code(detail)),
        }
    }

    /// Whether it says the change took effect or will (200, 202).
    pub fn accepted(&self) -> bool {
        matches!(self, Answer::Done | Answer::Pending)
    }
}
