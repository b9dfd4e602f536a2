//! Response headers (docs/http.md, Headers): the IETF RateLimit draft's
//! `RateLimit-Policy` and `RateLimit`, the legacy `X-RateLimit-*`, and
//! `Retry-After` on a denial.

use std::cmp::Ordering;
use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use librl_client::{Decision, RetryAfter};

use crate::configuration::{HeaderMode, LegacyReset};
use crate::hook::Outcome;
use crate::plan::Check;
use crate::policy::{ValidAlgorithm, ValidCost, ValidPolicy};

pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
pub const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
pub const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// How many small integers [`number`] keeps as ready header values.
const SMALL_NUMBERS: u64 = 1024;

/// `n` as a header value: `0` to `1023` (a reset or a `Retry-After` in
/// seconds, most remaining counts) from values made once, whose static
/// bytes a clone only points to; larger ones formatted (an allocation).
fn number(n: u64) -> HeaderValue {
    static SMALL: OnceLock<Vec<HeaderValue>> = OnceLock::new();
    let small = SMALL.get_or_init(|| {
        (0..SMALL_NUMBERS)
            .map(|i| HeaderValue::from_static(Box::leak(i.to_string().into_boxed_str())))
            .collect()
    });
    usize::try_from(n)
        .ok()
        .and_then(|i| small.get(i))
        .cloned()
        .unwrap_or_else(|| n.into())
}

/// The index of the reply a client most needs to see. Among denials, the
/// longest wait ("never" first): when the request is `refused`, among the
/// enforced policies' denials only, so that it names a policy that refused
/// it (a shadow policy's denial shows only on a request that is served).
/// When all admit, the smallest share of its limit left, then the later
/// reset, then the first in check order.
pub(crate) fn most_restrictive(
    checks: &[Check],
    replies: &[Decision],
    refused: bool,
) -> Option<usize> {
    let mut denied: Option<usize> = None;
    for (i, r) in replies.iter().enumerate() {
        // A refused request is named by a policy that refused it.
        let shadow = checks.get(i).is_some_and(|c| c.policy.shadow);
        let counts = match (r.allowed, refused) {
            (true, _) => false,
            (false, true) => !shadow,
            (false, false) => true,
        };
        if counts && denied.is_none_or(|d| r.retry_after > replies[d].retry_after) {
            denied = Some(i);
        }
    }
    if denied.is_some() {
        return denied;
    }
    let mut best: Option<usize> = None;
    for (i, r) in replies.iter().enumerate() {
        if best.is_none_or(|b| tighter(r, &replies[b]) == Ordering::Less) {
            best = Some(i);
        }
    }
    best
}

/// `a` before `b` when less of its limit is left, then when it resets later.
fn tighter(a: &Decision, b: &Decision) -> Ordering {
    let left_a = u128::from(a.remaining) * u128::from(b.limit);
    let left_b = u128::from(b.remaining) * u128::from(a.limit);
    left_a
        .cmp(&left_b)
        .then(b.reset_after_ms.cmp(&a.reset_after_ms))
}

/// The limit the headers and the problem body show: the reply's (the
/// effective limit after an override), except for a token policy with a
/// burst whose capacity no override changed: its rate.
pub(crate) fn shown_limit(check: &Check, reply: &Decision) -> u64 {
    match check.policy.algorithm {
        ValidAlgorithm::Token { burst: Some(b) } if reply.limit == b.get() => {
            check.policy.limit.get()
        }
        _ => reply.limit,
    }
}

/// Seconds, rounded up.
pub(crate) fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// `Retry-After`'s whole seconds, at least 1; None when no wait helps.
pub(crate) fn retry_after_secs(reply: &Decision) -> Option<u64> {
    match reply.retry_after {
        RetryAfter::Ms(ms) => Some(ceil_secs(ms).max(1)),
        RetryAfter::Never => None,
    }
}

