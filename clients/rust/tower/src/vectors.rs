//! The shared vectors (conformance/vectors/README.md): every pure rule of
//! docs/http.md as input and expected output, run against the functions
//! the middleware calls on requests, without Redis. Each function named by
//! a file has a thin adapter here that reads the input as the middleware
//! would meet it (configuration through the configuration reader, header
//! lines as a `HeaderMap`); none is a second implementation.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use librl_client::{Decision, RetryAfter};
use serde_json::{json, Map, Value};

use crate::configuration::Config;
use crate::headers;
use crate::hook::Outcome;
use crate::identity::{client_ip, header_lines, parse_address, Client, Subject};
use crate::keys::Keys;
use crate::plan::{self, cost_header, Check, Planned, Refusal};
use crate::refusals::{self, Refusing, Reply};
use crate::routes::{canonical_path, PolicySet};
use crate::walker::{walk_field, Walked};

/// Every file the directory holds, and the function each one names.
const FILES: &[(&str, &str)] = &[
    ("algorithms.json", "algorithm"),
    ("client-ip.json", "client_ip"),
    ("config-errors.json", "config_error"),
    ("cost-headers.json", "cost_header"),
    ("durations.json", "duration"),
    ("headers.json", "response_headers"),
    ("keys.json", "key"),
    ("outcomes.json", "outcome"),
    ("override-keys.json", "override_key"),
    ("paths.json", "canonical_path"),
    ("rates.json", "rate"),
    ("refusals.json", "refusal"),
    ("routes.json", "route"),
    ("sources.json", "source"),
    ("substitution.json", "substitute"),
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../conformance/vectors")
}

#[test]
fn the_directory_holds_exactly_the_files_run() {
    let mut found: Vec<String> = std::fs::read_dir(dir())
        .expect("conformance/vectors")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .filter(|name| FILES.iter().any(|(f, _)| f == name) || !wholly_pending(name))
        .collect();
    found.sort();
    let listed: Vec<&str> = FILES.iter().map(|(f, _)| *f).collect();
    assert_eq!(
        found, listed,
        "conformance/vectors holds a file this runner does not run, or lacks one it does"
    );
}

/// A file of a function not implemented yet: conformance/pending.json
/// lists every one of its vectors for Rust.
fn wholly_pending(file: &str) -> bool {
    let pending = pending(file);
    let text = std::fs::read_to_string(dir().join(file)).unwrap_or_default();
    let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    doc["vectors"].as_array().is_some_and(|vectors| {
        vectors.iter().all(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| pending.iter().any(|p| p == n))
        })
    })
}

