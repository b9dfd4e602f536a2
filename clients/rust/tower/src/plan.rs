//! A policy applied to one request: whose counter (subject and keys,
//! docs/http.md, Keys) and at what cost (docs/http.md, Cost). Requests
//! refused before any check (a bad cost header, a body too large) are
//! [`Refusal`]s.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};

use crate::identity::{Client, Subject};
use crate::policy::{Cost, Policy, MAX_UNITS};

#[derive(Clone, Debug)]
pub struct Check {
    pub policy: Arc<Policy>,
    pub subject: Subject,
    pub key: String,
    pub override_key: Option<String>,
    pub cost: u64,
}

/// A request refused before any policy is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The policy's cost header is not an integer from 1 to 2^50.
    BadCost { policy: String, header: HeaderName },
    /// The body is larger than `max_body_bytes`.
    BodyTooLarge { max: u64 },
}

/// The policies that apply to this client, each with its subject, in
/// check order: those whose subject is a loopback address are dropped
/// when `exempt_loopback` is on.
pub fn applying(
    policies: &[Arc<Policy>],
    client: &Client,
    headers: &HeaderMap,
    exempt_loopback: bool,
) -> Vec<(Arc<Policy>, Subject)> {
    policies
        .iter()
        .map(|p| (p.clone(), client.subject(&p.key, headers)))
        .filter(|(_, subject)| !(exempt_loopback && subject.is_loopback()))
        .collect()
}

/// Whether a policy needs the body's size.
pub fn needs_body_len(applying: &[(Arc<Policy>, Subject)]) -> bool {
    applying.iter().any(|(p, _)| p.cost == Cost::BodyBytes)
}

/// The checks, keyed `<prefix>{<subject>}:<policy>`; `body_len` is the
/// body's size when [`needs_body_len`] asked for it.
pub fn checks(
    applying: Vec<(Arc<Policy>, Subject)>,
    prefix: &str,
    headers: &HeaderMap,
    body_len: Option<u64>,
) -> Result<Vec<Check>, Refusal> {
    applying
        .into_iter()
        .map(|(policy, subject)| {
            let cost = match &policy.cost {
                Cost::Units(n) => *n,
                Cost::BodyBytes => body_len.unwrap_or(0).clamp(1, MAX_UNITS),
                Cost::Header(name) => {
                    header_cost(headers, name).ok_or_else(|| Refusal::BadCost {
                        policy: policy.name.clone(),
                        header: name.clone(),
                    })?
                }
            };
            // The subject is the hash tag: one subject's keys share a slot.
            let base = format!("{prefix}{{{subject}}}");
            Ok(Check {
                key: format!("{base}:{}", policy.name),
                override_key: policy
                    .overridable
                    .then(|| format!("{base}:override:{}", policy.name)),
                cost,
                subject,
                policy,
            })
        })
        .collect()
}

/// The cost a request declares in `name`: 1 when absent; None when it is
/// not a decimal integer from 1 to 2^50.
fn header_cost(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    let Some(value) = headers.get(name) else {
        return Some(1);
    };
    let text = value.to_str().ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>()
        .ok()
        .filter(|cost| (1..=MAX_UNITS).contains(cost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::KeyKind;
    use std::time::Duration;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn keys_carry_the_subject_as_hash_tag() {
        let p = Arc::new(
            Policy::fixed("p", 1, Duration::from_secs(1))
                .key(KeyKind::User)
                .overridable(),
        );
        let client = Client {
            ip: Some("127.0.0.1".parse().unwrap()),
            api_key: None,
            user: Some("alice".into()),
        };
        let h = HeaderMap::new();
        let c = checks(applying(&[p], &client, &h, true), "rl:", &h, None).unwrap();
        assert_eq!(c[0].key, "rl:{user:alice}:p");
        assert_eq!(
            c[0].override_key.as_deref(),
            Some("rl:{user:alice}:override:p")
        );
    }

    #[test]
    fn cost_headers_are_decimal_integers_from_1_to_2_50() {
        let name = HeaderName::from_static("x-cost");
        assert_eq!(header_cost(&headers(&[]), &name), Some(1));
        assert_eq!(header_cost(&headers(&[("x-cost", " 7 ")]), &name), Some(7));
        for bad in ["0", "-1", "1.5", "abc", "+3", "1125899906842625"] {
            assert_eq!(
                header_cost(&headers(&[("x-cost", bad)]), &name),
                None,
                "{bad}"
            );
        }
    }
}
