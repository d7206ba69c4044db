//! Peer input the hub refused: counted per reason, so an operator (and the simulator) can see
//! that a peer sends what no healthy node would, without a log line per frame being the only
//! trace.
//!
//! Every refusal is logged at warn where it happens and counted here; nothing a peer sends can
//! make the node allocate without bound or stop, so a refusal is the whole consequence.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Why a peer's input was refused (the key of the count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Refusal {
    /// A part of a full sync or offer broke a bound of the reassembly (`core::reassembly`).
    Parts,
    /// A row, start item or declared entry no API would accept (`model::validate_child`).
    InvalidChild,
    /// A declared-list version that leaves no room to increment or jumps implausibly far.
    ImplausibleVersion,
    /// A peer's call or cast beyond the bound of concurrent ones.
    Overloaded,
    /// A reachability record no honest observer writes (`core::reachability::ReachError`: a
    /// record in this node's name, a version jump, an incarnation in the future, a full table).
    Reachability,
    /// A typed message (a cast or a call to a child) whose bytes do not decode as the child's
    /// message type: another type or version, truncated, or forged.
    Undecodable,
}

impl Refusal {
    /// Every reason, so that each count is shown from the start (at zero).
    pub(crate) const ALL: [Refusal; 6] = [
        Refusal::Parts,
        Refusal::InvalidChild,
        Refusal::ImplausibleVersion,
        Refusal::Overloaded,
        Refusal::Reachability,
        Refusal::Undecodable,
    ];

    /// The snake_case name reported to operators.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::Parts => "parts",
            Refusal::InvalidChild => "invalid_child",
            Refusal::ImplausibleVersion => "implausible_version",
            Refusal::Overloaded => "overloaded",
            Refusal::Reachability => "reachability",
            Refusal::Undecodable => "undecodable_message",
        }
    }
}

/// The counts of refused peer input since the hub started.
#[derive(Default)]
pub(crate) struct Refusals(Mutex<BTreeMap<Refusal, u64>>);

impl Refusals {
    /// Counts one refusal of `what` (already logged by the caller).
    pub(crate) fn count(&self, what: Refusal) {
        *self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(what)
            .or_default() += 1;
    }

    /// Every count, by reason name.
    pub(crate) fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(r, n)| (r.name(), *n))
            .collect()
    }
}