/// The vectors of `file` conformance/pending.json lists for Rust: not
/// passed yet, reported as PENDING (conformance/README.md, Pending).
fn pending(file: &str) -> Vec<String> {
    let path = dir().join("../pending.json");
    let text = std::fs::read_to_string(&path).expect("conformance/pending.json");
    let doc: Value = serde_json::from_str(&text).expect("conformance/pending.json is JSON");
    doc["vectors"]["rust"][file]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

/// Runs every vector of `file`, failing with each one that differs, and
/// with each pending one that passes (it must leave the pending list).
fn run(file: &str) {
    let path = dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let function = doc["function"].as_str().unwrap_or_default();
    let expected = FILES.iter().find(|(f, _)| *f == file).map(|(_, f)| *f);
    assert_eq!(Some(function), expected, "{file}: function");
    let call: fn(&Value) -> Result<Value, String> = match function {
        "algorithm" => algorithm,
        "outcome" => outcome,
        "client_ip" => client_ip_vector,
        "config_error" => config_error,
        "cost_header" => cost_header_vector,
        "duration" => duration,
        "response_headers" => response_headers,
        "key" => key,
        "canonical_path" => canonical_path_vector,
        "rate" => rate,
        "refusal" => refusal,
        "route" => route,
        "source" => source,
        "substitute" => substitute_vector,
        "override_key" => override_key_vector,
        other => panic!("{file}: unknown function {other:?}"),
    };
    let vectors = doc["vectors"].as_array().expect("vectors");
    assert!(!vectors.is_empty(), "{file}: no vectors");
    let pending = pending(file);
    let mut failures = Vec::new();
    for v in vectors {
        let name = v["name"].as_str().unwrap_or("?");
        let result = call(&v["input"]);
        if pending.iter().any(|p| p == name) {
            match result {
                Ok(got) if same(&got, &v["expect"]) => failures.push(format!(
                    "{file} {name}: passes; remove it from conformance/pending.json"
                )),
                _ => eprintln!("vectors: PENDING {file} {name} (conformance/pending.json)"),
            }
            continue;
        }
        match result {
            Ok(got) if same(&got, &v["expect"]) => {}
            Ok(got) => failures.push(format!(
                "{file} {name}: got {got}, expected {}",
                v["expect"]
            )),
            Err(why) => failures.push(format!("{file} {name}: {why}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors differ:\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n")
    );
}

macro_rules! files {
    ($($test:ident => $file:literal),+ $(,)?) => {
        $(#[test] fn $test() { run($file); })+
    };
}

files! {
    algorithms_json => "algorithms.json",
    outcomes_json => "outcomes.json",
    client_ip_json => "client-ip.json",
    config_errors_json => "config-errors.json",
    cost_headers_json => "cost-headers.json",
    durations_json => "durations.json",
    headers_json => "headers.json",
    keys_json => "keys.json",
    paths_json => "paths.json",
    rates_json => "rates.json",
    refusals_json => "refusals.json",
    routes_json => "routes.json",
    sources_json => "sources.json",
    override_keys_json => "override-keys.json",
    substitution_json => "substitution.json",
}

/// Exact equality, numbers by value (`60.0` is 60), byte strings given as
/// `{"hex": ...}` compared as bytes.
fn same(got: &Value, want: &Value) -> bool {
    if let Some(hex) = want.get("hex").and_then(Value::as_str) {
        return got.as_str().map(str::as_bytes) == Some(&unhex(hex)[..])
            || got.get("hex").and_then(Value::as_str) == Some(hex);
    }
    match (got, want) {
        (Value::Number(g), Value::Number(w)) => g.as_f64() == w.as_f64(),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(g, w)| same(g, w))
        }
        (Value::Object(g), Value::Object(w)) => {
            g.len() == w.len() && w.iter().all(|(k, w)| g.get(k).is_some_and(|g| same(g, w)))
        }
        _ => got == want,
    }
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A JSON string's UTF-8 bytes, or `{"hex": ...}`'s bytes.
fn bytes(v: &Value) -> Result<Vec<u8>, String> {
    match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        _ => v
            .get("hex")
            .and_then(Value::as_str)
            .map(unhex)
            .ok_or_else(|| format!("{v} is not bytes")),
    }
}

/// Bytes as the vectors write them: text when UTF-8, else `{"hex": ...}`.
fn bytes_value(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(text) => json!(text),
        Err(_) => json!({"hex": b.iter().map(|b| format!("{b:02x}")).collect::<String>()}),
    }
}

/// `[[name, value], ...]`, one pair per header line, in order.
fn header_map(pairs: &Value) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for pair in pairs.as_array().into_iter().flatten() {
        let name = pair[0].as_str().ok_or("a header name")?;
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
        let value = HeaderValue::from_bytes(&bytes(&pair[1])?).map_err(|e| e.to_string())?;
        map.append(name, value);
    }
    Ok(map)
}

/// A configuration document read by the reader, as the middleware reads one.
fn config(doc: Value) -> Result<Config, String> {
    Config::from_value(&doc).map_err(|e| format!("configuration refused: {e}"))
}

/// The document's policies, validated, as checks (cost 1, keyed `k`).
fn checks(config: &Config) -> Result<Vec<Check>, String> {
    let valid = config
        .validated(&crate::resolvers::Resolvers::default())
        .map_err(|e| e.to_string())?;
    Ok(valid
        .policies
        .into_iter()
        .map(|p| Check {
            policy: Arc::new(p),
            subject: Subject::Global,
            key: "k".into(),
            override_key: None,
            cost: librl_core::units::Amount::ONE,
        })
        .collect())
}

