//! The configuration (docs/http.md, One configuration and Configuration
//! reference) as Rust values, read from a YAML/JSON document in two steps
//! (docs/http.md, Start-up validation): the schema's walker (`walker.rs`:
//! names, kinds, enums, bounds, patterns, durations, defaults), then the
//! rules that span fields, which the schema's description lists and this
//! file checks. A configuration built in code is written back as a
//! document and read the same way, so both meet the same rules and the
//! same messages.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode};
use ipnet::IpNet;
use serde_json::{json, Map, Value};

use crate::identity::Source;
use crate::policy::{Algorithm, Cost, Count, KeyKind, Policy, ValidPolicy};
use crate::resolvers::Resolvers;
use crate::walker::{walk_document, walk_object_at, Walked, WalkedObject};

/// `enforce`, or `shadow`: check and record, never refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Enforce,
    Shadow,
}

/// What a request gets when Redis cannot answer within the timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// Pass the request unlimited, and log a warning (at most every 10 s).
    Open,
    /// Answer 503 with a problem body.
    Closed,
    /// Decide in this process with librl-core's algorithms.
    Local,
}

/// Which rate-limit headers responses carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderMode {
    /// `RateLimit-Policy`, `RateLimit` and `X-RateLimit-*`.
    Both,
    /// The IETF draft's `RateLimit-Policy` and `RateLimit`.
    Ietf,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    Legacy,
    /// express-rate-limit's `draft-6`: `RateLimit-Limit`, `-Remaining`,
    /// `-Reset` and `RateLimit-Policy: <limit>;w=<window>`.
    Draft6,
    None,
}

/// What `X-RateLimit-Reset` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegacyReset {
    /// Seconds from now.
    Seconds,
    /// The Unix time in seconds at which it resets (go-zoox, GitHub).
    Unix,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenyBody {
    /// RFC 9457 `application/problem+json`.
    Problem,
    /// The deny message, with `content_type` (default `text/plain`).
    Text,
    /// `json`, sent as given, as `application/json`.
    Json,
}

/// The response to a denied request (`deny`), or to one refused by
/// `fail: closed` (`fail_deny`): docs/http.md, Refusals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deny {
    pub status: StatusCode,
    pub body: DenyBody,
    pub message: String,
    /// The `text` body's Content-Type.
    pub content_type: String,
    /// The `json` body.
    pub json: Option<Value>,
    /// Extra headers sent on this refusal, in the configuration's order.
    pub headers: Vec<(String, String)>,
}

/// A route's `deny`: each field it gives replaces the top-level one for
/// that route's denials (its `headers` replace `deny.headers` whole).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteDeny {
    pub status: Option<StatusCode>,
    pub body: Option<DenyBody>,
    pub message: Option<String>,
    pub content_type: Option<String>,
    pub json: Option<Value>,
    pub headers: Option<Vec<(String, String)>>,
}

impl Deny {
    /// This refusal with a route's fields over it.
    pub fn merged(&self, route: &RouteDeny) -> Deny {
        Deny {
            status: route.status.unwrap_or(self.status),
            body: route.body.unwrap_or(self.body),
            message: route
                .message
                .clone()
                .unwrap_or_else(|| self.message.clone()),
            content_type: route
                .content_type
                .clone()
                .unwrap_or_else(|| self.content_type.clone()),
            json: route.json.clone().or_else(|| self.json.clone()),
            headers: route
                .headers
                .clone()
                .unwrap_or_else(|| self.headers.clone()),
        }
    }
}

/// Policies for the paths under `path` (whole segments, compared as
/// canonical paths: docs/http.md, Routes), for `methods` (None: every
/// method).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub path: String,
    pub methods: Option<Vec<Method>>,
    pub policies: Vec<String>,
    /// This route's denials (None: `deny`'s).
    pub deny: Option<RouteDeny>,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// Put before every key the middleware writes.
    pub prefix: String,
    pub mode: Mode,
    /// `mode: code:<name>`: the mode resolver of this name gives each
    /// request's mode (`mode` is then unused).
    pub mode_resolver: Option<String>,
    pub fail: FailMode,
    /// The Redis budget of one request's check.
    pub timeout: Duration,
    pub headers: HeaderMode,
    pub legacy_reset: LegacyReset,
    /// Peers whose `X-Forwarded-For` and `X-Real-IP` are believed.
    pub trusted_proxies: Vec<IpNet>,
    /// Clients no policy limits (docs/http.md, Exemptions).
    pub exempt: Vec<IpNet>,
    /// Adds `127.0.0.0/8` and `::1/128` to `exempt`.
    pub exempt_loopback: bool,
    /// An IPv6 client's `ip` subject is its network of this many bits.
    pub ipv6_prefix: u8,
    pub api_key_header: HeaderName,
    /// Named identities, each its sources in order (docs/http.md, Named
    /// identities); `api-key` or `user` here redefines the built-in one.
    pub identities: Vec<(String, Vec<Source>)>,
    /// The largest body a `body-bytes` policy accepts; larger: 413.
    pub max_body_bytes: u64,
    /// The most limiter keys the `local` fail mode holds.
    pub local_max_keys: usize,
    pub deny: Deny,
    /// The refusal of `fail: closed`.
    pub fail_deny: Deny,
    pub policies: Vec<Policy>,
    /// Empty: every policy applies to every request.
    pub routes: Vec<Route>,
}

