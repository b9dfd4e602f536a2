//! What the operator chooses: where Redis is (a server or a cluster), what
//! to do when it is not there, which proxies to believe, and whether loopback is exempt.

use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use axum::http::HeaderName;
use ipnet::IpNet;

/// What a request gets when Redis cannot answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// Let the request through unlimited, and log a warning.
    Open,
    /// Answer 503 with a problem body, and log an error.
    Closed,
    /// Enforce the policies in this process with the module's own
    /// algorithms (per process, without overrides), and log a warning.
    Local,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub redis_url: String,
    /// A Redis Cluster's node URLs (some of them suffice); when not empty,
    /// `redis_url` is not used.
    pub cluster_nodes: Vec<String>,
    /// Put before every key the middleware writes.
    pub key_prefix: String,
    pub fail_mode: FailMode,
    /// Peers whose `X-Forwarded-For` and `X-Real-IP` are believed. Empty:
    /// the TCP peer is the client, and those headers are ignored.
    pub trusted_proxies: Vec<IpNet>,
    /// Skip IP-counted policies for loopback clients (127.0.0.0/8, ::1).
    pub exempt_loopback: bool,
    /// The header whose value identifies a client by API key.
    pub api_key_header: HeaderName,
    /// The longest a request waits for Redis before the fail mode applies.
    pub redis_timeout: Duration,
    /// The largest body buffered to count its size when it has no
    /// Content-Length; a larger one is answered 413.
    pub max_body_bytes: usize,
    /// The most limiter keys the `local` fail mode holds in memory.
    pub local_max_keys: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            redis_url: "redis://127.0.0.1:6379".into(),
            cluster_nodes: Vec::new(),
            key_prefix: "rl:".into(),
            fail_mode: FailMode::Open,
            trusted_proxies: Vec::new(),
            exempt_loopback: true,
            api_key_header: HeaderName::from_static("x-api-key"),
            redis_timeout: Duration::from_millis(250),
            max_body_bytes: 8 << 20,
            local_max_keys: 100_000,
        }
    }
}

impl Config {
    /// Reads the environment; unset variables keep their default:
    ///
    /// | variable | meaning | default |
    /// |---|---|---|
    /// | `REDIS_URL` | where librl is loaded | `redis://127.0.0.1:6379` |
    /// | `REDIS_CLUSTER_NODES` | comma-separated node URLs of a cluster | none |
    /// | `RATE_LIMIT_PREFIX` | key prefix | `rl:` |
    /// | `RATE_LIMIT_FAIL_MODE` | `open`, `closed` or `local` | `open` |
    /// | `RATE_LIMIT_LOCAL_KEYS` | keys the `local` mode holds | `100000` |
    /// | `TRUSTED_PROXIES` | comma-separated IPs or CIDRs | none |
    /// | `EXEMPT_LOOPBACK` | `true` or `false` | `true` |
    /// | `API_KEY_HEADER` | header name | `x-api-key` |
    /// | `REDIS_TIMEOUT_MS` | per-request Redis budget | `250` |
    pub fn from_env() -> Result<Config, String> {
        Config::from_vars(|name| std::env::var(name).ok())
    }

    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let mut config = Config::default();
        if let Some(url) = var("REDIS_URL") {
            config.redis_url = url;
        }
        if let Some(list) = var("REDIS_CLUSTER_NODES") {
            config.cluster_nodes = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(prefix) = var("RATE_LIMIT_PREFIX") {
            config.key_prefix = prefix;
        }
        if let Some(mode) = var("RATE_LIMIT_FAIL_MODE") {
            config.fail_mode = match mode.to_ascii_lowercase().as_str() {
                "open" => FailMode::Open,
                "closed" => FailMode::Closed,
                "local" => FailMode::Local,
                _ => {
                    return Err(format!(
                        "RATE_LIMIT_FAIL_MODE={mode}: use open, closed or local"
                    ))
                }
            };
        }
        if let Some(list) = var("TRUSTED_PROXIES") {
            config.trusted_proxies = parse_networks(&list)
                .map_err(|bad| format!("TRUSTED_PROXIES: {bad:?} is not an IP or CIDR"))?;
        }
        if let Some(flag) = var("EXEMPT_LOOPBACK") {
            config.exempt_loopback = match flag.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => true,
                "false" | "0" | "no" => false,
                _ => return Err(format!("EXEMPT_LOOPBACK={flag}: use true or false")),
            };
        }
        if let Some(name) = var("API_KEY_HEADER") {
            config.api_key_header = HeaderName::from_str(&name)
                .map_err(|_| format!("API_KEY_HEADER={name}: not a header name"))?;
        }
        if let Some(ms) = var("REDIS_TIMEOUT_MS") {
            let ms: u64 = ms
                .parse()
                .ok()
                .filter(|&ms| ms > 0)
                .ok_or(format!("REDIS_TIMEOUT_MS={ms}: use a positive integer"))?;
            config.redis_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = var("RATE_LIMIT_LOCAL_KEYS") {
            config.local_max_keys = n
                .parse()
                .ok()
                .filter(|&n: &usize| n > 0)
                .ok_or(format!("RATE_LIMIT_LOCAL_KEYS={n}: use a positive integer"))?;
        }
        Ok(config)
    }
}

