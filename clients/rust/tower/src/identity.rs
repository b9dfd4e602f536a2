//! Who sent a request (docs/http.md, Identity): its address (proxy
//! headers believed only from trusted proxies), its API key, its user, a
//! header's value; and the subject a policy counts, whose text is the
//! middle of the policy's keys.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::header::AsHeaderName;
use http::{HeaderMap, HeaderName};
use ipnet::{IpNet, Ipv6Net};

use crate::keys::{hashed, key_safe};
use crate::policy::KeyKind;

/// The identities a request carries, as the framework adapter found them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Client {
    /// The client's full address (after the trusted-proxy rules), which
    /// exemptions match; None when the server gave no peer address.
    pub ip: Option<IpAddr>,
    /// The bits of an IPv6 address its `ip` subject keeps (docs/http.md,
    /// IPv6 networks).
    pub ipv6_prefix: u8,
    /// The API key's id ([`hashed`]), never the key itself.
    pub api_key: Option<String>,
    /// The authenticated user, made key-safe.
    pub user: Option<String>,
}

/// Whose counter a policy uses; its `Display` is the key's middle part.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    /// An IPv4 address, or an IPv6 one at `ipv6_prefix: 128`.
    Ip(IpAddr),
    /// An IPv6 client's network (the address's first `ipv6_prefix` bits).
    Net(Ipv6Net),
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
    /// `peer` is the TCP peer; `user` what the framework authenticated (a
    /// string: its UTF-8 bytes are what the key is made of).
    pub fn new(
        peer: Option<IpAddr>,
        headers: &HeaderMap,
        trusted: &[IpNet],
        api_key_header: &HeaderName,
        user: Option<String>,
        ipv6_prefix: u8,
    ) -> Client {
        Client {
            ip: peer.map(|peer| client_ip(peer, headers, trusted)),
            ipv6_prefix,
            api_key: header_value(headers, api_key_header).map(|v| hashed(&v)),
            user: user
                .filter(|u| !u.is_empty())
                .map(|u| key_safe(u.as_bytes())),
        }
    }

    /// The subject of a policy keyed by `kind`, falling back as the
    /// contract says: user, then API key, then address.
    pub fn subject(&self, kind: &KeyKind, headers: &HeaderMap) -> Subject {
        let ip = || {
            self.ip
                .map_or(Subject::Unknown, |ip| ip_subject(ip, self.ipv6_prefix))
        };
        let api_key = || self.api_key.clone().map_or_else(ip, Subject::ApiKey);
        match kind {
            KeyKind::Ip => ip(),
            KeyKind::ApiKey => api_key(),
            KeyKind::User => self.user.clone().map_or_else(api_key, Subject::User),
            KeyKind::Header(name) => header_value(headers, name).map_or_else(ip, |v| {
                Subject::Header(name.as_str().to_string(), key_safe(&v))
            }),
            KeyKind::Global => Subject::Global,
        }
    }
}

/// An address's `ip` subject: an IPv4 address itself, an IPv6 one its
/// network of `prefix` bits (the address itself at 128).
pub(crate) fn ip_subject(ip: IpAddr, prefix: u8) -> Subject {
    match ip {
        IpAddr::V6(v6) if prefix < 128 => match Ipv6Net::new(v6, prefix) {
            Ok(net) => Subject::Net(net.trunc()),
            Err(_) => Subject::Ip(ip),
        },
        _ => Subject::Ip(ip),
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Ip(ip) => write!(f, "ip:{ip}"),
            Subject::Net(net) => write!(f, "ip:{net}"),
            Subject::ApiKey(id) => write!(f, "api-key:{id}"),
            Subject::User(name) => write!(f, "user:{name}"),
            Subject::Header(name, value) => write!(f, "header:{name}:{value}"),
            Subject::Global => f.write_str("global"),
            Subject::Unknown => f.write_str("ip:unknown"),
        }
    }
}

/// A header as docs/http.md, Identity reads it: every line joined by `, `
/// (as HTTP combines a field's lines), trimmed of spaces and tabs; None
/// when the header is absent. Bytes, never decoded.
pub(crate) fn header_lines<K: AsHeaderName>(headers: &HeaderMap, name: K) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(name).into_iter();
    let mut joined = lines.next()?.as_bytes().to_vec();
    for line in lines {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(line.as_bytes());
    }
    Some(trim_ows(&joined).to_vec())
}

/// [`header_lines`], where an empty value is no value.
pub(crate) fn header_value<K: AsHeaderName>(headers: &HeaderMap, name: K) -> Option<Vec<u8>> {
    header_lines(headers, name).filter(|v| !v.is_empty())
}

/// Without spaces and tabs at either end.
pub(crate) fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| matches!(b, b' ' | b'\t');
    let start = bytes.iter().take_while(|b| is_ows(b)).count();
    let end = bytes.len() - bytes.iter().rev().take_while(|b| is_ows(b)).count();
    bytes.get(start..end.max(start)).unwrap_or_default()
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
    let forwarded = header_lines(headers, "x-forwarded-for").unwrap_or_default();
    // Empty elements are skipped, as RFC 9110 reads a list.
    let hops: Vec<&[u8]> = forwarded
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|hop| !hop.is_empty())
        .collect();
    if hops.is_empty() {
        return header_value(headers, "x-real-ip")
            .and_then(|v| parse_address(&v))
            .unwrap_or(peer);
    }
    let mut client = peer;
    for hop in hops.iter().rev() {
        // Past an unreadable hop nothing can be believed: the nearest
        // address read so far stands.
        let Some(ip) = parse_address(hop) else { break };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// An address as a proxy or a socket writes it: `203.0.113.7`,
/// `2001:db8::1`, `203.0.113.7:4711`, `[2001:db8::1]:4711`, with an IPv6
/// zone index (`fe80::1%eth0`) dropped: it names the writer's interface,
/// not another client. IPv4-mapped IPv6 is IPv4. None for anything else.
pub(crate) fn parse_address(text: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(trim_ows(text)).ok()?;
    let ip = if let Some(bracketed) = text.strip_prefix('[') {
        let (inside, after) = bracketed.split_once(']')?;
        if !(after.is_empty() || port(after.strip_prefix(':')?)) {
            return None;
        }
        IpAddr::V6(ipv6(inside)?)
    } else if text.matches(':').count() == 1 {
        let (host, p) = text.split_once(':')?;
        if !port(p) {
            return None;
        }
        IpAddr::V4(host.parse::<Ipv4Addr>().ok()?)
    } else if text.contains(':') {
        IpAddr::V6(ipv6(text)?)
    } else {
        IpAddr::V4(text.parse::<Ipv4Addr>().ok()?)
    };
    Some(ip.to_canonical())
}

/// IPv6, with a zone index (`%` and at least one character) dropped.
fn ipv6(text: &str) -> Option<Ipv6Addr> {
    let address = match text.split_once('%') {
        Some((address, zone)) if !zone.is_empty() => address,
        Some(_) => return None,
        None => text,
    };
    address.parse().ok()
}

fn port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}
