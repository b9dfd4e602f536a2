"""Identity sources (docs/http.md, Named identities): where a subject's
value is read from a request: a header, a cookie, a query parameter, the
credentials of an Authorization scheme, or the framework's user. Each
reader gives the value's bytes as received (a query parameter's decoded
once), or None when there is none or it is empty."""

from __future__ import annotations

from typing import Optional
from urllib.parse import unquote_to_bytes

from ._request import Request

_SPACE = b" \t"


def source_value(kind: str, name: str, request: Request) -> Optional[bytes]:
    """The value of the source ``<kind>:<name>`` (``user``: no name) in
    ``request``; None when it has none. A header's ``name`` is lower case."""
    if kind == "header":
        value = request.header(name)
    elif kind == "cookie":
        value = cookie(request, name.encode())
    elif kind == "query":
        value = query(request.query, name.encode())
    elif kind == "authorization":
        value = credentials(request.header("authorization"), name.encode())
    elif kind == "user":
        user = request.user
        value = user.encode() if user else None
    else:
        raise ValueError(f"librl: no identity source {kind!r}")
    return value or None


def cookie(request: Request, name: bytes) -> Optional[bytes]:
    """The first ``name=value`` pair of the Cookie header (its lines
    joined by ``; ``, split on ``;``, each trimmed) with exactly that name;
    its value without one surrounding pair of double quotes, not decoded
    (RFC 6265)."""
    lines = request.header_lines("cookie")
    if not lines:
        return None
    for pair in b"; ".join(lines).split(b";"):
        key, equals, value = pair.partition(b"=")
        if not equals or key.strip(_SPACE) != name:
            continue
        value = value.strip(_SPACE)
        if len(value) >= 2 and value[:1] == b'"' and value[-1:] == b'"':
            value = value[1:-1]
        return value or None
    return None


def query(raw: Optional[bytes], name: bytes) -> Optional[bytes]:
    """The first ``name=value`` pair of the raw query string (split on
    ``&``) whose name, decoded, is exactly ``name``; its value decoded as
    ``application/x-www-form-urlencoded`` is: ``+`` a space, then each
    ``%XX`` once (an escape that is not one stays as written). A pair
    without ``=`` names nothing."""
    if not raw:
        return None
    for pair in raw.split(b"&"):
        key, equals, value = pair.partition(b"=")
        if not equals or form_decoded(key) != name:
            continue
        return form_decoded(value) or None
    return None


def form_decoded(text: bytes) -> bytes:
    """``+`` as a space, then percent-decoding once."""
    if b"+" not in text and b"%" not in text:
        return text
    return unquote_to_bytes(text.replace(b"+", b" "))


def credentials(value: Optional[bytes], scheme: bytes) -> Optional[bytes]:
    """The credentials of an Authorization value whose first token is
    ``scheme`` (ASCII case-insensitively): the rest after the spaces,
    trimmed."""
    if value is None or value[: len(scheme)].lower() != scheme.lower():
        return None
    rest = value[len(scheme) :]
    if rest and rest[:1] not in (b" ", b"\t"):
        return None  # a longer scheme
    return rest.strip(_SPACE) or None
