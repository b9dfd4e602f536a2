//! Reads the configuration document (YAML or JSON; docs/http.md, One
//! configuration) into a [`Config`], refusing the first wrong field with
//! its path (`policies[0].burst`). Every field is read here by hand rather
//! than by serde's derive, so that every refusal names the field the way
//! the contract does, unknown fields included.

use std::path::Path;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode};
use serde_json::{Map, Value};

use crate::configuration::{
    parse_network, valid_prefix, Config, ConfigError, Deny, DenyBody, FailMode, HeaderMode, Mode,
    Route, MAX_TIMEOUT,
};
use crate::policy::{
    parse_duration, parse_rate, valid_name, Algorithm, Cost, Count, KeyKind, Policy, MAX_UNITS,
    MAX_WINDOW_MS,
};

type Result<T> = std::result::Result<T, ConfigError>;

impl Config {
    /// Reads a file, YAML or JSON (JSON is YAML).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Config> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new("", format!("{}: {e}", path.display())))?;
        Config::from_yaml(&text)
    }

    pub fn from_yaml(text: &str) -> Result<Config> {
        let yaml: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| ConfigError::new("", format!("not YAML or JSON: {e}")))?;
        let value = serde_json::to_value(yaml)
            .map_err(|e| ConfigError::new("", format!("not a configuration document: {e}")))?;
        Config::from_value(&value)
    }

    pub fn from_json(text: &str) -> Result<Config> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| ConfigError::new("", format!("not JSON: {e}")))?;
        Config::from_value(&value)
    }

    /// The document as a JSON value (what serde gives for any format).
    pub fn from_value(value: &Value) -> Result<Config> {
        let top = object(
            value,
            "",
            &[
                "prefix",
                "mode",
                "fail",
                "timeout",
                "headers",
                "trusted_proxies",
                "exempt_loopback",
                "api_key_header",
                "max_body_bytes",
                "local_max_keys",
                "deny",
                "policies",
                "routes",
            ],
        )?;
        let mut c = Config::default();
        let at = |key: &str| Field {
            map: top,
            path: key.to_string(),
            key: key.to_string(),
        };
        if let Some(prefix) = at("prefix").string()? {
            if !valid_prefix(prefix) {
                return Err(at("prefix").error(
                    "use at most 64 printable ASCII characters without '{', '}' or spaces",
                ));
            }
            c.prefix = prefix.to_string();
        }
        if let Some(mode) =
            at("mode").choice(&[("enforce", Mode::Enforce), ("shadow", Mode::Shadow)])?
        {
            c.mode = mode;
        }
        let fails = [
            ("open", FailMode::Open),
            ("closed", FailMode::Closed),
            ("local", FailMode::Local),
        ];
        if let Some(fail) = at("fail").choice(&fails)? {
            c.fail = fail;
        }
        if let Some(timeout) = at("timeout").duration()? {
            if timeout.is_zero() || timeout > MAX_TIMEOUT {
                return Err(at("timeout").error("use 1 ms to 60 s"));
            }
            c.timeout = timeout;
        }
        let headers = [
            ("both", HeaderMode::Both),
            ("ietf", HeaderMode::Ietf),
            ("legacy", HeaderMode::Legacy),
            ("none", HeaderMode::None),
        ];
        if let Some(headers) = at("headers").choice(&headers)? {
            c.headers = headers;
        }
        if let Some(list) = at("trusted_proxies").list()? {
            for (i, item) in list.iter().enumerate() {
                let path = format!("trusted_proxies[{i}]");
                let net = item.as_str().and_then(parse_network).ok_or_else(|| {
                    ConfigError::new(
                        &path,
                        format!("{item} is not an IP address or CIDR network"),
                    )
                })?;
                c.trusted_proxies.push(net);
            }
        }
        if let Some(flag) = at("exempt_loopback").boolean()? {
            c.exempt_loopback = flag;
        }
        if let Some(name) = at("api_key_header").header_name()? {
            c.api_key_header = name;
        }
        if let Some(n) = at("max_body_bytes").integer(1, MAX_UNITS)? {
            c.max_body_bytes = n;
        }
        if let Some(n) = at("local_max_keys").integer(1, 1 << 32)? {
            c.local_max_keys = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(deny) = top.get("deny") {
            c.deny = read_deny(deny)?;
        }
        let policies = at("policies").list()?.ok_or_else(|| {
            at("policies").error("missing: a configuration has a list of policies")
        })?;
        for (i, item) in policies.iter().enumerate() {
            let policy = read_policy(item, &format!("policies[{i}]"))?;
            if c.policies.iter().any(|p| p.name == policy.name) {
                return Err(ConfigError::new(
                    format!("policies[{i}].name"),
                    format!("{:?} is used by an earlier policy", policy.name),
                ));
            }
            c.policies.push(policy);
        }
        if let Some(routes) = at("routes").list()? {
            for (i, item) in routes.iter().enumerate() {
                c.routes
                    .push(read_route(item, &format!("routes[{i}]"), &c.policies)?);
            }
        }
        Ok(c)
    }
}

