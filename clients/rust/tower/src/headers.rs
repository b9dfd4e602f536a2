//! Response headers (docs/http.md, Headers): the IETF RateLimit draft's
//! `RateLimit-Policy` and `RateLimit`, the legacy `X-RateLimit-*`, and
//! `Retry-After` on a denial.

use std::cmp::Ordering;

use http::{HeaderMap, HeaderName, HeaderValue};
use librl_client::{Decision, RetryAfter};

use crate::configuration::HeaderMode;
use crate::plan::Check;
use crate::policy::{Algorithm, Cost};

pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The index of the reply a client most needs to see. Among denials, the
/// longest wait ("never" first). When all admit, the smallest share of its
/// limit left, then the later reset, then the first in check order.
pub fn most_restrictive(replies: &[Decision]) -> Option<usize> {
    let mut denied: Option<usize> = None;
    for (i, r) in replies.iter().enumerate() {
        if !r.allowed && denied.is_none_or(|d| r.retry_after > replies[d].retry_after) {
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
pub fn shown_limit(check: &Check, reply: &Decision) -> u64 {
    match check.policy.algorithm {
        Algorithm::Token { burst: Some(b) } if reply.limit == b => check.policy.limit,
        _ => reply.limit,
    }
}

/// Seconds, rounded up.
pub fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// `Retry-After`'s whole seconds, at least 1; None when no wait helps.
pub fn retry_after_secs(reply: &Decision) -> Option<u64> {
    match reply.retry_after {
        RetryAfter::Ms(ms) => Some(ceil_secs(ms).max(1)),
        RetryAfter::Never => None,
    }
}

/// Writes the headers `mode` asks for, for the checks and their replies
/// (same order); `Retry-After` when `denied` (whatever the mode).
pub fn write(
    headers: &mut HeaderMap,
    mode: HeaderMode,
    checks: &[Check],
    replies: &[Decision],
    denied: bool,
) {
    let Some(worst) = most_restrictive(replies) else {
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
    if matches!(mode, HeaderMode::Both | HeaderMode::Legacy) {
        set(X_RATELIMIT_LIMIT, shown_limit(check, reply).to_string());
        set(X_RATELIMIT_REMAINING, reply.remaining.to_string());
        set(X_RATELIMIT_RESET, reset.to_string());
    }
    if denied {
        if let Some(secs) = retry_after_secs(reply) {
            set(http::header::RETRY_AFTER, secs.to_string());
        }
    }
}

/// `"name";q=<limit>;w=<window s>`, with `qu="content-bytes"` when the
/// policy counts body bytes.
fn policy_item(check: &Check, reply: &Decision) -> String {
    let unit = match check.policy.cost {
        Cost::BodyBytes => ";qu=\"content-bytes\"",
        Cost::Units(_) | Cost::Header(_) => "",
    };
    format!(
        "\"{}\";q={};w={}{unit}",
        check.policy.name,
        shown_limit(check, reply),
        check.policy.window_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Subject;
    use crate::policy::Policy;
    use std::sync::Arc;
    use std::time::Duration;

    fn reply(allowed: bool, limit: u64, remaining: u64, retry: RetryAfter, reset: u64) -> Decision {
        Decision {
            allowed,
            count: limit - remaining,
            retry_after: retry,
            limit,
            remaining,
            reset_after_ms: reset,
        }
    }

    fn check(policy: Policy) -> Check {
        Check {
            policy: Arc::new(policy),
            subject: Subject::Global,
            key: "k".into(),
            override_key: None,
            cost: 1,
        }
    }

    #[test]
    fn admitted_picks_the_smallest_share_left() {
        let a = reply(true, 100, 40, RetryAfter::Ms(0), 1000);
        let b = reply(true, 10, 3, RetryAfter::Ms(0), 1000);
        assert_eq!(most_restrictive(&[a, b]), Some(1));
        // Same share: the later reset; then the first.
        let c = reply(true, 10, 4, RetryAfter::Ms(0), 9000);
        assert_eq!(most_restrictive(&[a, c]), Some(1));
        assert_eq!(most_restrictive(&[a, a]), Some(0));
        assert_eq!(most_restrictive(&[]), None);
    }

    #[test]
    fn denied_picks_the_longest_wait_and_never_above_all() {
        let ok = reply(true, 10, 0, RetryAfter::Ms(0), 500);
        let soon = reply(false, 10, 0, RetryAfter::Ms(100), 100);
        let late = reply(false, 10, 0, RetryAfter::Ms(5000), 5000);
        let never = reply(false, 10, 10, RetryAfter::Never, 0);
        assert_eq!(most_restrictive(&[ok, soon, late]), Some(2));
        assert_eq!(most_restrictive(&[late, never]), Some(1));
    }

    #[test]
    fn writes_draft_and_legacy_headers() {
        let checks = [
            check(Policy::fixed("burst", 2, Duration::from_secs(10))),
            check(
                Policy::token("bytes", 1000, Duration::from_millis(1500))
                    .burst(4000)
                    .cost(Cost::BodyBytes),
            ),
        ];
        let replies = [
            reply(false, 2, 0, RetryAfter::Ms(4001), 4001),
            reply(true, 4000, 3999, RetryAfter::Ms(0), 2),
        ];
        let mut h = HeaderMap::new();
        write(&mut h, HeaderMode::Both, &checks, &replies, true);
        assert_eq!(
            h[RATELIMIT_POLICY],
            "\"burst\";q=2;w=10, \"bytes\";q=1000;w=2;qu=\"content-bytes\""
        );
        assert_eq!(h[RATELIMIT], "\"burst\";r=0;t=5");
        assert_eq!(h[X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[X_RATELIMIT_REMAINING], "0");
        assert_eq!(h[X_RATELIMIT_RESET], "5");
        assert_eq!(h["retry-after"], "5");
        let mut legacy = HeaderMap::new();
        write(&mut legacy, HeaderMode::Legacy, &checks, &replies, false);
        assert!(!legacy.contains_key(RATELIMIT) && !legacy.contains_key("retry-after"));
        assert_eq!(legacy[X_RATELIMIT_LIMIT], "2");
    }
}
