//! Sealed frames: how a node proves that a frame claiming to come from it does.
//!
//! A frame names its sender (`from`), and over ractor_cluster the receiver cannot tell which
//! session a frame arrived on: any peer holding the cookie could write another node's name. So
//! between two nodes that speak wire version 2, every frame is *sealed*: it carries a MAC
//! (keyed BLAKE3) under a key the receiver chose for that sender and sent only over the
//! sender's own session (the transport's key exchange, `cluster::gateway`). A forger never sees
//! the key, so it cannot seal a frame in another node's name; the receiver checks the seal
//! before it decodes the message.
//!
//! Layouts (the version first and alone, as in every frame):
//! - version 1, *open*: `01 00 | bincode(hub_id, from, msg)`: what [`super::encode`] makes. The
//!   in-process router (which knows every sender) and peers that only speak version 1 use it;
//! - version 2, *sealed*: `02 00 | 00 | mac[32] | bincode(hub_id, from, msg)`;
//! - version 2, *key offer*: `02 00 | 01 | bincode(hub_id, from, key[32])`: the one frame that
//!   carries no seal, since it is how a receiver hands a sender its key (and the sender checks
//!   the offer with its author before it uses it);
//! - version 3, *compact sealed*: `03 00 | mac[32] | compact(hub_id, from, msg)`: the same
//!   message with variable-length integers (lengths, tags and small numbers in one byte), about
//!   half the size of version 2, its MAC under a key derived from the seal key for version 3. Sent only to a peer
//!   whose gateway says it speaks version 3 (`gateway::keys::gateway_version`).

use bincode::Options;

use super::{WireError, MAX_FRAME_BYTES};
use crate::model::NodeName;

/// The version of open frames.
pub const OPEN_VERSION: u16 = 1;
/// The version of sealed frames and key offers.
pub const SEALED_VERSION: u16 = 2;
/// The version of compact sealed frames (the newest this build speaks).
pub const COMPACT_VERSION: u16 = 3;

const TAG_SEALED: u8 = 0;
const TAG_KEY_OFFER: u8 = 1;
const MAC_LEN: usize = 32;
/// Bytes a seal adds to an open frame.
pub const SEAL_OVERHEAD: usize = 1 + MAC_LEN;

/// A key that seals the frames of one sender to one receiver, with the key derived from it for
/// version 3 (derived once, not per frame). Its `Debug` hides it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SealKey {
    raw: [u8; 32],
    compact: [u8; 32],
}

impl SealKey {
    /// A fresh random key.
    pub fn random() -> Self {
        Self::from_bytes(rand::random())
    }

    /// The key's fingerprint: what a sender asks the receiver to confirm, without the key.
    pub fn fingerprint(&self) -> [u8; 32] {
        *blake3::hash(&self.raw).as_bytes()
    }

    /// The raw key (to put in a key offer).
    pub fn to_bytes(self) -> [u8; 32] {
        self.raw
    }

    /// A key from its raw bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self {
            raw: bytes,
            compact: blake3::derive_key(COMPACT_KEY_CONTEXT, &bytes),
        }
    }
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

/// A frame as it arrived, sorted by its layout.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrived<'a> {
    /// An open frame (version 1); `frame` is the whole frame, for [`super::decode`].
    Open {
        /// The whole frame.
        frame: &'a [u8],
        /// Its sender, as it claims.
        from: NodeName,
    },
    /// A sealed frame; check [`Arrived::verify`] with the sender's key before decoding `body`.
    Sealed {
        /// [`SEALED_VERSION`] or [`COMPACT_VERSION`]: how `body` is encoded.
        version: u16,
        /// The MAC.
        mac: [u8; 32],
        /// `bincode(hub_id, from, msg)`, for [`super::decode_body`] with `version`.
        body: &'a [u8],
        /// Its sender, as it claims.
        from: NodeName,
    },
    /// A key offer from `from`.
    KeyOffer {
        /// The offering node, as it claims.
        from: NodeName,
        /// The key it wants frames to it sealed with.
        key: SealKey,
    },
}

