//! Response headers: the IETF RateLimit draft's `RateLimit-Policy` and
//! `RateLimit`, the legacy `X-RateLimit-*`, and `Retry-After` on 429.

use std::cmp::Ordering;

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::policy::{reset_after_secs, retry_after_secs, Check, Cost, Decision};

pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The index of the reply a client most needs to see. Among denials, the
/// longest wait (a cost no wait can fit first). When all admitted, the
/// smallest share of its limit left (as Forja reports), then the later reset.
pub fn most_restrictive(replies: &[Decision]) -> Option<usize> {
    let denied = replies.iter().enumerate().filter(|(_, r)| !r.allowed);
    if let Some((i, _)) = denied.max_by_key(|(_, r)| r.retry_after) {
        return Some(i);
    }
    replies
        .iter()
        .enumerate()
        .min_by(|(_, a), (_, b)| tighter(a, b))
        .map(|(i, _)| i)
}

/// Orders `a` before `b` when less of its limit is left.
fn tighter(a: &Decision, b: &Decision) -> Ordering {
    let left_a = u128::from(a.remaining) * u128::from(b.limit);
    let left_b = u128::from(b.remaining) * u128::from(a.limit);
    left_a
        .cmp(&left_b)
        .then(b.reset_after_ms.cmp(&a.reset_after_ms))
}

/// Writes every header for the checks made and their replies (same order);
/// `Retry-After` only when the request was refused (`admitted` is false).
/// (In librl's monitor mode a request is admitted while a clause still
/// says it would have refused: that clause is reported, without a wait.)
pub fn write(headers: &mut HeaderMap, checks: &[Check<'_>], replies: &[Decision], admitted: bool) {
    let Some(worst) = most_restrictive(replies) else {
        return;
    };
    let policies: Vec<String> = checks
        .iter()
        .zip(replies)
        .map(|(check, reply)| policy_item(check, reply))
        .collect();
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
    set(RATELIMIT_POLICY, policies.join(", "));
    set(
        RATELIMIT,
        format!(
            "\"{}\";r={};t={}",
            check.policy.name,
            reply.remaining,
            reset_after_secs(reply)
        ),
    );
    set(X_RATELIMIT_LIMIT, reply.limit.to_string());
    set(X_RATELIMIT_REMAINING, reply.remaining.to_string());
    set(X_RATELIMIT_RESET, reset_after_secs(reply).to_string());
    if !admitted && !reply.allowed {
        if let Some(secs) = retry_after_secs(reply) {
            set(axum::http::header::RETRY_AFTER, secs.to_string());
        }
    }
}

/// `"name";q=<effective limit>;w=<window s>`, with `qu="content-bytes"`
/// when the policy counts body bytes.
fn policy_item(check: &Check<'_>, reply: &Decision) -> String {
    let unit = match check.policy.cost {
        Cost::BodyBytes => ";qu=\"content-bytes\"",
        Cost::One | Cost::Header(_) => "",
    };
    format!(
        "\"{}\";q={};w={}{}",
        check.policy.name,
        reply.limit,
        check.policy.window_secs(),
        unit
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, RetryAfter};
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

    #[test]
    fn admitted_picks_the_smallest_share_left() {
        let a = reply(true, 100, 40, RetryAfter::Ms(0), 1000);
        let b = reply(true, 10, 3, RetryAfter::Ms(0), 1000);
        assert_eq!(most_restrictive(&[a, b]), Some(1));
        // Same share: the later reset.
        let c = reply(true, 10, 4, RetryAfter::Ms(0), 9000);
        assert_eq!(most_restrictive(&[a, c]), Some(1));
        assert_eq!(most_restrictive(&[]), None);
    }

    #[test]
    fn denied_picks_the_longest_wait_and_never_above_all() {
        let ok = reply(true, 10, 0, RetryAfter::Ms(0), 500);
        let soon = reply(false, 10, 0, RetryAfter::Ms(100), 100);
        let late = reply(false, 10, 0, RetryAfter::Ms(5000), 5000);
        let never = reply(false, 10, 10, RetryAfter::Never, 0);
        assert_eq!(most_restrictive(&[ok, soon, late]), Some(2));
        assert_eq!(most_restrictive(&[never, late]), Some(0));
    }

    #[test]
    fn writes_draft_and_legacy_headers() {
        let burst = Policy::fixed("burst", 2, Duration::from_secs(10));
        let daily = Policy::token("bytes", 1000, Duration::from_millis(1500)).cost(Cost::BodyBytes);
        let checks = [
            Check {
                policy: &burst,
                key: "a".into(),
                override_key: None,
                cost: 1,
            },
            Check {
                policy: &daily,
                key: "b".into(),
                override_key: None,
                cost: 1,
            },
        ];
        let replies = [
            reply(false, 2, 0, RetryAfter::Ms(4001), 4001),
            reply(true, 1000, 999, RetryAfter::Ms(0), 2),
        ];
        let mut h = HeaderMap::new();
        write(&mut h, &checks, &replies, false);
        assert_eq!(
            h[RATELIMIT_POLICY],
            "\"burst\";q=2;w=10, \"bytes\";q=1000;w=2;qu=\"content-bytes\""
        );
        assert_eq!(h[RATELIMIT], "\"burst\";r=0;t=5");
        assert_eq!(h[X_RATELIMIT_LIMIT], "2");
        assert_eq!(h[X_RATELIMIT_REMAINING], "0");
        assert_eq!(h[X_RATELIMIT_RESET], "5");
        assert_eq!(h["retry-after"], "5");
    }
}
