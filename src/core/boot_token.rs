//! Boot tokens: telling a node that restarted from a node whose network flapped.
//!
//! A node that crashes and comes back quickly may never be seen as down by its peers; they would
//! keep registry bindings that point at pids of its previous life (fast-restart
//! stale-binding reaping). So each boot draws a random token and announces it when it joins. A
//! peer that hears a known node announce a *different* token knows the node restarted and reaps
//! the bindings of its previous life; the *same* token after a disconnect means the network
//! flapped and the bindings are still live.

use std::collections::BTreeMap;
use std::fmt;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::model::NodeName;

/// A random identity of one boot of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BootToken(pub u128);

impl BootToken {
    /// A fresh token from the thread RNG; collisions are not a practical concern at 128 bits.
    pub fn random() -> Self {
        Self(rand::random())
    }

    /// A token drawn from an injected RNG (simulations replay from a seed).
    pub fn from_rng<R: Rng + ?Sized>(rng: &mut R) -> Self {
        Self(rng.gen())
    }
}

impl fmt::Display for BootToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// What an announced token says about a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerBoot {
    /// First time this node is heard of: nothing to reap.
    FirstSeen,
    /// Same boot as before: a flap; its bindings are live, keep them.
    SameBoot,
    /// The node restarted since we last heard it: reap the bindings of its previous boot.
    Restarted {
        /// The token of the previous boot.
        previous: BootToken,
    },
}

/// The last token heard from each node. Kept after a node goes down, so that a later return
/// can be classified.
#[derive(Debug, Clone, Default)]
pub struct BootTokens {
    known: BTreeMap<NodeName, BootToken>,
}

impl BootTokens {
    /// Nobody known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `token` announced by `node` and classifies it.
    pub fn observe(&mut self, node: &str, token: BootToken) -> PeerBoot {
        match self.known.insert(node.to_owned(), token) {
            None => PeerBoot::FirstSeen,
            Some(previous) if previous == token => PeerBoot::SameBoot,
            Some(previous) => PeerBoot::Restarted { previous },
        }
    }

    /// The last token heard from `node`.
    pub fn get(&self, node: &str) -> Option<BootToken> {
        self.known.get(node).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn restart_is_told_apart_from_a_flap() {
        let mut rng = StdRng::seed_from_u64(3);
        let first = BootToken::from_rng(&mut rng);
        let second = BootToken::from_rng(&mut rng);
        assert_ne!(first, second);
        let mut tokens = BootTokens::new();
        assert_eq!(tokens.observe("b", first), PeerBoot::FirstSeen);
        assert_eq!(tokens.observe("b", first), PeerBoot::SameBoot);
        assert_eq!(
            tokens.observe("b", second),
            PeerBoot::Restarted { previous: first }
        );
        assert_eq!(tokens.get("b"), Some(second));
        assert_eq!(tokens.observe("c", first), PeerBoot::FirstSeen);
        assert_eq!(format!("{first}").len(), 32);
        assert_ne!(BootToken::random(), BootToken::random());
    }
}