fn with_policies(mut top: Map<String, Value>, policies: Value) -> Value {
    top.insert("policies".into(), policies);
    Value::Object(top)
}

fn duration(input: &Value) -> Result<Value, String> {
    let object = match input["field"].as_str() {
        Some("timeout") => "config",
        Some("window") => "policy",
        other => return Err(format!("unknown field {other:?}")),
    };
    let field = input["field"].as_str().unwrap_or_default();
    Ok(match walk_field(field, &input["value"], object, field) {
        Ok(Walked::Ms(ms)) => json!({"ms": ms}),
        Ok(other) => return Err(format!("walked as {other:?}")),
        Err(_) => json!({"error": true}),
    })
}

fn rate(input: &Value) -> Result<Value, String> {
    Ok(
        match walk_field("rate", &input["value"], "policy", "rate") {
            Ok(Walked::Rate { count, window_ms }) => {
                json!({"limit": count, "window_ms": window_ms})
            }
            Ok(other) => return Err(format!("walked as {other:?}")),
            Err(_) => json!({"error": true}),
        },
    )
}

fn cost_header_vector(input: &Value) -> Result<Value, String> {
    let lines: Vec<Value> = input["lines"]
        .as_array()
        .ok_or("lines")?
        .iter()
        .map(|line| Ok(json!(["X-Cost", line])))
        .collect::<Result<_, String>>()?;
    let headers = header_map(&Value::Array(lines))?;
    Ok(
        match cost_header(header_lines(&headers, "x-cost").as_deref()) {
            Some(cost) => json!({"cost": cost.get()}),
            None => json!({"error": "bad-cost"}),
        },
    )
}

fn canonical_path_vector(input: &Value) -> Result<Value, String> {
    Ok(bytes_value(&canonical_path(&bytes(&input["path"])?)))
}

fn route(input: &Value) -> Result<Value, String> {
    let policies: Vec<Value> = input["policies"]
        .as_array()
        .ok_or("policies")?
        .iter()
        .map(|n| json!({"name": n, "algorithm": "fixed", "limit": 1, "window": "1s"}))
        .collect();
    let config = config(json!({"policies": policies, "routes": input["routes"]}))?;
    let valid = config
        .validated(&crate::resolvers::Resolvers::default())
        .map_err(|e| e.to_string())?;
    let set = PolicySet::new(valid.policies, &config.routes, &config.deny);
    let method = input["method"].as_str().ok_or("method")?;
    let method = Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
    Ok(match set.select(&method, &bytes(&input["path"])?) {
        None => Value::Null,
        Some(selection) => json!({
            "route": selection.route.map(|(i, _)| i),
            "policies": selection.policies.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
        }),
    })
}

/// A peer as a socket reports it (a zone possible), or null.
fn peer(v: &Value) -> Option<IpAddr> {
    v.as_str().and_then(|p| parse_address(p.as_bytes()))
}

fn client_ip_vector(input: &Value) -> Result<Value, String> {
    let config = config(json!({"policies": [], "trusted_proxies": input["trusted_proxies"]}))?;
    let headers = header_map(&input["headers"])?;
    Ok(match peer(&input["peer"]) {
        None => Value::Null,
        Some(p) => json!(client_ip(p, &headers, &config.trusted_proxies).to_string()),
    })
}

fn key(input: &Value) -> Result<Value, String> {
    let top = input["config"].as_object().cloned().unwrap_or_default();
    let config = config(with_policies(top, json!([input["policy"]])))?;
    let policy = checks(&config)?.remove(0).policy;
    let request = &input["request"];
    let headers = header_map(&request["headers"])?;
    let user = match &request["user"] {
        Value::Null => None,
        v => Some(String::from_utf8(bytes(v)?).map_err(|_| "a user is a string in Rust")?),
    };
    let client = Client::new(
        peer(&request["peer"]),
        &headers,
        &config.trusted_proxies,
        &config.api_key_header,
        user,
        config.ipv6_prefix,
    );
    let attributes = attributes(&request["attributes"])?;
    let subject = client.subject(
        &policy.key,
        &headers,
        request["query"].as_str(),
        attributes.as_ref(),
    );
    let exempt = plan::is_exempt(
        &plan::exempt_networks(&config.exempt, config.exempt_loopback),
        &client,
    );
    let keys = Keys::new(&config.prefix, &subject, &policy.name, policy.overridable);
    Ok(json!({
        "subject": subject.to_string(),
        "key": keys.key,
        "override_key": keys.override_key,
        "exempt": exempt,
    }))
}

