"""Who sent a request (docs/http.md, Identity): its address (proxy headers
believed only from trusted proxies), its API key, its user, a header's
value; and the subject a policy counts, the middle part of its keys."""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
from typing import Any, Optional, Sequence, Union

from ._configuration import Config, Identity, IpNetwork, Policy
from ._request import Request
from ._sources import source_value

IpAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

_SAFE_VALUE = re.compile(rb"[A-Za-z0-9._~@+=:/-]{1,64}")
_PORT = re.compile(r"[0-9]{1,5}")


def client_ip(
    peer: Optional[str], request: Request, trusted: Sequence[IpNetwork]
) -> Optional[IpAddress]:
    """The client's address: the peer, unless the peer is a trusted proxy;
    then X-Forwarded-For read from its nearest hop back, the first address
    that is not a trusted proxy being the client (the hops left of it were
    written by the client and prove nothing); without X-Forwarded-For, the
    trusted peer's X-Real-IP."""
    address = parse_ip(peer) if peer else None
    if address is None or not trusted or not _trusted(address, trusted):
        return address
    forwarded = request.header("x-forwarded-for") or b""
    # Empty elements are skipped, as RFC 9110 reads a list.
    hops = [hop for hop in (h.strip(b" \t") for h in forwarded.split(b",")) if hop]
    if not hops:
        real = request.header("x-real-ip")
        return (parse_hop(real) if real else None) or address
    client = address
    for hop in reversed(hops):
        ip = parse_hop(hop)
        if ip is None:
            break  # past an unreadable hop nothing can be believed
        client = ip
        if not _trusted(ip, trusted):
            break
    return client


def _trusted(ip: IpAddress, trusted: Sequence[IpNetwork]) -> bool:
    return any(ip in net for net in trusted)


#: Parsed addresses kept: a server sees the same peers again and again.
_CACHED_ADDRESSES = 4096


@functools.lru_cache(maxsize=_CACHED_ADDRESSES)
def parse_ip(text: str) -> Optional[IpAddress]:
    """An address: IPv4-mapped IPv6 as IPv4, an IPv6 zone index dropped
    (``fe80::1%eth0`` is ``fe80::1``); str() of it is its canonical text."""
    address, percent, zone = text.partition("%")
    if percent and (not zone or ":" not in address):
        return None  # only an IPv6 address has a zone, and a zone has a name
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@functools.lru_cache(maxsize=_CACHED_ADDRESSES)
def parse_hop(hop: bytes) -> Optional[IpAddress]:
    """A forwarded hop: ``203.0.113.7``, ``2001:db8::1``,
    ``203.0.113.7:4711``, ``[2001:db8::1]`` or ``[2001:db8::1]:4711``."""
    try:
        text = hop.decode("ascii").strip(" \t")
    except UnicodeDecodeError:
        return None
    ip = parse_ip(text)
    if ip is not None:
        return ip
    if text.startswith("["):
        inside, bracket, port = text[1:].partition("]")
        if bracket and (not port or (port[0] == ":" and _port(port[1:]))):
            return parse_ip(inside)
        return None
    host, colon, port = text.rpartition(":")
    if colon and _port(port) and "." in host:
        return parse_ip(host)
    return None


def _port(text: str) -> bool:
    return _PORT.fullmatch(text) is not None and int(text) <= 65535


def subject(policy: Policy, request: Request, ip: Optional[IpAddress], config: Config) -> str:
    """The subject ``policy`` counts for ``request``, whose client is
    ``ip`` (client_ip of the request, with ``config``'s trusted proxies):
    user, else API key, else address, as the key kind says; a named
    identity's (or an inline source's) first source with a value."""
    identity = policy.identity
    if identity is not None:
        for kind, name in identity.sources:
            if kind == "ip":
                break
            value = source_value(kind, name, request)
            if value is not None:
                return identity_subject(identity, value)
        return ip_subject(ip, config.ipv6_prefix)
    kind = policy.key
    if kind == "global":
        return "global"
    if kind == "header":
        assert policy.key_header is not None
        value = request.header(policy.key_header)
        if value:
            return f"header:{policy.key_header}:{key_safe(value)}"
    if kind == "user" and request.user:
        # A user name is text: its UTF-8 bytes.
        return f"user:{key_safe(request.user.encode())}"
    if kind in ("api-key", "user"):
        api_key = request.header(config.api_key_header)
        if api_key:
            return f"api-key:{hashed(api_key)}"
    peer = request.peer
    if peer and not config.trusted_proxies:
        # The client is the peer (client_ip): its text keys the cache, as
        # an address object's hash is computed in Python on every lookup.
        return peer_subject(peer, config.ipv6_prefix)
    return ip_subject(ip, config.ipv6_prefix)