fn read_deny(value: &Value) -> Result<Deny> {
    let map = object(value, "deny", &["status", "body", "message"])?;
    let at = |key: &str| Field {
        map,
        path: format!("deny.{key}"),
        key: key.to_string(),
    };
    let mut deny = Deny::default();
    if let Some(status) = at("status").integer(400, 599)? {
        deny.status = u16::try_from(status)
            .ok()
            .and_then(|s| StatusCode::from_u16(s).ok())
            .ok_or_else(|| at("status").error("use 400 to 599"))?;
    }
    if let Some(body) =
        at("body").choice(&[("problem", DenyBody::Problem), ("text", DenyBody::Text)])?
    {
        deny.body = body;
    }
    if let Some(message) = at("message").string()? {
        if !(1..=1024).contains(&message.len()) {
            return Err(at("message").error("use 1 to 1024 bytes"));
        }
        deny.message = message.to_string();
    }
    Ok(deny)
}

fn read_policy(value: &Value, path: &str) -> Result<Policy> {
    let map = object(
        value,
        path,
        &[
            "name",
            "algorithm",
            "limit",
            "window",
            "rate",
            "aligned",
            "burst",
            "key",
            "cost",
            "count",
            "overridable",
        ],
    )?;
    let at = |key: &str| Field {
        map,
        path: format!("{path}.{key}"),
        key: key.to_string(),
    };
    let name = at("name")
        .string()?
        .ok_or_else(|| at("name").error("missing"))?;
    if !valid_name(name) {
        return Err(at("name").error(format!("{name:?}: use 1 to 64 of A-Z a-z 0-9 - _ .")));
    }
    let algorithms = [
        ("fixed", Algorithm::Fixed { aligned: false }),
        ("sliding", Algorithm::Sliding),
        ("approx", Algorithm::Approx),
        ("token", Algorithm::Token { burst: None }),
    ];
    let mut algorithm = at("algorithm")
        .choice(&algorithms)?
        .ok_or_else(|| at("algorithm").error("missing: use fixed, sliding, approx or token"))?;
    let (limit, window) = if map.contains_key("rate") {
        if map.contains_key("limit") || map.contains_key("window") {
            return Err(at("rate").error("give rate, or limit and window, not both"));
        }
        let text = at("rate").string()?.unwrap_or_default();
        parse_rate(text)
            .filter(|(limit, window)| (1..=MAX_UNITS).contains(limit) && window_ok(*window))
            .ok_or_else(|| at("rate").error(format!("{text:?}: use N/unit (s, second, m, minute, h, hour, d, day) or N/<duration>, N from 1 to 2^50")))?
    } else {
        let limit = at("limit")
            .integer(1, MAX_UNITS)?
            .ok_or_else(|| at("limit").error("missing: give limit and window, or rate"))?;
        let window = at("window")
            .duration()?
            .ok_or_else(|| at("window").error("missing: give limit and window, or rate"))?;
        if !window_ok(window) {
            return Err(at("window").error("use 1 ms to 3650 days"));
        }
        (limit, window)
    };
    if at("aligned").boolean()? == Some(true) {
        match &mut algorithm {
            Algorithm::Fixed { aligned } => *aligned = true,
            other => {
                return Err(
                    at("aligned").error(format!("aligned is for fixed policies, not {other}"))
                )
            }
        }
    }
    if let Some(capacity) = at("burst").integer(1, MAX_UNITS)? {
        match &mut algorithm {
            Algorithm::Token { burst } => *burst = Some(capacity),
            other => {
                return Err(at("burst").error(format!("burst is for token policies, not {other}")))
            }
        }
    }
    let mut policy = Policy::new(name, algorithm, limit, window);
    if let Some(text) = at("key").string()? {
        policy.key = match text {
            "ip" => KeyKind::Ip,
            "api-key" => KeyKind::ApiKey,
            "user" => KeyKind::User,
            "global" => KeyKind::Global,
            _ => KeyKind::Header(header_suffix(text).ok_or_else(|| {
                at("key").error(format!(
                    "{text:?}: use ip, api-key, user, global or header:<Name>"
                ))
            })?),
        };
    }
    if let Some(cost) = map.get("cost") {
        policy.cost = match cost {
            Value::Number(_) => Cost::Units(at("cost").integer(1, MAX_UNITS)?.unwrap_or(1)),
            Value::String(text) if text == "body-bytes" => Cost::BodyBytes,
            Value::String(text) => Cost::Header(header_suffix(text).ok_or_else(|| {
                at("cost").error(format!(
                    "{text:?}: use an integer, body-bytes or header:<Name>"
                ))
            })?),
            other => {
                return Err(at("cost").error(format!(
                    "{other}: use an integer, body-bytes or header:<Name>"
                )))
            }
        };
    }
    let counts = [
        ("all", Count::All),
        ("failed", Count::Failed),
        ("succeeded", Count::Succeeded),
    ];
    if let Some(count) = at("count").choice(&counts)? {
        policy.count = count;
    }
    if let Some(flag) = at("overridable").boolean()? {
        policy.overridable = flag;
    }
    Ok(policy)
}

