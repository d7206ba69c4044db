//! A replica's role: what a replicated child's instance is told it is (the core decides it,
//! `config` and `kinds` name it), below every layer that uses it.

use serde::{Deserialize, Serialize};

/// A replica's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// It answers messages sent to the child by id.
    Active,
    /// It stands by, ready to become active when the active replica's node goes down.
    Passive,
}

impl Role {
    /// Its name in JSON and logs.
    pub fn name(self) -> &'static str {
        match self {
            Role::Active => "active",
            Role::Passive => "passive",
        }
    }
}