/// A configuration refused at start-up: `path` names the field
/// (`policies[0].burst`, `routes[1].policies[0]`, `timeout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "librl: configuration: {}: {}", self.path, self.message)
    }
}

impl std::error::Error for ConfigError {}

type Result<T> = std::result::Result<T, ConfigError>;

/// The cross-field rules the schema's description lists, each checked
/// below where its name is written; `fail-local-where-supported` refuses
/// nothing here, Rust having the `local` fail mode.
#[cfg(test)]
const CROSS_FIELD: &[&str] = &[
    "aligned-only-on-fixed",
    "burst-only-on-token",
    "code-limit-alone",
    "concurrency-has-lease",
    "deny-headers-are-extra",
    "deny-json-with-json-body",
    "exempt-are-networks",
    "fail-local-where-supported",
    "identity-names-not-reserved",
    "ip-source-last",
    "keys-name-identities",
    "policy-names-unique",
    "queue-only-on-token",
    "rate-or-limit-and-window",
    "resolvers-registered",
    "routes-name-defined-policies",
    "trusted-proxies-are-networks",
];

/// A configuration ready to serve: its policies with the module's numbers.
pub(crate) struct Validated {
    pub policies: Vec<ValidPolicy>,
}

impl Default for Config {
    /// The schema's defaults, with no policies.
    fn default() -> Config {
        Config::from_value(&json!({"policies": []}))
            .unwrap_or_else(|e| panic!("librl-tower: the schema's defaults are refused: {e}"))
    }
}

impl Default for Deny {
    /// `deny`'s defaults (a 429 problem).
    fn default() -> Deny {
        Config::default().deny
    }
}

impl Config {
    /// Reads a file, YAML or JSON (JSON is YAML), with its `${VAR}` and
    /// `${VAR:-default}` replaced from the environment first.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Config> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new("(file)", format!("cannot read {}: {e}", path.display()))
        })?;
        let text = crate::substitution::substitute(&text, |name| std::env::var(name).ok())?;
        Config::from_yaml(&text).map_err(|e| match e.path.as_str() {
            "(document)" if e.message.starts_with("not YAML") => {
                ConfigError::new("(file)", format!("{} is {}", path.display(), e.message))
            }
            _ => e,
        })
    }

    pub fn from_yaml(text: &str) -> Result<Config> {
        let yaml: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| ConfigError::new("(document)", format!("not YAML or JSON: {e}")))?;
        let value = serde_json::to_value(yaml)
            .map_err(|e| ConfigError::new("(document)", format!("not YAML or JSON: {e}")))?;
        Config::from_value(&value)
    }

    pub fn from_json(text: &str) -> Result<Config> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| ConfigError::new("(document)", format!("not JSON: {e}")))?;
        Config::from_value(&value)
    }

    /// The document as a JSON value (what serde gives for any format).
    pub fn from_value(value: &Value) -> Result<Config> {
        read_config(&walk_document(value)?)
    }

    /// This configuration as a document (the JSON form docs/http.md
    /// describes), which [`Config::from_value`] reads back.
    pub fn to_value(&self) -> Value {
        let mut doc = Map::new();
        doc.insert("prefix".into(), json!(self.prefix));
        let mode = match &self.mode_resolver {
            Some(name) => format!("code:{name}"),
            None => self.mode.name().to_string(),
        };
        doc.insert("mode".into(), json!(mode));
        doc.insert("fail".into(), json!(self.fail.name()));
        doc.insert("timeout".into(), duration_text(self.timeout));
        doc.insert("headers".into(), json!(self.headers.name()));
        doc.insert("legacy_reset".into(), json!(self.legacy_reset.name()));
        let proxies: Vec<String> = self.trusted_proxies.iter().map(IpNet::to_string).collect();
        doc.insert("trusted_proxies".into(), json!(proxies));
        let exempt: Vec<String> = self.exempt.iter().map(IpNet::to_string).collect();
        doc.insert("exempt".into(), json!(exempt));
        doc.insert("exempt_loopback".into(), json!(self.exempt_loopback));
        doc.insert("ipv6_prefix".into(), json!(self.ipv6_prefix));
        doc.insert("api_key_header".into(), json!(self.api_key_header.as_str()));
        if !self.identities.is_empty() {
            let identities: Map<String, Value> = self
                .identities
                .iter()
                .map(|(name, sources)| {
                    let sources: Vec<String> = sources.iter().map(Source::to_config).collect();
                    (name.clone(), json!(sources))
                })
                .collect();
            doc.insert("identities".into(), Value::Object(identities));
        }
        doc.insert("max_body_bytes".into(), json!(self.max_body_bytes));
        doc.insert("local_max_keys".into(), json!(self.local_max_keys as u64));
        doc.insert("deny".into(), deny_document(&self.deny));
        doc.insert("fail_deny".into(), deny_document(&self.fail_deny));
        let policies: Vec<Value> = self.policies.iter().map(policy_document).collect();
        doc.insert("policies".into(), Value::Array(policies));
        let routes: Vec<Value> = self.routes.iter().map(route_document).collect();
        doc.insert("routes".into(), Value::Array(routes));
        Value::Object(doc)
    }

    /// Every check of docs/http.md, Start-up validation, with the messages
    /// a document gets, with no resolver registered (the builder's
    /// `build` checks `code:<name>` against the ones it was given).
    pub fn validate(&self) -> Result<()> {
        self.validated(&Resolvers::default()).map(|_| ())
    }

    pub(crate) fn validated(&self, resolvers: &Resolvers) -> Result<Validated> {
        let read = Config::from_value(&self.to_value())?;
        // resolvers-registered
        if let Some(name) = &read.mode_resolver {
            if !resolvers.mode.contains_key(name) {
                return Err(ConfigError::new(
                    "mode",
                    format!("no mode resolver is registered as \"{name}\""),
                ));
            }
        }
        let mut policies = valid_policies(&read.policies, "policies", &read.identities, resolvers)?;
        whole_shadow(read.mode, &mut policies);
        Ok(Validated { policies })
    }
}

