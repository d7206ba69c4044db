//! The restart decision: given a child's restart type and how it exited, restart it or let it go.

use crate::model::Restart;

/// How a child's actor ended, as the supervisor saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitKind {
    /// It stopped itself or was stopped (`ActorTerminated` without a kill): a normal exit.
    Normal,
    /// It panicked or returned an error from a handler (`ActorFailed`).
    Failed(String),
    /// It was killed (`ActorTerminated` with reason `killed`), which OTP counts as abnormal.
    Killed,
}

impl ExitKind {
    /// Whether the exit is abnormal (what `transient` restarts on).
    pub fn is_abnormal(&self) -> bool {
        !matches!(self, ExitKind::Normal)
    }
}

/// What the supervisor does with a child that ended on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartDecision {
    /// Start it again (subject to restart intensity).
    Restart,
    /// It ended for good: unbind it and drop its row.
    Remove,
}

/// `permanent` always restarts, `transient` only after an abnormal exit, `temporary` never.
///
/// Children the hub itself is stopping never reach this function.
pub fn restart_decision(restart: Restart, exit: &ExitKind) -> RestartDecision {
    match (restart, exit.is_abnormal()) {
        (Restart::Permanent, _) | (Restart::Transient, true) => RestartDecision::Restart,
        (Restart::Transient, false) | (Restart::Temporary, _) => RestartDecision::Remove,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_restart_table() {
        let (again, gone) = (RestartDecision::Restart, RestartDecision::Remove);
        let f = ExitKind::Failed("boom".into());
        assert_eq!(
            restart_decision(Restart::Permanent, &ExitKind::Normal),
            again
        );
        assert_eq!(restart_decision(Restart::Permanent, &f), again);
        assert_eq!(
            restart_decision(Restart::Transient, &ExitKind::Normal),
            gone
        );
        assert_eq!(restart_decision(Restart::Transient, &f), again);
        assert_eq!(
            restart_decision(Restart::Transient, &ExitKind::Killed),
            again
        );
        assert_eq!(restart_decision(Restart::Temporary, &f), gone);
        assert_eq!(
            restart_decision(Restart::Temporary, &ExitKind::Normal),
            gone
        );
    }
}
