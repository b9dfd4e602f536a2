//! The configuration (docs/http.md, Configuration reference) as Rust
//! values, its defaults, and the checks a value built in code needs
//! before it is used. Reading a YAML/JSON document is `document.rs`.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode};
use ipnet::IpNet;

use crate::policy::Policy;

/// `enforce`, or `shadow`: check and record, never refuse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Enforce,
    Shadow,
}

/// What a request gets when Redis cannot answer within the timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailMode {
    /// Pass the request unlimited, and log a warning (at most every 10 s).
    #[default]
    Open,
    /// Answer 503 with a problem body.
    Closed,
    /// Decide in this process with librl-core's algorithms.
    Local,
}

/// Which rate-limit headers responses carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeaderMode {
    /// `RateLimit-Policy`, `RateLimit` and `X-RateLimit-*`.
    #[default]
    Both,
    /// The IETF draft's `RateLimit-Policy` and `RateLimit`.
    Ietf,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    Legacy,
    None,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DenyBody {
    /// RFC 9457 `application/problem+json`.
    #[default]
    Problem,
    /// `text/plain`: the deny message.
    Text,
}

/// The response to a denied request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deny {
    pub status: StatusCode,
    pub body: DenyBody,
    pub message: String,
}

impl Default for Deny {
    fn default() -> Deny {
        Deny {
            status: StatusCode::TOO_MANY_REQUESTS,
            body: DenyBody::Problem,
            message: "Too Many Requests".into(),
        }
    }
}

/// Policies for the paths under `path` (whole segments), for `methods`
/// (None: every method).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub path: String,
    pub methods: Option<Vec<Method>>,
    pub policies: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// Put before every key the middleware writes.
    pub prefix: String,
    pub mode: Mode,
    pub fail: FailMode,
    /// The Redis budget of one request's check.
    pub timeout: Duration,
    pub headers: HeaderMode,
    /// Peers whose `X-Forwarded-For` and `X-Real-IP` are believed.
    pub trusted_proxies: Vec<IpNet>,
    /// Skip every policy whose subject is a loopback address.
    pub exempt_loopback: bool,
    pub api_key_header: HeaderName,
    /// The largest body a `body-bytes` policy accepts; larger: 413.
    pub max_body_bytes: u64,
    /// The most limiter keys the `local` fail mode holds.
    pub local_max_keys: usize,
    pub deny: Deny,
    pub policies: Vec<Policy>,
    /// Empty: every policy applies to every request.
    pub routes: Vec<Route>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            prefix: "rl:".into(),
            mode: Mode::Enforce,
            fail: FailMode::Open,
            timeout: Duration::from_millis(250),
            headers: HeaderMode::Both,
            trusted_proxies: Vec::new(),
            exempt_loopback: true,
            api_key_header: HeaderName::from_static("x-api-key"),
            max_body_bytes: 8 << 20,
            local_max_keys: 100_000,
            deny: Deny::default(),
            policies: Vec::new(),
            routes: Vec::new(),
        }
    }
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

/// The longest timeout: a rate limiter that waits longer is an outage.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);

impl Config {
    /// Every check a configuration built in code needs (a document read
    /// by `document.rs` has passed them all already).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !valid_prefix(&self.prefix) {
            return Err(ConfigError::new(
                "prefix",
                "use at most 64 printable ASCII characters without '{', '}' or spaces",
            ));
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(ConfigError::new("timeout", "use 1 ms to 60 s"));
        }
        if !(1..=crate::policy::MAX_UNITS).contains(&self.max_body_bytes) {
            return Err(ConfigError::new("max_body_bytes", "use 1 to 2^50"));
        }
        if self.local_max_keys == 0 {
            return Err(ConfigError::new("local_max_keys", "use at least 1"));
        }
        if !(400..=599).contains(&self.deny.status.as_u16()) {
            return Err(ConfigError::new("deny.status", "use 400 to 599"));
        }
        if !(1..=1024).contains(&self.deny.message.len()) {
            return Err(ConfigError::new("deny.message", "use 1 to 1024 bytes"));
        }
        validate_policies(&self.policies, "policies")?;
        for (i, route) in self.routes.iter().enumerate() {
            if !route.path.starts_with('/') {
                return Err(ConfigError::new(
                    format!("routes[{i}].path"),
                    format!("{:?} must start with '/'", route.path),
                ));
            }
            for (j, name) in route.policies.iter().enumerate() {
                if !self.policies.iter().any(|p| &p.name == name) {
                    return Err(ConfigError::new(
                        format!("routes[{i}].policies[{j}]"),
                        format!("no policy is named {name:?}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Each policy's values, and names used once; `list` is the list's path.
pub fn validate_policies(policies: &[Policy], list: &str) -> Result<(), ConfigError> {
    for (i, policy) in policies.iter().enumerate() {
        policy
            .validate()
            .map_err(|(field, why)| ConfigError::new(format!("{list}[{i}].{field}"), why))?;
        if policies[..i].iter().any(|p| p.name == policy.name) {
            return Err(ConfigError::new(
                format!("{list}[{i}].name"),
                format!("{:?} is used by an earlier policy", policy.name),
            ));
        }
    }
    Ok(())
}

pub fn valid_prefix(prefix: &str) -> bool {
    prefix.len() <= 64
        && prefix
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'{' && b != b'}')
}

/// `10.0.0.0/8`, `127.0.0.1` (a one-host network), `::1`.
pub fn parse_network(text: &str) -> Option<IpNet> {
    let text = text.trim();
    text.parse::<IpNet>()
        .ok()
        .or_else(|| text.parse::<IpAddr>().ok().map(IpNet::from))
}
