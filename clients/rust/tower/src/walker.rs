//! The configuration's walker (docs/http.md, Start-up validation): reads a
//! document with the schema's tree (`schema.rs`, generated from
//! conformance/schema/config.schema.json by scripts/gen-schema.py) and
//! checks every field's name, kind, enum, bounds, pattern and duration,
//! filling in the defaults. Its messages are conformance/README.md's
//! templates, the same in every language. The rules that span fields are
//! `configuration.rs`'s.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use crate::configuration::ConfigError;
use crate::durations::{duration_value_ms, rate_ms, whole_number};
use crate::schema::{Field, Kind, OBJECTS, ROOT};

/// A field's value once walked: durations in ms, rates as their count and
/// period in ms, everything else as the document has it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Walked {
    Text(String),
    Integer(u64),
    Boolean(bool),
    Ms(u64),
    Rate {
        count: u64,
        window_ms: u64,
    },
    List(Vec<Walked>),
    Object(WalkedObject),
    /// A map's entries (names the document chose), in the document's order.
    Map(Vec<(String, Walked)>),
    /// Any JSON value but null, as the document has it.
    Json(Value),
}

/// An object once walked: its fields (given or defaulted), each with its path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WalkedObject {
    prefix: String,
    fields: Vec<(&'static str, Walked)>,
}

type Result<T> = std::result::Result<T, ConfigError>;

/// The whole document; its path is `(document)`.
pub(crate) fn walk_document(document: &Value) -> Result<WalkedObject> {
    walk_object("(document)", "", document, ROOT)
}

/// One object of the schema (`policy`, ...) found at `path` (`layer[0]`).
pub(crate) fn walk_object_at(path: &str, value: &Value, object: &str) -> Result<WalkedObject> {
    walk_object(path, &format!("{path}."), value, object)
}

/// One field of one of the schema's objects (`policy`, `rate`), at `path`.
#[cfg(test)]
pub(crate) fn walk_field(path: &str, value: &Value, object: &str, name: &str) -> Result<Walked> {
    let field = fields_of(object)?
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| ConfigError::new(path, "the generated schema has no such field"))?;
    walk(path, value, field)
}

fn fields_of(object: &str) -> Result<&'static [Field]> {
    OBJECTS
        .iter()
        .find(|o| o.name == object)
        .map(|o| o.fields)
        .ok_or_else(|| ConfigError::new(object, "the generated schema has no such object"))
}

fn walk_object(where_: &str, prefix: &str, value: &Value, object: &str) -> Result<WalkedObject> {
    let Value::Object(map) = value else {
        return Err(ConfigError::new(where_, "must be an object"));
    };
    let fields = fields_of(object)?;
    if let Some(unknown) = map.keys().find(|k| !fields.iter().any(|f| f.name == *k)) {
        return Err(ConfigError::new(
            format!("{prefix}{unknown}"),
            "unknown field",
        ));
    }
    let mut out = Vec::with_capacity(fields.len());
    for field in fields {
        let path = format!("{prefix}{}", field.name);
        if let Some(given) = map.get(field.name) {
            out.push((field.name, walk(&path, given, field)?));
        } else if field.required {
            return Err(ConfigError::new(path, "missing"));
        } else if let Some(default) = field.default {
            let default: Value = serde_json::from_str(default)
                .map_err(|e| ConfigError::new(&path, format!("the schema's default: {e}")))?;
            out.push((field.name, walk(&path, &default, field)?));
        }
    }
    Ok(WalkedObject {
        prefix: prefix.to_string(),
        fields: out,
    })
}

