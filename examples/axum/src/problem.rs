//! RFC 9457 problem details: every refusal the middleware makes is an
//! `application/problem+json` body. The type is `about:blank`, so the title
//! is the status's reason phrase and `detail` says what happened.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use crate::policy::{retry_after_secs, Check, Decision};

pub const CONTENT_TYPE: &str = "application/problem+json";

/// A problem response; `extra` members are added beside the standard ones.
pub fn response(status: StatusCode, detail: &str, extra: Map<String, Value>) -> Response {
    let mut body = json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "detail": detail,
    });
    if let Value::Object(members) = &mut body {
        members.extend(extra);
    }
    let mut response = (status, body.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// 429 for the policy that denied; `retry_after` (seconds) is absent when
/// the request's cost exceeds the limit, since no wait would help.
pub fn too_many_requests(check: &Check<'_>, reply: &Decision) -> Response {
    let policy = check.policy;
    let mut extra = Map::new();
    extra.insert("policy".into(), json!(policy.name));
    extra.insert("limit".into(), json!(reply.limit));
    let detail = match retry_after_secs(reply) {
        Some(secs) => {
            extra.insert("retry_after".into(), json!(secs));
            format!(
                "Rate limit \"{}\" ({}) exceeded; retry in {secs} s.",
                policy.name, policy
            )
        }
        None => format!(
            "This request costs {}, more than rate limit \"{}\" ({}) ever admits at once.",
            check.cost, policy.name, policy
        ),
    };
    response(StatusCode::TOO_MANY_REQUESTS, &detail, extra)
}

/// 503 when Redis cannot answer and the fail mode is closed.
pub fn limiter_unavailable() -> Response {
    response(
        StatusCode::SERVICE_UNAVAILABLE,
        "The rate limiter is unavailable, and this service does not admit unlimited requests.",
        Map::new(),
    )
}

pub fn bad_request(detail: &str) -> Response {
    response(StatusCode::BAD_REQUEST, detail, Map::new())
}

pub fn payload_too_large(max: usize) -> Response {
    response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("A body without Content-Length may be at most {max} bytes."),
        Map::new(),
    )
}