/// With the top-level `mode: shadow` every policy is checked exactly as
/// enforce would check it (docs/http.md, Shadow mode): none is a shadow
/// policy of its own.
pub(crate) fn whole_shadow(mode: Mode, policies: &mut [ValidPolicy]) {
    if mode == Mode::Shadow {
        for p in policies {
            p.shadow = false;
        }
    }
}

/// Policies built in code for one layer, checked as a document's are,
/// at `<list>[i]` (`layer[0].limit`).
pub(crate) fn validate_policies(
    policies: &[Policy],
    list: &str,
    identities: &[(String, Vec<Source>)],
    resolvers: &Resolvers,
) -> Result<Vec<ValidPolicy>> {
    let mut read = Vec::with_capacity(policies.len());
    for (i, policy) in policies.iter().enumerate() {
        let path = format!("{list}[{i}]");
        let walked = walk_object_at(&path, &policy_document(policy), "policy")?;
        let policy = read_policy(&walked)?;
        unique_name(&read, &policy, &walked)?;
        key_names_identity(&policy, identities, &walked)?;
        read.push(policy);
    }
    valid_policies(&read, list, identities, resolvers)
}

/// keys-name-identities: a key that is a name is `ip`, `global`,
/// `api-key`, `user` or one of `identities`.
fn key_names_identity(
    policy: &Policy,
    identities: &[(String, Vec<Source>)],
    walked: &WalkedObject,
) -> Result<()> {
    match &policy.key {
        KeyKind::Identity(name) if !identities.iter().any(|(n, _)| n == name) => {
            Err(ConfigError::new(
                walked.path("key"),
                format!("no identity is named \"{name}\""),
            ))
        }
        _ => Ok(()),
    }
}

/// `identities`: names not reserved (identity-names-not-reserved), each
/// source read, `ip` only last (ip-source-last).
fn read_identities(top: &WalkedObject) -> Result<Vec<(String, Vec<Source>)>> {
    let mut identities = Vec::new();
    for (name, sources) in top.map("identities")?.unwrap_or_default() {
        let at = format!("{}.{name}", top.path("identities"));
        if name == "ip" || name == "global" {
            return Err(ConfigError::new(at, "ip and global are reserved"));
        }
        let Walked::List(items) = sources else {
            return Err(top.out_of_step("identities"));
        };
        let mut read: Vec<Source> = Vec::with_capacity(items.len());
        for (j, item) in items.iter().enumerate() {
            let path = format!("{at}[{j}]");
            if read.last() == Some(&Source::Ip) {
                return Err(ConfigError::new(path, "a source after ip is never read"));
            }
            let source = item
                .as_text()
                .and_then(Source::from_config)
                .ok_or_else(|| {
                    ConfigError::new(
                    &path,
                    "must be user, ip, or header:, cookie:, query: or authorization: and a name",
                )
                })?;
            read.push(source);
        }
        identities.push((name.clone(), read));
    }
    Ok(identities)
}

fn valid_policies(
    policies: &[Policy],
    list: &str,
    identities: &[(String, Vec<Source>)],
    resolvers: &Resolvers,
) -> Result<Vec<ValidPolicy>> {
    policies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            // resolvers-registered
            let unregistered = |field: &str, kind: &str, name: &str| {
                ConfigError::new(
                    format!("{list}[{i}].{field}"),
                    format!("no {kind} resolver is registered as \"{name}\""),
                )
            };
            if let Cost::Code(name) = &p.cost {
                if !resolvers.cost.contains_key(name) {
                    return Err(unregistered("cost", "cost", name));
                }
            }
            if let Some(name) = &p.limit_resolver {
                if !resolvers.limit.contains_key(name) {
                    return Err(unregistered("limit", "limit", name));
                }
            }
            ValidPolicy::new(p, identities, resolvers).ok_or_else(|| {
                ConfigError::new(
                    format!("{list}[{i}]"),
                    "a number the walker accepted is out of the module's range (a bug in librl-tower)",
                )
            })
        })
        .collect()
}