fn read_route(value: &Value, path: &str, policies: &[Policy]) -> Result<Route> {
    let map = object(value, path, &["path", "methods", "policies"])?;
    let at = |key: &str| Field {
        map,
        path: format!("{path}.{key}"),
        key: key.to_string(),
    };
    let route_path = at("path")
        .string()?
        .ok_or_else(|| at("path").error("missing"))?;
    if !route_path.starts_with('/') {
        return Err(at("path").error(format!("{route_path:?} must start with '/'")));
    }
    let mut methods = None;
    if let Some(list) = at("methods").list()? {
        let mut parsed = Vec::new();
        for (j, item) in list.iter().enumerate() {
            let method = item
                .as_str()
                .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()))
                .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
                .ok_or_else(|| {
                    ConfigError::new(
                        format!("{path}.methods[{j}]"),
                        format!("{item}: use an upper-case method name"),
                    )
                })?;
            parsed.push(method);
        }
        methods = Some(parsed);
    }
    let list = at("policies")
        .list()?
        .ok_or_else(|| at("policies").error("missing (use [] to exempt a route)"))?;
    let mut names = Vec::new();
    for (j, item) in list.iter().enumerate() {
        let item_path = format!("{path}.policies[{j}]");
        let name = item
            .as_str()
            .ok_or_else(|| ConfigError::new(&item_path, format!("{item}: use a policy's name")))?;
        if !policies.iter().any(|p| p.name == name) {
            return Err(ConfigError::new(
                item_path,
                format!("no policy is named {name:?}"),
            ));
        }
        names.push(name.to_string());
    }
    Ok(Route {
        path: route_path.to_string(),
        methods,
        policies: names,
    })
}

