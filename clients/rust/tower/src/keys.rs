//! The keys a check writes (docs/http.md, Keys): `<prefix>{<subject>}:<policy>`
//! and its override key, with the subject as the cluster hash tag; and
//! how a value becomes part of a key: verbatim when it is short and safe,
//! else hashed (docs/http.md, Identity).

use sha2::{Digest, Sha256};

use crate::identity::Subject;

/// A policy's limiter key and, when it is overridable, its override key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keys {
    pub key: String,
    pub override_key: Option<String>,
}

impl Keys {
    /// One subject's keys share the hash tag, so they share a slot.
    pub(crate) fn new(prefix: &str, subject: &Subject, policy: &str, overridable: bool) -> Keys {
        let base = format!("{prefix}{{{subject}}}");
        Keys {
            key: format!("{base}:{policy}"),
            override_key: overridable.then(|| format!("{base}:override:{policy}")),
        }
    }
}

/// The first 16 bytes of the value's SHA-256 in hex: API keys stay out of
/// Redis (and out of `KEYS` and `MONITOR`), and an operator can still find
/// one client's counters: `printf %s "$KEY" | sha256sum | cut -c1-32`.
pub fn hashed(value: &[u8]) -> String {
    Sha256::digest(value)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A user or header value as it appears in a key: verbatim when it is 1 to
/// 64 bytes of `A-Z a-z 0-9 . _ ~ @ + = : / -`, else `sha256-` and its hash
/// (a `}` must not end the hash tag early). The test is on the bytes.
pub(crate) fn key_safe(value: &[u8]) -> String {
    let safe = (1..=64).contains(&value.len())
        && value
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._~@+=:/-".contains(b));
    match std::str::from_utf8(value) {
        Ok(text) if safe => text.to_string(),
        _ => format!("sha256-{}", hashed(value)),
    }
}
