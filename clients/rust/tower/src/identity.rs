//! Who sent a request (docs/http.md, Identity): its address (proxy
//! headers believed only from trusted proxies), its API key, its user, a
//! header's value; and the subject a policy counts, whose text is the
//! middle of the policy's keys.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use http::{HeaderMap, HeaderName};
use ipnet::IpNet;
use sha2::{Digest, Sha256};

use crate::policy::KeyKind;

/// The identities a request carries, as the framework adapter found them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Client {
    /// The client's address (after the trusted-proxy rules); None when the
    /// server gave no peer address.
    pub ip: Option<IpAddr>,
    /// The API key's id ([`hashed`]), never the key itself.
    pub api_key: Option<String>,
    /// The authenticated user, as the framework or a resolver names it.
    pub user: Option<String>,
}

/// Whose counter a policy uses; its `Display` is the key's middle part.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    Ip(IpAddr),
    ApiKey(String),
    User(String),
    /// A header's lower-case name and its value, made key-safe.
    Header(String, String),
    Global,
    /// No peer address (the app was served without one): every such
    /// request shares one counter.
    Unknown,
}

impl Client {
    /// `peer` is the TCP peer; `user` what the framework authenticated.
    pub fn new(
        peer: Option<IpAddr>,
        headers: &HeaderMap,
        trusted: &[IpNet],
        api_key_header: &HeaderName,
        user: Option<String>,
    ) -> Client {
        Client {
            ip: peer.map(|peer| client_ip(peer, headers, trusted)),
            api_key: headers
                .get(api_key_header)
                .map(|v| v.as_bytes())
                .filter(|v| !v.is_empty())
                .map(hashed),
            user: user.filter(|u| !u.is_empty()).map(|u| key_safe(&u)),
        }
    }

    /// The subject of a policy keyed by `kind`, falling back as the
    /// contract says: user, then API key, then address.
    pub fn subject(&self, kind: &KeyKind, headers: &HeaderMap) -> Subject {
        let ip = || self.ip.map_or(Subject::Unknown, Subject::Ip);
        let api_key = || self.api_key.clone().map_or_else(ip, Subject::ApiKey);
        match kind {
            KeyKind::Ip => ip(),
            KeyKind::ApiKey => api_key(),
            KeyKind::User => self.user.clone().map_or_else(api_key, Subject::User),
            KeyKind::Header(name) => headers
                .get(name)
                .map(|v| v.as_bytes())
                .filter(|v| !v.is_empty())
                .map_or_else(ip, |v| {
                    Subject::Header(name.as_str().to_string(), key_safe_bytes(v))
                }),
            KeyKind::Global => Subject::Global,
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
            Subject::Ip(ip) => write!(f, "ip:{ip}"),
            Subject::ApiKey(id) => write!(f, "api-key:{id}"),
            Subject::User(name) => write!(f, "user:{name}"),
            Subject::Header(name, value) => write!(f, "header:{name}:{value}"),
            Subject::Global => f.write_str("global"),
            Subject::Unknown => f.write_str("ip:unknown"),
        }
    }
}

/// The first 16 bytes of the value's SHA-256 in hex: API keys stay out of
/// Redis (and out of `KEYS` and `MONITOR`), and an operator can still find
/// one client's counters: `printf %s "$KEY" | sha256sum | cut -c1-32`.
pub fn hashed(value: &[u8]) -> String {
    Sha256::digest(value)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A user or header value as it appears in a key: verbatim when short and
/// made of safe characters, else `sha256-` and its hash (a `}` must not end
/// the hash tag early).
pub fn key_safe(value: &str) -> String {
    key_safe_bytes(value.as_bytes())
}

fn key_safe_bytes(value: &[u8]) -> String {
    let safe = (1..=64).contains(&value.len())
        && value
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._~@+=:/-".contains(b));
    match std::str::from_utf8(value) {
        Ok(text) if safe => text.to_string(),
        _ => format!("sha256-{}", hashed(value)),
    }
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
        let trusted: Vec<IpNet> = trusted
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| crate::configuration::parse_network(s).unwrap())
            .collect();
        client_ip(ip(peer), &map, &trusted)
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
    fn user_falls_back_to_api_key_then_ip() {
        let headers = HeaderMap::new();
        let mut c = Client {
            ip: Some(ip("198.51.100.1")),
            api_key: Some("ab".into()),
            user: Some("alice".into()),
        };
        assert_eq!(
            c.subject(&KeyKind::User, &headers).to_string(),
            "user:alice"
        );
        assert_eq!(
            c.subject(&KeyKind::Ip, &headers).to_string(),
            "ip:198.51.100.1"
        );
        c.user = None;
        assert_eq!(
            c.subject(&KeyKind::User, &headers).to_string(),
            "api-key:ab"
        );
        c.api_key = None;
        assert_eq!(
            c.subject(&KeyKind::User, &headers).to_string(),
            "ip:198.51.100.1"
        );
        assert!(!c.subject(&KeyKind::User, &headers).is_loopback());
        c.ip = Some(ip("127.0.0.2"));
        assert!(c.subject(&KeyKind::ApiKey, &headers).is_loopback());
        assert_eq!(c.subject(&KeyKind::Global, &headers).to_string(), "global");
    }

    #[test]
    fn unsafe_values_are_hashed() {
        assert_eq!(key_safe("alice@example.com"), "alice@example.com");
        assert_eq!(key_safe("a b}"), "sha256-3010f89b5b4bf5c82c7279d7b2901e7b");
        assert!(key_safe(&"x".repeat(65)).starts_with("sha256-"));
    }

    #[test]
    fn api_key_ids_are_sha256_prefixes() {
        // printf %s secret | sha256sum
        assert_eq!(hashed(b"secret"), "2bb80d537b1da3e38bd30361aa855686");
    }
}
