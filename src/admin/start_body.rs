//! `POST /v1/children`'s body read in one pass, for the body the API takes.
//!
//! [`super::strict::parse_start_body`] reads a body into a `serde_json::Value` first and then
//! each spec field by field, so that a refusal names the field and where it is. For a body it
//! takes, that costs a map with an allocated key per field and a copy of every string, about a
//! tenth of what a start costs the node it enters by. [`read`] reads the same body straight
//! into [`StartSpec`]s and gives up at the first thing it does not take as it is: an unknown or
//! repeated field, a missing `id` or `kind`, a value of the wrong type, a key given twice
//! anywhere inside (`args`, `metadata`), text after the value. Then the strict reading runs on
//! the body and says what is wrong. So this reading takes exactly the bodies the strict one
//! takes, with the same specs, and refuses nothing by itself.

use std::fmt;

use serde::de::Visitor;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess};
use serde::Deserialize;
use serde_json::Value;

use super::bodies::StartSpec;
use super::json_keys::NoDuplicateKeys;

/// The specs of `body` and whether it was a single spec, or `None` when the strict reading
/// must look at it (it may refuse it, or name what it holds that this reading does not take).
pub(super) fn read(body: &[u8]) -> Option<(Vec<StartSpec>, bool)> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let specs = deserializer.deserialize_any(BodyVisitor).ok()?;
    deserializer.end().ok()?;
    Some(specs)
}

/// The body: an array of specs, or one spec.
struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = (Vec<StartSpec>, bool);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a child spec or an array of them")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // A spec takes at least 20 bytes of text: the hint is bounded by the body's size.
        let mut specs = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(OneSpec(spec)) = seq.next_element()? {
            specs.push(spec);
        }
        Ok((specs, false))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok((vec![SpecVisitor.visit_map(map)?], true))
    }
}

/// One entry of an array body: an object, read by [`SpecVisitor`].
struct OneSpec(StartSpec);

impl<'de> Deserialize<'de> for OneSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(SpecVisitor).map(OneSpec)
    }
}

/// A field of a spec ([`super::strict::START_SPEC_FIELDS`]); another name fails the reading.
#[derive(Clone, Copy)]
enum Field {
    Id,
    Kind,
    Args,
    Restart,
    Metadata,
    Durable,
    Nodes,
    GuidedFallback,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(FieldVisitor)
    }
}

struct FieldVisitor;

impl Visitor<'_> for FieldVisitor {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field of a child spec")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Field, E> {
        Ok(match name {
            "id" => Field::Id,
            "kind" => Field::Kind,
            "args" => Field::Args,
            "restart" => Field::Restart,
            "metadata" => Field::Metadata,
            "durable" => Field::Durable,
            "nodes" => Field::Nodes,
            "guided_fallback" => Field::GuidedFallback,
            _ => return Err(E::custom("unknown field")),
        })
    }
}

/// One spec's object. Fields other than `id`, `kind` and the two flags are read as JSON first
/// (no key twice inside) and then as their type, as the strict reading does.
struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = StartSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a child spec")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StartSpec, A::Error> {
        let mut seen = 0u8;
        let (mut id, mut kind) = (None, None);
        let mut spec = StartSpec::new(String::new(), String::new());
        while let Some(field) = map.next_key::<Field>()? {
            let bit = 1u8 << field as u8;
            if seen & bit != 0 {
                return Err(de::Error::custom("a field given twice"));
            }
            seen |= bit;
            match field {
                Field::Id => id = Some(map.next_value::<String>()?),
                Field::Kind => kind = Some(map.next_value::<String>()?),
                // Any JSON, `null` included, as given.
                Field::Args => spec.args = Some(map.next_value_seed(NoDuplicateKeys)?),
                Field::Restart => spec.restart = optional(map.next_value_seed(NoDuplicateKeys)?)?,
                Field::Metadata => spec.metadata = optional(map.next_value_seed(NoDuplicateKeys)?)?,
                Field::Nodes => spec.nodes = optional(map.next_value_seed(NoDuplicateKeys)?)?,
                // Absent and `null` are both "not given".
                Field::Durable => spec.durable = map.next_value::<Option<bool>>()?.unwrap_or(false),
                Field::GuidedFallback => {
                    spec.guided_fallback = map.next_value::<Option<bool>>()?.unwrap_or(false)
                }
            }
        }
        match (id, kind) {
            (Some(id), Some(kind)) => {
                spec.id = id;
                spec.kind = kind;
                Ok(spec)
            }
            _ => Err(de::Error::custom("a required field is missing")),
        }
    }
}

/// `null` is "not given"; another value is read as `T` (as the strict reading reads it).
fn optional<T: DeserializeOwned, E: de::Error>(value: Value) -> Result<Option<T>, E> {
    if value.is_null() {
        return Ok(None);
    }
    T::deserialize(&value)
        .map(Some)
        .map_err(|_| E::custom("a field of the wrong type"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::strict::parse_start_body;

    /// Bodies the API takes: the one-pass reading gives the strict reading's specs.
    #[test]
    fn a_body_the_api_takes_reads_the_same_in_one_pass() {
        for body in [
            r#"{"id":"a","kind":"counter","durable":true}"#,
            r#"[{"id":"a","kind":"counter"},{"id":"b","kind":"counter","restart":"transient","metadata":{"tag":"t"},"args":{"start":2,"x":[1,{"y":null}]},"nodes":["n@h"],"guided_fallback":true}]"#,
            r#"{"id":"a","kind":"k","restart":null,"metadata":null,"nodes":null,"durable":null,"args":null}"#,
            r#" [ {"kind":"k","id":"\u0061"} ] "#,
            r#"{"\u0069d":"a","kind":"k"}"#,
            "[]",
        ] {
            let strict = parse_start_body(body.as_bytes()).expect(body);
            assert_eq!(read(body.as_bytes()), Some(strict), "{body}");
        }
    }

    /// Bodies the API refuses: the one-pass reading takes none of them, so the strict one
    /// answers (and names what is wrong).
    #[test]
    fn a_body_the_api_refuses_is_left_to_the_strict_reading() {
        for body in [
            r#"{"id":"a","kind":"k","durabel":true}"#,
            r#"[{"id":"a","kind":"k"},{"id":"b"}]"#,
            r#"[{"id":"a","kind":"k","id":"b"}]"#,
            r#"[{"id":"a","kind":"k","\u0069d":"b"}]"#,
            r#"{"id":"a","kind":"k","args":{"x":1,"x":2}}"#,
            r#"{"id":"a","kind":"k","metadata":{"t":"1","t":"2"}}"#,
            r#"{"id":"a","kind":"k","metadata":{"t":1}}"#,
            r#"{"id":"a","kind":"k","restart":"permanant"}"#,
            r#"{"id":"a","kind":"k","durable":"yes"}"#,
            r#"{"id":7,"kind":"k"}"#,
            r#"{"id":null,"kind":"k"}"#,
            r#"[{"id":"a","kind":"k"},3]"#,
            r#"{"id":"a","kind":"k"} {}"#,
            r#""text""#,
            "{oops",
        ] {
            assert_eq!(read(body.as_bytes()), None, "{body}");
            assert!(parse_start_body(body.as_bytes()).is_err(), "{body}");
        }
    }
}
