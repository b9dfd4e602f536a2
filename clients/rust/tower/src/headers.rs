//! Response headers (docs/http.md, Headers): the IETF RateLimit draft's
//! `RateLimit-Policy` and `RateLimit`, the legacy `X-RateLimit-*`, and
//! `Retry-After` on a denial.

use std::cmp::Ordering;

use http::{HeaderMap, HeaderName, HeaderValue};
use librl_client::{Decision, RetryAfter};

use crate::configuration::{HeaderMode, LegacyReset};
use crate::hook::Outcome;
use crate::plan::Check;
use crate::policy::{ValidAlgorithm, ValidCost};

pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
pub const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
pub const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

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
    let mut set = |name: HeaderName, value: String| {
        // Policy names are checked tokens and the rest are integers, so
        // every value is a valid header value.
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    let reset = ceil_secs(reply.reset_after_ms);
    if matches!(mode, HeaderMode::Both | HeaderMode::Ietf) {
        let items: Vec<String> = checks
            .iter()
            .zip(replies)
            .map(|(c, r)| policy_item(c, r))
            .collect();
        set(RATELIMIT_POLICY, items.join(", "));
        set(
            RATELIMIT,
            format!("\"{}\";r={};t={reset}", check.policy.name, reply.remaining),
        );
    }
    // Integers straight into header values: no string in between.
    if matches!(mode, HeaderMode::Both | HeaderMode::Legacy) {
        let legacy = match legacy_reset {
            LegacyReset::Seconds => reset,
            LegacyReset::Unix => ceil_secs(now_ms.saturating_add(reply.reset_after_ms)),
        };
        headers.insert(X_RATELIMIT_LIMIT, shown_limit(check, reply).into());
        headers.insert(X_RATELIMIT_REMAINING, reply.remaining.into());
        headers.insert(X_RATELIMIT_RESET, legacy.into());
    }
    if mode == HeaderMode::Draft6 {
        let limit = shown_limit(check, reply);
        headers.insert(RATELIMIT_LIMIT, limit.into());
        headers.insert(RATELIMIT_REMAINING, reply.remaining.into());
        headers.insert(RATELIMIT_RESET, reset.into());
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
            headers.insert(http::header::RETRY_AFTER, secs.into());
        }
    }
}

/// `"name";q=<limit>;w=<window s>`, with `qu="content-bytes"` when the
/// policy counts body bytes; a concurrency policy has no window, so no `w`.
fn policy_item(check: &Check, reply: &Decision) -> String {
    let unit = match check.policy.cost {
        ValidCost::BodyBytes => ";qu=\"content-bytes\"",
        ValidCost::Units(_) | ValidCost::Header { .. } | ValidCost::Code(_) => "",
    };
    let window = match check.policy.window_secs() {
        Some(secs) => format!(";w={secs}"),
        None => String::new(),
    };
    format!(
        "\"{}\";q={}{window}{unit}",
        check.policy.name,
        shown_limit(check, reply),
    )
}
