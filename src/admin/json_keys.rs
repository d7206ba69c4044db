//! Finding a key given twice in one JSON object.
//!
//! `serde_json` reads `{"durable": true, "durable": false}` as its last value without a word,
//! so a request that says two things would do one of them and answer 200. [`read_value`] reads
//! the start body into a [`Value`] in one pass and stops at such a key, naming where it is.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// One step of the path to a JSON value: an object's key or an array's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The value of this key.
    Key(String),
    /// The element at this index.
    Index(usize),
}

/// A key given twice in one object: the path to that object (empty for the top-level value)
/// and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DuplicateKey {
    /// From the top-level value to the object holding the key twice.
    pub(super) path: Vec<Step>,
    /// The key given twice.
    pub(super) key: String,
}

/// `a.b[2].c`: a path as messages write it (empty for the top-level value).
pub(super) fn path_text(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) if out.is_empty() => out.push_str(key),
            Step::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Why a text did not read as one JSON value without a key given twice.
#[derive(Debug)]
pub(super) enum Unread {
    /// The text is not JSON.
    NotJson(serde_json::Error),
    /// The first key (in the text's order) given twice in one object.
    Duplicate(DuplicateKey),
}

/// Reads `text` as one JSON value, as `serde_json::from_slice` would, except that a key given
/// twice in one object is refused (naming the first such key and where it is) instead of
/// taking its last value.
pub(super) fn read_value(text: &[u8]) -> Result<Value, Unread> {
    let mut walk = Walk {
        path: Vec::new(),
        found: None,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let read = (&mut walk)
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match (read, walk.found) {
        (_, Some(duplicate)) => Err(Unread::Duplicate(duplicate)),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(Unread::NotJson(e)),
    }
}

/// Reads one JSON value as [`read_value`] does, inside a larger reading: a key given twice
/// fails it without saying where (the caller reads the text again with [`read_value`] to name
/// the key), so nothing a strict reading refuses is ever taken.
pub(super) struct NoDuplicateKeys;

impl<'de> DeserializeSeed<'de> for NoDuplicateKeys {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let mut walk = Walk {
            path: Vec::new(),
            found: None,
        };
        (&mut walk).deserialize(deserializer)
    }
}

/// The first key (in the text's order) given twice in one object of `text`, if any; text that
/// is not JSON answers `None`.
#[cfg(test)]
fn find_duplicate_key(text: &[u8]) -> Option<DuplicateKey> {
    match read_value(text) {
        Err(Unread::Duplicate(duplicate)) => Some(duplicate),
        _ => None,
    }
}

/// The walk through one JSON text: where it is, and the duplicate once found.
struct Walk {
    path: Vec<Step>,
    found: Option<DuplicateKey>,
}

impl<'de> DeserializeSeed<'de> for &mut Walk {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut Walk {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            self.path.push(Step::Index(items.len()));
            let item = seq.next_element_seed(&mut *self)?;
            self.path.pop();
            match item {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                self.found = Some(DuplicateKey {
                    path: self.path.clone(),
                    key,
                });
                return Err(de::Error::custom("duplicate key"));
            }
            self.path.push(Step::Key(key));
            let value = map.next_value_seed(&mut *self)?;
            if let Some(Step::Key(key)) = self.path.pop() {
                object.insert(key, value);
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Option<(String, String)> {
        find_duplicate_key(text.as_bytes()).map(|d| (path_text(&d.path), d.key))
    }

    #[test]
    fn a_key_given_twice_is_found_with_its_path() {
        assert_eq!(
            found(r#"{"id":"a","kind":"counter","durable":true,"durable":false}"#),
            Some((String::new(), "durable".into()))
        );
        assert_eq!(
            found(r#"[{"id":"a"},{"id":"b","args":{"x":[1,{"y":1,"y":2}]}}]"#),
            Some(("[1].args.x[1]".into(), "y".into()))
        );
        // The first in the text's order.
        assert_eq!(
            found(r#"[{"a":1,"a":2},{"b":1,"b":2}]"#),
            Some(("[0]".into(), "a".into()))
        );
    }

    #[test]
    fn json_without_a_duplicate_reads_as_serde_json_reads_it() {
        for text in [
            r#"{"id":"a","kind":"counter","args":{"start":3,"x":[1,-2,1.5,null,true,"\u0061"]}}"#,
            r#"[{"id":"a"},{"id":"b","metadata":{}},[],18446744073709551615,-9223372036854775808]"#,
            r#" "text" "#,
        ] {
            let expected: Value = serde_json::from_slice(text.as_bytes()).unwrap();
            assert_eq!(read_value(text.as_bytes()).unwrap(), expected, "{text}");
        }
        // Trailing text is not JSON, as for serde_json.
        assert!(matches!(read_value(b"{} {}"), Err(Unread::NotJson(_))));
    }

    #[test]
    fn json_without_a_duplicate_has_none() {
        assert_eq!(
            found(r#"{"a":{"a":1},"b":[{"a":1},{"a":2}],"c":1.5}"#),
            None
        );
        assert_eq!(found(r#"[1,"x",null,true,-3,18446744073709551615]"#), None);
        // Not JSON: the caller's own reading reports it.
        assert_eq!(found("{oops"), None);
        // An escaped key is the same key.
        assert_eq!(
            found(r#"{"a":1,"\u0061":2}"#),
            Some((String::new(), "a".into()))
        );
    }
}