impl Arrived<'_> {
    /// Whether a sealed frame's MAC is `key`'s (constant time). `false` for the other layouts.
    pub fn verify(&self, key: &SealKey) -> bool {
        match self {
            Arrived::Sealed {
                version, mac, body, ..
            } => mac_of(*version, body, key) == blake3::Hash::from_bytes(*mac),
            _ => false,
        }
    }

    /// The node the frame claims to come from.
    pub fn from(&self) -> &NodeName {
        match self {
            Arrived::Open { from, .. }
            | Arrived::Sealed { from, .. }
            | Arrived::KeyOffer { from, .. } => from,
        }
    }
}

fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_FRAME_BYTES)
}

/// The context version 3 derives its MAC key with.
const COMPACT_KEY_CONTEXT: &str = "process_hub 2026-12 wire version 3 seal";

/// A sealed frame's MAC: version 2's under the key itself (as that version was defined),
/// version 3's under a key derived from it for that version alone, so that no MAC of one
/// version verifies a frame of the other, whatever the bytes.
fn mac_of(version: u16, body: &[u8], key: &SealKey) -> blake3::Hash {
    if version == COMPACT_VERSION {
        blake3::keyed_hash(&key.compact, body)
    } else {
        blake3::keyed_hash(&key.raw, body)
    }
}

/// Reads who a frame body (`bincode(hub_id, from, ...)` in `version`'s encoding) says it is for
/// and from, without decoding the message, and checks the hub.
fn header(hub_id: &str, version: u16, body: &[u8]) -> Result<NodeName, WireError> {
    let (found, from): (String, NodeName) = super::frame::read_body(version, body, true)
        .map_err(|e| WireError::Malformed(e.to_string()))?;
    if found != hub_id {
        return Err(WireError::WrongHub {
            expected: hub_id.to_owned(),
            found,
        });
    }
    Ok(from)
}

/// Seals an open frame (from [`super::encode`]) with `key`.
pub fn seal(open: &[u8], key: &SealKey) -> Result<Vec<u8>, WireError> {
    let body = open_body(open)?;
    let mac = mac_of(SEALED_VERSION, body, key);
    let mut frame = Vec::with_capacity(2 + SEAL_OVERHEAD + body.len());
    frame.extend_from_slice(&SEALED_VERSION.to_le_bytes());
    frame.push(TAG_SEALED);
    frame.extend_from_slice(mac.as_bytes());
    frame.extend_from_slice(body);
    Ok(frame)
}

/// Seals a compact body (from [`super::encode_compact_body`]) with `key` into a version-3 frame.
pub fn seal_compact(body: &[u8], key: &SealKey) -> Vec<u8> {
    let mac = mac_of(COMPACT_VERSION, body, key);
    let mut frame = Vec::with_capacity(2 + MAC_LEN + body.len());
    frame.extend_from_slice(&COMPACT_VERSION.to_le_bytes());
    frame.extend_from_slice(mac.as_bytes());
    frame.extend_from_slice(body);
    frame
}

/// The body of an open frame.
fn open_body(open: &[u8]) -> Result<&[u8], WireError> {
    match open.split_first_chunk::<2>() {
        Some((head, body)) if u16::from_le_bytes(*head) == OPEN_VERSION => Ok(body),
        Some((head, _)) => Err(WireError::UnknownVersion {
            found: u16::from_le_bytes(*head),
            supported: OPEN_VERSION,
        }),
        None => Err(WireError::Truncated { len: open.len() }),
    }
}

/// A key offer from `from` to its peers of hub `hub_id`: "seal what you send me with `key`".
pub fn key_offer(hub_id: &str, from: &str, key: &SealKey) -> Result<Vec<u8>, WireError> {
    let body = options()
        .serialize(&(hub_id, from, key.raw))
        .map_err(|e| WireError::Encode(e.to_string()))?;
    let mut frame = Vec::with_capacity(3 + body.len());
    frame.extend_from_slice(&SEALED_VERSION.to_le_bytes());
    frame.push(TAG_KEY_OFFER);
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// A sealed frame of `version` from `rest` (`mac[32] | body`, what follows its version and
/// tag); `len` is the whole frame's, for the error.
fn sealed<'a>(
    hub_id: &str,
    version: u16,
    rest: &'a [u8],
    len: usize,
) -> Result<Arrived<'a>, WireError> {
    let Some((mac, body)) = rest.split_first_chunk::<MAC_LEN>() else {
        return Err(WireError::Truncated { len });
    };
    Ok(Arrived::Sealed {
        version,
        mac: *mac,
        from: header(hub_id, version, body)?,
        body,
    })
}

