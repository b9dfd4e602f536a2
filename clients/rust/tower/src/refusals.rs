//! The bodies of the responses the middleware makes itself (docs/http.md,
//! Refusals): RFC 9457 `application/problem+json` with `type`
//! `about:blank`, or the deny message as `text/plain`; for a gRPC request
//! (docs/http.md, gRPC), the same refusal as a gRPC status.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use librl_client::Decision;
use serde_json::{json, Map, Value};

use crate::configuration::{Deny, DenyBody};
use crate::headers::{retry_after_secs, shown_limit};
use crate::plan::{Check, Refusal};
use crate::policy::{window_text, ValidAlgorithm};

pub const PROBLEM_JSON: &str = "application/problem+json";
pub const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
pub const GRPC: &str = "application/grpc";

/// gRPC status codes the refusals map to.
pub const RESOURCE_EXHAUSTED: u8 = 8;
pub const UNAVAILABLE: u8 = 14;
pub const INVALID_ARGUMENT: u8 = 3;

/// A response the middleware makes: status, Content-Type and body, and
/// the same refusal for a gRPC caller: its gRPC code and message (the
/// problem's `detail`, or the deny message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
    pub grpc_code: u8,
    pub detail: String,
}

/// A gRPC request's Content-Type (`application/grpc`, `application/grpc+<format>`
/// or gRPC-Web's `application/grpc-web...`), which its refusal echoes so a
/// gRPC-Web client reads it as its own; `None` for any other request.
pub fn grpc_content_type(headers: &HeaderMap) -> Option<HeaderValue> {
    headers
        .get(http::header::CONTENT_TYPE)
        .filter(|v| v.as_bytes().starts_with(GRPC.as_bytes()))
        .cloned()
}

/// `grpc-message`'s encoding: bytes outside 0x20..=0x7E, and `%`, as
/// `%XX` (upper-case hex) of the UTF-8 bytes.
pub fn grpc_message(text: &str) -> HeaderValue {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if (0x20..=0x7E).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::from_str(&out).expect("visible ASCII is a header value")
}

fn problem(
    status: StatusCode,
    grpc_code: u8,
    title: &str,
    detail: &str,
    extra: Map<String, Value>,
) -> Reply {
    let mut body = Map::new();
    body.insert("type".into(), json!("about:blank"));
    body.insert("title".into(), json!(title));
    body.insert("status".into(), json!(status.as_u16()));
    body.insert("detail".into(), json!(detail));
    body.extend(extra);
    Reply {
        status,
        content_type: PROBLEM_JSON,
        body: Bytes::from(Value::Object(body).to_string()),
        grpc_code,
        detail: detail.to_owned(),
    }
}

/// The denial for the most restrictive denying check: `deny.status`, a
/// problem body naming the policy (`retry_after` in ms, null when no wait
/// helps), or the deny message as text.
pub(crate) fn denied(deny: &Deny, check: &Check, reply: &Decision) -> Reply {
    if deny.body == DenyBody::Text {
        return Reply {
            status: deny.status,
            content_type: TEXT_PLAIN,
            body: Bytes::from(deny.message.clone()),
            grpc_code: RESOURCE_EXHAUSTED,
            detail: deny.message.clone(),
        };
    }
    let policy = &check.policy;
    let limit = shown_limit(check, reply);
    let per = window_text(policy.window);
    let (name, cost) = (&policy.name, check.cost.get());
    let detail = match (&policy.algorithm, retry_after_secs(reply)) {
        // A concurrency policy has no window: its limit is requests at once.
        (ValidAlgorithm::Concurrency, Some(secs)) => {
            format!("Concurrency limit \"{name}\" ({limit} at once) reached; retry in {secs} s.")
        }
        (ValidAlgorithm::Concurrency, None) => format!(
            "This request costs {cost}, more than concurrency limit \"{name}\" ({limit} at once) ever admits."
        ),
        (_, Some(secs)) => {
            format!("Rate limit \"{name}\" ({limit} per {per}) exceeded; retry in {secs} s.")
        }
        (_, None) => format!(
            "This request costs {cost}, more than rate limit \"{name}\" ({limit} per {per}) ever admits at once."
        ),
    };
    let retry_ms = reply.retry_after.duration().map(|d| d.as_millis());
    let mut extra = Map::new();
    extra.insert("policy".into(), json!(policy.name));
    extra.insert("limit".into(), json!(limit));
    extra.insert("retry_after".into(), json!(retry_ms));
    problem(
        deny.status,
        RESOURCE_EXHAUSTED,
        "Too Many Requests",
        &detail,
        extra,
    )
}

