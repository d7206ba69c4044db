//! Where a message to a child goes from this node, and which failures are worth a retry.
//!
//! Every node holds the whole registry, so the sender decides alone: the child runs here, on a
//! peer that is up, or nowhere reachable right now. "Nowhere" is two different answers to a
//! caller. A child whose row still names a host that is down (within its grace, before the
//! re-placement), or whose row names no host at all (a cold swap or a re-placement is under
//! way), is **between nodes**: it exists and will run again, so a retry in a moment succeeds.
//! A child the registry does not know is **not found**, unless the ring owner is a peer that
//! may have started it a moment ago (its registry delta still in flight): that owner is asked
//! and answers for itself.

use crate::model::NodeName;

/// What the registry says about a child, as far as routing needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// No row.
    Unknown,
    /// A row whose bindings name these nodes (empty: a stub, nobody runs it).
    Bound(Vec<NodeName>),
}

/// Where to send a message to a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildRoute {
    /// The child runs on this node.
    Here,
    /// Send it to this peer, which runs the child (or owns its id and may have just started it).
    Peer(NodeName),
    /// The child exists but runs on no reachable node now: its host is down or it is being
    /// moved. `host` is the node the registry names, if any. Retryable.
    BetweenNodes {
        /// The host the registry names (down or not yet bound), or `None` for a stub.
        host: Option<NodeName>,
    },
    /// No node knows the child.
    NotFound,
}

/// Who may be asked about a child this node cannot place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// This node originates the message: when it cannot reach the child, the ring owner (a
    /// peer that is up) is asked; it may reach a host this node is cut off from, or know the
    /// child this node's registry does not know yet.
    Origin,
    /// This node originates a message that gets no answer (a cast): the ring owner is asked
    /// only about a child this node's registry does not know; a child whose host is down is
    /// between nodes at once, so the sender learns it rather than the owner dropping the cast.
    OriginNoAnswer,
    /// This node was asked by a peer: it answers for itself and never sends the question on
    /// to an owner (two nodes asking each other would bounce it).
    Answering,
}

/// Decides where a message to a child goes.
///
/// `here` says the child runs on this node; `known` is this node's registry row; `is_up`
/// tells a peer that is up for the hub; `this` is this node and `owner` the ring owner of the
/// child's id.
pub fn route_child(
    here: bool,
    known: &Known,
    this: &str,
    owner: &str,
    is_up: impl Fn(&str) -> bool,
    asking: Asking,
) -> ChildRoute {
    if here {
        return ChildRoute::Here;
    }
    let owner_up = owner != this && is_up(owner);
    let ask_owner = asking == Asking::Origin && owner_up;
    match known {
        Known::Bound(nodes) => {
            if let Some(node) = nodes.iter().find(|n| n.as_str() != this && is_up(n)) {
                return ChildRoute::Peer(node.clone());
            }
            if ask_owner {
                return ChildRoute::Peer(owner.to_owned());
            }
            // Bound only to nodes that are down, or to this node while it (re)starts the
            // child, or to nobody (a stub): it exists and will run again.
            ChildRoute::BetweenNodes {
                host: nodes.first().cloned(),
            }
        }
        Known::Unknown if asking != Asking::Answering && owner_up => {
            ChildRoute::Peer(owner.to_owned())
        }
        Known::Unknown => ChildRoute::NotFound,
    }
}

/// Failure codes a caller should retry after a short pause (the child exists and will run
/// again); every other code is final for this attempt.
pub fn is_retryable(code: &str) -> bool {
    matches!(code, "between_nodes" | "moved")
}

/// The pause before retry number `attempt` (from 0) of a message to a child: short at first
/// (a move takes milliseconds), then doubling up to `cap_ms`, never past what is left of the
/// caller's timeout (`left_ms`).
pub fn retry_pause_ms(attempt: u32, cap_ms: u64, left_ms: u64) -> u64 {
    let base = 5u64.saturating_mul(1u64 << attempt.min(16));
    base.min(cap_ms).min(left_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(nodes: &'static [&'static str]) -> impl Fn(&str) -> bool {
        move |n| nodes.contains(&n)
    }

    fn route(known: &Known, owner: &str, up: impl Fn(&str) -> bool) -> ChildRoute {
        route_child(false, known, "a", owner, up, Asking::Answering)
    }

    #[test]
    fn a_local_child_is_here_whatever_the_registry_says() {
        let r = route_child(true, &Known::Unknown, "a", "b", up(&["b"]), Asking::Origin);
        assert_eq!(r, ChildRoute::Here);
    }

    #[test]
    fn a_child_bound_to_an_up_peer_goes_there() {
        let known = Known::Bound(vec!["b".into()]);
        assert_eq!(
            route(&known, "c", up(&["b", "c"])),
            ChildRoute::Peer("b".into())
        );
    }

    #[test]
    fn a_child_whose_host_is_down_is_between_nodes_naming_the_host() {
        let known = Known::Bound(vec!["b".into()]);
        assert_eq!(
            route(&known, "c", up(&["c"])),
            ChildRoute::BetweenNodes {
                host: Some("b".into())
            }
        );
        // The origin asks the owner, which may reach the host (or already re-placed it).
        assert_eq!(
            route_child(false, &known, "a", "c", up(&["c"]), Asking::Origin),
            ChildRoute::Peer("c".into())
        );
        assert_eq!(
            route_child(false, &known, "a", "c", up(&["c"]), Asking::OriginNoAnswer),
            ChildRoute::BetweenNodes {
                host: Some("b".into())
            }
        );
        assert_eq!(
            route_child(false, &known, "a", "a", up(&["c"]), Asking::Origin),
            ChildRoute::BetweenNodes {
                host: Some("b".into())
            }
        );
    }

    #[test]
    fn a_stub_is_between_nodes_without_a_host() {
        let known = Known::Bound(vec![]);
        assert_eq!(
            route(&known, "b", up(&["b"])),
            ChildRoute::BetweenNodes { host: None }
        );
    }

    #[test]
    fn an_unknown_child_is_asked_of_its_owner_or_not_found() {
        let origin =
            |owner: &str, up| route_child(false, &Known::Unknown, "a", owner, up, Asking::Origin);
        assert_eq!(origin("b", up(&["b"])), ChildRoute::Peer("b".into()));
        assert_eq!(origin("b", up(&[])), ChildRoute::NotFound);
        assert_eq!(origin("a", up(&["b"])), ChildRoute::NotFound);
        let cast = route_child(
            false,
            &Known::Unknown,
            "a",
            "b",
            up(&["b"]),
            Asking::OriginNoAnswer,
        );
        assert_eq!(cast, ChildRoute::Peer("b".into()));
        // A node asked by a peer answers for itself.
        assert_eq!(
            route(&Known::Unknown, "b", up(&["b"])),
            ChildRoute::NotFound
        );
    }

    #[test]
    fn only_between_nodes_and_moved_are_retried() {
        assert!(is_retryable("between_nodes"));
        assert!(is_retryable("moved"));
        for code in [
            "not_found",
            "timeout",
            "decode",
            "unreachable",
            "overloaded",
        ] {
            assert!(!is_retryable(code), "{code}");
        }
    }

    #[test]
    fn retry_pauses_grow_and_stay_within_the_cap_and_the_time_left() {
        assert_eq!(retry_pause_ms(0, 200, 10_000), 5);
        assert_eq!(retry_pause_ms(2, 200, 10_000), 20);
        assert_eq!(retry_pause_ms(30, 200, 10_000), 200);
        assert_eq!(retry_pause_ms(30, 200, 7), 7);
    }
}
