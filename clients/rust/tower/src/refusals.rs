//! The bodies of the responses the middleware makes itself (docs/http.md,
//! Refusals): RFC 9457 `application/problem+json` with `type`
//! `about:blank`, the deny message as text, or the configured JSON, with
//! the refusal's extra headers; for a gRPC request (docs/http.md, gRPC),
//! the same refusal as a gRPC status.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use librl_client::Decision;
use serde_json::{json, Map, Value};

use crate::configuration::{Deny, DenyBody};
use crate::headers::{decimal, retry_after_secs, shown_limit};
use crate::plan::{Check, Refusal};
use crate::policy::ValidAlgorithm;

pub const PROBLEM_JSON: &str = "application/problem+json";
pub const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
pub const APPLICATION_JSON: &str = "application/json";
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
    pub content_type: HeaderValue,
    pub body: Bytes,
    pub grpc_code: u8,
    pub detail: String,
    /// The refusal's extra headers (`deny.headers`), sent besides.
    pub headers: Arc<[(HeaderName, HeaderValue)]>,
}

/// A `deny` or `fail_deny` (a route's merged over `deny`) made ready at
/// start-up: what a refusal sends, but for the problem's words.
#[derive(Clone, Debug)]
pub(crate) struct Refusing {
    status: StatusCode,
    body: Prepared,
    /// The `text` body, and gRPC's `grpc-message` for it.
    message: String,
    headers: Arc<[(HeaderName, HeaderValue)]>,
}

#[derive(Clone, Debug)]
enum Prepared {
    Problem,
    Text(HeaderValue, Bytes),
    Json(Bytes),
}

impl Refusing {
    /// From a validated refusal: its content type and header values
    /// passed the schema's patterns, so none is dropped.
    pub(crate) fn new(deny: &Deny) -> Refusing {
        let body = match deny.body {
            DenyBody::Problem => Prepared::Problem,
            DenyBody::Text => Prepared::Text(
                HeaderValue::from_str(&deny.content_type)
                    .unwrap_or(HeaderValue::from_static(TEXT_PLAIN)),
                Bytes::from(deny.message.clone()),
            ),
            DenyBody::Json => Prepared::Json(Bytes::from(
                deny.json.as_ref().unwrap_or(&Value::Null).to_string(),
            )),
        };
        let headers = deny
            .headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    HeaderName::from_bytes(name.as_bytes()).ok()?,
                    HeaderValue::from_str(value).ok()?,
                ))
            })
            .collect();
        Refusing {
            status: deny.status,
            body,
            message: deny.message.clone(),
            headers,
        }
    }

    /// The configured body in place of a problem (`problem` when None),
    /// with `detail` for gRPC's message when the body is JSON.
    fn reply(&self, grpc_code: u8, problem: impl FnOnce() -> Reply) -> Reply {
        let (content_type, body, detail) = match &self.body {
            Prepared::Problem => {
                let mut reply = problem();
                reply.headers = self.headers.clone();
                return reply;
            }
            Prepared::Text(content_type, body) => {
                (content_type.clone(), body.clone(), self.message.clone())
            }
            Prepared::Json(body) => (
                HeaderValue::from_static(APPLICATION_JSON),
                body.clone(),
                problem().detail,
            ),
        };
        Reply {
            status: self.status,
            content_type,
            body,
            grpc_code,
            detail,
            headers: self.headers.clone(),
        }
    }
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
        content_type: HeaderValue::from_static(PROBLEM_JSON),
        body: Bytes::from(Value::Object(body).to_string()),
        grpc_code,
        detail: detail.to_owned(),
        headers: Arc::new([]),
    }
}

/// The denial for the most restrictive denying check: `deny.status`, a
/// problem body naming the policy (`retry_after` in ms, null when no wait
/// helps), the deny message as text, or the configured JSON.
pub(crate) fn denied(deny: &Refusing, check: &Check, reply: &Decision) -> Reply {
    deny.reply(RESOURCE_EXHAUSTED, || {
        denial_problem(deny.status, check, reply)
    })
}