fn read_config(top: &WalkedObject) -> Result<Config> {
    let text = |name: &str| -> Result<&str> { top.required(name, top.text(name)?) };
    let mode = text("mode")?;
    let mode_resolver = mode.strip_prefix("code:").map(String::from);
    let mode = if mode_resolver.is_some() {
        "enforce"
    } else {
        mode
    };
    let fail = text("fail")?;
    let headers = text("headers")?;
    // trusted-proxies-are-networks, exempt-are-networks: the pattern only
    // bounds characters.
    let networks = |field: &str| -> Result<Vec<IpNet>> {
        let mut nets = Vec::new();
        for (i, item) in top.list(field)?.iter().enumerate() {
            let net = item.as_text().and_then(parse_network).ok_or_else(|| {
                ConfigError::new(
                    format!("{}[{i}]", top.path(field)),
                    "must be an IP address or a CIDR network",
                )
            })?;
            nets.push(net);
        }
        Ok(nets)
    };
    let trusted_proxies = networks("trusted_proxies")?;
    let exempt = networks("exempt")?;
    let legacy_reset = text("legacy_reset")?;
    let api_key_header = text("api_key_header")?;
    let deny = read_deny(top.required("deny", top.object("deny")?)?)?;
    let fail_deny = read_deny(top.required("fail_deny", top.object("fail_deny")?)?)?;
    let identities = read_identities(top)?;
    let mut policies: Vec<Policy> = Vec::new();
    for item in top.list("policies")? {
        let walked = top.required("policies", item.as_object())?;
        let policy = read_policy(walked)?;
        unique_name(&policies, &policy, walked)?;
        key_names_identity(&policy, &identities, walked)?;
        policies.push(policy);
    }
    let mut routes = Vec::new();
    for item in top.list("routes")? {
        let walked = top.required("routes", item.as_object())?;
        routes.push(read_route(walked, &policies, &deny)?);
    }
    Ok(Config {
        prefix: text("prefix")?.to_string(),
        mode: top.required("mode", Mode::from_name(mode))?,
        mode_resolver,
        fail: top.required("fail", FailMode::from_name(fail))?,
        timeout: Duration::from_millis(top.required("timeout", top.ms("timeout")?)?),
        headers: top.required("headers", HeaderMode::from_name(headers))?,
        legacy_reset: top.required("legacy_reset", LegacyReset::from_name(legacy_reset))?,
        trusted_proxies,
        exempt,
        exempt_loopback: top.required("exempt_loopback", top.boolean("exempt_loopback")?)?,
        ipv6_prefix: top.required(
            "ipv6_prefix",
            top.integer("ipv6_prefix")?
                .and_then(|n| u8::try_from(n).ok()),
        )?,
        api_key_header: top.required(
            "api_key_header",
            HeaderName::from_bytes(api_key_header.as_bytes()).ok(),
        )?,
        identities,
        max_body_bytes: top.required("max_body_bytes", top.integer("max_body_bytes")?)?,
        local_max_keys: usize::try_from(
            top.required("local_max_keys", top.integer("local_max_keys")?)?,
        )
        .unwrap_or(usize::MAX),
        deny,
        fail_deny,
        policies,
        routes,
    })
}

/// `deny` or `fail_deny` (the walker gave every default).
fn read_deny(d: &WalkedObject) -> Result<Deny> {
    let read = read_route_deny(d)?;
    let deny = Deny {
        status: d.required("status", read.status)?,
        body: d.required("body", read.body)?,
        message: d.required("message", read.message)?,
        content_type: d.required("content_type", read.content_type)?,
        json: read.json,
        headers: read.headers.unwrap_or_default(),
    };
    json_with_json_body(d, deny.body, deny.json.is_some(), deny.json.is_some())?;
    Ok(deny)
}

/// A refusal object's fields as given (a route's has no defaults), with
/// deny-headers-are-extra.
pub(crate) fn read_route_deny(d: &WalkedObject) -> Result<RouteDeny> {
    let status = match d.integer("status")? {
        Some(n) => Some(
            d.required(
                "status",
                u16::try_from(n)
                    .ok()
                    .and_then(|s| StatusCode::from_u16(s).ok()),
            )?,
        ),
        None => None,
    };
    let body = match d.text("body")? {
        Some(body) => Some(d.required("body", DenyBody::from_name(body))?),
        None => None,
    };
    let headers = match d.map("headers")? {
        Some(entries) => {
            let mut headers: Vec<(String, String)> = Vec::with_capacity(entries.len());
            for (name, value) in entries {
                let at = format!("{}.{name}", d.path("headers"));
                // deny-headers-are-extra
                if SET_BY_LIBRL.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                    return Err(ConfigError::new(
                        at,
                        "the integration sets this header itself",
                    ));
                }
                if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    return Err(ConfigError::new(at, format!("\"{name}\" is given twice")));
                }
                let value = d.required("headers", value.as_text())?;
                headers.push((name.clone(), value.to_string()));
            }
            Some(headers)
        }
        None => None,
    };
    Ok(RouteDeny {
        status,
        body,
        message: d.text("message")?.map(String::from),
        content_type: d.text("content_type")?.map(String::from),
        json: d.json("json")?.cloned(),
        headers,
    })
}

