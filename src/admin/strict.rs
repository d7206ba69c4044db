//! Strict reading of `POST /v1/children`'s body: every field known and given once, every
//! required field present, each error naming the field and where it is.
//!
//! A field the API does not know is refused rather than ignored: `"durabel": true` ignored
//! would start a plain child where the caller asked for a durable one, and answer 200. The body
//! is read as JSON first and each spec checked field by field, so that an error says
//! `unknown field "durabel" in children[3] (id "x")` rather than serde's message about an
//! untagged enum. A key given twice in one object is refused too (see `json_keys`): JSON
//! readers keep its last value without a word. `process-hub ctl start --file` checks its files with the same functions
//! before it sends anything.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::bodies::StartSpec;
use super::json_keys::{path_text, read_value, DuplicateKey, Step, Unread};

/// The fields of a child spec, as the API takes them.
pub const START_SPEC_FIELDS: &[&str] = &[
    "id",
    "kind",
    "args",
    "restart",
    "metadata",
    "durable",
    "nodes",
    "guided_fallback",
];

/// The fields a child spec must have.
const REQUIRED_FIELDS: &[&str] = &["id", "kind"];

/// A request body, or one spec of it, that the API refuses: where, which field (when one is
/// to blame) and why, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SpecInputError {
    /// Where in the body: `children[3]` for an entry of an array, `the child spec` for a body
    /// of one spec, `the body` for the body as a whole.
    pub at: String,
    /// The field to blame, if one is.
    pub field: Option<String>,
    /// The whole sentence, naming both.
    pub message: String,
}

impl SpecInputError {
    fn whole(message: String) -> Self {
        Self {
            at: "the body".into(),
            field: None,
            message,
        }
    }
}