/// Writes the headers `mode` asks for, for the checks and their replies
/// (same order); `Retry-After` when the request is denied (whatever the
/// mode; never in shadow mode, whose denials pass: `WouldDeny`).
pub(crate) fn write(
    headers: &mut HeaderMap,
    mode: HeaderMode,
    legacy_reset: LegacyReset,
    now_ms: u64,
    checks: &[Check],
    replies: &[Decision],
    outcome: Outcome,
) {
    let Some(worst) = most_restrictive(checks, replies, outcome == Outcome::Denied) else {
        return;
    };
    let (Some(check), Some(reply)) = (checks.get(worst), replies.get(worst)) else {
        return;
    };
    // Room for the five headers at once, instead of growing the map.
    headers.reserve(5);
    let reset = ceil_secs(reply.reset_after_ms);
    let limit = shown_limit(check, reply);
    // The policy's own limit: the values made with the policy serve.
    let own = limit == check.policy.limit.get();
    if matches!(mode, HeaderMode::Both | HeaderMode::Ietf) {
        let items = match (checks, &check.policy.premade.policy_item) {
            ([_], Some(item)) if own => Some(item.clone()),
            _ => joined_items(checks, replies),
        };
        if let Some(items) = items {
            headers.insert(RATELIMIT_POLICY, items);
        }
        if let Some(now) = ratelimit(&check.policy.name, reply.remaining, reset) {
            headers.insert(RATELIMIT, now);
        }
    }
    // Integers straight into header values: no string in between.
    if matches!(mode, HeaderMode::Both | HeaderMode::Legacy) {
        let legacy = match legacy_reset {
            LegacyReset::Seconds => reset,
            LegacyReset::Unix => ceil_secs(now_ms.saturating_add(reply.reset_after_ms)),
        };
        let limit = match &check.policy.premade.limit {
            Some(value) if own => value.clone(),
            _ => number(limit),
        };
        headers.insert(X_RATELIMIT_LIMIT, limit);
        headers.insert(X_RATELIMIT_REMAINING, number(reply.remaining));
        headers.insert(X_RATELIMIT_RESET, number(legacy));
    }
    if mode == HeaderMode::Draft6 {
        let limit = shown_limit(check, reply);
        headers.insert(RATELIMIT_LIMIT, number(limit));
        headers.insert(RATELIMIT_REMAINING, number(reply.remaining));
        headers.insert(RATELIMIT_RESET, number(reset));
        let policy = match check.policy.window_secs() {
            Some(secs) => format!("{limit};w={secs}"),
            None => limit.to_string(),
        };
        if let Ok(value) = HeaderValue::from_str(&policy) {
            headers.insert(RATELIMIT_POLICY, value);
        }
    }
    if outcome == Outcome::Denied {
        if let Some(secs) = retry_after_secs(reply) {
            headers.insert(http::header::RETRY_AFTER, number(secs));
        }
    }
}

/// Every check's `RateLimit-Policy` item, joined by `, `.
fn joined_items(checks: &[Check], replies: &[Decision]) -> Option<HeaderValue> {
    let items: Vec<HeaderValue> = checks
        .iter()
        .zip(replies)
        .filter_map(|(c, r)| policy_item(&c.policy, shown_limit(c, r)))
        .collect();
    let mut joined = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(item.as_bytes());
    }
    HeaderValue::from_maybe_shared(Bytes::from(joined)).ok()
}

/// `"name";q=<limit>;w=<window s>`, with `qu="content-bytes"` when the
/// policy counts body bytes; a concurrency policy has no window, so no
/// `w`. Policy names are checked tokens, so the value is always valid.
pub(crate) fn policy_item(policy: &ValidPolicy, limit: u64) -> Option<HeaderValue> {
    let unit = match policy.cost {
        ValidCost::BodyBytes => ";qu=\"content-bytes\"",
        ValidCost::Units(_) | ValidCost::Header { .. } | ValidCost::Code(_) => "",
    };
    let window = match policy.window_secs() {
        Some(secs) => format!(";w={secs}"),
        None => String::new(),
    };
    let item = format!("\"{}\";q={limit}{window}{unit}", policy.name);
    HeaderValue::from_maybe_shared(Bytes::from(item)).ok()
}

/// `RateLimit`'s `"name";r=<remaining>;t=<reset s>`, written into one
/// buffer that becomes the value (no string formatted, nothing copied).
fn ratelimit(name: &str, remaining: u64, reset: u64) -> Option<HeaderValue> {
    let mut value = Vec::with_capacity(name.len() + 48);
    value.push(b'"');
    value.extend_from_slice(name.as_bytes());
    value.extend_from_slice(b"\";r=");
    decimal(&mut value, remaining);
    value.extend_from_slice(b";t=");
    decimal(&mut value, reset);
    HeaderValue::from_maybe_shared(Bytes::from(value)).ok()
}

/// `n` in decimal, appended.
pub(crate) fn decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        // n % 10 < 10: the cast keeps it.
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ready value and a formatted one read the same, either side of
    /// the last small number.
    #[test]
    fn numbers_read_as_their_decimal() {
        for n in [0, 1, 9, 10, 59, 60, 999, 1023, 1024, 1025, 3600, u64::MAX] {
            assert_eq!(number(n), HeaderValue::from(n), "{n}");
            assert_eq!(number(n).to_str().unwrap(), n.to_string());
        }
    }
}
