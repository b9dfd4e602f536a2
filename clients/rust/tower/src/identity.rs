//! Who sent a request (docs/http.md, Identity): its address (proxy
//! headers believed only from trusted proxies), its API key, its user, a
//! header's value, an attribute the application left on it; and the
//! subject a policy counts, whose text is the middle of the policy's keys.

use std::fmt::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use http::header::{AsHeaderName, AUTHORIZATION, COOKIE};
use http::{HeaderMap, HeaderName};
use ipnet::{IpNet, Ipv6Net};

use crate::keys::{hashed, key_safe};

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
    /// The authenticated user as the framework gave it (not empty).
    pub user: Option<String>,
}

/// Values the application's own code leaves on a request for
/// `attribute:<name>` sources (docs/http.md, Request attributes): insert
/// it into the request's extensions in a layer that runs before the
/// limiter's.
///
/// ```
/// # let mut req = http::Request::new(());
/// let mut attributes = librl_tower::Attributes::new();
/// attributes.insert("project", "1:42");
/// req.extensions_mut().insert(attributes);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    // A request carries a handful: a list beats a map's hashing.
    values: Vec<(String, String)>,
}

impl Attributes {
    pub fn new() -> Attributes {
        Attributes::default()
    }

    /// Sets `name` (case-sensitive) to `value`, replacing an earlier value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let (name, value) = (name.into(), value.into());
        match self.values.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.values.push((name, value)),
        }
    }

    /// The value of `name`, as inserted.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Where an identity's value is read from (docs/http.md, Named
/// identities).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// That header, its lines joined by `, ` and trimmed.
    Header(HeaderName),
    /// That cookie of the `Cookie` header (the name as written).
    Cookie(String),
    /// That parameter of the raw query string, form-decoded.
    Query(String),
    /// The credentials of `Authorization: <Scheme> <credentials>`.
    Authorization(String),
    /// That request attribute ([`Attributes`]; the name as written).
    Attribute(String),
    /// The framework's authenticated user.
    User,
    /// The request's `ip` subject; only last.
    Ip,
}

impl Source {
    /// The configuration's text: `header:X-Client-ID`, `cookie:sid`, `user`.
    pub fn to_config(&self) -> String {
        match self {
            Source::Header(name) => format!("header:{name}"),
            Source::Cookie(name) => format!("cookie:{name}"),
            Source::Query(name) => format!("query:{name}"),
            Source::Authorization(scheme) => format!("authorization:{scheme}"),
            Source::Attribute(name) => format!("attribute:{name}"),
            Source::User => "user".into(),
            Source::Ip => "ip".into(),
        }
    }

    /// Reads a text the walker has checked against the schema's pattern.
    pub(crate) fn from_config(text: &str) -> Option<Source> {
        match text {
            "user" => return Some(Source::User),
            "ip" => return Some(Source::Ip),
            _ => {}
        }
        let (kind, name) = text.split_once(':')?;
        if name.is_empty() {
            return None;
        }
        Some(match kind {
            "header" => Source::Header(HeaderName::from_bytes(name.as_bytes()).ok()?),
            "cookie" => Source::Cookie(name.into()),
            "query" => Source::Query(name.into()),
            "authorization" => Source::Authorization(name.into()),
            "attribute" => Source::Attribute(name.into()),
            _ => return None,
        })
    }

    /// This source's value in a request: None when absent or empty.
    pub(crate) fn read(&self, request: &Sourced<'_>) -> Option<Vec<u8>> {
        let Sourced {
            headers,
            query,
            user,
            attributes,
        } = *request;
        match self {
            Source::Header(name) => header_value(headers, name),
            Source::Cookie(name) => cookie_value(headers, name),
            Source::Query(name) => query_value(query?, name),
            Source::Authorization(scheme) => authorization_value(headers, scheme),
            Source::Attribute(name) => {
                let value = trim_ows(attributes?.get(name)?.as_bytes());
                (!value.is_empty()).then(|| value.to_vec())
            }
            Source::User => user
                .filter(|u| !u.is_empty())
                .map(|u| u.as_bytes().to_vec()),
            Source::Ip => None,
        }
    }
}

/// What a request's sources read: its headers, raw query string,
/// authenticated user and [`Attributes`].
#[derive(Clone, Copy)]
pub(crate) struct Sourced<'a> {
    pub headers: &'a HeaderMap,
    pub query: Option<&'a str>,
    pub user: Option<&'a str>,
    pub attributes: Option<&'a Attributes>,
}