fn window_ok(window: Duration) -> bool {
    window.as_millis() >= 1 && window.as_millis() <= u128::from(MAX_WINDOW_MS)
}

/// `header:<Name>`'s name, when it is a valid header name.
fn header_suffix(text: &str) -> Option<HeaderName> {
    text.strip_prefix("header:")
        .filter(|name| !name.is_empty())
        .and_then(|name| HeaderName::from_bytes(name.as_bytes()).ok())
}

/// `value` as an object holding only `allowed` fields.
fn object<'v>(value: &'v Value, path: &str, allowed: &[&str]) -> Result<&'v Map<String, Value>> {
    let map = value.as_object().ok_or_else(|| {
        ConfigError::new(
            if path.is_empty() { "(document)" } else { path },
            "must be an object",
        )
    })?;
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            return Err(ConfigError::new(
                at,
                "unknown field (see docs/http.md, Configuration reference)",
            ));
        }
    }
    Ok(map)
}

/// One field of an object, read as the type the contract gives it.
struct Field<'v> {
    map: &'v Map<String, Value>,
    path: String,
    key: String,
}

impl<'v> Field<'v> {
    fn error(&self, why: impl Into<String>) -> ConfigError {
        ConfigError::new(self.path.clone(), why)
    }

    fn get(&self) -> Option<&'v Value> {
        self.map.get(&self.key).filter(|v| !v.is_null())
    }

    fn string(&self) -> Result<Option<&'v str>> {
        match self.get() {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.error(format!("{other} is not a string"))),
        }
    }

    fn boolean(&self) -> Result<Option<bool>> {
        match self.get() {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.error(format!("{other} is not true or false"))),
        }
    }

    fn list(&self) -> Result<Option<&'v Vec<Value>>> {
        match self.get() {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(self.error(format!("{other} is not a list"))),
        }
    }

    fn integer(&self, min: u64, max: u64) -> Result<Option<u64>> {
        let Some(value) = self.get() else {
            return Ok(None);
        };
        value
            .as_u64()
            .filter(|n| (min..=max).contains(n))
            .map(Some)
            .ok_or_else(|| self.error(format!("{value}: use an integer from {min} to {max}")))
    }

    fn duration(&self) -> Result<Option<Duration>> {
        let Some(value) = self.get() else {
            return Ok(None);
        };
        let parsed = match value {
            Value::Number(n) => n
                .as_u64()
                .and_then(|s| s.checked_mul(1000))
                .map(Duration::from_millis),
            Value::String(s) => parse_duration(s),
            _ => None,
        };
        parsed.map(Some).ok_or_else(|| {
            self.error(format!(
                "{value}: use an integer with a unit (250ms, 1s, 15m, 24h, 7d)"
            ))
        })
    }

    fn header_name(&self) -> Result<Option<HeaderName>> {
        let Some(text) = self.string()? else {
            return Ok(None);
        };
        HeaderName::from_bytes(text.as_bytes())
            .map(Some)
            .map_err(|_| self.error(format!("{text:?} is not a header name")))
    }

    fn choice<T: Copy>(&self, choices: &[(&str, T)]) -> Result<Option<T>> {
        let Some(text) = self.string()? else {
            return Ok(None);
        };
        choices
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, value)| Some(*value))
            .ok_or_else(|| {
                let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                self.error(format!("{text:?}: use {}", names.join(", ")))
            })
    }
}

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
    use serde_json::json;

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
    fn defaults_fill_what_the_document_leaves_out() {
        let c = Config::from_value(
            &json!({"policies": [{"name": "p", "algorithm": "fixed", "rate": "5/s"}]}),
        )
        .unwrap();
        assert_eq!(c.prefix, "rl:");
        assert_eq!(c.timeout, Duration::from_millis(250));
        assert!(c.exempt_loopback);
        assert_eq!(c.policies[0].key, KeyKind::Ip);
        assert_eq!(c.policies[0].cost, Cost::Units(1));
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