fn walk(path: &str, value: &Value, field: &Field) -> Result<Walked> {
    let refuse = |why: String| Err(ConfigError::new(path, why));
    match field.kind {
        Kind::String => walk_string(path, value, field),
        Kind::Integer => match integer(value, field) {
            Some(n) => Ok(Walked::Integer(n)),
            None => refuse(integer_expected(field)),
        },
        Kind::Boolean => match value {
            Value::Bool(b) => Ok(Walked::Boolean(*b)),
            _ => refuse("must be true or false".into()),
        },
        Kind::Duration => match duration_value_ms(value).filter(|ms| in_duration(*ms, field)) {
            Some(ms) => Ok(Walked::Ms(ms)),
            None => refuse(format!(
                "must be a duration from {} ms to {} ms (an integer and ms, s, m, h or d; seconds without a unit)",
                bound(field.duration_min_ms),
                bound(field.duration_max_ms)
            )),
        },
        Kind::Rate => {
            let rate = value
                .as_str()
                .filter(|text| matches(text, field))
                .and_then(rate_ms)
                .filter(|(count, ms)| in_bounds(*count, field) && in_duration(*ms, field));
            match rate {
                Some((count, window_ms)) => Ok(Walked::Rate { count, window_ms }),
                None => refuse(format!(
                    "must be a rate: a count from {} to {} per a period from {} ms to {} ms (100/minute, 5 per 10s, 3/1500ms)",
                    bound(field.minimum),
                    bound(field.maximum),
                    bound(field.duration_min_ms),
                    bound(field.duration_max_ms)
                )),
            }
        }
        Kind::IntOrString => {
            let walked = match value {
                Value::String(text) => matches(text, field).then(|| Walked::Text(text.clone())),
                _ => integer(value, field).map(Walked::Integer),
            };
            walked.map_or_else(
                || {
                    refuse(format!(
                        "must be {}",
                        field.expected.unwrap_or("an integer or a string")
                    ))
                },
                Ok,
            )
        }
        Kind::List => {
            let Value::Array(items) = value else {
                return refuse("must be a list".into());
            };
            if field
                .min_items
                .is_some_and(|min| (items.len() as u64) < min)
            {
                return refuse("must not be empty".into());
            }
            let Some(item) = field.items else {
                return refuse("the generated schema gives this list no items".into());
            };
            items
                .iter()
                .enumerate()
                .map(|(i, v)| walk(&format!("{path}[{i}]"), v, item))
                .collect::<Result<Vec<_>>>()
                .map(Walked::List)
        }
        Kind::Object => {
            let Some(object) = field.object else {
                return refuse("the generated schema names no object here".into());
            };
            walk_object(path, &format!("{path}."), value, object).map(Walked::Object)
        }
        Kind::Map => {
            let Value::Object(entries) = value else {
                return refuse("must be an object".into());
            };
            let (Some(names), Some(item)) = (field.key_pattern, field.items) else {
                return refuse("the generated schema gives this map no names or values".into());
            };
            let mut out = Vec::with_capacity(entries.len());
            for (name, v) in entries {
                let at = format!("{path}.{name}");
                if !pattern(names).is_some_and(|re| re.is_match(name)) {
                    return Err(ConfigError::new(
                        at,
                        format!("must be {}", field.key_expected.unwrap_or("another name")),
                    ));
                }
                out.push((name.clone(), walk(&at, v, item)?));
            }
            Ok(Walked::Map(out))
        }
        Kind::Json => match value {
            Value::Null => refuse(format!(
                "must be {}",
                field.expected.unwrap_or("a JSON value other than null")
            )),
            other => Ok(Walked::Json(other.clone())),
        },
    }
}

fn walk_string(path: &str, value: &Value, field: &Field) -> Result<Walked> {
    if !field.choices.is_empty() {
        return match value {
            Value::String(text) if field.choices.contains(&text.as_str()) => {
                Ok(Walked::Text(text.clone()))
            }
            _ => Err(ConfigError::new(
                path,
                format!("must be one of {}", field.choices.join(", ")),
            )),
        };
    }
    match value {
        Value::String(text) if matches(text, field) => Ok(Walked::Text(text.clone())),
        _ => Err(ConfigError::new(
            path,
            format!("must be {}", field.expected.unwrap_or("a string")),
        )),
    }
}

fn integer(value: &Value, field: &Field) -> Option<u64> {
    whole_number(value).filter(|n| in_bounds(*n, field))
}

