//! The seal keys of one hub endpoint, and the Confirmer: the actor a peer asks whether a key
//! offered in this node's name really is this node's.
//!
//! **The exchange.** For every peer P that speaks sealed frames, this node picks a random key
//! (its *inbound* key for P) and sends it in a key offer to P's gateway, over P's own session:
//! only P receives it. P cannot tell who sent an offer (a forger may offer keys in this node's
//! name), so before using it P asks this node's Confirmer, by a remote call over this node's
//! own session, whether the key's fingerprint is the one this node chose for P; the answer of a
//! call comes back on the session it was made on, so only this node can give it. Once
//! confirmed, P seals every frame to this node with the key (its *outbound* key), and this node
//! accepts a frame claiming P's name only when P's inbound key verifies its seal.
//!
//! Names. A sealing node's gateway and Confirmer carry actor names that say so
//! ([`gateway_name`], [`confirmer_name`]); ractor_cluster advertises an actor's name with the
//! actor, over its node's own session, so a peer learns which version a node speaks from the
//! same message that introduces its gateway, and cannot be told otherwise by a third node.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use bincode::Options;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::RactorClusterMessage;

use crate::cluster::wire::seal::{SealKey, COMPACT_VERSION, SEALED_VERSION};
use crate::model::NodeName;

/// The pg group every Confirmer joins, inside its hub's scope.
pub const CONFIRMER_GROUP: &str = "confirmers";

/// Largest confirmation request accepted (a node name and a fingerprint).
const MAX_REQUEST_BYTES: u64 = 4096;

/// The actor name of a sealing gateway of hub `hub_id` on `node` that speaks wire versions up
/// to `max_version` (one per endpoint: `nonce` tells a re-opened endpoint's gateway from its
/// predecessor's). Version 2 is the bare name, which builds that speak only 2 advertise; a
/// newer version is a `|v<N>` suffix, which those builds ignore (they match on the prefix).
pub fn gateway_name(hub_id: &str, node: &str, nonce: u64, max_version: u16) -> String {
    format!(
        "{}{nonce:016x}{}",
        gateway_prefix(hub_id, node),
        version_suffix(max_version)
    )
}

/// The name every sealing gateway of `hub_id` on `node` starts with.
pub fn gateway_prefix(hub_id: &str, node: &str) -> String {
    format!("process_hub.gateway.v2|{hub_id}|{node}|")
}

/// The newest wire version a sealing gateway named `gateway` (of `hub_id` on `node`) speaks:
/// 2 without a suffix, `None` if the name is not such a gateway's.
pub fn gateway_version(gateway: &str, hub_id: &str, node: &str) -> Option<u16> {
    let rest = gateway.strip_prefix(&gateway_prefix(hub_id, node))?;
    match rest.split_once("|v") {
        None => Some(SEALED_VERSION),
        // A version this build does not know is spoken as the newest it does.
        Some((_, version)) => Some(
            version
                .parse::<u16>()
                .map_or(SEALED_VERSION, |v| v.clamp(SEALED_VERSION, COMPACT_VERSION)),
        ),
    }
}

fn version_suffix(max_version: u16) -> String {
    if max_version > SEALED_VERSION {
        format!("|v{max_version}")
    } else {
        String::new()
    }
}

/// The actor name of the Confirmer that goes with the gateway named
/// `gateway_name(hub_id, node, nonce, max_version)`.
pub fn confirmer_name(hub_id: &str, node: &str, nonce: u64, max_version: u16) -> String {
    format!(
        "process_hub.confirmer.v2|{hub_id}|{node}|{nonce:016x}{}",
        version_suffix(max_version)
    )
}

/// The Confirmer's name for the gateway named `gateway`, if that is a sealing gateway's name.
pub fn confirmer_of(gateway: &str) -> Option<String> {
    gateway
        .strip_prefix("process_hub.gateway.v2|")
        .map(|rest| format!("process_hub.confirmer.v2|{rest}"))
}

/// The inbound keys of one endpoint: the key this node chose for each sender.
#[derive(Clone, Default)]
pub struct InboundKeys(Arc<RwLock<BTreeMap<NodeName, SealKey>>>);

impl InboundKeys {
    /// The key chosen for `node`, chosen now if there is none yet.
    pub fn for_sender(&self, node: &str) -> SealKey {
        let mut keys = self.0.write().unwrap_or_else(|p| p.into_inner());
        *keys.entry(node.to_owned()).or_insert_with(SealKey::random)
    }