/// A list of [`reply`]s.
fn replies(v: &Value) -> Result<Vec<Decision>, String> {
    v.as_array().ok_or("replies")?.iter().map(reply).collect()
}

/// `[allowed, count, retry_after, limit, remaining, reset_after]`.
fn reply(v: &Value) -> Result<Decision, String> {
    let n = |i: usize| v[i].as_i64().ok_or_else(|| format!("reply {v}"));
    let non_negative = |i: usize| n(i).map(|n| u64::try_from(n).unwrap_or(0));
    Ok(Decision {
        allowed: n(0)? == 1,
        count: non_negative(1)?,
        retry_after: match n(2)? {
            ms if ms < 0 => RetryAfter::Never,
            ms => RetryAfter::Ms(u64::try_from(ms).unwrap_or(0)),
        },
        limit: non_negative(3)?,
        remaining: non_negative(4)?,
        reset_after_ms: non_negative(5)?,
        lease: None,
    })
}

fn response_headers(input: &Value) -> Result<Value, String> {
    let mut doc = json!({
        "headers": input["headers"],
        "mode": input["mode"],
        "policies": input["policies"],
    });
    if let Some(reset) = input.get("legacy_reset") {
        doc["legacy_reset"] = reset.clone();
    }
    let config = config(doc)?;
    let now_ms = input["now_ms"].as_u64().unwrap_or(0);
    let checks = checks(&config)?;
    let replies = replies(&input["replies"])?;
    let denied = input["denied"].as_bool().ok_or("denied")?;
    let mut map = HeaderMap::new();
    let outcome = Outcome::of(!denied, config.mode);
    let mut sent = Map::new();
    headers::write(
        &mut map,
        config.headers,
        config.legacy_reset,
        now_ms,
        &checks,
        &replies,
        outcome,
    );
    // draft6's names are reported when sent; `absent` lists the others.
    for name in ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"] {
        if let Some(v) = map.get(name) {
            sent.insert(name.into(), json!(v.to_str().map_err(|e| e.to_string())?));
        }
    }
    let all = [
        "RateLimit-Policy",
        "RateLimit",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "Retry-After",
    ];
    let mut absent = Vec::new();
    for name in all {
        match map.get(name) {
            Some(v) => {
                sent.insert(name.into(), json!(v.to_str().map_err(|e| e.to_string())?));
            }
            None => absent.push(name),
        }
    }
    Ok(json!({
        "most_restrictive": headers::most_restrictive(&checks, &replies, outcome == Outcome::Denied),
        "headers": sent,
        "absent": absent,
    }))
}

