//! The bodies of the responses the middleware makes itself (docs/http.md,
//! Refusals): RFC 9457 `application/problem+json` with `type`
//! `about:blank`, or the deny message as `text/plain`.

use bytes::Bytes;
use http::StatusCode;
use librl_client::Decision;
use serde_json::{json, Map, Value};

use crate::check::{Check, Refusal};
use crate::config::{Deny, DenyBody};
use crate::headers::shown_limit;

pub const PROBLEM_JSON: &str = "application/problem+json";
pub const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

/// A response the middleware makes: status, Content-Type and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
}

fn problem(status: StatusCode, title: &str, detail: &str, extra: Map<String, Value>) -> Reply {
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
    }
}

/// The denial for the most restrictive denying check: `deny.status`, a
/// problem body naming the policy (`retry_after` in ms, null when no wait
/// helps), or the deny message as text.
pub fn denied(deny: &Deny, check: &Check, reply: &Decision) -> Reply {
    if deny.body == DenyBody::Text {
        return Reply {
            status: deny.status,
            content_type: TEXT_PLAIN,
            body: Bytes::from(deny.message.clone()),
        };
    }
    let policy = &check.policy;
    let retry_ms = reply.retry_after.duration().map(|d| d.as_millis());
    let detail = match retry_ms {
        Some(ms) => format!(
            "Rate limit \"{}\" ({policy}) exceeded; retry in {} s.",
            policy.name,
            u64::try_from(ms).unwrap_or(u64::MAX).div_ceil(1000).max(1)
        ),
        None => format!(
            "This request costs {}, more than rate limit \"{}\" ({policy}) ever admits at once.",
            check.cost, policy.name
        ),
    };
    let mut extra = Map::new();
    extra.insert("policy".into(), json!(policy.name));
    extra.insert("limit".into(), json!(shown_limit(check, reply)));
    extra.insert("retry_after".into(), json!(retry_ms));
    problem(deny.status, "Too Many Requests", &detail, extra)
}

/// 503 when Redis cannot answer and the fail mode is closed.
pub fn unavailable() -> Reply {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable",
        "The rate limiter is unavailable, and this service does not admit unlimited requests.",
        Map::new(),
    )
}

/// 400 for a bad cost header, 413 for a body too large to measure.
pub fn refused(refusal: &Refusal) -> Reply {
    match refusal {
        Refusal::BadCost { policy, header } => {
            let mut extra = Map::new();
            extra.insert("policy".into(), json!(policy));
            problem(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                &format!("{header} must be an integer from 1 to 2^50."),
                extra,
            )
        }
        Refusal::BodyTooLarge { max } => problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Content Too Large",
            &format!("The body may be at most {max} bytes."),
            Map::new(),
        ),
    }
}
