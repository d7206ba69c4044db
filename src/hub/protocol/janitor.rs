//! The Janitor's messages.

/// The Janitor's only message: sweep now.
pub(crate) enum JanitorMsg {
    Sweep,
}

impl ractor::Message for JanitorMsg {}