fn denial_problem(status: StatusCode, check: &Check, reply: &Decision) -> Reply {
    use Piece::{Number as N, Text as T};
    let policy = &check.policy;
    let limit = shown_limit(check, reply);
    let per = Piece::Window(policy.window.ms());
    let (name, cost) = (&policy.name, check.cost.get());
    let pieces: &[Piece] = match (&policy.algorithm, retry_after_secs(reply)) {
        // A concurrency policy has no window: its limit is requests at once.
        (ValidAlgorithm::Concurrency, Some(secs)) => &[
            T("Concurrency limit \""),
            T(name),
            T("\" ("),
            N(limit),
            T(" at once) reached; retry in "),
            N(secs),
            T(" s."),
        ],
        (ValidAlgorithm::Concurrency, None) => &[
            T("This request costs "),
            N(cost),
            T(", more than concurrency limit \""),
            T(name),
            T("\" ("),
            N(limit),
            T(" at once) ever admits."),
        ],
        (_, Some(secs)) => &[
            T("Rate limit \""),
            T(name),
            T("\" ("),
            N(limit),
            T(" per "),
            per,
            T(") exceeded; retry in "),
            N(secs),
            T(" s."),
        ],
        (_, None) => &[
            T("This request costs "),
            N(cost),
            T(", more than rate limit \""),
            T(name),
            T("\" ("),
            N(limit),
            T(" per "),
            per,
            T(") ever admits at once."),
        ],
    };
    let detail = Piece::join(pieces);
    let retry_ms = reply.retry_after.duration().map(|d| d.as_millis());
    // Written straight into the body (what `problem` makes of these
    // members, in its order): a refused request builds no JSON value.
    let mut body = Vec::with_capacity(128 + detail.len() + name.len());
    body.extend_from_slice(br#"{"type":"about:blank","title":"Too Many Requests","status":"#);
    decimal(&mut body, u64::from(status.as_u16()));
    body.extend_from_slice(br#","detail":"#);
    json_string(&mut body, &detail);
    body.extend_from_slice(br#","policy":"#);
    json_string(&mut body, name);
    body.extend_from_slice(br#","limit":"#);
    decimal(&mut body, limit);
    body.extend_from_slice(br#","retry_after":"#);
    match retry_ms.map(u64::try_from) {
        Some(Ok(ms)) => decimal(&mut body, ms),
        Some(Err(_)) => decimal(&mut body, u64::MAX),
        None => body.extend_from_slice(b"null"),
    }
    body.push(b'}');
    Reply {
        status,
        content_type: HeaderValue::from_static(PROBLEM_JSON),
        body: Bytes::from(body),
        grpc_code: RESOURCE_EXHAUSTED,
        detail,
        headers: Arc::new([]),
    }
}

/// A part of a refusal's detail: written in turn, with no formatting
/// machinery (a refused request's detail is made every time).
enum Piece<'a> {
    Text(&'a str),
    Number(u64),
    /// A window in ms, as docs/http.md, Refusals writes it: whole
    /// seconds with `s` when a multiple of 1000 ms (`60s`), else `ms`.
    Window(u64),
}

impl Piece<'_> {
    fn join(pieces: &[Piece]) -> String {
        let mut out = Vec::with_capacity(112);
        for piece in pieces {
            match *piece {
                Piece::Text(text) => out.extend_from_slice(text.as_bytes()),
                Piece::Number(n) => decimal(&mut out, n),
                Piece::Window(ms) if ms.is_multiple_of(1000) => {
                    decimal(&mut out, ms / 1000);
                    out.push(b's');
                }
                Piece::Window(ms) => {
                    decimal(&mut out, ms);
                    out.extend_from_slice(b"ms");
                }
            }
        }
        // Text and ASCII digits: always UTF-8.
        String::from_utf8(out).unwrap_or_default()
    }
}

/// `text` as a JSON string, escaped as serde_json escapes it: by hand when
/// only `"` needs it (a detail quotes its policy's name), else by serde_json.
fn json_string(out: &mut Vec<u8>, text: &str) {
    if text.bytes().any(|b| b == b'\\' || b < 0x20) {
        // Writing into a Vec cannot fail, and a str always serializes.
        let _ = serde_json::to_writer(&mut *out, text);
        return;
    }
    out.push(b'"');
    for b in text.bytes() {
        if b == b'"' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// `fail_deny` (503 problem by default) when Redis cannot answer and the
/// fail mode is closed.
pub(crate) fn unavailable(fail_deny: &Refusing) -> Reply {
    fail_deny.reply(UNAVAILABLE, || {
        problem(
            fail_deny.status,
            UNAVAILABLE,
            "Service Unavailable",
            "The rate limiter is unavailable, and this service does not admit unlimited requests.",
            Map::new(),
        )
    })
}

/// 400 for a bad cost (header or resolver), 413 for a body too large to
/// measure.
pub(crate) fn refused(refusal: &Refusal) -> Reply {
    let bad_cost = |policy: &str, what: String| {
        let mut extra = Map::new();
        extra.insert("policy".into(), json!(policy));
        problem(
            StatusCode::BAD_REQUEST,
            INVALID_ARGUMENT,
            "Bad Request",
            &format!("{what} must be an integer from 1 to 2^50."),
            extra,
        )
    };
    match refusal {
        Refusal::BadCost { policy, header } => bad_cost(policy, header.clone()),
        Refusal::BadResolvedCost { policy, resolver } => {
            bad_cost(policy, format!("The cost \"{resolver}\""))
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
        let deny = &Refusing::new(deny);
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

    /// The denial's body written by hand is the problem `problem` builds
    /// from the same members.
    #[test]
    fn denial_body_is_the_problem_json() {
        let check = Check::for_test(Policy::fixed("a.b-c_d", 7, Duration::from_secs(90)), 1);
        for retry_after in [RetryAfter::Ms(1_500), RetryAfter::Never] {
            let reply = Decision {
                allowed: false,
                count: 7,
                retry_after,
                limit: 7,
                remaining: 0,
                reset_after_ms: 1_500,
                lease: None,
            };
            let made = denial_problem(StatusCode::TOO_MANY_REQUESTS, &check, &reply);
            let mut extra = Map::new();
            extra.insert("policy".into(), json!("a.b-c_d"));
            extra.insert("limit".into(), json!(7));
            extra.insert(
                "retry_after".into(),
                json!(reply.retry_after.duration().map(|d| d.as_millis())),
            );
            let built = problem(
                StatusCode::TOO_MANY_REQUESTS,
                RESOURCE_EXHAUSTED,
                "Too Many Requests",
                &made.detail,
                extra,
            );
            assert_eq!(made, built);
        }
    }

    /// Each detail as docs/http.md, Refusals words it, and the body's JSON
    /// strings escaped as serde_json escapes them.
    #[test]
    fn details_read_as_the_contract_words_them() {
        let denial = |policy: Policy, cost: u64, retry_after: RetryAfter| {
            let check = Check::for_test(policy, cost);
            let reply = Decision {
                allowed: false,
                count: 0,
                retry_after,
                limit: 7,
                remaining: 0,
                reset_after_ms: 0,
                lease: None,
            };
            denial_problem(StatusCode::TOO_MANY_REQUESTS, &check, &reply).detail
        };
        let ms = Duration::from_millis;
        let cases = [
            (
                denial(Policy::fixed("p", 7, ms(90_000)), 1, RetryAfter::Ms(1_500)),
                "Rate limit \"p\" (7 per 90s) exceeded; retry in 2 s.",
            ),
            (
                denial(Policy::fixed("p", 7, ms(1_500)), 9, RetryAfter::Never),
                "This request costs 9, more than rate limit \"p\" (7 per 1500ms) ever admits at once.",
            ),
            (
                denial(Policy::concurrency("c", 7, ms(30_000)), 1, RetryAfter::Ms(30_000)),
                "Concurrency limit \"c\" (7 at once) reached; retry in 30 s.",
            ),
            (
                denial(Policy::concurrency("c", 7, ms(30_000)), 8, RetryAfter::Never),
                "This request costs 8, more than concurrency limit \"c\" (7 at once) ever admits.",
            ),
        ];
        for (made, want) in cases {
            assert_eq!(made, want);
        }
        for text in [
            "",
            "plain",
            "a \"b\"",
            "back\\slash",
            "ctl\n\t\u{1}\u{7f}",
            "ünï \"x\"",
        ] {
            let mut out = Vec::new();
            json_string(&mut out, text);
            assert_eq!(out, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
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
        let fail_deny = Refusing::new(&crate::configuration::Config::default().fail_deny);
        assert_eq!(unavailable(&fail_deny).grpc_code, UNAVAILABLE);
        let json = Deny {
            body: DenyBody::Json,
            json: Some(json!({"code": "rate_limit:exceeded"})),
            ..Deny::default()
        };
        let j = denial(&json);
        assert_eq!(j.grpc_code, RESOURCE_EXHAUSTED);
        assert!(j.detail.starts_with("Rate limit \"tonic\""), "{}", j.detail);
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
    fn a_json_body_is_sent_in_the_order_the_file_writes_it() {
        let config = crate::configuration::Config::from_yaml(
            "deny: {body: json, json: {status: 429, code: \"rate_limit:exceeded\", a: [2, 1]}}\n\
             policies: [{name: p, algorithm: fixed, limit: 1, window: 1s}]\n",
        );
        let deny = match config {
            Ok(c) => c.deny,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            denial(&deny).body.as_ref(),
            br#"{"status":429,"code":"rate_limit:exceeded","a":[2,1]}"#
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