/// The headers a refusal carries that the integration writes itself.
const SET_BY_LIBRL: &[&str] = &[
    "RateLimit",
    "RateLimit-Policy",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "Retry-After",
    "Content-Type",
    "Content-Length",
];

/// deny-json-with-json-body: `body: json` needs a `json` (`has_json`:
/// given here or inherited); a `json` given here needs `body: json`.
fn json_with_json_body(
    d: &WalkedObject,
    body: DenyBody,
    has_json: bool,
    gives_json: bool,
) -> Result<()> {
    match body {
        DenyBody::Json if !has_json => Err(ConfigError::new(
            d.path("json"),
            "missing (body: json sends it)",
        )),
        DenyBody::Problem | DenyBody::Text if gives_json => Err(ConfigError::new(
            d.path("json"),
            "json is sent only with body: json",
        )),
        _ => Ok(()),
    }
}

/// A refusal as a document's object: every field of `deny`.
fn deny_document(d: &Deny) -> Value {
    route_deny_document(&RouteDeny {
        status: Some(d.status),
        body: Some(d.body),
        message: Some(d.message.clone()),
        content_type: Some(d.content_type.clone()),
        json: d.json.clone(),
        headers: (!d.headers.is_empty()).then(|| d.headers.clone()),
    })
}

/// A route's refusal as a document's object: the fields it gives.
fn route_deny_document(d: &RouteDeny) -> Value {
    let mut doc = Map::new();
    if let Some(status) = d.status {
        doc.insert("status".into(), json!(status.as_u16()));
    }
    if let Some(body) = d.body {
        doc.insert("body".into(), json!(body.name()));
    }
    if let Some(message) = &d.message {
        doc.insert("message".into(), json!(message));
    }
    if let Some(content_type) = &d.content_type {
        doc.insert("content_type".into(), json!(content_type));
    }
    if let Some(json) = &d.json {
        doc.insert("json".into(), json.clone());
    }
    if let Some(headers) = &d.headers {
        let map: Map<String, Value> = headers.iter().map(|(n, v)| (n.clone(), json!(v))).collect();
        doc.insert("headers".into(), Value::Object(map));
    }
    Value::Object(doc)
}

/// A policy, with the cross-field rules within one policy, in the order
/// conformance/README.md's table gives them.
fn read_policy(p: &WalkedObject) -> Result<Policy> {
    let name = p.required("name", p.text("name")?)?;
    let algorithm = p.required("algorithm", p.text("algorithm")?)?;
    let mut algorithm = p.required("algorithm", Algorithm::from_name(algorithm))?;
    let concurrency = algorithm == Algorithm::Concurrency;
    let limit_resolver = match p.value("limit") {
        Some(Walked::Text(text)) => Some(code_limit_alone(p, text, concurrency)?),
        _ => None,
    };
    let rate_limit = if concurrency {
        None
    } else if limit_resolver.is_some() {
        // Each request's own, from the resolver; these are never sent.
        Some((1, 1000))
    } else {
        Some(rate_limit_and_window(p)?)
    };
    // aligned-only-on-fixed
    if p.boolean("aligned")? == Some(true) {
        match &mut algorithm {
            Algorithm::Fixed { aligned } => *aligned = true,
            other => {
                return Err(ConfigError::new(
                    p.path("aligned"),
                    format!("aligned is for fixed policies, not {}", other.name()),
                ))
            }
        }
    }
    // burst-only-on-token
    if let Some(capacity) = p.integer("burst")? {
        match &mut algorithm {
            Algorithm::Token { burst } => *burst = Some(capacity),
            other => {
                return Err(ConfigError::new(
                    p.path("burst"),
                    format!("burst is for token policies, not {}", other.name()),
                ))
            }
        }
    }
    // queue-only-on-token
    let queue = p.ms("queue")?.map(Duration::from_millis);
    if queue.is_some() && !matches!(algorithm, Algorithm::Token { .. }) {
        return Err(ConfigError::new(
            p.path("queue"),
            format!("queue is for token policies, not {}", algorithm.name()),
        ));
    }
    // concurrency-has-lease
    let (limit, window_ms) = match rate_limit {
        Some(_) if p.has("lease") => {
            return Err(ConfigError::new(
                p.path("lease"),
                format!(
                    "lease is for concurrency policies, not {}",
                    algorithm.name()
                ),
            ))
        }
        Some(rate_limit) => rate_limit,
        None => concurrency_limit_and_lease(p)?,
    };
    let key = p.required("key", p.text("key")?)?;
    let count = p.required(
        "count",
        Count::from_name(p.required("count", p.text("count")?)?),
    )?;
    if concurrency && count != Count::All {
        return Err(ConfigError::new(
            p.path("count"),
            "must be all on a concurrency policy (its slots are freed when the response is finished)",
        ));
    }
    let cost = match p.value("cost") {
        Some(Walked::Integer(n)) => Cost::Units(*n),
        Some(Walked::Text(text)) if text == "body-bytes" => Cost::BodyBytes,
        Some(Walked::Text(text)) => match text.strip_prefix("code:") {
            Some(name) => Cost::Code(name.to_string()),
            None => Cost::Header(
                p.required("cost", text.strip_prefix("header:"))?
                    .to_string(),
            ),
        },
        _ => return Err(p.out_of_step("cost")),
    };
    Ok(Policy {
        name: name.to_string(),
        algorithm,
        limit,
        window: Duration::from_millis(window_ms),
        key: p.required("key", KeyKind::from_config(key))?,
        cost,
        count,
        overridable: p.required("overridable", p.boolean("overridable")?)?,
        mode: match p.text("mode")? {
            Some(mode) => Some(p.required("mode", Mode::from_name(mode))?),
            None => None,
        },
        limit_resolver,
        block: p.ms("block")?.map(Duration::from_millis),
        queue,
    })
}

