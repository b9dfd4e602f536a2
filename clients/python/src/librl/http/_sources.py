"""Identity sources (docs/http.md, Named identities): where a subject's
value is read from a request: a header, a cookie, a query parameter, the
credentials of an Authorization scheme, the framework's user, or a value
the application's code left on the request (an attribute). Each reader
gives the value's bytes as received (a query parameter's decoded once; an
attribute's text as UTF-8), or None when there is none or it is empty."""

from __future__ import annotations

from typing import Any, Optional
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
    elif kind == "attribute":
        value = attribute_value(request.attribute(name))
    else:
        raise ValueError(f"librl: no identity source {kind!r}")
    return value or None


def attribute_value(value: Any) -> Optional[bytes]:
    """A request attribute as a source's value (docs/http.md, Request
    attributes): a string's UTF-8 bytes, trimmed of spaces and tabs; an
    integer's decimal text (a boolean is no integer here); anything else
    is no value."""
    if isinstance(value, str):
        # A lone surrogate has no UTF-8 form: surrogatepass keeps it apart.
        return value.encode("utf-8", "surrogatepass").strip(_SPACE) or None
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return str(value).encode()
        except ValueError:  # past Python's int-to-text digit limit
            return None
    return None


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