fn refusal(input: &Value) -> Result<Value, String> {
    let mut top = Map::new();
    top.insert("deny".into(), input["deny"].clone());
    if let Some(fail_deny) = input.get("fail_deny") {
        top.insert("fail_deny".into(), fail_deny.clone());
    }
    if let Some(max) = input.get("max_body_bytes") {
        top.insert("max_body_bytes".into(), max.clone());
    }
    let policies = match input.get("policy") {
        Some(p) => json!([p]),
        None => json!([]),
    };
    let config = config(with_policies(top, policies))?;
    // Which body the refusal was configured to send: text is reported
    // as text whatever its Content-Type.
    let mut text_body = false;
    let reply_to: Reply = match input["kind"].as_str() {
        Some("denied") => {
            let mut check = checks(&config)?.remove(0);
            let cost = input["cost"].as_u64().ok_or("cost")?;
            check.cost = librl_core::units::Amount::new(cost).ok_or("cost")?;
            let deny = match input.get("route_deny") {
                Some(route) => {
                    let route = crate::walker::walk_object_at("route_deny", route, "refusal")
                        .and_then(|w| crate::configuration::read_route_deny(&w))
                        .map_err(|e| e.to_string())?;
                    config.deny.merged(&route)
                }
                None => config.deny.clone(),
            };
            text_body = deny.body == crate::configuration::DenyBody::Text;
            refusals::denied(&Refusing::new(&deny), &check, &reply(&input["reply"])?)
        }
        Some("bad-cost") => {
            // Planned as a request is, with a cost header that is no
            // integer, or a cost resolver that gives none.
            let mut resolvers = crate::resolvers::Resolvers::default();
            if let Some(name) = input["resolver"].as_str() {
                let none: Arc<crate::resolvers::CostResolver> = Arc::new(|_| None);
                resolvers.cost.insert(name.into(), none);
            }
            let valid = config.validated(&resolvers).map_err(|e| e.to_string())?;
            let policy = Arc::new(valid.policies.into_iter().next().ok_or("policy")?);
            let headers = match input["header"].as_str() {
                Some(header) => header_map(&json!([[header, "x"]]))?,
                None => HeaderMap::new(),
            };
            let planned = Planned {
                route: None,
                deny: None,
                mode: config.mode,
                applying: vec![(policy, Subject::Global)],
            };
            let (uri, extensions) = (http::Uri::from_static("/"), http::Extensions::new());
            let parts = crate::resolvers::RequestParts {
                method: &Method::GET,
                uri: &uri,
                headers: &headers,
                extensions: &extensions,
            };
            match planned.checks(&config.prefix, &parts, None) {
                Err(refusal) => refusals::refused(&refusal),
                other => return Err(format!("planned as {other:?}")),
            }
        }
        Some("too-large") => refusals::refused(&Refusal::BodyTooLarge {
            max: config.max_body_bytes,
        }),
        Some("unavailable") => {
            text_body = config.fail_deny.body == crate::configuration::DenyBody::Text;
            refusals::unavailable(&Refusing::new(&config.fail_deny))
        }
        other => return Err(format!("unknown kind {other:?}")),
    };
    let body_text = String::from_utf8(reply_to.body.to_vec()).map_err(|e| e.to_string())?;
    let mut out = json!({
        "status": reply_to.status.as_u16(),
    });
    let content_type = reply_to.content_type.to_str().map_err(|e| e.to_string())?;
    out["content_type"] = json!(content_type);
    if !text_body {
        out["body"] = serde_json::from_str(&body_text).map_err(|e| e.to_string())?;
    } else {
        out["body_text"] = json!(body_text);
    }
    if !reply_to.headers.is_empty() {
        let headers: Map<String, Value> = reply_to
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    as_given(input, n.as_str()),
                    json!(v.to_str().unwrap_or_default()),
                )
            })
            .collect();
        out["headers"] = Value::Object(headers);
    }
    Ok(out)
}

/// A header name as the input's refusals write it (`HeaderName` is lower
/// case; the vectors keep the configuration's case).
fn as_given(input: &Value, name: &str) -> String {
    ["deny", "fail_deny", "route_deny"]
        .iter()
        .filter_map(|r| input[*r]["headers"].as_object())
        .flat_map(|headers| headers.keys())
        .find(|given| given.eq_ignore_ascii_case(name))
        .cloned()
        .unwrap_or_else(|| name.to_string())
}

/// The decision hook's outcome for a request's replies (the enforced
/// policies admitted when all of them allowed, as RL.ALL answers).
fn outcome(input: &Value) -> Result<Value, String> {
    let config = config(json!({"mode": input["mode"], "policies": input["policies"]}))?;
    let checks = checks(&config)?;
    let replies = replies(&input["replies"])?;
    let pairs = || checks.iter().zip(&replies);
    let admitted = pairs().all(|(c, r)| c.policy.shadow || r.allowed);
    let shadow_denied = pairs().any(|(c, r)| c.policy.shadow && !r.allowed);
    let outcome = Outcome::decided(admitted, shadow_denied, config.mode);
    Ok(json!({"outcome": outcome.as_str()}))
}