/// code-limit-alone: `limit: code:<name>` without window, rate, burst or
/// overridable (the first given, in that order); its resolver's name.
fn code_limit_alone(p: &WalkedObject, text: &str, concurrency: bool) -> Result<String> {
    let name = p.required("limit", text.strip_prefix("code:"))?;
    if concurrency {
        return Err(ConfigError::new(
            p.path("limit"),
            "a concurrency policy's limit is an integer (its slots), not code:<name>",
        ));
    }
    let given = |field: &str| match field {
        "overridable" => p.boolean(field).ok().flatten() == Some(true),
        _ => p.has(field),
    };
    if let Some(field) = ["window", "rate", "burst", "overridable"]
        .into_iter()
        .find(|f| given(f))
    {
        return Err(ConfigError::new(
            p.path(field),
            format!("a policy whose limit is {text} has no {field}"),
        ));
    }
    Ok(name.to_string())
}

/// rate-or-limit-and-window: a rate policy's units and window in ms.
fn rate_limit_and_window(p: &WalkedObject) -> Result<(u64, u64)> {
    match p.rate("rate")? {
        Some(_) if p.has("limit") || p.has("window") => Err(ConfigError::new(
            p.path("rate"),
            "give rate, or limit and window, not both",
        )),
        Some(rate) => Ok(rate),
        None => {
            let missing = |field: &str| {
                ConfigError::new(p.path(field), "missing (give limit and window, or rate)")
            };
            let limit = p.integer("limit")?.ok_or_else(|| missing("limit"))?;
            let window = p.ms("window")?.ok_or_else(|| missing("window"))?;
            Ok((limit, window))
        }
    }
}

/// concurrency-has-lease: a concurrency policy has limit and lease, and
/// no window or rate. Its slots and lease in ms.
fn concurrency_limit_and_lease(p: &WalkedObject) -> Result<(u64, u64)> {
    for field in ["window", "rate", "block"] {
        if p.has(field) {
            return Err(ConfigError::new(
                p.path(field),
                format!("a concurrency policy has no {field}; give limit and lease"),
            ));
        }
    }
    let missing = |field: &str| {
        ConfigError::new(
            p.path(field),
            "missing (a concurrency policy gives limit and lease)",
        )
    };
    let limit = p.integer("limit")?.ok_or_else(|| missing("limit"))?;
    let lease = p.ms("lease")?.ok_or_else(|| missing("lease"))?;
    Ok((limit, lease))
}

/// policy-names-unique
fn unique_name(earlier: &[Policy], policy: &Policy, walked: &WalkedObject) -> Result<()> {
    if earlier.iter().any(|p| p.name == policy.name) {
        return Err(ConfigError::new(
            walked.path("name"),
            format!("\"{}\" is used by an earlier policy", policy.name),
        ));
    }
    Ok(())
}

fn read_route(r: &WalkedObject, policies: &[Policy], top: &Deny) -> Result<Route> {
    let path = r.required("path", r.text("path")?)?;
    let methods = if r.has("methods") {
        let mut methods = Vec::new();
        for item in r.list("methods")? {
            let method = item
                .as_text()
                .and_then(|m| Method::from_bytes(m.as_bytes()).ok());
            methods.push(r.required("methods", method)?);
        }
        Some(methods)
    } else {
        None
    };
    let mut names = Vec::new();
    for (j, item) in r.list("policies")?.iter().enumerate() {
        let name = r.required("policies", item.as_text())?;
        // routes-name-defined-policies
        if !policies.iter().any(|p| p.name == name) {
            return Err(ConfigError::new(
                format!("{}[{j}]", r.path("policies")),
                format!("no policy is named \"{name}\""),
            ));
        }
        names.push(name.to_string());
    }
    let deny = match r.object("deny")? {
        Some(d) => {
            let read = read_route_deny(d)?;
            let merged = top.merged(&read);
            json_with_json_body(d, merged.body, merged.json.is_some(), read.json.is_some())?;
            Some(read)
        }
        None => None,
    };
    Ok(Route {
        path: path.to_string(),
        methods,
        policies: names,
        deny,
    })
}

/// `10.0.0.0/8`, `127.0.0.1` (a one-host network), `::1`; no zone index.
pub(crate) fn parse_network(text: &str) -> Option<IpNet> {
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<IpAddr>().ok().map(IpNet::from))
}