fn integer_expected(field: &Field) -> String {
    format!(
        "must be an integer from {} to {}",
        bound(field.minimum),
        bound(field.maximum)
    )
}

fn in_bounds(n: u64, field: &Field) -> bool {
    field.minimum.is_none_or(|min| n >= min) && field.maximum.is_none_or(|max| n <= max)
}

fn in_duration(ms: u64, field: &Field) -> bool {
    field.duration_min_ms.is_none_or(|min| ms >= min)
        && field.duration_max_ms.is_none_or(|max| ms <= max)
}

/// A bound for a message; every bound a message names is in the schema.
fn bound(b: Option<u64>) -> String {
    b.map_or_else(|| "?".into(), |b| b.to_string())
}

/// The field's pattern (searched for: the schema's are anchored) and its
/// lengths in bytes of UTF-8.
fn matches(text: &str, field: &Field) -> bool {
    let len = text.len() as u64;
    field
        .pattern
        .is_none_or(|p| pattern(p).is_some_and(|re| re.is_match(text)))
        && field.min_length.is_none_or(|min| len >= min)
        && field.max_length.is_none_or(|max| len <= max)
}

/// Every pattern of the schema, compiled once; a pattern that does not
/// compile matches nothing (a test compiles them all).
fn pattern(source: &str) -> Option<&'static Regex> {
    static PATTERNS: OnceLock<HashMap<&'static str, Regex>> = OnceLock::new();
    PATTERNS
        .get_or_init(|| {
            let mut all = HashMap::new();
            for p in schema_patterns() {
                if let Ok(re) = Regex::new(p) {
                    all.insert(p, re);
                }
            }
            all
        })
        .get(source)
}

/// Every pattern the schema holds: fields', their items' (a list of maps
/// of lists, at any depth) and maps' names.
fn schema_patterns() -> Vec<&'static str> {
    fn add(field: &'static Field, out: &mut Vec<&'static str>) {
        out.extend(field.pattern);
        out.extend(field.key_pattern);
        if let Some(item) = field.items {
            add(item, out);
        }
    }
    let mut out = Vec::new();
    for object in OBJECTS {
        for field in object.fields {
            add(field, &mut out);
        }
    }
    out
}

impl WalkedObject {
    /// A field's path, for the cross-field rules' messages.
    pub(crate) fn path(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// A field's walked value (given, or by its default).
    pub(crate) fn value(&self, name: &str) -> Option<&Walked> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The field was in the walked tree (given, or by its default).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.value(name).is_some()
    }

    /// The reader asked a field for a kind the schema does not give it: a
    /// generated schema out of step with this crate.
    pub(crate) fn out_of_step(&self, name: &str) -> ConfigError {
        ConfigError::new(
            self.path(name),
            "the schema and librl-tower's reader disagree on this field (regenerate src/schema.rs and update the reader)",
        )
    }

    /// The field's value as `kind` reads it; an error when the field holds
    /// another kind.
    fn read<'w, T>(
        &'w self,
        name: &str,
        kind: impl Fn(&'w Walked) -> Option<T>,
    ) -> Result<Option<T>> {
        match self.value(name) {
            None => Ok(None),
            Some(v) => kind(v).map(Some).ok_or_else(|| self.out_of_step(name)),
        }
    }

    pub(crate) fn text(&self, name: &str) -> Result<Option<&str>> {
        self.read(name, Walked::as_text)
    }

    pub(crate) fn integer(&self, name: &str) -> Result<Option<u64>> {
        self.read(name, |v| match v {
            Walked::Integer(n) => Some(*n),
            _ => None,
        })
    }

    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>> {
        self.read(name, |v| match v {
            Walked::Boolean(b) => Some(*b),
            _ => None,
        })
    }

    pub(crate) fn ms(&self, name: &str) -> Result<Option<u64>> {
        self.read(name, |v| match v {
            Walked::Ms(ms) => Some(*ms),
            _ => None,
        })
    }