/// The `local` fail mode's replies to a sequence of calls on one key
/// (librl-core's algorithms, as the module decides).
fn algorithm(input: &Value) -> Result<Value, String> {
    let mut policy = json!({
        "name": "p",
        "algorithm": input["algorithm"],
        "limit": input["limit"],
        "window": format!("{}ms", input["window_ms"].as_u64().ok_or("window_ms")?),
    });
    for field in ["aligned", "burst"] {
        if let Some(v) = input.get(field) {
            policy[field] = v.clone();
        }
    }
    let config = config(json!({"policies": [policy]}))?;
    let check = checks(&config)?.remove(0);
    let local = crate::fail::LocalLimiter::new(16);
    let mut out = Vec::new();
    for call in input["calls"].as_array().ok_or("calls")? {
        let now = call[0].as_u64().ok_or("now_ms")?;
        let cost = call[1].as_u64().ok_or("cost")?;
        let mut c = check.clone();
        c.cost = librl_core::units::Amount::new(cost).ok_or("cost")?;
        let (_, replies) = local.check_at(&[c], now);
        let r = replies.first().ok_or("no reply")?;
        let retry = match r.retry_after {
            RetryAfter::Never => -1,
            RetryAfter::Ms(ms) => i64::try_from(ms).unwrap_or(i64::MAX),
        };
        out.push(json!([
            i32::from(r.allowed),
            r.count,
            retry,
            r.limit,
            r.remaining,
            r.reset_after_ms
        ]));
    }
    Ok(Value::Array(out))
}

/// One source's value in a request, read as the middleware reads it.
fn source(input: &Value) -> Result<Value, String> {
    let text = input["source"].as_str().ok_or("source")?;
    let source = crate::identity::Source::from_config(text).ok_or("not a source")?;
    let request = &input["request"];
    let headers = header_map(&request["headers"])?;
    let user = match &request["user"] {
        Value::Null => None,
        v => Some(String::from_utf8(bytes(v)?).map_err(|_| "a user is a string in Rust")?),
    };
    let attributes = attributes(&request["attributes"])?;
    let request = crate::identity::Sourced {
        headers: &headers,
        query: request["query"].as_str(),
        user: user.as_deref(),
        attributes: attributes.as_ref(),
    };
    Ok(match source.read(&request) {
        Some(value) => bytes_value(&value),
        None => Value::Null,
    })
}

/// A request's `attributes` (absent: the request carries none), each
/// value a string, as [`Attributes`](crate::Attributes) holds them.
fn attributes(v: &Value) -> Result<Option<crate::Attributes>, String> {
    let Some(map) = v.as_object() else {
        return Ok(None);
    };
    let mut attributes = crate::Attributes::new();
    for (name, value) in map {
        attributes.insert(
            name,
            value.as_str().ok_or("an attribute is a string in Rust")?,
        );
    }
    Ok(Some(attributes))
}

fn override_key_vector(input: &Value) -> Result<Value, String> {
    let Ok(config) = config(input["config"].clone()) else {
        return Ok(json!({"error": true}));
    };
    let value = match &input["value"] {
        Value::Null => None,
        v => Some(bytes(v)?),
    };
    let policy = input["policy"].as_str().ok_or("policy")?;
    Ok(
        match crate::keys::policy_keys(&config, policy, value.as_deref()) {
            Ok(keys) => json!({"key": keys.key, "override_key": keys.override_key}),
            Err(_) => json!({"error": true}),
        },
    )
}

fn substitute_vector(input: &Value) -> Result<Value, String> {
    let text = input["text"].as_str().ok_or("text")?;
    let env = input["env"].as_object().ok_or("env")?;
    let lookup = |name: &str| env.get(name).and_then(Value::as_str).map(String::from);
    Ok(match crate::substitution::substitute(text, lookup) {
        Ok(text) => json!({"text": text}),
        // The vectors pin the message of an unset variable only; any
        // other refusal is `true`.
        Err(e) if e.message == "not set" => json!({"error": e.to_string()}),
        Err(_) => json!({"error": true}),
    })
}

fn config_error(input: &Value) -> Result<Value, String> {
    let read = Config::from_value(&input["config"]).and_then(|c| {
        c.validated(&crate::resolvers::Resolvers::default())
            .map(|_| c)
    });
    Ok(match read {
        Ok(_) => json!("accepted"),
        Err(e) => json!(e.to_string()),
    })
}