/// 503 when Redis cannot answer and the fail mode is closed.
pub(crate) fn unavailable() -> Reply {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        UNAVAILABLE,
        "Service Unavailable",
        "The rate limiter is unavailable, and this service does not admit unlimited requests.",
        Map::new(),
    )
}

/// 400 for a bad cost header, 413 for a body too large to measure.
pub(crate) fn refused(refusal: &Refusal) -> Reply {
    match refusal {
        Refusal::BadCost { policy, header } => {
            let mut extra = Map::new();
            extra.insert("policy".into(), json!(policy));
            problem(
                StatusCode::BAD_REQUEST,
                INVALID_ARGUMENT,
                "Bad Request",
                &format!("{header} must be an integer from 1 to 2^50."),
                extra,
            )
        }
        Refusal::BodyTooLarge { max } => problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            RESOURCE_EXHAUSTED,
            "Content Too Large",
            &format!("The body may be at most {max} bytes."),
            Map::new(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use librl_client::RetryAfter;
    use std::time::Duration;

    fn denial(deny: &Deny) -> Reply {
        let check = Check::for_test(Policy::fixed("tonic", 2, Duration::from_secs(60)), 1);
        let reply = Decision {
            allowed: false,
            count: 2,
            retry_after: RetryAfter::Ms(59_000),
            limit: 2,
            remaining: 0,
            reset_after_ms: 59_000,
            lease: None,
        };
        denied(deny, &check, &reply)
    }

    #[test]
    fn refusals_map_to_grpc_codes() {
        let deny = Deny::default();
        let d = denial(&deny);
        assert_eq!((d.status.as_u16(), d.grpc_code), (429, RESOURCE_EXHAUSTED));
        assert!(d.detail.contains("\"tonic\""), "{}", d.detail);
        // A configured deny status is still a rate-limit denial.
        let other = Deny {
            status: StatusCode::SERVICE_UNAVAILABLE,
            ..Deny::default()
        };
        assert_eq!(denial(&other).grpc_code, RESOURCE_EXHAUSTED);
        let text = Deny {
            body: DenyBody::Text,
            message: "slow down".into(),
            ..Deny::default()
        };
        let t = denial(&text);
        assert_eq!(
            (t.grpc_code, t.detail.as_str()),
            (RESOURCE_EXHAUSTED, "slow down")
        );
        assert_eq!(unavailable().grpc_code, UNAVAILABLE);
        let bad = refused(&Refusal::BadCost {
            policy: "p".into(),
            header: "X-Cost".into(),
        });
        assert_eq!(
            (bad.status.as_u16(), bad.grpc_code),
            (400, INVALID_ARGUMENT)
        );
        let large = refused(&Refusal::BodyTooLarge { max: 10 });
        assert_eq!(
            (large.status.as_u16(), large.grpc_code),
            (413, RESOURCE_EXHAUSTED)
        );
    }

    #[test]
    fn grpc_message_is_percent_encoded() {
        assert_eq!(
            grpc_message("Rate limit \"a\" exceeded; 100% ~"),
            "Rate limit \"a\" exceeded; 100%25 ~"
        );
        assert_eq!(grpc_message("é\n\t\u{7f}"), "%C3%A9%0A%09%7F");
        assert_eq!(grpc_message(""), "");
    }

    #[test]
    fn grpc_requests_by_content_type() {
        let mut h = HeaderMap::new();
        assert_eq!(grpc_content_type(&h), None);
        for (ct, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("application/grpc-web", true),
            ("application/json", false),
            ("application/problem+json", false),
        ] {
            h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ct));
            let echoed = grpc.then(|| HeaderValue::from_static(ct));
            assert_eq!(grpc_content_type(&h), echoed, "{ct}");
        }
    }
}