@functools.lru_cache(maxsize=_CACHED_ADDRESSES)
def peer_subject(peer: str, ipv6_prefix: int) -> str:
    """ip_subject of the address a peer's text names."""
    return ip_subject(parse_ip(peer), ipv6_prefix)


@functools.lru_cache(maxsize=_CACHED_ADDRESSES)
def ip_subject(ip: Optional[IpAddress], ipv6_prefix: int = 128) -> str:
    """``ip:<address>``, the subject of a client's address; an IPv6
    client's is its network of ``ipv6_prefix`` bits, ``ip:<network>/<n>``
    (docs/http.md, IPv6 networks), unless that is 128."""
    if ip is None:
        return "ip:unknown"
    if ip.version == 6 and ipv6_prefix < 128:
        network = ipaddress.IPv6Network(
            (int(ip) >> (128 - ipv6_prefix) << (128 - ipv6_prefix), ipv6_prefix)
        )
        return f"ip:{network}"
    return f"ip:{ip}"


def identity_subject(identity: Identity, value: bytes) -> str:
    """``<label>:<value>``: the value verbatim when key-safe, else hashed;
    always hashed for api-key and an identity with an authorization
    source (credentials stay out of Redis)."""
    return f"{identity.label}:{hashed(value) if identity.hashed else key_safe(value)}"


def is_exempt(ip: Optional[IpAddress], config: Config) -> bool:
    """Whether the client's full address is in ``exempt`` (docs/http.md,
    Exemptions); a request without one never is."""
    if ip is None or not config.exempt:
        return False
    cache = config.exempt_cache
    found = cache.get(ip)
    if found is None:
        found = any(ip in network for network in config.exempt)
        if len(cache) >= _CACHED_ADDRESSES:
            cache.clear()
        cache[ip] = found
    return found


def hashed(value: bytes) -> str:
    """The first 32 hex digits of the SHA-256 of ``value``: an API key
    stays out of Redis, and an operator can still find its counters."""
    return hashlib.sha256(value).hexdigest()[:32]


def key_safe(value: bytes) -> str:
    """A user or header value as it appears in a key: verbatim when 1 to 64
    safe bytes, else ``sha256-`` and its hash (a ``}`` must not end the
    hash tag)."""
    if _SAFE_VALUE.fullmatch(value):
        return value.decode("ascii")
    return "sha256-" + hashed(value)


def user_name(user: Any) -> Optional[str]:
    """The name of a framework's user object: a string as is; an object's
    ``username``, ``identity``, ``display_name`` or ``id``; None when it is
    not authenticated."""
    if user is None or isinstance(user, str):
        return user or None
    if getattr(user, "is_authenticated", True) is False:
        return None
    for attr in ("username", "identity", "display_name", "id"):
        try:
            value = getattr(user, attr, None)
            if callable(value):
                value = value()
        except NotImplementedError:  # Starlette's BaseUser leaves identity abstract
            continue
        if value not in (None, ""):
            return str(value)
    return None


def subject_of_value(policy: Policy, value: Union[str, bytes, None], config: Config) -> str:
    """The subject ``policy`` counts for a request whose value for the
    policy's key is ``value`` (an address, an API key, a user name, a
    header's value; None for ``global``), as the middleware writes it
    (docs/http.md, Keys from code); a ValueError for a value it cannot
    be."""
    kind = policy.key
    if kind == "global":
        return "global"
    if value is None or value in ("", b""):
        raise ValueError(f"librl: policy {policy.name!r} (key: {kind}) needs a value")
    raw = value.encode() if isinstance(value, str) else value
    if policy.identity is not None:
        return identity_subject(policy.identity, raw)
    if kind == "ip":
        ip = parse_ip(raw.decode("ascii", "replace"))
        if ip is None:
            raise ValueError(f"librl: {value!r} is not an IP address")
        return ip_subject(ip, config.ipv6_prefix)
    if kind == "api-key":
        return f"api-key:{hashed(raw)}"
    if kind == "header":
        return f"header:{policy.key_header}:{key_safe(raw)}"
    return f"{kind}:{key_safe(raw)}"