    /// The key chosen for `node`, if any.
    pub fn get(&self, node: &str) -> Option<SealKey> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .copied()
    }

    /// Whether `fingerprint` is that of the key chosen for `node`.
    pub fn confirms(&self, node: &str, fingerprint: &[u8; 32]) -> bool {
        self.get(node)
            .is_some_and(|key| constant_time_eq(&key.fingerprint(), fingerprint))
    }
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_REQUEST_BYTES)
        .reject_trailing_bytes()
}

/// Encodes a confirmation request: "is `fingerprint` the key you chose for `sender`?".
pub fn confirm_request(sender: &str, fingerprint: &[u8; 32]) -> Vec<u8> {
    options()
        .serialize(&(sender, fingerprint))
        .unwrap_or_default()
}

/// The Confirmer's message: a remote call answered on the session it came in on.
#[derive(RactorClusterMessage)]
pub enum ConfirmMsg {
    /// `confirm_request(sender, fingerprint)` -> whether the key is the one chosen for `sender`.
    #[rpc]
    Confirm(Vec<u8>, RpcReplyPort<bool>),
}

/// Answers peers' confirmation requests from the endpoint's [`InboundKeys`].
pub struct Confirmer;

impl Actor for Confirmer {
    type Msg = ConfirmMsg;
    type State = InboundKeys;
    type Arguments = InboundKeys;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        keys: InboundKeys,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(keys)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: ConfirmMsg,
        keys: &mut InboundKeys,
    ) -> Result<(), ActorProcessingErr> {
        let ConfirmMsg::Confirm(request, reply) = msg;
        let answer = match options().deserialize::<(NodeName, [u8; 32])>(&request) {
            Ok((sender, fingerprint)) => keys.confirms(&sender, &fingerprint),
            Err(error) => {
                tracing::debug!(%error, "malformed key confirmation request");
                false
            }
        };
        let _ = reply.send(answer);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_confirmed_only_for_the_sender_it_was_chosen_for() {
        let keys = InboundKeys::default();
        let for_v = keys.for_sender("v@x");
        assert_eq!(keys.for_sender("v@x"), for_v, "chosen once");
        assert!(keys.confirms("v@x", &for_v.fingerprint()));
        assert!(!keys.confirms("m@x", &for_v.fingerprint()));
        assert!(!keys.confirms("v@x", &SealKey::random().fingerprint()));
    }

    #[test]
    fn names_tie_a_confirmer_to_its_gateway_and_node() {
        for version in [SEALED_VERSION, COMPACT_VERSION] {
            let gateway = gateway_name("h", "a@x", 7, version);
            assert!(gateway.starts_with(&gateway_prefix("h", "a@x")));
            assert!(!gateway.starts_with(&gateway_prefix("h", "b@x")));
            assert_eq!(
                confirmer_of(&gateway).as_deref(),
                Some(confirmer_name("h", "a@x", 7, version).as_str())
            );
            assert_eq!(gateway_version(&gateway, "h", "a@x"), Some(version));
            assert_eq!(gateway_version(&gateway, "h", "b@x"), None);
        }
        assert_eq!(confirmer_of("something else"), None);
    }

    #[test]
    fn a_gateway_names_the_newest_version_it_speaks() {
        let bare = format!("{}{:016x}", gateway_prefix("h", "a@x"), 7);
        assert_eq!(gateway_version(&bare, "h", "a@x"), Some(SEALED_VERSION));
        let future = format!("{bare}|v9");
        assert_eq!(gateway_version(&future, "h", "a@x"), Some(COMPACT_VERSION));
        let garbage = format!("{bare}|vx");
        assert_eq!(gateway_version(&garbage, "h", "a@x"), Some(SEALED_VERSION));
    }

    #[tokio::test]
    async fn the_confirmer_answers_from_the_keys() {
        let keys = InboundKeys::default();
        let key = keys.for_sender("v@x");
        let (actor, handle) = Actor::spawn(None, Confirmer, keys).await.unwrap();
        let ask = |sender: &'static str, fingerprint: [u8; 32]| {
            let actor = actor.clone();
            async move {
                ractor::call_t!(
                    actor,
                    ConfirmMsg::Confirm,
                    1_000,
                    confirm_request(sender, &fingerprint)
                )
                .unwrap()
            }
        };
        assert!(ask("v@x", key.fingerprint()).await);
        assert!(!ask("m@x", key.fingerprint()).await);
        let garbage = ractor::call_t!(actor, ConfirmMsg::Confirm, 1_000, vec![1, 2, 3]).unwrap();
        assert!(!garbage);
        actor.stop(None);
        handle.await.unwrap();
    }
}