/// A policy as a document's policy object.
fn policy_document(p: &Policy) -> Value {
    let mut doc = Map::new();
    doc.insert("name".into(), json!(p.name));
    doc.insert("algorithm".into(), json!(p.algorithm.name()));
    let period = match p.algorithm {
        Algorithm::Concurrency => "lease",
        _ => "window",
    };
    match &p.limit_resolver {
        Some(name) => {
            doc.insert("limit".into(), json!(format!("code:{name}")));
        }
        None => {
            doc.insert("limit".into(), json!(p.limit));
            doc.insert(period.into(), duration_text(p.window));
        }
    }
    match p.algorithm {
        Algorithm::Fixed { aligned } => {
            doc.insert("aligned".into(), json!(aligned));
        }
        Algorithm::Token { burst: Some(b) } if p.limit_resolver.is_none() => {
            doc.insert("burst".into(), json!(b));
        }
        Algorithm::Token { .. }
        | Algorithm::Sliding
        | Algorithm::Approx
        | Algorithm::Concurrency => {}
    }
    doc.insert("key".into(), json!(p.key.to_config()));
    let cost = match &p.cost {
        Cost::Units(n) => json!(n),
        Cost::BodyBytes => json!("body-bytes"),
        Cost::Header(name) => json!(format!("header:{name}")),
        Cost::Code(name) => json!(format!("code:{name}")),
    };
    doc.insert("cost".into(), cost);
    doc.insert("count".into(), json!(p.count.name()));
    if p.limit_resolver.is_none() || p.overridable {
        doc.insert("overridable".into(), json!(p.overridable));
    }
    if let Some(mode) = p.mode {
        doc.insert("mode".into(), json!(mode.name()));
    }
    if let Some(block) = p.block {
        doc.insert("block".into(), duration_text(block));
    }
    if let Some(queue) = p.queue {
        doc.insert("queue".into(), duration_text(queue));
    }
    Value::Object(doc)
}

fn route_document(r: &Route) -> Value {
    let mut doc = Map::new();
    doc.insert("path".into(), json!(r.path));
    if let Some(methods) = &r.methods {
        let methods: Vec<&str> = methods.iter().map(Method::as_str).collect();
        doc.insert("methods".into(), json!(methods));
    }
    doc.insert("policies".into(), json!(r.policies));
    if let Some(deny) = &r.deny {
        doc.insert("deny".into(), route_deny_document(deny));
    }
    Value::Object(doc)
}

/// A duration as the grammar writes it: whole milliseconds, else
/// nanoseconds, a unit the grammar does not have, so that a duration the
/// module cannot take is refused as a document's would be.
fn duration_text(d: Duration) -> Value {
    if d.subsec_nanos().is_multiple_of(1_000_000) {
        json!(format!("{}ms", d.as_millis()))
    } else {
        json!(format!("{}ns", d.as_nanos()))
    }
}

macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The configuration's name of this value.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            /// Reads a value the walker has checked against the schema's enum.
            pub(crate) fn from_name(name: &str) -> Option<$ty> {
                match name {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

names!(Mode { Enforce => "enforce", Shadow => "shadow" });
names!(FailMode { Open => "open", Closed => "closed", Local => "local" });
names!(HeaderMode { Both => "both", Ietf => "ietf", Legacy => "legacy", Draft6 => "draft6", None => "none" });
names!(LegacyReset { Seconds => "seconds", Unix => "unix" });
names!(DenyBody { Problem => "problem", Text => "text", Json => "json" });

/// Serde support: a `Config` inside an application's own settings is read
/// and checked exactly as a file is.
impl<'de> serde::Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Config, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Config::from_value(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::OBJECTS;

    #[test]
    fn reads_the_sample_file() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../conformance/examples/policies.yaml"
        );
        let c = Config::from_file(path).unwrap();
        assert_eq!(c.policies.len(), 4);
        assert_eq!(c.routes.len(), 4);
        assert_eq!(c.policies[1].limit, 30);
        assert_eq!(c.policies[1].window, Duration::from_secs(60));
        assert_eq!(
            c.policies[2].algorithm,
            Algorithm::Token {
                burst: Some(2_097_152)
            }
        );
        assert_eq!(c.routes[0].methods, Some(vec![Method::POST, Method::PUT]));
        c.validate().unwrap();
    }

    #[test]
    fn files_that_cannot_be_read_are_named() {
        let err = Config::from_file("/nonexistent/policies.yaml").unwrap_err();
        assert_eq!(err.path, "(file)");
        assert!(err.message.contains("/nonexistent/policies.yaml"), "{err}");
        let err = Config::from_yaml("policies: [").unwrap_err();
        assert_eq!(err.path, "(document)");
        assert!(err
            .to_string()
            .starts_with("librl: configuration: (document): not YAML"));
    }

    #[test]
    fn yaml_reads_as_json_does() {
        let c = Config::from_yaml(
            "timeout: 1S\npolicies:\n  - {name: p, algorithm: fixed, rate: 5 per Minute, cost: 2.0}\n",
        )
        .unwrap();
        assert_eq!(c.timeout, Duration::from_secs(1));
        assert_eq!(c.policies[0].window, Duration::from_secs(60));
        assert_eq!(c.policies[0].cost, Cost::Units(2));
        let err = Config::from_yaml("timeout:\npolicies: []\n").unwrap_err();
        assert_eq!(err.path, "timeout", "an empty YAML value is null, refused");
    }

    #[test]
    fn defaults_are_the_schemas() {
        let c = Config::default();
        assert_eq!(c.prefix, "rl:");
        assert_eq!(c.timeout, Duration::from_millis(250));
        assert!(!c.exempt_loopback);
        assert_eq!(c.deny.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(c.deny.message, "Too Many Requests");
        // Policy::new's defaults are the schema's too.
        let walked = read_config(
            &walk_document(
                &json!({"policies": [{"name": "p", "algorithm": "fixed", "limit": 1, "window": 1}]}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            walked.policies[0],
            Policy::fixed("p", 1, Duration::from_secs(1))
        );
    }

    #[test]
    fn every_cross_field_rule_of_the_schema_is_checked() {
        let mut rules: Vec<&str> = crate::schema::RULES.iter().map(|(name, _)| *name).collect();
        rules.sort_unstable();
        assert_eq!(rules, CROSS_FIELD);
    }

    #[test]
    fn every_choice_of_the_schema_has_a_value() {
        let field = |object: &str, name: &str| {
            OBJECTS
                .iter()
                .find(|o| o.name == object)
                .and_then(|o| o.fields.iter().find(|f| f.name == name))
                .unwrap()
                .choices
        };
        for c in field("config", "mode") {
            assert_eq!(Mode::from_name(c).map(Mode::name), Some(*c));
        }
        for c in field("config", "fail") {
            assert_eq!(FailMode::from_name(c).map(FailMode::name), Some(*c));
        }
        for c in field("config", "headers") {
            assert_eq!(HeaderMode::from_name(c).map(HeaderMode::name), Some(*c));
        }
        for c in field("config", "legacy_reset") {
            assert_eq!(LegacyReset::from_name(c).map(LegacyReset::name), Some(*c));
        }
        for c in field("policy", "mode") {
            assert_eq!(Mode::from_name(c).map(Mode::name), Some(*c));
        }
        for c in field("deny", "body") {
            assert_eq!(DenyBody::from_name(c).map(DenyBody::name), Some(*c));
        }
        for c in field("policy", "algorithm") {
            if *c == "concurrency" {
                continue; // refused at start-up until implemented (conformance/pending.json)
            }
            assert_eq!(Algorithm::from_name(c).map(|a| a.name()), Some(*c));
        }
        for c in field("policy", "count") {
            assert_eq!(Count::from_name(c).map(Count::name), Some(*c));
        }
    }

    #[test]
    fn a_config_built_in_code_meets_the_documents_rules() {
        let bad = |c: Config| c.validate().unwrap_err().to_string();
        let with = |p: Policy| Config {
            policies: vec![p],
            ..Config::default()
        };
        let s = Duration::from_secs;
        assert_eq!(
            bad(with(Policy::fixed("a", 0, s(1)))),
            "librl: configuration: policies[0].limit: must be an integer from 1 to 1125899906842624 or code:<name>"
        );
        assert!(
            bad(with(Policy::fixed("a", 1, Duration::from_micros(1500))))
                .starts_with("librl: configuration: policies[0].window: must be a duration")
        );
        assert!(bad(with(Policy::fixed("a b", 1, s(1)))).contains("policies[0].name"));
        assert!(bad(with(Policy::token("a", 1, s(1)).burst(0))).contains("policies[0].burst"));
        assert!(bad(with(
            Policy::fixed("a", 1, s(1)).cost(Cost::Header("X Cost".into()))
        ))
        .contains("policies[0].cost"));
        assert!(bad(Config {
            timeout: Duration::ZERO,
            ..Config::default()
        })
        .contains(": timeout: "));
        let empty = Route {
            path: "/".into(),
            methods: Some(vec![]),
            policies: vec![],
            deny: None,
        };
        assert_eq!(
            bad(Config {
                routes: vec![empty],
                ..Config::default()
            }),
            "librl: configuration: routes[0].methods: must not be empty"
        );
        let lower = Route {
            path: "/".into(),
            methods: Some(vec![Method::from_bytes(b"get").unwrap()]),
            policies: vec![],
            deny: None,
        };
        assert!(bad(Config {
            routes: vec![lower],
            ..Config::default()
        })
        .contains("routes[0].methods[0]"));
        let twice = vec![Policy::fixed("a", 1, s(1)), Policy::sliding("a", 2, s(1))];
        assert_eq!(
            validate_policies(&twice, "layer", &[], &Resolvers::default())
                .unwrap_err()
                .to_string(),
            "librl: configuration: layer[1].name: \"a\" is used by an earlier policy"
        );
        let ok = with(Policy::token("t", 5, Duration::from_millis(1500)).burst(9));
        let valid = ok.validated(&Resolvers::default()).unwrap();
        assert_eq!(valid.policies[0].window.ms(), 1500);
    }

    #[test]
    fn serde_reads_a_config_inside_other_settings() {
        #[derive(serde::Deserialize)]
        struct Settings {
            #[allow(dead_code)]
            rate_limits: Config,
        }
        let bad = json!({"rate_limits": {"policies": [{"name": "p", "algorithm": "fixed", "limit": 0, "window": 1}]}});
        let err = serde_json::from_value::<Settings>(bad)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("policies[0].limit"), "{err}");
    }
}
