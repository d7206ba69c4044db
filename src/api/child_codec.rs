//! The encoding of `#[derive(ChildMessage)]`: a child's message crosses nodes as ractor's
//! `SerializedMessage` (the variant's name, its fields' bytes, and for an `#[rpc]` variant a
//! reply port of bytes), with every field and every answer encoded by serde in the hub's codec.
//!
//! The codec is the one the hub's frames use: bincode with fixed-width little-endian integers
//! (the bytes of `bincode::serialize`). A variant's fields are encoded one after the other, in
//! declaration order (the reply port left out), which is exactly the encoding of the tuple of
//! its fields. Decoding is bounded: no field may claim more bytes than the message has (so a
//! forged length cannot make the receiver allocate), every byte must be consumed, and bytes
//! that do not decode are an error, never a default value.
//!
//! What the derive generates calls [`FieldCodec`], [`Encoder`], [`Decoder`], [`reply_bytes`]
//! and [`reply_typed`] through `process_hub::__private`; nothing here is an API of its own. The
//! file uses no other module of the crate: the derive's compile-fail test compiles it alone.

use bincode::Options;
use ractor::message::BoxedDowncastErr;
use ractor::RpcReplyPort;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A value that can be a field of a `ChildMessage` variant or the answer of an `#[rpc]`
/// variant: anything serde can encode and decode into an owned value. Implemented for every
/// such type; the derive asks for it on each field, so a type that cannot cross the wire is
/// named at its field.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cross the wire in a `ChildMessage`: it does not implement serde's `Serialize` and `DeserializeOwned`",
    label = "this field's type is not a serde type",
    note = "derive `serde::Serialize` and `serde::Deserialize` for `{Self}` (or wrap it in a type that does)"
)]
pub trait WireField: Serialize + DeserializeOwned + Send + 'static {}

impl<T: Serialize + DeserializeOwned + Send + 'static> WireField for T {}

/// The codec: fixed-width little-endian integers like `bincode::serialize`, nothing after the
/// value, and at most `limit` bytes read.
fn options(limit: u64) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(limit)
        .allow_trailing_bytes()
}

/// How one field's type (or one answer's) is encoded and decoded: the derive makes one per
/// field, as a constant, so that a type that is not a serde type is reported once, at its
/// field, and every use of the constant needs no bound of its own.
pub struct FieldCodec<T> {
    encode: fn(&T, &mut Vec<u8>) -> Result<(), BoxedDowncastErr>,
    decode: fn(&mut &[u8]) -> Result<T, BoxedDowncastErr>,
}

impl<T> Clone for FieldCodec<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for FieldCodec<T> {}

/// The codec of `T`: the one place the derive asks for `T: WireField`.
pub const fn codec<T: WireField>() -> FieldCodec<T> {
    FieldCodec {
        encode: encode_into::<T>,
        decode: decode_from::<T>,
    }
}

/// Appends `value` to `bytes`. A value serde refuses (e.g. a sequence of unknown length) fails
/// the whole message, logged with serde's reason.
fn encode_into<T: WireField>(value: &T, bytes: &mut Vec<u8>) -> Result<(), BoxedDowncastErr> {
    // No limit here: the caller's own value, measured against the frame budget after.
    options(u64::MAX).serialize_into(bytes, value).map_err(|e| {
        tracing::warn!(
            field = std::any::type_name::<T>(),
            error = %e,
            "a ChildMessage field did not encode"
        );
        BoxedDowncastErr
    })
}

/// Reads a `T` from the start of `rest` and advances it. Fails when the bytes are not a `T`
/// (truncated, another type, or a length beyond the bytes left, refused before allocating).
fn decode_from<T: WireField>(rest: &mut &[u8]) -> Result<T, BoxedDowncastErr> {
    let limit = rest.len() as u64;
    options(limit)
        .deserialize_from(rest)
        .map_err(|_| BoxedDowncastErr)
}

/// Encodes a variant's fields one after the other.
#[derive(Default)]
pub struct Encoder {
    bytes: Vec<u8>,
}

impl Encoder {
    /// An empty message body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one field.
    pub fn push<T>(&mut self, codec: FieldCodec<T>, field: &T) -> Result<(), BoxedDowncastErr> {
        (codec.encode)(field, &mut self.bytes)
    }

    /// The encoded fields.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// Decodes a variant's fields in the order [`Encoder`] wrote them.
pub struct Decoder<'a> {
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    /// Reads the fields of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// The next field.
    pub fn next<T>(&mut self, codec: FieldCodec<T>) -> Result<T, BoxedDowncastErr> {
        (codec.decode)(&mut self.rest)
    }

    /// Succeeds only if every byte was read: a message with bytes left over is not of this
    /// variant.
    pub fn finish(self) -> Result<(), BoxedDowncastErr> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(BoxedDowncastErr)
        }
    }
}

/// An answer's bytes as a `T`, bounded like a field.
fn decode_answer<T>(codec: FieldCodec<T>, bytes: &[u8]) -> Option<T> {
    let mut decoder = Decoder::new(bytes);
    let value = decoder.next(codec).ok()?;
    decoder.finish().ok()?;
    Some(value)
}

/// The runtime that carries a reply port's bridge, or `BoxedDowncastErr` outside one (the
/// message then does not encode, rather than panicking in `tokio::spawn`).
fn runtime() -> Result<tokio::runtime::Handle, BoxedDowncastErr> {
    tokio::runtime::Handle::try_current().map_err(|_| {
        tracing::warn!("a ChildMessage call was encoded outside a tokio runtime");
        BoxedDowncastErr
    })
}