    pub(crate) fn rate(&self, name: &str) -> Result<Option<(u64, u64)>> {
        self.read(name, |v| match v {
            Walked::Rate { count, window_ms } => Some((*count, *window_ms)),
            _ => None,
        })
    }

    pub(crate) fn list(&self, name: &str) -> Result<&[Walked]> {
        let list = self.read(name, |v| match v {
            Walked::List(items) => Some(items.as_slice()),
            _ => None,
        })?;
        Ok(list.unwrap_or_default())
    }

    /// A map's entries, in the document's order.
    pub(crate) fn map(&self, name: &str) -> Result<Option<&[(String, Walked)]>> {
        self.read(name, |v| match v {
            Walked::Map(entries) => Some(entries.as_slice()),
            _ => None,
        })
    }

    /// A `json` field's value.
    pub(crate) fn json(&self, name: &str) -> Result<Option<&Value>> {
        self.read(name, |v| match v {
            Walked::Json(value) => Some(value),
            _ => None,
        })
    }

    pub(crate) fn object(&self, name: &str) -> Result<Option<&WalkedObject>> {
        self.read(name, Walked::as_object)
    }

    /// A field the schema requires or defaults: absent only when out of step.
    pub(crate) fn required<T>(&self, name: &str, value: Option<T>) -> Result<T> {
        value.ok_or_else(|| self.out_of_step(name))
    }
}

impl Walked {
    pub(crate) fn as_object(&self) -> Option<&WalkedObject> {
        match self {
            Walked::Object(o) => Some(o),
            _ => None,
        }
    }

    pub(crate) fn as_text(&self) -> Option<&str> {
        match self {
            Walked::Text(t) => Some(t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_of_the_schema_compiles() {
        for p in schema_patterns() {
            assert!(pattern(p).is_some(), "{p}");
        }
    }

    #[test]
    fn maps_and_json_values_walk() {
        let field = |object: &str, name: &str| {
            OBJECTS
                .iter()
                .find(|o| o.name == object)
                .and_then(|o| o.fields.iter().find(|f| f.name == name))
                .unwrap()
        };
        let identities = field("config", "identities");
        let walked = walk(
            "identities",
            &serde_json::json!({"client": ["header:X-Client-Id", "ip"]}),
            identities,
        )
        .unwrap();
        assert_eq!(
            walked,
            Walked::Map(vec![(
                "client".into(),
                Walked::List(vec![
                    Walked::Text("header:X-Client-Id".into()),
                    Walked::Text("ip".into())
                ])
            )])
        );
        let bad = |value: Value| {
            walk("identities", &value, identities)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad(serde_json::json!({"a b": ["ip"]})),
            "librl: configuration: identities.a b: must be 1 to 64 of A-Z a-z 0-9 - _ ."
        );
        assert_eq!(
            bad(serde_json::json!({"c": ["cookie:"]})),
            "librl: configuration: identities.c[0]: must be user, ip, or header:, cookie:, query:, authorization: or attribute: and a name"
        );
        assert_eq!(
            bad(serde_json::json!([])),
            "librl: configuration: identities: must be an object"
        );
        let json = field("refusal", "json");
        let body = serde_json::json!({"status": 429, "code": "rate_limit:exceeded"});
        assert_eq!(walk("deny.json", &body, json).unwrap(), Walked::Json(body));
        assert_eq!(
            walk("deny.json", &Value::Null, json)
                .unwrap_err()
                .to_string(),
            "librl: configuration: deny.json: must be a JSON value other than null"
        );
    }

    #[test]
    fn every_default_walks() {
        let walked = walk_document(&serde_json::json!({"policies": []})).unwrap();
        assert_eq!(walked.text("prefix").unwrap(), Some("rl:"));
        assert_eq!(walked.ms("timeout").unwrap(), Some(250));
        let deny = walked.object("deny").unwrap().unwrap();
        assert_eq!(deny.integer("status").unwrap(), Some(429));
    }
}