/// Sorts a frame that arrived for hub `hub_id` by its layout and reads its claimed sender;
/// decodes nothing else. Never panics, whatever the bytes.
pub fn arrived<'a>(hub_id: &str, bytes: &'a [u8]) -> Result<Arrived<'a>, WireError> {
    if bytes.len() as u64 > MAX_FRAME_BYTES + 2 + SEAL_OVERHEAD as u64 {
        return Err(WireError::TooLarge {
            len: bytes.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    let Some((head, rest)) = bytes.split_first_chunk::<2>() else {
        return Err(WireError::Truncated { len: bytes.len() });
    };
    match u16::from_le_bytes(*head) {
        OPEN_VERSION => Ok(Arrived::Open {
            frame: bytes,
            from: header(hub_id, OPEN_VERSION, rest)?,
        }),
        SEALED_VERSION => match rest.split_first() {
            Some((&TAG_SEALED, rest)) => sealed(hub_id, SEALED_VERSION, rest, bytes.len()),
            Some((&TAG_KEY_OFFER, body)) => {
                let (found, from, key): (String, NodeName, [u8; 32]) = options()
                    .reject_trailing_bytes()
                    .deserialize(body)
                    .map_err(|e| WireError::Malformed(e.to_string()))?;
                if found != hub_id {
                    return Err(WireError::WrongHub {
                        expected: hub_id.to_owned(),
                        found,
                    });
                }
                Ok(Arrived::KeyOffer {
                    from,
                    key: SealKey::from_bytes(key),
                })
            }
            Some((tag, _)) => Err(WireError::Malformed(format!(
                "unknown frame layout {tag} in version {SEALED_VERSION}"
            ))),
            None => Err(WireError::Truncated { len: bytes.len() }),
        },
        COMPACT_VERSION => sealed(hub_id, COMPACT_VERSION, rest, bytes.len()),
        found => Err(WireError::UnknownVersion {
            found,
            supported: COMPACT_VERSION,
        }),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::cluster::wire::{decode_body, encode, encode_compact_body, WireMsg};

    fn open(from: &str) -> Vec<u8> {
        encode("h", from, &WireMsg::SyncRequest).unwrap()
    }

    #[test]
    fn a_sealed_frame_verifies_with_its_key_and_decodes() {
        let key = SealKey::random();
        let sealed = seal(&open("a@x"), &key).unwrap();
        let arrived = arrived("h", &sealed).unwrap();
        assert_eq!(arrived.from(), "a@x");
        assert!(arrived.verify(&key));
        assert!(!arrived.verify(&SealKey::random()));
        let Arrived::Sealed { body, .. } = arrived else {
            panic!("not sealed: {arrived:?}");
        };
        let frame = decode_body(SEALED_VERSION, body).unwrap();
        assert_eq!(frame.payload, WireMsg::SyncRequest);
        assert_eq!(frame.from, "a@x");
    }

    #[test]
    fn a_frame_resealed_under_another_name_fails_its_seal() {
        let key = SealKey::random();
        let mut sealed = seal(&open("m@x"), &key).unwrap();
        // A forger rewrites the sender in a frame it sealed itself (or one it saw).
        let forged = seal(&open("v@x"), &SealKey::random()).unwrap();
        let arrived_forged = arrived("h", &forged).unwrap();
        assert_eq!(arrived_forged.from(), "v@x");
        assert!(!arrived_forged.verify(&key));
        // Flipping one bit of the body breaks the seal too.
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert!(!arrived("h", &sealed)
            .map(|a| a.verify(&key))
            .unwrap_or(false));
    }

    #[test]
    fn a_compact_frame_verifies_with_its_key_and_decodes_to_the_same_message() {
        let key = SealKey::random();
        let msg = WireMsg::ChildCast {
            id: "child-000001".into(),
            payload: vec![7; 40],
            hops: 1,
        };
        let body = encode_compact_body("h", "a@x", &msg).unwrap();
        let sealed = seal_compact(&body, &key);
        let classic = seal(&encode("h", "a@x", &msg).unwrap(), &key).unwrap();
        assert!(
            sealed.len() < classic.len(),
            "{} >= {}",
            sealed.len(),
            classic.len()
        );
        let arrived = arrived("h", &sealed).unwrap();
        assert_eq!(arrived.from(), "a@x");
        assert!(arrived.verify(&key));
        assert!(!arrived.verify(&SealKey::random()));
        let Arrived::Sealed { version, body, .. } = arrived else {
            panic!("not sealed: {arrived:?}");
        };
        assert_eq!(version, COMPACT_VERSION);
        let frame = decode_body(version, body).unwrap();
        assert_eq!(frame.payload, msg);
        assert_eq!(frame.version, COMPACT_VERSION);
        // Its body under version 2's MAC does not verify: the MAC covers the version.
        let mut relabelled = SEALED_VERSION.to_le_bytes().to_vec();
        relabelled.push(TAG_SEALED);
        relabelled.extend_from_slice(&sealed[2..]);
        assert!(arrived_then_verify(&relabelled, &key).is_none_or(|ok| !ok));
    }

    fn arrived_then_verify(bytes: &[u8], key: &SealKey) -> Option<bool> {
        arrived("h", bytes).ok().map(|a| a.verify(key))
    }

    #[test]
    fn a_key_offer_round_trips_and_carries_no_seal() {
        let key = SealKey::random();
        let offer = key_offer("h", "a@x", &key).unwrap();
        match arrived("h", &offer).unwrap() {
            Arrived::KeyOffer { from, key: got } => {
                assert_eq!(from, "a@x");
                assert_eq!(got, key);
            }
            other => panic!("not an offer: {other:?}"),
        }
        assert!(!arrived("h", &offer).unwrap().verify(&key));
    }

    #[test]
    fn an_open_frame_is_sorted_open_with_its_sender() {
        let frame = open("a@x");
        assert_eq!(
            arrived("h", &frame).unwrap(),
            Arrived::Open {
                frame: &frame,
                from: "a@x".to_owned()
            }
        );
    }

    #[test]
    fn frames_of_another_hub_or_version_are_refused() {
        let key = SealKey::random();
        let sealed = seal(&open("a@x"), &key).unwrap();
        assert!(matches!(
            arrived("other", &sealed),
            Err(WireError::WrongHub { .. })
        ));
        let mut v4 = sealed.clone();
        v4[0] = 4;
        assert!(matches!(
            arrived("h", &v4),
            Err(WireError::UnknownVersion { found: 4, .. })
        ));
        // A version-2 frame relabelled as version 3 does not read as one.
        let mut v3 = sealed.clone();
        v3[0] = 3;
        assert!(arrived("h", &v3).map_or(true, |a| !a.verify(&key)));
        assert!(matches!(
            arrived("h", &sealed[..10]),
            Err(WireError::Truncated { .. } | WireError::Malformed(_))
        ));
    }

    #[test]
    fn the_key_does_not_show_in_debug() {
        let key = SealKey::from_bytes([7; 32]);
        assert_eq!(format!("{key:?}"), "SealKey(..)");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = arrived("h", &bytes);
            for version in [SEALED_VERSION, COMPACT_VERSION] {
                let mut framed = version.to_le_bytes().to_vec();
                framed.extend_from_slice(&bytes);
                if let Ok(a) = arrived("h", &framed) {
                    let sealed = matches!(a, Arrived::Sealed { .. });
                    prop_assert!(sealed || !a.verify(&SealKey::from_bytes([0; 32])));
                    if let Arrived::Sealed { version, body, .. } = a {
                        let _ = decode_body(version, body);
                    }
                }
            }
        }
    }
}