/// The name of a JSON value's type, for messages.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads `POST /v1/children`'s body: one spec (an object) or an array of them. Answers the
/// specs and whether the body was a single spec. Every spec is checked before any is
/// answered, so one bad entry refuses the whole body.
pub fn parse_start_body(body: &[u8]) -> Result<(Vec<StartSpec>, bool), SpecInputError> {
    // A body the API takes reads in one pass; anything else is read here, to say what is wrong.
    if let Some(specs) = super::start_body::read(body) {
        return Ok(specs);
    }
    let value = match read_value(body) {
        Ok(value) => value,
        Err(Unread::NotJson(e)) => {
            return Err(SpecInputError::whole(format!(
                "the body is not JSON ({e}); it must be a child spec {} or an array of them",
                spec_shape()
            )))
        }
        Err(Unread::Duplicate(duplicate)) => {
            // The message names the entry by its id: read the body as serde_json does (the
            // last value of a key given twice) for that alone.
            let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let single = value.is_object().then(|| place_of(0, true));
            return Err(duplicate_error(duplicate, &value, single.as_deref()));
        }
    };
    match value {
        Value::Array(entries) => {
            let specs = entries
                .iter()
                .enumerate()
                .map(|(i, entry)| start_spec_from_json(entry, &place_of(i, false)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((specs, false))
        }
        Value::Object(_) => Ok((
            vec![start_spec_from_json(&value, &place_of(0, true))?],
            true,
        )),
        other => Err(SpecInputError::whole(format!(
            "the body is {}; it must be a child spec {} or an array of them",
            type_name(&other),
            spec_shape()
        ))),
    }
}

/// Reads one child spec from its JSON text, `at` naming where it is (`f.jsonl:4`): JSON, no
/// key given twice, then as [`start_spec_from_json`] reads it. Answers the JSON as read too
/// (what `process-hub ctl start --file` sends).
pub fn spec_from_text(text: &[u8], at: &str) -> Result<(Value, StartSpec), SpecInputError> {
    let value = match read_value(text) {
        Ok(value) => value,
        Err(Unread::NotJson(e)) => {
            return Err(SpecInputError {
                at: at.to_owned(),
                field: None,
                message: format!(
                    "{at}: not JSON ({e}); a child spec is an object {}",
                    spec_shape()
                ),
            })
        }
        Err(Unread::Duplicate(duplicate)) => {
            let value: Value = serde_json::from_slice(text).unwrap_or(Value::Null);
            return Err(duplicate_error(duplicate, &value, Some(at)));
        }
    };
    let spec = start_spec_from_json(&value, at)?;
    Ok((value, spec))
}

/// The error of a key given twice in a body whose JSON is `value`: `single` names where the
/// body's one spec is, `None` when the body is an array of specs (`children[N]`). The field
/// blamed is the spec's field holding the duplicate (`args` for a key twice inside `args`).
fn duplicate_error(duplicate: DuplicateKey, value: &Value, single: Option<&str>) -> SpecInputError {
    let DuplicateKey { path, key } = duplicate;
    let (at, spec, inner) = match (single, path.split_first()) {
        (Some(at), _) => (at.to_owned(), value, &path[..]),
        (None, Some((Step::Index(i), rest))) => (place_of(*i, false), &value[*i], rest),
        // An array has no keys: the top-level value of a body of specs is never the object.
        (None, _) => ("the body".to_owned(), value, &path[..]),
    };
    // The id names the entry, unless the id is what was given twice.
    let place = match spec.get("id").and_then(Value::as_str) {
        Some(id) if !(inner.is_empty() && key == "id") => format!("{at} (id {id:?})"),
        _ => at.clone(),
    };
    match inner.first() {
        None => SpecInputError {
            message: format!(
                "duplicate field {key:?} in {place}; a field is given once (JSON keeps only the last)"
            ),
            at,
            field: Some(key),
        },
        Some(first) => SpecInputError {
            message: format!(
                "duplicate key {key:?} in {} of {place}; a key is given once (JSON keeps only the last)",
                path_text(inner)
            ),
            at,
            field: match first {
                Step::Key(field) => Some(field.clone()),
                Step::Index(_) => None,
            },
        },
    }
}

/// Where entry `index` of a body is, as [`parse_start_body`] names it.
pub fn place_of(index: usize, single: bool) -> String {
    if single {
        "the child spec".into()
    } else {
        format!("children[{index}]")
    }
}

/// Refuses the first spec whose `id` is not a valid child id or whose `kind` is blank, naming
/// the field and where.
pub fn check_values(specs: &[StartSpec], single: bool) -> Result<(), SpecInputError> {
    for (index, spec) in specs.iter().enumerate() {
        let at = place_of(index, single);
        if let Err(e) = crate::model::ChildId::parse(spec.id.clone()) {
            return Err(SpecInputError {
                message: format!("field \"id\" in {at}: {e}"),
                at,
                field: Some("id".into()),
            });
        }
        if spec.kind.trim().is_empty() {
            return Err(SpecInputError {
                message: format!("field \"kind\" in {at} (id {:?}) is blank", spec.id),
                at,
                field: Some("kind".into()),
            });
        }
    }
    Ok(())
}

/// Refuses the first spec whose kind is not in `known` (sorted names), listing the known
/// kinds: a typo in a kind is refused before anything starts, like a typo in a field.
pub fn check_kinds(
    specs: &[StartSpec],
    single: bool,
    known: &[String],
) -> Result<(), SpecInputError> {
    specs
        .iter()
        .enumerate()
        .try_for_each(|(index, spec)| check_kind(spec, &place_of(index, single), known))
}

/// Refuses `spec`, at `at`, if its kind is not in `known` (sorted names), listing the known
/// kinds (`process-hub ctl start --file` checks each line with it before sending anything).
pub fn check_kind(spec: &StartSpec, at: &str, known: &[String]) -> Result<(), SpecInputError> {
    if known.contains(&spec.kind) {
        return Ok(());
    }
    let at = at.to_owned();
    Err(SpecInputError {
        message: format!(
            "unknown kind {:?} in {at} (id {:?}); known kinds: {}",
            spec.kind,
            spec.id,
            known.join(", ")
        ),
        at,
        field: Some("kind".into()),
    })
}

/// `{"id", "kind", "args"?, ...}`: the shape of a spec, for messages.
fn spec_shape() -> String {
    let fields: Vec<String> = START_SPEC_FIELDS
        .iter()
        .map(|f| {
            if REQUIRED_FIELDS.contains(f) {
                format!("\"{f}\"")
            } else {
                format!("\"{f}\"?")
            }
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// Reads one child spec from `value`, `at` naming where it is in the request (`children[3]`,
/// `f.jsonl:4`): an object with only [`START_SPEC_FIELDS`], `id` and `kind` present, each
/// field of its type.
pub fn start_spec_from_json(value: &Value, at: &str) -> Result<StartSpec, SpecInputError> {
    let Value::Object(fields) = value else {
        return Err(SpecInputError {
            at: at.to_owned(),
            field: None,
            message: format!(
                "{at} is {}; a child spec is an object {}",
                type_name(value),
                spec_shape()
            ),
        });
    };
    // Named in messages next to the place, so an entry is found by its id too.
    let place = match fields.get("id").and_then(Value::as_str) {
        Some(id) => format!("{at} (id {id:?})"),
        None => at.to_owned(),
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !START_SPEC_FIELDS.contains(&k.as_str()))
    {
        return Err(SpecInputError {
            at: at.to_owned(),
            field: Some(unknown.clone()),
            message: format!(
                "unknown field {unknown:?} in {place}; the fields of a child spec are {}",
                START_SPEC_FIELDS.join(", ")
            ),
        });
    }
    if let Some(missing) = REQUIRED_FIELDS.iter().find(|f| !fields.contains_key(**f)) {
        return Err(SpecInputError {
            at: at.to_owned(),
            field: Some((*missing).to_owned()),
            message: format!("missing field {missing:?} in {place}"),
        });
    }
    let field = |name: &str| Field {
        fields,
        name: name.to_owned(),
        at,
        place: &place,
    };
    Ok(StartSpec {
        id: field("id").required()?,
        kind: field("kind").required()?,
        args: fields.get("args").cloned(),
        restart: field("restart").optional()?,
        metadata: field("metadata").optional()?,
        durable: field("durable").optional()?.unwrap_or(false),
        nodes: field("nodes").optional()?,
        guided_fallback: field("guided_fallback").optional()?.unwrap_or(false),
    })
}

/// One field of a spec being read.
struct Field<'a> {
    fields: &'a Map<String, Value>,
    name: String,
    at: &'a str,
    place: &'a str,
}

impl Field<'_> {
    fn required<T: DeserializeOwned>(&self) -> Result<T, SpecInputError> {
        // `start_spec_from_json` checked the required fields are present.
        self.decode(self.fields.get(&self.name).unwrap_or(&Value::Null))
    }

    /// Absent and `null` are both "not given".
    fn optional<T: DeserializeOwned>(&self) -> Result<Option<T>, SpecInputError> {
        match self.fields.get(&self.name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => self.decode(value).map(Some),
        }
    }

    fn decode<T: DeserializeOwned>(&self, value: &Value) -> Result<T, SpecInputError> {
        T::deserialize(value).map_err(|e| SpecInputError {
            at: self.at.to_owned(),
            field: Some(self.name.clone()),
            message: format!("field {:?} in {}: {e}", self.name, self.place),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(body: Value) -> SpecInputError {
        parse_start_body(body.to_string().as_bytes()).unwrap_err()
    }

    #[test]
    fn a_single_spec_and_an_array_read_alike() {
        let (specs, single) =
            parse_start_body(br#"{"id":"a","kind":"counter","durable":true}"#).unwrap();
        assert!(single);
        assert_eq!((specs[0].id.as_str(), specs[0].durable), ("a", true));
        let (specs, single) = parse_start_body(
            br#"[{"id":"a","kind":"counter"},{"id":"b","kind":"counter","restart":"transient","metadata":{"tag":"t"},"args":{"start":2},"nodes":["n@h"],"guided_fallback":true}]"#,
        )
        .unwrap();
        assert!(!single);
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[1].restart, Some(crate::model::Restart::Transient));
        assert_eq!(specs[1].args, Some(json!({"start": 2})));
        assert_eq!(specs[1].metadata.as_ref().unwrap()["tag"], "t");
        assert!(specs[1].guided_fallback);
        // `null` is "not given".
        let (specs, _) = parse_start_body(br#"{"id":"a","kind":"k","restart":null}"#).unwrap();
        assert_eq!(specs[0].restart, None);
    }

    #[test]
    fn an_unknown_field_is_named_with_its_place_and_the_fields_there_are() {
        let e = refused(json!([
            {"id": "a", "kind": "counter"},
            {"id": "x", "kind": "counter", "durabel": true},
        ]));
        assert_eq!(e.at, "children[1]");
        assert_eq!(e.field.as_deref(), Some("durabel"));
        assert!(
            e.message
                .starts_with(r#"unknown field "durabel" in children[1] (id "x")"#),
            "{e}"
        );
        assert!(e.message.contains("id, kind, args, restart"), "{e}");
        let e = refused(json!({"id": "x", "kind": "counter", "durabel": true}));
        assert_eq!(e.at, "the child spec");
        assert!(e.message.contains(r#""durabel""#), "{e}");
    }

    #[test]
    fn a_missing_or_mistyped_field_is_named() {
        let e = refused(json!([{"id": "a", "knd": "counter"}]));
        // The unknown field is the typo to fix first.
        assert_eq!(e.field.as_deref(), Some("knd"));
        let e = refused(json!([{"id": "a"}]));
        assert_eq!(e.message, r#"missing field "kind" in children[0] (id "a")"#);
        let e = refused(json!([{"kind": "counter"}]));
        assert_eq!(e.message, r#"missing field "id" in children[0]"#);
        let e = refused(json!({"id": "a", "kind": "counter", "restart": "permanant"}));
        assert_eq!(e.field.as_deref(), Some("restart"));
        assert!(
            e.message
                .starts_with(r#"field "restart" in the child spec (id "a"): unknown variant"#),
            "{e}"
        );
        let e = refused(json!([{"id": "a", "kind": "counter"}, {"id": 7, "kind": "c"}]));
        assert_eq!(
            (e.at.as_str(), e.field.as_deref()),
            ("children[1]", Some("id"))
        );
        let e = refused(json!({"id": "a", "kind": "c", "durable": "yes"}));
        assert_eq!(e.field.as_deref(), Some("durable"));
    }

    #[test]
    fn an_unknown_kind_lists_the_known_ones() {
        let known = vec!["counter".to_owned(), "kv_shard".to_owned()];
        let (specs, single) =
            parse_start_body(br#"[{"id":"a","kind":"counter"},{"id":"b","kind":"cuonter"}]"#)
                .unwrap();
        let e = check_kinds(&specs, single, &known).unwrap_err();
        assert_eq!(
            e.message,
            r#"unknown kind "cuonter" in children[1] (id "b"); known kinds: counter, kv_shard"#
        );
        assert_eq!(e.field.as_deref(), Some("kind"));
        assert!(check_kinds(&specs[..1], false, &known).is_ok());
    }

    #[test]
    fn a_key_given_twice_is_refused_naming_the_field_and_where() {
        let e = parse_start_body(br#"{"id":"a","kind":"counter","durable":true,"durable":false}"#)
            .unwrap_err();
        assert_eq!(
            (e.at.as_str(), e.field.as_deref()),
            ("the child spec", Some("durable"))
        );
        assert!(
            e.message
                .starts_with(r#"duplicate field "durable" in the child spec (id "a")"#),
            "{e}"
        );
        let e = parse_start_body(
            br#"[{"id":"a","kind":"counter"},{"id":"b","kind":"counter","args":{"start":1,"start":2}}]"#,
        )
        .unwrap_err();
        assert_eq!(
            (e.at.as_str(), e.field.as_deref()),
            ("children[1]", Some("args"))
        );
        assert!(
            e.message
                .starts_with(r#"duplicate key "start" in args of children[1] (id "b")"#),
            "{e}"
        );
        // The id given twice: which one would name the entry is the question.
        let e = parse_start_body(br#"[{"id":"a","id":"b","kind":"counter"}]"#).unwrap_err();
        assert!(
            e.message
                .starts_with(r#"duplicate field "id" in children[0];"#),
            "{e}"
        );
        // The same through the reader of one spec's text (`ctl --file`).
        let e =
            spec_from_text(br#"{"id":"a","kind":"k","kind":"counter"}"#, "f.jsonl:3").unwrap_err();
        assert_eq!(
            (e.at.as_str(), e.field.as_deref()),
            ("f.jsonl:3", Some("kind"))
        );
        assert!(
            e.message
                .starts_with(r#"duplicate field "kind" in f.jsonl:3 (id "a")"#),
            "{e}"
        );
        let (json, spec) = spec_from_text(br#"{"id":"a","kind":"counter"}"#, "f:1").unwrap();
        assert_eq!(
            (json["id"].as_str(), spec.kind.as_str()),
            (Some("a"), "counter")
        );
        assert!(spec_from_text(b"{oops", "f:2")
            .unwrap_err()
            .message
            .starts_with("f:2: not JSON"));
    }

    #[test]
    fn a_body_of_the_wrong_shape_says_what_it_is() {
        let e = parse_start_body(b"{oops").unwrap_err();
        assert!(e.message.starts_with("the body is not JSON"), "{e}");
        assert!(refused(json!(3))
            .message
            .starts_with("the body is a number"));
        let e = refused(json!([{"id": "a", "kind": "c"}, "b"]));
        assert_eq!(e.at, "children[1]");
        assert!(e.message.starts_with("children[1] is a string"), "{e}");
    }
}
