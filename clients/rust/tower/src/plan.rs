//! Which checks a request needs (docs/http.md, One decision per request,
//! step 1): the route's policies, the loopback-exempt ones dropped, each
//! one's subject and keys (docs/http.md, Keys) and its cost
//! (docs/http.md, Cost). A request refused before any check (a bad cost
//! header, a body too large) is a [`Refusal`].

use std::net::IpAddr;
use std::sync::Arc;

use http::{Extensions, HeaderMap, Method, Uri};
use ipnet::IpNet;
use librl_core::units::{Amount, Window};
use librl_core::MAX_AMOUNT;

use crate::configuration::Mode;
use crate::identity::{header_lines, Attributes, Client, Subject};
use crate::keys::Keys;
use crate::policy::{ValidAlgorithm, ValidCost, ValidPolicy};
use crate::refusals::Refusing;
use crate::resolvers::{RequestParts, ResolvedLimit};

/// What a request is, as the adapter saw it.
pub struct RequestFacts<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    /// The path as the framework hands it (raw or decoded: the canonical
    /// path is the same).
    pub path: &'a str,
    /// The raw query string (after `?`), for `query:` sources.
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub extensions: &'a Extensions,
    /// The TCP peer.
    pub peer: Option<IpAddr>,
}

/// The policies a request gets, each with its subject, before costs are known.
pub(crate) struct Planned {
    /// The matched route's path as configured.
    pub route: Option<String>,
    /// The matched route's own refusal; None: the top-level `deny`.
    pub deny: Option<Arc<Refusing>>,
    /// This request's mode (the mode resolver's, else `mode`).
    pub mode: Mode,
    pub applying: Vec<(Arc<ValidPolicy>, Subject)>,
}

/// One policy checked for one request.
#[derive(Clone, Debug)]
pub(crate) struct Check {
    pub policy: Arc<ValidPolicy>,
    pub subject: Subject,
    pub key: String,
    pub override_key: Option<String>,
    pub cost: Amount,
}

/// A request refused before any policy is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The policy's cost header is not an integer from 1 to 2^50; `header`
    /// is its name as configured.
    BadCost { policy: String, header: String },
    /// The policy's cost resolver gave no integer from 1 to 2^50.
    BadResolvedCost { policy: String, resolver: String },
    /// The body is larger than `max_body_bytes`.
    BodyTooLarge { max: u64 },
}

/// The policies that apply to this client, each with its subject, in
/// check order.
pub(crate) fn applying(
    policies: &[Arc<ValidPolicy>],
    client: &Client,
    facts: &RequestFacts<'_>,
) -> Vec<(Arc<ValidPolicy>, Subject)> {
    let attributes = facts.extensions.get::<Attributes>();
    policies
        .iter()
        .map(|p| {
            let subject = client.subject(&p.key, facts.headers, facts.query, attributes);
            (p.clone(), subject)
        })
        .collect()
}

/// The networks no policy limits (docs/http.md, Exemptions): `exempt`,
/// and with `exempt_loopback` `127.0.0.0/8` and `::1/128`.
pub(crate) fn exempt_networks(exempt: &[IpNet], exempt_loopback: bool) -> Vec<IpNet> {
    let mut nets = exempt.to_vec();
    if exempt_loopback {
        let loopback = ["127.0.0.0/8", "::1/128"];
        nets.extend(loopback.iter().filter_map(|n| n.parse::<IpNet>().ok()));
    }
    nets
}

/// Whether the client's full address (never its IPv6 network; IPv4-mapped
/// read as IPv4) is in an exempt network. A request without an address
/// is never exempt.
pub(crate) fn is_exempt(networks: &[IpNet], client: &Client) -> bool {
    client
        .ip
        .is_some_and(|ip| networks.iter().any(|net| net.contains(&ip)))
}

impl RequestFacts<'_> {
    /// What a resolver sees.
    pub(crate) fn parts(&self) -> RequestParts<'_> {
        RequestParts {
            method: self.method,
            uri: self.uri,
            headers: self.headers,
            extensions: self.extensions,
        }
    }
}

impl Planned {
    /// The body's size is needed (a `body-bytes` policy applies).
    pub(crate) fn needs_body_len(&self) -> bool {
        self.applying
            .iter()
            .any(|(p, _)| p.cost == ValidCost::BodyBytes)
    }