/// How a validated policy finds its subject: the configuration's `key`
/// resolved once at start-up against `identities`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Keyed {
    Ip,
    Global,
    /// The built-in `api-key`: the `api_key_header`, hashed.
    ApiKey,
    /// The built-in `user`: the user, else the API key, else the address.
    User,
    /// An inline `header:<Name>`.
    Header(HeaderName),
    /// A named identity, or an inline `cookie:`, `query:`,
    /// `authorization:` or `attribute:` source: `label` is the subject's
    /// first part (`client`, `cookie:anon_id`, `authorization:bearer`,
    /// `attribute:project`), `hash` says
    /// whether values are always hashed.
    Sources {
        label: Arc<str>,
        sources: Arc<[Source]>,
        hash: bool,
    },
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
    /// A named identity's (or an inline source's) label and value.
    Named(Arc<str>, String),
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
            user: user.filter(|u| !u.is_empty()),
        }
    }

    /// The subject of a policy keyed by `key`, falling back as the
    /// contract says (the built-in `user`: user, then API key, then
    /// address; every other: its sources, then the address). `query` is
    /// the raw query string.
    pub(crate) fn subject(
        &self,
        key: &Keyed,
        headers: &HeaderMap,
        query: Option<&str>,
        attributes: Option<&Attributes>,
    ) -> Subject {
        let ip = || {
            self.ip
                .map_or(Subject::Unknown, |ip| ip_subject(ip, self.ipv6_prefix))
        };
        let api_key = || self.api_key.clone().map_or_else(ip, Subject::ApiKey);
        match key {
            Keyed::Ip => ip(),
            Keyed::ApiKey => api_key(),
            Keyed::User => self
                .user
                .as_ref()
                .map_or_else(api_key, |u| Subject::User(key_safe(u.as_bytes()))),
            Keyed::Header(name) => header_value(headers, name).map_or_else(ip, |v| {
                Subject::Header(name.as_str().to_string(), key_safe(&v))
            }),
            Keyed::Global => Subject::Global,
            Keyed::Sources {
                label,
                sources,
                hash,
            } => {
                let request = Sourced {
                    headers,
                    query,
                    user: self.user.as_deref(),
                    attributes,
                };
                sources
                    .iter()
                    .take_while(|s| **s != Source::Ip)
                    .find_map(|s| s.read(&request))
                    .map_or_else(ip, |v| {
                        let value = if *hash { hashed(&v) } else { key_safe(&v) };
                        Subject::Named(label.clone(), value)
                    })
            }
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

impl Subject {
    /// Appends the subject as [`fmt::Display`] writes it, its text parts
    /// copied without the formatting machinery (every request's key is
    /// made of it).
    pub(crate) fn push_to(&self, out: &mut String) {
        let (kind, value): (&str, &str) = match self {
            Subject::ApiKey(id) => ("api-key:", id),
            Subject::User(name) => ("user:", name),
            Subject::Named(label, value) => {
                out.push_str(label);
                (":", value)
            }
            Subject::Header(name, value) => {
                out.push_str("header:");
                out.push_str(name);
                (":", value)
            }
            Subject::Ip(_) | Subject::Net(_) | Subject::Global | Subject::Unknown => {
                let _ = write!(out, "{self}");
                return;
            }
        };
        out.push_str(kind);
        out.push_str(value);
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
            Subject::Named(label, value) => write!(f, "{label}:{value}"),
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
    let first = lines.next()?.as_bytes();
    let Some(second) = lines.next() else {
        // One line (the usual case): trimmed and copied once.
        return Some(trim_ows(first).to_vec());
    };
    let mut joined = first.to_vec();
    for line in std::iter::once(second).chain(lines) {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(line.as_bytes());
    }
    Some(trim_ows(&joined).to_vec())
}

/// [`header_lines`], where an empty value is no value.
pub(crate) fn header_value<K: AsHeaderName>(headers: &HeaderMap, name: K) -> Option<Vec<u8>> {
    header_lines(headers, name).filter(|v| !v.is_empty())
}

/// A cookie's value (docs/http.md, Named identities): the `Cookie`
/// lines joined by `; `, pairs split on `;` and trimmed, name and value
/// split at the first `=` (a pair without one is skipped) and trimmed;
/// the first pair of exactly that name; one surrounding pair of double
/// quotes removed; never decoded. Empty: None.
pub(crate) fn cookie_value(headers: &HeaderMap, name: &str) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(COOKIE).into_iter();
    let mut joined = lines.next()?.as_bytes().to_vec();
    for line in lines {
        joined.extend_from_slice(b"; ");
        joined.extend_from_slice(line.as_bytes());
    }
    let value = joined.split(|&b| b == b';').find_map(|pair| {
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (n, v) = (pair.get(..eq)?, pair.get(eq + 1..)?);
        (trim_ows(n) == name.as_bytes()).then(|| trim_ows(v))
    })?;
    let value = match value {
        [b'"', inner @ .., b'"'] => inner,
        v => v,
    };
    (!value.is_empty()).then(|| value.to_vec())
}

/// A query parameter's value (docs/http.md, Named identities): pairs of
/// the raw query split on `&`, name and value at the first `=` (a pair
/// without one is skipped), both form-decoded; the first pair whose name
/// is exactly `name`. Empty: None.
pub(crate) fn query_value(query: &str, name: &str) -> Option<Vec<u8>> {
    let value = query.split('&').find_map(|pair| {
        let (n, v) = pair.split_once('=')?;
        (form_decode(n) == name.as_bytes()).then(|| form_decode(v))
    })?;
    (!value.is_empty()).then_some(value)
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, then
/// each `%XX` once; a `%` without two hex digits stays.
fn form_decode(text: &str) -> Vec<u8> {
    let hex = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = match (b, bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)),
            _ => None,
        };
        match (b, escaped) {
            (_, Some((h, l))) => {
                out.push((h << 4) | l);
                i += 3;
                continue;
            }
            (b'+', None) => out.push(b' '),
            (b, None) => out.push(b),
        }
        i += 1;
    }
    out
}

/// The credentials of an `Authorization` value whose first token (up to
/// the first space) is `scheme`, ASCII case-insensitively: the rest,
/// trimmed. None when absent, another scheme, or no credentials.
pub(crate) fn authorization_value(headers: &HeaderMap, scheme: &str) -> Option<Vec<u8>> {
    let value = header_lines(headers, AUTHORIZATION)?;
    let space = value.iter().position(|&b| b == b' ')?;
    let (first, rest) = value.split_at(space);
    if !first.eq_ignore_ascii_case(scheme.as_bytes()) {
        return None;
    }
    let credentials = trim_ows(rest);
    (!credentials.is_empty()).then(|| credentials.to_vec())
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