/// The sender's side of an `#[rpc]` variant: a port of bytes that, once the host's answer
/// arrives, decodes it and answers the caller's typed `port`. An answer that does not decode
/// as `T` closes `port` without a value (logged), which the hub's callers report as `decode`.
/// The bridge waits at most the port's timeout (without one, until the bytes' sender is
/// dropped).
pub fn reply_bytes<T: Send + 'static>(
    port: RpcReplyPort<T>,
    codec: FieldCodec<T>,
) -> Result<RpcReplyPort<Vec<u8>>, BoxedDowncastErr> {
    let runtime = runtime()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
    let timeout = port.get_timeout();
    runtime.spawn(async move {
        let bytes = match timeout {
            Some(t) => match tokio::time::timeout(t, rx).await {
                Ok(Ok(bytes)) => bytes,
                _ => return,
            },
            None => match rx.await {
                Ok(bytes) => bytes,
                Err(_) => return,
            },
        };
        match decode_answer(codec, &bytes) {
            Some(value) => {
                let _ = port.send(value);
            }
            None => tracing::warn!(
                answer = std::any::type_name::<T>(),
                bytes = bytes.len(),
                "a ChildMessage answer did not decode as its type"
            ),
        }
    });
    Ok(match timeout {
        Some(t) => RpcReplyPort::from((tx, t)),
        None => RpcReplyPort::from(tx),
    })
}

/// The host's side of an `#[rpc]` variant: a typed port for the child whose answer is encoded
/// and sent on `port` (the bytes go back to the caller). An answer serde refuses drops `port`
/// (logged), which the caller sees as `no_reply`.
pub fn reply_typed<T: Send + 'static>(
    port: RpcReplyPort<Vec<u8>>,
    codec: FieldCodec<T>,
) -> Result<RpcReplyPort<T>, BoxedDowncastErr> {
    let runtime = runtime()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<T>();
    let timeout = port.get_timeout();
    runtime.spawn(async move {
        let value = match timeout {
            Some(t) => match tokio::time::timeout(t, rx).await {
                Ok(Ok(value)) => value,
                _ => return,
            },
            None => match rx.await {
                Ok(value) => value,
                Err(_) => return,
            },
        };
        let mut encoder = Encoder::new();
        if encoder.push(codec, &value).is_ok() {
            let _ = port.send(encoder.finish());
        }
    });
    Ok(match timeout {
        Some(t) => RpcReplyPort::from((tx, t)),
        None => RpcReplyPort::from(tx),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Player {
        name: String,
        score: i64,
        tags: Vec<String>,
    }

    fn player(name: &str) -> Player {
        Player {
            name: name.into(),
            score: -3,
            tags: vec!["a".into(), "b".into()],
        }
    }

    #[test]
    fn fields_round_trip_as_the_tuple_of_the_fields() {
        let players = vec![player("ana"), player("bo")];
        let scores: BTreeMap<String, Option<u32>> =
            [("ana".to_owned(), Some(3)), ("bo".to_owned(), None)].into();
        let mut encoder = Encoder::new();
        encoder.push(codec(), &players).unwrap();
        encoder.push(codec(), &scores).unwrap();
        encoder.push(codec(), &7u8).unwrap();
        let bytes = encoder.finish();
        // The same bytes as bincode's encoding of the tuple.
        assert_eq!(
            bytes,
            bincode::serialize(&(&players, &scores, 7u8)).unwrap()
        );
        let mut decoder = Decoder::new(&bytes);
        assert_eq!(decoder.next(codec::<Vec<Player>>()).unwrap(), players);
        assert_eq!(
            decoder
                .next(codec::<BTreeMap<String, Option<u32>>>())
                .unwrap(),
            scores
        );
        assert_eq!(decoder.next(codec::<u8>()).unwrap(), 7);
        decoder.finish().unwrap();
    }

    #[test]
    fn bytes_that_are_not_the_fields_fail() {
        let bytes = bincode::serialize(&vec![player("ana")]).unwrap();
        // Truncated.
        let mut decoder = Decoder::new(&bytes[..bytes.len() - 1]);
        assert!(decoder.next(codec::<Vec<Player>>()).is_err());
        // Left over.
        let mut decoder = Decoder::new(&bytes);
        assert!(decoder.next(codec::<u64>()).is_ok());
        assert!(decoder.finish().is_err());
        // A forged length far beyond the bytes: refused before allocating it.
        let mut forged = u64::MAX.to_le_bytes().to_vec();
        forged.extend_from_slice(b"xy");
        assert!(Decoder::new(&forged).next(codec::<Vec<u8>>()).is_err());
        assert!(Decoder::new(&forged).next(codec::<String>()).is_err());
        assert!(Decoder::new(&forged).next(codec::<Vec<Player>>()).is_err());
        // Not UTF-8.
        let mut bad = 2u64.to_le_bytes().to_vec();
        bad.extend_from_slice(&[0xff, 0xfe]);
        assert!(Decoder::new(&bad).next(codec::<String>()).is_err());
        assert_eq!(decode_answer(codec::<String>(), &bad), None);
    }

    #[tokio::test]
    async fn an_answer_crosses_both_bridges_and_a_bad_one_closes_the_port() {
        let (tx, rx) = tokio::sync::oneshot::channel::<Vec<Player>>();
        let bytes_port = reply_bytes(RpcReplyPort::from(tx), codec()).unwrap();
        let typed_port = reply_typed::<Vec<Player>>(bytes_port, codec()).unwrap();
        typed_port.send(vec![player("cy")]).unwrap();
        assert_eq!(rx.await.unwrap(), vec![player("cy")]);

        let (tx, rx) = tokio::sync::oneshot::channel::<Vec<Player>>();
        let bytes_port = reply_bytes(RpcReplyPort::from(tx), codec()).unwrap();
        bytes_port.send(vec![1, 2, 3]).unwrap();
        assert!(rx.await.is_err(), "undecodable bytes never become a value");
    }
}