    /// The checks, keyed `<prefix>{<subject>}:<policy>`; `body_len` is the
    /// body's size when [`Planned::needs_body_len`] asked for it. A policy
    /// whose limit resolver gives nothing is not checked.
    pub(crate) fn checks(
        self,
        prefix: &str,
        parts: &RequestParts<'_>,
        body_len: Option<u64>,
    ) -> Result<Vec<Check>, Refusal> {
        let headers = parts.headers;
        self.applying
            .into_iter()
            .filter_map(|(policy, subject)| match &policy.limit_resolver {
                None => Some((policy, subject)),
                Some(resolver) => {
                    resolved(&policy, (resolver.resolve)(parts)).map(|p| (Arc::new(p), subject))
                }
            })
            .map(|(policy, subject)| {
                let cost = match &policy.cost {
                    ValidCost::Units(n) => *n,
                    ValidCost::BodyBytes => clamped(body_len.unwrap_or(0)),
                    ValidCost::Header { name, configured } => {
                        cost_header(header_lines(headers, name).as_deref()).ok_or_else(|| {
                            Refusal::BadCost {
                                policy: policy.name.clone(),
                                header: configured.clone(),
                            }
                        })?
                    }
                    ValidCost::Code(resolver) => (resolver.resolve)(parts)
                        .and_then(Amount::new)
                        .ok_or_else(|| Refusal::BadResolvedCost {
                            policy: policy.name.clone(),
                            resolver: resolver.name.to_string(),
                        })?,
                };
                let keys = Keys::new(prefix, &subject, &policy.name, policy.overridable);
                Ok(Check {
                    key: keys.key,
                    override_key: keys.override_key,
                    cost,
                    subject,
                    policy,
                })
            })
            .collect()
    }
}

/// A policy with the limit, window and burst its resolver gave this
/// request; None when it gave nothing (the policy does not apply) or
/// numbers the module would refuse (logged: a bug in the resolver).
fn resolved(policy: &ValidPolicy, limit: Option<ResolvedLimit>) -> Option<ValidPolicy> {
    let limit = limit?;
    let window = u64::try_from(limit.window.as_millis())
        .ok()
        .filter(|_| limit.window.subsec_nanos().is_multiple_of(1_000_000))
        .and_then(Window::new);
    let burst = limit.burst.map(Amount::new);
    let (Some(amount), Some(window), None | Some(Some(_))) =
        (Amount::new(limit.limit), window, burst)
    else {
        tracing::error!(
            "librl: the limit resolver {:?} of policy {:?} gave {limit:?}, which the module refuses; the policy is not checked",
            policy.limit_resolver,
            policy.name
        );
        return None;
    };
    let mut p = policy.clone();
    p.limit = amount;
    p.window = window;
    if let ValidAlgorithm::Token { burst: b } = &mut p.algorithm {
        *b = burst.flatten();
    }
    Some(p.premade())
}

/// A body's size as a cost: at least 1, at most 2^50 (`max_body_bytes`
/// already bounds it below that).
fn clamped(len: u64) -> Amount {
    Amount::new(len.clamp(1, MAX_AMOUNT)).unwrap_or(Amount::ONE)
}

/// The cost a request declares (docs/http.md, Cost), from the header's
/// lines joined and trimmed ([`header_lines`]): absent (None) costs 1;
/// otherwise ASCII digits (leading zeros allowed) from 1 to 2^50, or None:
/// the request is refused.
pub(crate) fn cost_header(value: Option<&[u8]>) -> Option<Amount> {
    let Some(text) = value else {
        return Some(Amount::ONE);
    };
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = text.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    Amount::new(n)
}

#[cfg(test)]
impl Check {
    /// A check of `policy` (valid) at `cost`, on the key `k` of the global
    /// subject.
    pub(crate) fn for_test(policy: crate::policy::Policy, cost: u64) -> Check {
        Check {
            policy: Arc::new(
                ValidPolicy::new(&policy, &[], &Default::default()).expect("a valid policy"),
            ),
            subject: Subject::Global,
            key: "k".into(),
            override_key: None,
            cost: Amount::new(cost).expect("a valid cost"),
        }
    }
}
