//! Who sent a request: its IP address (proxy headers believed only from
//! trusted proxies), its API key, and the user an auth layer put in the
//! request's extensions.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderMap;
use ipnet::IpNet;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::policy::Scope;

/// The user an authentication layer has verified. Insert it into the
/// request's extensions before the rate limiter runs, and `Scope::Client`
/// policies count that user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthUser(pub String);

/// The identities a request carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Client {
    /// None only when the server runs without connect info.
    pub ip: Option<IpAddr>,
    /// The API key's id ([`api_key_id`]), never the key itself.
    pub api_key: Option<String>,
    pub user: Option<String>,
}

/// Whose counter a policy uses; its `Display` is the key's middle part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    ApiKey(String),
    User(String),
    Ip(IpAddr),
    /// No peer address (the app was served without connect info): every
    /// such request shares one counter.
    Unknown,
}

impl Client {
    /// The middleware does not validate API keys: put the layer that does
    /// before it, or pair each `Scope::Client` policy with a `Scope::Ip` one
    /// so that inventing keys does not escape the IP limit.
    pub fn of(req: &Request, config: &Config) -> Client {
        let peer = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        Client {
            ip: peer.map(|peer| client_ip(peer, req.headers(), &config.trusted_proxies)),
            api_key: req
                .headers()
                .get(&config.api_key_header)
                .map(|v| v.as_bytes())
                .filter(|v| !v.is_empty())
                .map(api_key_id),
            user: req.extensions().get::<AuthUser>().map(|u| u.0.clone()),
        }
    }

    pub fn subject(&self, scope: Scope) -> Subject {
        let ip = || self.ip.map_or(Subject::Unknown, Subject::Ip);
        match scope {
            Scope::Ip => ip(),
            Scope::Client => match (&self.api_key, &self.user) {
                (Some(key), _) => Subject::ApiKey(key.clone()),
                (None, Some(user)) => Subject::User(user.clone()),
                (None, None) => ip(),
            },
        }
    }
}

impl Subject {
    pub fn is_loopback(&self) -> bool {
        matches!(self, Subject::Ip(ip) if ip.is_loopback())
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::ApiKey(id) => write!(f, "key:{id}"),
            Subject::User(name) => write!(f, "user:{name}"),
            Subject::Ip(ip) => write!(f, "ip:{ip}"),
            Subject::Unknown => f.write_str("unknown"),
        }
    }
}

/// The first 16 bytes of the key's SHA-256 in hex: keys stay out of Redis
/// (and out of `KEYS` and `MONITOR`), and an operator can still find one
/// client's counters: `printf %s "$KEY" | sha256sum | cut -c1-32`.
pub fn api_key_id(key: &[u8]) -> String {
    Sha256::digest(key)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The client's address. The TCP peer, unless the peer is a trusted proxy:
/// then `X-Forwarded-For` is read from its nearest hop back, and the first
/// address that is not a trusted proxy is the client (the hops left of it
/// were written by the client and prove nothing). Without
/// `X-Forwarded-For`, a trusted proxy's `X-Real-IP` is the client.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(&ip));
    let peer = peer.to_canonical();
    if !is_trusted(peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    if hops.is_empty() {
        return headers
            .get("x-real-ip")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_hop)
            .unwrap_or(peer);
    }
    let mut client = peer;
    for hop in hops.iter().rev() {
        // Past an unreadable hop nothing can be believed: the nearest
        // address read so far stands.
        let Some(ip) = parse_hop(hop) else { break };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// `203.0.113.7`, `2001:db8::1`, `203.0.113.7:4711` or `[2001:db8::1]:4711`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    hop.parse::<IpAddr>()
        .or_else(|_| hop.parse::<SocketAddr>().map(|s| s.ip()))
        .ok()
        .map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_networks;
    use axum::http::HeaderName;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn resolve(peer: &str, headers: &[(&str, &str)], trusted: &str) -> IpAddr {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        client_ip(ip(peer), &map, &parse_networks(trusted).unwrap())
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        let xff = [
            ("x-forwarded-for", "198.51.100.1"),
            ("x-real-ip", "198.51.100.2"),
        ];
        assert_eq!(resolve("203.0.113.9", &xff, ""), ip("203.0.113.9"));
        assert_eq!(
            resolve("203.0.113.9", &xff, "10.0.0.0/8"),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn a_trusted_peer_names_the_nearest_untrusted_hop() {
        let trusted = "10.0.0.0/8";
        let one = [("x-forwarded-for", "198.51.100.1")];
        assert_eq!(resolve("10.0.0.1", &one, trusted), ip("198.51.100.1"));
        // The client forged the first hop; our proxy appended the real one.
        let forged = [("x-forwarded-for", "1.1.1.1, 198.51.100.1, 10.0.0.2")];
        assert_eq!(resolve("10.0.0.1", &forged, trusted), ip("198.51.100.1"));
        // Two header lines read as one list.
        let lines = [
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "198.51.100.1"),
        ];
        assert_eq!(resolve("10.0.0.1", &lines, trusted), ip("198.51.100.1"));
        // Ports and brackets are dropped.
        let ported = [("x-forwarded-for", "[2001:db8::1]:4711")];
        assert_eq!(resolve("10.0.0.1", &ported, trusted), ip("2001:db8::1"));
    }

    #[test]
    fn a_trusted_peer_without_forwarded_for_may_send_x_real_ip() {
        let real = [("x-real-ip", "198.51.100.7")];
        assert_eq!(resolve("127.0.0.1", &real, "127.0.0.1"), ip("198.51.100.7"));
        assert_eq!(resolve("127.0.0.1", &[], "127.0.0.1"), ip("127.0.0.1"));
    }

    #[test]
    fn garbage_stops_the_walk_at_the_last_readable_hop() {
        let bad = [("x-forwarded-for", "198.51.100.1, nonsense, 10.0.0.2")];
        assert_eq!(resolve("10.0.0.1", &bad, "10.0.0.0/8"), ip("10.0.0.2"));
    }

    #[test]
    fn ipv4_mapped_peers_match_ipv4_networks() {
        let xff = [("x-forwarded-for", "198.51.100.1")];
        assert_eq!(
            resolve("::ffff:127.0.0.1", &xff, "127.0.0.1"),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn client_scope_prefers_api_key_then_user_then_ip() {
        let mut c = Client {
            ip: Some(ip("198.51.100.1")),
            api_key: Some("ab".into()),
            user: Some("alice".into()),
        };
        assert_eq!(c.subject(Scope::Client).to_string(), "key:ab");
        assert_eq!(c.subject(Scope::Ip).to_string(), "ip:198.51.100.1");
        c.api_key = None;
        assert_eq!(c.subject(Scope::Client).to_string(), "user:alice");
        c.user = None;
        assert_eq!(c.subject(Scope::Client).to_string(), "ip:198.51.100.1");
        assert!(!c.subject(Scope::Client).is_loopback());
        c.ip = Some(ip("127.0.0.2"));
        assert!(c.subject(Scope::Client).is_loopback());
    }

    #[test]
    fn api_key_ids_are_sha256_prefixes() {
        // printf %s secret | sha256sum
        assert_eq!(api_key_id(b"secret"), "2bb80d537b1da3e38bd30361aa855686");
    }
}