/// `"10.0.0.0/8, 127.0.0.1"`: a bare address is a one-host network.
pub fn parse_networks(list: &str) -> Result<Vec<IpNet>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            IpNet::from_str(s)
                .or_else(|_| IpAddr::from_str(s).map(IpNet::from))
                .map_err(|_| s.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<Config, String> {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn unset_variables_keep_the_defaults() {
        let c = from(&[]).unwrap();
        assert_eq!(c.fail_mode, FailMode::Open);
        assert!(c.exempt_loopback);
        assert!(c.trusted_proxies.is_empty());
    }

    #[test]
    fn reads_each_variable() {
        let c = from(&[
            ("RATE_LIMIT_FAIL_MODE", "Closed"),
            ("TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1 ,::1"),
            ("EXEMPT_LOOPBACK", "false"),
            ("API_KEY_HEADER", "X-Token"),
            ("REDIS_TIMEOUT_MS", "40"),
            (
                "REDIS_CLUSTER_NODES",
                "redis://10.0.0.1:7000, redis://10.0.0.2:7000",
            ),
            ("RATE_LIMIT_LOCAL_KEYS", "500"),
        ])
        .unwrap();
        assert_eq!(c.fail_mode, FailMode::Closed);
        let nets: Vec<String> = c.trusted_proxies.iter().map(|n| n.to_string()).collect();
        assert_eq!(nets, ["10.0.0.0/8", "127.0.0.1/32", "::1/128"]);
        assert!(!c.exempt_loopback);
        assert_eq!(c.api_key_header, "x-token");
        assert_eq!(c.redis_timeout, Duration::from_millis(40));
        assert_eq!(
            c.cluster_nodes,
            ["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]
        );
        assert_eq!(c.local_max_keys, 500);
        let local = from(&[("RATE_LIMIT_FAIL_MODE", "local")]).unwrap();
        assert_eq!(local.fail_mode, FailMode::Local);
    }

    #[test]
    fn names_the_variable_it_refuses() {
        for (var, value) in [
            ("RATE_LIMIT_FAIL_MODE", "maybe"),
            ("TRUSTED_PROXIES", "10.0.0.0/33"),
            ("EXEMPT_LOOPBACK", "sometimes"),
            ("REDIS_TIMEOUT_MS", "0"),
            ("RATE_LIMIT_LOCAL_KEYS", "none"),
        ] {
            let err = from(&[(var, value)]).unwrap_err();
            assert!(err.starts_with(var), "{err}");
        }
    }
}
