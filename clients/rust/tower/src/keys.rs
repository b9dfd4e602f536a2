//! The keys a check writes (docs/http.md, Keys): `<prefix>{<subject>}:<policy>`
//! and its override key, with the subject as the cluster hash tag; and
//! how a value becomes part of a key: verbatim when it is short and safe,
//! else hashed (docs/http.md, Identity).

use sha2::{Digest, Sha256};

use crate::configuration::{Config, ConfigError};
use crate::identity::{ip_subject, parse_address, Keyed, Subject};

/// A policy's limiter key and, when it is overridable, its override key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keys {
    pub key: String,
    pub override_key: Option<String>,
}

impl Keys {
    /// One subject's keys share the hash tag, so they share a slot.
    pub(crate) fn new(prefix: &str, subject: &Subject, policy: &str, overridable: bool) -> Keys {
        // One buffer, formatted once: the override key is the key with
        // `override:` before the policy's name.
        let mut key = String::with_capacity(prefix.len() + policy.len() + 64);
        key.push_str(prefix);
        key.push('{');
        subject.push_to(&mut key);
        key.push_str("}:");
        let base = key.len();
        key.push_str(policy);
        let override_key = overridable.then(|| {
            let mut okey = String::with_capacity(key.len() + 9);
            okey.push_str(key.get(..base).unwrap_or_default());
            okey.push_str("override:");
            okey.push_str(policy);
            okey
        });
        Keys { key, override_key }
    }
}

/// A policy's two keys for one subject, as the middleware writes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyKeys {
    pub key: String,
    /// Where `RL.OVERRIDE SET` gives this subject its own limit (read when
    /// the policy is `overridable`).
    pub override_key: String,
}

/// The keys the middleware uses for `policy` (a name in `config`) and a
/// subject given by its raw value, as the request would carry it: an
/// address for `ip` (an IPv6 one becomes its network), the API key itself
/// for `api-key` (hashed here), the user, the header's or a named
/// identity's value (made key-safe here, or hashed where the identity
/// always hashes: `api-key`, an `authorization:` source), nothing for
/// `global`. Managing a customer's plan is
/// one call: `RL.OVERRIDE SET <override_key> ...`.
pub fn policy_keys(
    config: &Config,
    policy: &str,
    value: Option<&[u8]>,
) -> Result<PolicyKeys, ConfigError> {
    let p = config
        .policies
        .iter()
        .find(|p| p.name == policy)
        .ok_or_else(|| ConfigError::new("policy", format!("no policy is named \"{policy}\"")))?;
    let value =
        || value.ok_or_else(|| ConfigError::new("value", "this policy's subject needs a value"));
    let keyed = p.key.keyed(&config.identities).ok_or_else(|| {
        ConfigError::new(
            "policy",
            format!("the key of \"{policy}\" names no identity"),
        )
    })?;
    let subject = match keyed {
        Keyed::Ip => {
            let ip = parse_address(value()?)
                .ok_or_else(|| ConfigError::new("value", "not an IP address"))?;
            ip_subject(ip, config.ipv6_prefix)
        }
        Keyed::ApiKey => Subject::ApiKey(hashed(value()?)),
        Keyed::User => Subject::User(key_safe(value()?)),
        Keyed::Header(name) => Subject::Header(name.as_str().to_string(), key_safe(value()?)),
        Keyed::Global => Subject::Global,
        // A named identity's or an inline source's value, whichever
        // source would give it: hashed where the identity always hashes.
        Keyed::Sources { label, hash, .. } => {
            let value = value()?;
            Subject::Named(label, if hash { hashed(value) } else { key_safe(value) })
        }
    };
    let keys = Keys::new(&config.prefix, &subject, &p.name, true);
    Ok(PolicyKeys {
        key: keys.key,
        override_key: keys.override_key.unwrap_or_default(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The key is written without the formatting machinery, and reads as
    /// the subject's `Display` does, for every kind of subject.
    #[test]
    fn keys_read_as_the_subject_displays() {
        let v6: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
        let subjects = [
            Subject::Ip(std::net::Ipv4Addr::new(10, 0, 0, 1).into()),
            ip_subject(v6.into(), 64),
            Subject::ApiKey("abc".into()),
            Subject::User("alice".into()),
            Subject::Header("x-client".into(), "c1".into()),
            Subject::Named("tenant".into(), "acme".into()),
            Subject::Global,
            Subject::Unknown,
        ];
        for subject in subjects {
            let keys = Keys::new("rl:", &subject, "p", true);
            assert_eq!(keys.key, format!("rl:{{{subject}}}:p"));
            assert_eq!(
                keys.override_key,
                Some(format!("rl:{{{subject}}}:override:p"))
            );
        }
    }
}
