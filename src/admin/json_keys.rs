//! Finding a key given twice in one JSON object.
//!
//! `serde_json` reads `{"durable": true, "durable": false}` as its last value without a word,
//! so a request that says two things would do one of them and answer 200. The start body is
//! walked once more, keeping only each object's keys, to find such a key and where it is.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

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

/// The first key (in the text's order) given twice in one object of `text`, if any. `text`
/// is expected to be JSON already read once; text that is not JSON answers `None` (the
/// caller reports that from its own reading).
pub(super) fn find_duplicate_key(text: &[u8]) -> Option<DuplicateKey> {
    let mut walk = Walk {
        path: Vec::new(),
        found: None,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    // The walk stops at the first duplicate with an error; only `found` matters.
    let _ = (&mut walk).deserialize(&mut deserializer);
    walk.found
}

/// The walk through one JSON text: where it is, and the duplicate once found.
struct Walk {
    path: Vec<Step>,
    found: Option<DuplicateKey>,
}

impl<'de> DeserializeSeed<'de> for &mut Walk {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut Walk {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i128<E>(self, _: i128) -> Result<(), E> {
        Ok(())
    }
    fn visit_u128<E>(self, _: u128) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            self.path.push(Step::Index(index));
            let more = seq.next_element_seed(&mut *self)?;
            self.path.pop();
            if more.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                self.found = Some(DuplicateKey {
                    path: self.path.clone(),
                    key,
                });
                return Err(de::Error::custom("duplicate key"));
            }
            self.path.push(Step::Key(key));
            map.next_value_seed(&mut *self)?;
            self.path.pop();
        }
        Ok(())
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
